"""Turning the user's words and log lines into facts (pure string work, no I/O).

Symptom phrases match word by word: a phrase word matches a word of the text that starts with
it ("hang" ~ "hanging", "init" ~ "initialization") or is within a small edit distance of it
(rapidfuzz, for typos), and all the phrase's words must occur close together. A phrase just
after a negation ("not", "never", "doesn't") does not count. Phrases in Chinese (or any text
without spaces) match as substrings, fuzzily when long enough.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from rapidfuzz import fuzz

from .compiled import CompiledKB

__all__ = ["SymptomMatch", "SignatureHit", "match_symptoms", "scan_lines", "clean_line", "tokens"]

_WORD = re.compile(r"[a-z0-9][a-z0-9_'+/.]*[a-z0-9]|[a-z0-9]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_STOP = frozenset("a an the of to in on at is are was be it my our with for and or by as".split())
_NEGATORS = frozenset(
    "not no never doesn't don't didn't isn't wasn't aren't can't cannot won't without".split()
)
_WINDOW_SLACK = 4


@dataclass(frozen=True)
class SymptomMatch:
    symptom: str
    phrase: str
    score: float  # 0..1
    captures: dict[str, str]


@dataclass(frozen=True)
class SignatureHit:
    signature: str
    line_no: int
    line: str
    captures: dict[str, str]


def tokens(text: str) -> list[str]:
    """Lower-cased words of a text (keeps identifiers like NCCL_SOCKET_IFNAME whole)."""
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def clean_line(line: str) -> str:
    """Drop ANSI colour codes and trailing CR/LF."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    return line.rstrip("\r\n")


def _word_score(word: str, candidate: str) -> float:
    if candidate == word:
        return 1.0
    if len(word) >= 4 and candidate.startswith(word):
        return 1.0
    if len(word) >= 5 and len(candidate) >= 4:
        ratio = fuzz.ratio(word, candidate)
        if ratio >= 85:
            return ratio / 100
    return 0.0


def _phrase_score(phrase_words: list[str], text_words: list[str]) -> float:
    """Best score of the phrase's words occurring together in the text; 0 when absent."""
    if not phrase_words:
        return 0.0
    positions: list[list[tuple[int, float]]] = []
    for word in phrase_words:
        found = [(i, s) for i, w in enumerate(text_words) if (s := _word_score(word, w)) > 0]
        if not found:
            return 0.0
        positions.append(found)
    window = len(phrase_words) + _WINDOW_SLACK
    best = 0.0
    for start, first_score in positions[0]:
        total, lo, hi, ok = first_score, start, start, True
        for found in positions[1:]:
            near = [(i, s) for i, s in found if abs(i - start) <= window]
            if not near:
                ok = False
                break
            i, s = max(near, key=lambda p: (p[1], -abs(p[0] - start)))
            total += s
            lo, hi = min(lo, i), max(hi, i)
        if not ok or hi - lo >= window:
            continue
        around = text_words[max(0, lo - 2):hi + 1]
        if any(w in _NEGATORS and w not in phrase_words for w in around):
            continue
        best = max(best, total / len(phrase_words))
    return best


def _cjk_score(phrase: str, text: str) -> float:
    if phrase in text:
        return 1.0
    if len(phrase) >= 4:
        score = fuzz.partial_ratio(phrase, text)
        if score >= 85:
            return score / 100
    return 0.0


def match_symptoms(ckb: CompiledKB, text: str) -> list[SymptomMatch]:
    """Every symptom the text mentions, best phrase per symptom, in KB order."""
    lowered = text.lower()
    words = tokens(text)
    matches: list[SymptomMatch] = []
    for symptom in ckb.kb.symptoms.values():
        best: SymptomMatch | None = None
        for regex in ckb.symptom_regexes.get(symptom.id, ()):
            found = regex.search(text)
            if found:
                caps = {k: v for k, v in found.groupdict().items() if v is not None}
                best = SymptomMatch(symptom.id, found.group(0), 1.0, caps)
                break
        if best is None:
            for phrase in symptom.phrases:
                if _CJK.search(phrase):
                    score = _cjk_score(phrase.lower(), lowered)
                else:
                    score = _phrase_score([w for w in tokens(phrase) if w not in _STOP] or tokens(phrase), words)
                if score > 0 and (best is None or score > best.score):
                    best = SymptomMatch(symptom.id, phrase, score, {})
        if best is not None:
            matches.append(best)
    return matches


def scan_lines(ckb: CompiledKB, lines: Iterable[str], first_line: int = 1) -> Iterator[SignatureHit]:
    """Run every log signature over the lines; yield one hit per (line, signature)."""
    signatures = [
        (sig.id, tuple(sig.needles), ckb.signature_regexes[sig.id])
        for sig in ckb.kb.signatures.values()
    ]
    for line_no, raw in enumerate(lines, start=first_line):
        line = clean_line(raw)
        if not line:
            continue
        for sig_id, needles, regex in signatures:
            if needles and not any(n in line for n in needles):
                continue
            found = regex.search(line)
            if found:
                caps = {k: v for k, v in found.groupdict().items() if v is not None}
                yield SignatureHit(sig_id, line_no, line, caps)
