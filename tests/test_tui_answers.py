"""Reading the user's own words as answers (no UI needed)."""
from __future__ import annotations

import pytest

from nccl_doctor.engine import Question
from nccl_doctor.tui.answers import log_paths, read_answer


def q(type_: str, choices=()):
    return Question("x", "?", type_, list(choices), "", 0.0, [])


@pytest.mark.parametrize("words, kind, value", [
    ("yes", "answer", True), ("Yep, it pings", "answer", True), ("no", "answer", False),
    ("nope, ping times out", "answer", False), ("是的，可以 ping 通", "answer", True), ("不行", "answer", False),
    ("don't know", "dont_know", None), ("not sure", "dont_know", None), ("不知道", "dont_know", None),
    ("we use slurm", "tell", None),
])
def test_bool(words, kind, value):
    reading = read_answer(q("bool"), words)
    assert (reading.kind, reading.value) == (kind, value)


CHOICES = ["none", "kubernetes", "slurm", "ray", "sagemaker", "other"]


@pytest.mark.parametrize("words, kind, value", [
    ("slurm", "answer", "slurm"), ("3", "answer", "slurm"), ("we schedule with Kubernetes", "answer", "kubernetes"),
    ("kube", "answer", "kubernetes"), ("kubernetees", "answer", "kubernetes"),
    ("slurm or ray", "ambiguous", None), ("it's complicated", "tell", None),
])
def test_choice(words, kind, value):
    reading = read_answer(q("choice", CHOICES), words)
    assert reading.kind == kind
    if value:
        assert reading.value == value


def test_on_prem_with_underscore():
    assert read_answer(q("choice", ["aws", "on_prem"]), "on prem").value == "on_prem"


def test_number_version_text():
    assert read_answer(q("number"), "about 30 minutes").value == 30
    assert read_answer(q("version"), "NCCL 2.18.3").value == "NCCL 2.18.3"
    assert read_answer(q("version"), "no idea").kind == "dont_know"
    assert read_answer(q("text"), "eth0").value == "eth0"


def test_log_paths(tmp_path):
    log = tmp_path / "rank 0.log"
    log.write_text("x\n")
    assert log_paths(f"'{log}'") == [str(log)]
    assert log_paths(str(tmp_path)) == [str(log)]
    assert log_paths("training hangs") is None
    assert log_paths(f"{log}\nmore") is None
