"""engine/fuzzy.py gives rapidfuzz's figures (so matching is unchanged) without importing it for
short texts."""
from __future__ import annotations

import random
import subprocess
import sys

import pytest
from rapidfuzz import fuzz, process

from nccl_doctor.engine import fuzzy


@pytest.fixture(autouse=True)
def _python_first(monkeypatch):
    """Each test starts as a fresh process does: rapidfuzz not yet taken, the budget whole."""
    monkeypatch.setattr(fuzzy, "_rapidfuzz", None)
    monkeypatch.setattr(fuzzy, "_budget", fuzzy.PYTHON_BUDGET)


def test_ratio_equals_rapidfuzz_for_every_length_and_overlap():
    for len_a in range(1, 31):
        for len_b in range(1, 31):
            for common in range(min(len_a, len_b) + 1):
                a = "a" * common + "b" * (len_a - common)
                b = "c" * (len_b - common) + "a" * common
                assert fuzzy.ratio(a, b) == fuzz.ratio(a, b), (a, b)
    assert fuzzy.ratio("", "") == fuzz.ratio("", "")


def test_ratio_equals_rapidfuzz_on_random_words():
    rng = random.Random(7)
    for _ in range(20_000):
        a = "".join(rng.choice("abcdeé卡") for _ in range(rng.randint(1, 14)))
        b = "".join(rng.choice("abcdeé卡") for _ in range(rng.randint(1, 14)))
        assert fuzzy.ratio(a, b) == fuzz.ratio(a, b), (a, b)


def _extract(word: str, words: list[str]) -> list[tuple[str, float]]:
    return sorted((w, s) for w, s, _ in process.extract(word, words, scorer=fuzz.ratio, score_cutoff=85, limit=None))


def test_close_words_finds_what_process_extract_finds():
    rng = random.Random(11)
    vocabulary = ["initialization", "initialisation", "hang", "hangs", "hanging", "timeout", "timeoutt", "nccl",
                  "allreduce", "all_reduce", "socket", "sockets", "infiniband", "infinband", "rendezvous", "rendevous"]
    for size in (1, 3, fuzzy.PYTHON_WORDS, fuzzy.PYTHON_WORDS + 1, 60):
        for _ in range(50):
            fuzzy._rapidfuzz, fuzzy._budget = None, fuzzy.PYTHON_BUDGET  # keep the Python path under test
            words = sorted({rng.choice(vocabulary) + rng.choice(["", "", "s", "x"]) for _ in range(size)})
            for word in vocabulary:
                assert sorted(fuzzy.close_words(word, words, 85)) == _extract(word, words), (word, words)


def test_after_the_budget_rapidfuzz_scores_the_same(monkeypatch):
    words = ["hang", "hangs", "timout", "initialisation", "nccl"]
    first = sorted(fuzzy.close_words("timeout", words, 85))
    assert first == _extract("timeout", words) and fuzzy._rapidfuzz is None
    monkeypatch.setattr(fuzzy, "_budget", 0)
    assert sorted(fuzzy.close_words("timeout", words, 85)) == first and fuzzy._rapidfuzz is not None
    assert fuzzy.partial_ratio("第一次allreduce", "第一次allreduce hangs", 85) == fuzz.partial_ratio(
        "第一次allreduce", "第一次allreduce hangs")


def test_partial_ratio_above_the_cutoff_equals_rapidfuzz():
    rng = random.Random(5)
    alphabet = "训练卡住初始化超时通信ab "
    for _ in range(5_000):
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(4, 8)))
        b = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        expected = fuzz.partial_ratio(a, b)
        fuzzy._rapidfuzz = None  # the bound, not rapidfuzz, decides each time
        assert fuzzy.partial_ratio(a, b, 85) == (expected if expected >= 85 else 0.0), (a, b)
    for phrase, text in [("训练卡住了", "training hangs at init"), ("第一次allreduce", "allreduce hangs"),
                         ("第一次allreduce", "it hangs in allreduce"), ("第一次allreduce", "第一次allreduce"),
                         ("第一次allreduce", "the first allreduce"), ("allreduce", "第一次allreduce")]:
        expected = fuzz.partial_ratio(phrase, text)
        fuzzy._rapidfuzz = None
        assert fuzzy.partial_ratio(phrase, text, 85) == (expected if expected >= 85 else 0.0), (phrase, text)
    for _ in range(5_000):  # Chinese phrases with English in them, against English texts
        a = "".join(rng.choice("第一次") for _ in range(rng.randint(0, 3))) + rng.choice(["allreduce", "nccl", "gpu"])
        b = " ".join(rng.choice(["allreduce", "allreduc", "hangs", "nccl", "at", "gpu", "init"])
                     for _ in range(rng.randint(1, 6)))
        expected = fuzz.partial_ratio(a, b)
        fuzzy._rapidfuzz = None  # the bound, not rapidfuzz, decides each time
        assert fuzzy.partial_ratio(a, b, 85) == (expected if expected >= 85 else 0.0), (a, b)


def test_partial_ratio_with_the_texts_characters_equals_rapidfuzz_once_it_is_in():
    """With rapidfuzz in and the text's characters counted, a phrase sharing no character with the
    text is answered without rapidfuzz; every answer is still rapidfuzz's."""
    from collections import Counter

    fuzzy._imported()
    rng = random.Random(7)
    alphabet = "训练卡住初始化超时通信ab "
    for _ in range(3_000):
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(4, 8)))
        b = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        expected = fuzz.partial_ratio(a, b)
        assert fuzzy.partial_ratio(a, b, 85, Counter(b)) == (expected if expected >= 85 else 0.0), (a, b)
    assert fuzzy.partial_ratio("训练卡住了", "training hangs at init", 85, Counter("training hangs at init")) == 0.0


def test_a_short_description_does_not_import_rapidfuzz():
    code = ("import sys, nccl_doctor; s = nccl_doctor.load_doctor().session(); s.tell('the allreduce timout'); "
            "s.diagnoses(); print('rapidfuzz' in sys.modules, [(m['phrase'], m['score']) for m in s.symptom_matches])")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert done.stdout.startswith("False ["), done.stdout
    assert "('timeout', 0.923)" in done.stdout  # the typo matched fuzzily, in Python
