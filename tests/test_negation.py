"""Negation, hedging, near misses and differing captures: the one mechanism every symptom match
goes through (engine/negation.py), in English and Chinese, for phrases and patterns alike."""
from __future__ import annotations

import pytest

from nccl_doctor.engine import Doctor
from nccl_doctor.engine.negation import fine_after, fine_before, negated_span
from nccl_doctor.errors import KBError
from nccl_doctor.kb.load import kb_files, load_files

KB = """
facts:
  - {id: hang, type: bool}
  - {id: gloo, type: bool}
  - {id: mismatch, type: bool}
  - {id: box, type: bool}
  - {id: hosts, type: bool}
symptoms:
  - {id: says_hang_phrase, phrases: [hangs, 卡住], sets: {hang: true}}
  - {id: says_hang_pattern, patterns: ['\\bstuck\\s+at\\s+init'], sets: {hang: true}}
  - {id: says_gloo, patterns: ['\\bgloo\\b'], fine_cancels: true, sets: {gloo: true}}
  - id: says_waiting
    patterns: ['\\bis\\s+waiting\\b']
    unless: ['waiting\\s+for\\s+(the\\s+)?(download|allocation)']
    sets: {hang: true}
  - id: says_mismatch
    patterns: ['--nodes=(?P<a>\\d+)\\D{0,40}num_nodes=(?P<b>\\d+)']
    differ: [[a, b]]
    sets: {mismatch: true}
  - {id: says_hosts, patterns: ['\\b(two|different)\\s+(nodes|hosts)\\b'], sets: {hosts: true}}
  - {id: says_one_host, patterns: ['\\bsame\\s+(machine|host)\\b'], sets: {hosts: false}}
"""


@pytest.fixture(scope="module")
def doctor(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kb")
    (folder / "kb.yaml").write_text(KB)
    return Doctor(load_files(kb_files(folder), folder))


def said(doctor, text):
    return {m.symptom for m in doctor.session().tell(text)}


@pytest.mark.parametrize("text,expected", [
    ("the job hangs at init", {"says_hang_phrase"}),
    ("it does not hang, it crashes", set()),
    ("it never hangs", set()),
    ("it doesn't crash, it hangs", {"says_hang_phrase"}),  # the negation belongs to another clause
    ("rank 3 is stuck at init", {"says_hang_pattern"}),
    ("rank 3 is not stuck at init", set()),
    ("it isn't stuck at init but crashes", set()),
    ("no rank is stuck at init; it crashes", set()),
    ("I don't know why rank 3 is stuck at init", {"says_hang_pattern"}),
    ("训练卡住了", {"says_hang_phrase"}),
    ("训练没有卡住", set()),
    ("是不是卡住了", {"says_hang_phrase"}),  # a yes-no question, not a negation
    ("it crashes mid-run instead of being stuck at init", set()),  # a contrast denies what follows it
    ("it crashes rather than hangs", set()),
    ("instead of crashing, rank 3 is stuck at init", {"says_hang_pattern"}),  # the contrast is another clause's
    ("8 RTX 3090s (PCIe only, no NVLink) stuck at init", {"says_hang_pattern"}),  # the bracket closes the clause
    ("4 GPUs [no NVLink] stuck at init", {"says_hang_pattern"}),
    ("two cards (rank 3 is not stuck at init) crash", set()),
])
def test_negation_scope(doctor, text, expected):
    assert said(doctor, text) & {"says_hang_phrase", "says_hang_pattern"} == expected


@pytest.mark.parametrize("text,expected", [
    ("the gloo backend fails", True),
    ("with gloo it works", False),
    ("gloo is fine, nccl hangs", False),
    ("switching to gloo works", False),
    ("换成gloo就正常", False),
    ("gloo fails and nccl works", True),  # the hedge after 'and nccl' is another thing's
])
def test_fine_after_cancels_only_where_declared(doctor, text, expected):
    assert ("says_gloo" in said(doctor, text)) is expected


@pytest.mark.parametrize("text,expected", [
    # the setup that works, contrasted with the failing one: the failing one is what counts
    ("the jobs are fine when the containers are on different hosts, and fail on the same machine", {"says_one_host"}),
    ("it hangs on two nodes; it works fine on the same machine", {"says_hosts"}),
    # alone, what works is still true of the failing setup ("fails on more" sets nothing)
    ("works on two nodes, fails on more", {"says_hosts"}),
    # not a working clause: a negated cue, or no condition word after it
    ("it does not work when the ranks are on different hosts", {"says_hosts"}),
    ("it worked until we moved to two nodes", {"says_hosts"}),
])
def test_a_working_setup_contrasted_with_the_failing_one(doctor, text, expected):
    assert said(doctor, text) & {"says_hosts", "says_one_host"} == expected


def test_near_misses_and_differing_captures(doctor):
    assert "says_waiting" in said(doctor, "rank 0 is waiting forever")
    assert "says_waiting" not in said(doctor, "the job is waiting for the allocation")
    assert "says_mismatch" in said(doctor, "sbatch --nodes=2 but Trainer(num_nodes=1)")
    assert "says_mismatch" not in said(doctor, "sbatch --nodes=2 and Trainer(num_nodes=2)")


def test_span_helpers():
    text = "it does not hang"
    assert negated_span(text, text.index("hang"), len(text))
    assert not negated_span("it does hang", 8, 12)
    assert fine_after("gloo works fine", 4) and not fine_after("gloo fails", 4)
    text = "it is fine when the containers are on different hosts"
    assert fine_before(text, text.index("different")) and not fine_before(text, text.index("fine"))
    text = "it does not work when the ranks are on different hosts"
    assert not fine_before(text, text.index("different"))


def test_look_arounds_and_back_references_are_refused_with_a_hint(tmp_path):
    (tmp_path / "kb.yaml").write_text("""
facts:
  - {id: x, type: bool}
symptoms:
  - {id: bad_look, patterns: ['(?<!not )hang'], sets: {x: true}}
  - {id: bad_ref, patterns: ['(?P<a>\\\\d)(?P=a)'], sets: {x: true}}
""")
    with pytest.raises(KBError) as caught:
        load_files(kb_files(tmp_path), tmp_path)
    text = str(caught.value)
    assert "[bad_look]" in text and "no look-arounds" in text
    assert "[bad_ref]" in text and "no back-references" in text
