"""Negation and hedging: one mechanism for every symptom match, phrase or pattern, English or Chinese.

A match names something the user says. It does not count when, in the same clause,

- a negation cue stands just before it ("not", "never", "no", "n't", "without", "cannot", or a
  contrast "instead of" / "rather than" a word or two before; 没有, 没, 未, 不, 无法, 并非) —
  "it does not hang", "fails mid-run instead of at start-up", "没有卡住"; or
- for a symptom that names a thing as the suspect (``fine_cancels: true``), a cue that the thing
  is fine follows it ("works", "is fine", "no problem", 正常, 没问题) — "gloo works fine"; or
- a pattern match stands in a clause that describes the setup that works — a fine cue, not
  negated, and a condition word come before it ("the jobs are fine when the containers are on
  different hosts", "it works with 2.18") — and another match sets the same fact: the user
  contrasts the working setup with the failing one (``engine.matching`` weighs this; alone, "works
  on up to 4 nodes, fails on more", the match still counts).

A clause ends at sentence punctuation, a comma, a closing bracket, a line break, or "but" /
"however" / 但 / 但是, so "it doesn't crash, it hangs" still says it hangs, and "8 RTX 3090s
(PCIe only, no NVLink) stuck at start-up" says they are stuck (a fuzzy phrase match reads the
word-level form, :func:`negated_words`, which knows no clauses). Cues inside the match belong to the
pattern ("does not hang" written into a pattern is matched as such).
"""
from __future__ import annotations

import re

__all__ = ["NEGATORS", "negated_span", "negated_words", "fine_after", "fine_before"]

NEGATORS = frozenset(
    "not no never doesn't don't didn't isn't wasn't aren't weren't can't cannot won't without "
    "nor neither hardly".split()
)
# Two-word cues that deny what follows them ("fails mid-run instead of at start-up"); they may stand
# a word further away than the one-word cues.
_CONTRASTS = frozenset({("instead", "of"), ("rather", "than")})
_CONTRAST_WORDS_BEFORE = 4
_ZH_NEGATORS = ("没有", "没", "未", "不", "无法", "并非", "并未", "别")
_WORDS_BEFORE = 3
_ZH_CHARS_BEFORE = 4
_FINE_CHARS_AFTER = 32
# 是不是 / 会不会 (a yes-no question) and 不同 / 不一致 (different) are not negations.
_ZH_NOT_NEGATION = re.compile(r"(.)不\1|不同|不一")
_CLAUSE_END = re.compile(r"[.;!?\n。；！？,，:：)\]）]|\b(?:but|however|although|though|whereas)\b|但是|但|然而|不过")
_WORD = re.compile(r"[a-z0-9][a-z0-9_'’]*")
_FINE = re.compile(
    r"^\W{0,3}(?:\w+\s+){0,2}?(?:works?|worked|working|runs?\s+fine|ran\s+fine|is\s+fine|was\s+fine|are\s+fine|"
    r"is\s+ok(?:ay)?|fine|no\s+problems?|succeeds?|succeeded|passes|passed|is\s+good)\b"
    r"|^.{0,6}(?:正常|没问题|没有问题|可以|成功)"
)

# "<it works | is fine | runs fine ...> <when | with | on ...> ... <the match>": the match names the
# working setup. "worked until / before the upgrade" has no condition word and still counts.
_FINE_BEFORE = re.compile(
    r"\b(?:works?|worked|working|runs?\s+fine|ran\s+fine|(?:is|are|was|were)\s+(?:fine|ok(?:ay)?)|"
    r"fine|no\s+problems?|succeeds?|succeeded|passes|passed)\s+(?:\w+\s+)?"
    r"(?:when|whenever|with|on|in|if|for|across|using|under)\b[^.;!?\n]*$"
)


def _clause_start(text: str, start: int) -> int:
    last = 0
    for found in _CLAUSE_END.finditer(text, max(0, start - 200), start):
        last = found.end()
    return last


def _clause_end(text: str, end: int) -> int:
    found = _CLAUSE_END.search(text, end, end + 200)
    return found.start() if found else min(len(text), end + 200)


def negated_span(text: str, start: int, end: int) -> bool:
    """True when a negation cue stands just before ``text[start:end]`` in its clause (``text``
    lower-cased)."""
    before = text[_clause_start(text, start):start]
    all_words = _WORD.findall(before.replace("’", "'"))
    words = all_words[-_WORDS_BEFORE:]
    if any(w in NEGATORS or w.endswith("n't") for w in words) or _contrast(all_words[-_CONTRAST_WORDS_BEFORE:]):
        return True
    tail = _ZH_NOT_NEGATION.sub("", before.rstrip())[-_ZH_CHARS_BEFORE:]
    return any(cue in tail for cue in _ZH_NEGATORS)


def fine_after(text: str, end: int) -> bool:
    """True when the clause goes on to say the thing just named is fine ("gloo works fine")."""
    after = text[end:_clause_end(text, end)][:_FINE_CHARS_AFTER]
    return _FINE.search(after) is not None


def fine_before(text: str, start: int) -> bool:
    """True when the clause before ``text[start:]`` says what follows is the setup that works
    ("fine when the containers are on different hosts"; ``text`` lower-cased)."""
    before = text[_clause_start(text, start):start]
    found = _FINE_BEFORE.search(before)
    return found is not None and not negated_span(before, found.start(), found.end())  # "does not work when"


def negated_words(words: list[str], lo: int, hi: int, own: set[str] | list[str]) -> bool:
    """The word-level form for fuzzy phrase matches: a negator among the two words before the
    phrase or between its words (the phrase's own words excepted), or a contrast ("instead of")
    among the four words before it."""
    if _contrast(words[max(0, lo - _CONTRAST_WORDS_BEFORE):lo]):
        return True
    return any((w in NEGATORS or w.endswith("n't")) and w not in own for w in words[max(0, lo - 2):hi + 1])


def _contrast(words: list[str]) -> bool:
    return any(pair in _CONTRASTS for pair in zip(words, words[1:]))
