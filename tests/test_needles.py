"""The literal needles that gate symptom patterns: every match contains one, so skipping a pattern
whose needles are absent never loses a match (and a start compiles only the patterns it needs)."""
from __future__ import annotations

from pathlib import Path

import yaml

from nccl_doctor.kb.load import DATA_DIR, kb_files, load_files
from nccl_doctor.kb.needles import needle_groups, needles
from nccl_doctor.kb.patterns import compile_pattern

DEV_SET = Path(__file__).resolve().parents[2] / "shared" / "eval" / "dev.yaml"  # used when beside the checkout


def test_two_letter_alternatives_gate_a_pattern():
    assert needles(r"\b(a|an|one)\s+(workstation|pc|box)\b") == ["box", "pc", "workstation"]
    assert needles(r"\b(tp|pp)[ _-]?size\s*=\s*[2-9]") == ["size"]
    assert needles(r"\b(tp|pp)\s*=\s*[2-9]") == ["pp", "tp"]


def test_single_letters_and_optional_parts_gate_nothing():
    assert needles(r"\b(a|b)\s+\d+") == []
    assert needles(r"(hang)?\s*\d+") == []


def test_the_longer_needle_set_wins():
    assert needles(r"\b(no|not)\s+(hang|hangs|stall)") == ["hang", "hangs", "stall"]


def _texts(kb) -> list[str]:
    texts = []
    for item in list(kb.symptoms.values()) + list(kb.rules.values()):
        for example in list(item.examples.fires) + list(item.examples.silent):
            texts += [t for t in (example.get("text"), example.get("log")) if t]
    try:
        with open(DEV_SET, encoding="utf-8") as handle:
            texts += [c.get("symptom") or "" for c in yaml.safe_load(handle)]
    except OSError:
        pass
    return texts


def _matches(kb, texts: list[str], wanted):
    """Each (symptom id, pattern, line, matched text lower-cased) of the KB's symptom patterns
    ``wanted`` keeps, over every line of ``texts``."""
    for symptom in kb.symptoms.values():
        for pattern in filter(wanted, symptom.patterns):
            regex = compile_pattern(pattern, ignore_case=True)
            for text in texts:
                for line in text.splitlines():
                    found = regex.search(line)
                    if found:
                        yield symptom.id, pattern, line, found.group(0).lower()


def test_every_match_of_a_kb_symptom_pattern_contains_a_needle():
    kb = load_files(kb_files(DATA_DIR), DATA_DIR)
    checked = 0
    for symptom_id, pattern, line, matched in _matches(kb, _texts(kb), lambda p: bool(needles(p))):
        checked += 1
        assert any(n in matched for n in needles(pattern)), (symptom_id, pattern, line)
    assert checked > 500


def test_every_needle_group_splits_the_pattern_where_a_match_must_pass():
    assert needle_groups(r"\bwith\s+(2|two)\s+gpus?\b[^.\n]{0,20}\b(works|is fine)\b") == [
        ["with"], ["gpu"], ["is fine", "works"]]
    assert needle_groups(r"(hang)?\s*\d+") == []
    assert needle_groups(r"\b(acs|iommu)\s+(enabled|on)\b") == [["acs", "iommu"], ["enabled", "on"]]
    assert needles(r"\b(acs|iommu)\s+(enabled|on)\b") in needle_groups(r"\b(acs|iommu)\s+(enabled|on)\b")


def test_every_match_of_a_kb_symptom_pattern_holds_a_literal_of_each_needle_group():
    kb = load_files(kb_files(DATA_DIR), DATA_DIR)
    texts = _texts(kb) + [i.reporter for i in kb.incidents.values()]
    checked = 0
    for symptom_id, pattern, line, matched in _matches(kb, texts, lambda p: len(needle_groups(p)) >= 2):
        checked += 1
        assert all(any(n in matched for n in group) for group in needle_groups(pattern)), (symptom_id, pattern, line)
    assert checked > 500
