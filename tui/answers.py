"""Reading the user's own words as an answer to the question on screen.

Input handling only: which of the question's answers the words name, if any. Nothing here
weighs causes; words that fit no answer go to the session as free text (``Session.tell``).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal

from rapidfuzz import fuzz

from ..engine import Question
from ..engine.values import Value, ValueProblem, coerce, parse_version
from ..log_paths import expand
from ..logs import LogProblem

__all__ = ["Reading", "read_answer", "log_paths", "choice_label"]

_DONT_KNOW = re.compile(
    r"^\s*(?:(?:i\s+)?(?:don'?t|do not|dunno)(?:\s+know)?\b(?!\s+(?!know)\w)|not sure|no idea|unsure|unknown|idk|"
    r"can'?t tell|\?+\s*$|不知道|不清楚|不确定)",
    re.I,
)
_YES = {"yes", "y", "yeah", "yep", "yup", "sure", "true", "correct", "right", "affirmative", "是", "是的", "对", "有", "可以", "能"}
_NO = {"no", "n", "nope", "nah", "false", "not", "never", "否", "不", "不是", "没有", "不能", "不行"}
_WORD = re.compile(r"[\w.+-]+|[^\w\s]", re.U)


@dataclass(frozen=True)
class Reading:
    """What the words mean for the question: an answer, "don't know", free text, or a choice
    among several that fit (``candidates``)."""

    kind: Literal["answer", "dont_know", "tell", "ambiguous"]
    value: Value | None = None
    candidates: tuple[str, ...] = ()


def choice_label(choice: str) -> str:
    """``on_prem`` -> ``on prem``: how a choice reads on a button."""
    return choice.replace("_", " ")


def _norm(text: str) -> str:
    return re.sub(r"[\s_-]+", " ", text.strip().lower())


def _first_word(text: str) -> str:
    words = _WORD.findall(text.lower())
    return words[0].strip(".,!") if words else ""


def read_answer(question: Question, text: str) -> Reading:
    """Match ``text`` to one of the question's answers, or say it is free text."""
    text = text.strip()
    if not text:
        return Reading("tell")
    if _DONT_KNOW.match(text):
        return Reading("dont_know")
    if question.type == "bool":
        return _read_bool(text)
    if question.type == "choice":
        return _read_choice(question, text)
    try:
        if question.type == "number":
            found = re.search(r"-?\d+(?:[.,]\d+)?", text)
            if found:
                return Reading("answer", coerce(found.group(0), "number"))
            return Reading("tell")
        if question.type == "version":
            if parse_version(text) is not None:
                return Reading("answer", coerce(text, "version"))
            return Reading("tell")
    except ValueProblem:
        return Reading("tell")
    return Reading("answer", text)


def _read_bool(text: str) -> Reading:
    word = _first_word(text)
    if word in _YES or text in _YES:
        return Reading("answer", True)
    if word in _NO or text in _NO:
        return Reading("answer", False)
    # Chinese answers often open with the verdict: "是的，可以 ping 通" / "不行".
    for token in sorted(_YES | _NO, key=len, reverse=True):
        if not token.isascii() and text.startswith(token):
            return Reading("answer", token in _YES)
    return Reading("tell")


def _read_choice(question: Question, text: str) -> Reading:
    choices = question.choices
    said = _norm(text)
    if said.isdigit() and 1 <= int(said) <= len(choices):
        return Reading("answer", choices[int(said) - 1])
    for choice in choices:
        if said == _norm(choice):
            return Reading("answer", choice)
    words = said.split()
    found = []
    for choice in choices:
        name = _norm(choice)
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", said):
            found.append(choice)
            continue
        if len(said) >= 3 and name.startswith(said):
            found.append(choice)
            continue
        if any(len(w) >= 4 and fuzz.ratio(w, name) >= 85 for w in words):
            found.append(choice)
    if len(found) == 1:
        return Reading("answer", found[0])
    if len(found) > 1:
        return Reading("ambiguous", candidates=tuple(found))
    return Reading("tell")


def log_paths(text: str) -> list[str] | None:
    """The files ``text`` names when it is nothing but one or more log paths (as a terminal
    pastes a dragged file, quotes and ``~`` included); None when it is anything else."""
    text = text.strip()
    if not text or "\n" in text or len(text) > 4096:
        return None
    try:
        parts = shlex.split(text)
    except ValueError:
        return None
    if not parts:
        return None
    import os

    parts = [os.path.expanduser(p) for p in parts]
    if not all(os.path.exists(p) or any(ch in p for ch in "*?[") for p in parts):
        return None
    try:
        return expand(parts).files or None
    except LogProblem:
        return None
