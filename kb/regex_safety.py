"""Can a KB regex stall the engine on hostile text? A static check and a measured one.

The engine runs KB regexes with Python's backtracking ``re`` over text that users (or a chat
bot's users) control, so one careless pattern lets a single message burn minutes of CPU.
:func:`check_pattern` reads a pattern's parse tree and names the constructs that backtrack
super-linearly:

- nested quantifiers whose inner and outer repeats can split the same text in many ways
  (``(a+)+``, ``(\\w+\\s?)*``, ``(.*,)+``): exponential;
- a repeated alternation whose branches can match the same text (``(a|a)*``, ``(a|aa)+``,
  ``(\\w|\\d)+``): exponential;
- two unbounded quantifiers over overlapping characters with only optional items between
  them (``\\s*-?\\s*``, ``[A-Z_]+.*?``, ``.*.*``): quadratic for every start offset;
- a pattern that starts with an unanchored unbounded quantifier (``.*foo``, ``\\d+x``):
  ``search()`` retries it at every offset, so a failed search is quadratic in the line.

:func:`time_pattern` measures instead: it builds adversarial inputs of about
:data:`INPUT_CHARS` characters from the pattern itself (runs of the characters its quantifiers
accept, its own prefix repeated, ...) and returns the slowest ``search`` it saw. A linear
pattern takes well under a millisecond on 20 KB; anything near :data:`SLOW_SECONDS` deserves a
rewrite. Usual rewrites: bound the count (``\\d{1,6}``), put a boundary or a literal between
neighbouring quantifiers (``[A-Z_]+\\b.*?``), drop a leading ``.*`` (``search`` already
scans), use a negated class instead of ``.*`` (``[^,]*,``).
"""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

try:  # Python 3.11+
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _p  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

__all__ = [
    "check_pattern",
    "time_pattern",
    "adversarial_inputs",
    "kb_patterns",
    "worst_inputs",
    "INPUT_CHARS",
    "SLOW_SECONDS",
    "LARGE_REPEAT",
]

INPUT_CHARS = 20_000
SLOW_SECONDS = 0.25  # worst search over INPUT_CHARS; see the module docstring
LARGE_REPEAT = 100  # a bounded repeat above this counts as unbounded

# Characters that stand for "every character" when sets are compared: ASCII plus a few that
# behave specially (non-breaking and ideographic space, CJK, case-folding oddities).
_ALPHABET = [chr(i) for i in range(128)] + [
    "\u00a0", "\u00e9", "\u00c9", "\u0131", "\u017f", "\u212a", "\u2028", "\u3000", "\u4e2d",
    "\u673a", "\uff0c", "\u0660",
]
_ALPHABET_LOCK = threading.RLock()
_ALPHABET_SET = set(_ALPHABET)
_PREFERRED = "a0 A_-.:/=,x!\u4e2d"  # representative characters, in order of preference
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT}
_POSSESSIVE = getattr(_c, "POSSESSIVE_REPEAT", None)
_ATOMIC = getattr(_c, "ATOMIC_GROUP", None)
_CATEGORY_TEXT = {
    _c.CATEGORY_DIGIT: r"\d", _c.CATEGORY_NOT_DIGIT: r"\D",
    _c.CATEGORY_SPACE: r"\s", _c.CATEGORY_NOT_SPACE: r"\S",
    _c.CATEGORY_WORD: r"\w", _c.CATEGORY_NOT_WORD: r"\W",
}
_AT_TEXT = {
    _c.AT_BEGINNING: "^", _c.AT_BEGINNING_STRING: r"\A", _c.AT_END: "$",
    _c.AT_END_STRING: r"\Z", _c.AT_BOUNDARY: r"\b", _c.AT_NON_BOUNDARY: r"\B",
}
_SCOPED_FLAGS = (re.IGNORECASE | re.DOTALL | re.MULTILINE | re.VERBOSE | re.ASCII)


# --------------------------------------------------------------------------- unparsing
def _class_char(code: int) -> str:
    ch = chr(code)
    if ch.isalnum() or ch in " _":
        return ch
    return f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _unparse(items: Iterable, flags: int = 0) -> str:
    """Regex text for a parsed sub-pattern (equivalent, not necessarily identical)."""
    out = []
    for op, av in items:
        out.append(_unparse_node(op, av, flags))
    return "".join(out)


def _unparse_node(op, av, flags: int) -> str:
    if op is _c.LITERAL:
        return re.escape(chr(av))
    if op is _c.NOT_LITERAL:
        return f"[^{_class_char(av)}]"
    if op is _c.ANY:
        return "."
    if op is _c.IN:
        if len(av) == 1 and av[0][0] is _c.CATEGORY and av[0][1] in _CATEGORY_TEXT:
            return _CATEGORY_TEXT[av[0][1]]
        if len(av) == 1 and av[0][0] is _c.LITERAL:
            return re.escape(chr(av[0][1]))
        parts, negate = [], False
        for iop, iav in av:
            if iop is _c.NEGATE:
                negate = True
            elif iop is _c.LITERAL:
                parts.append(_class_char(iav))
            elif iop is _c.RANGE:
                parts.append(f"{_class_char(iav[0])}-{_class_char(iav[1])}")
            elif iop is _c.CATEGORY:
                parts.append(_CATEGORY_TEXT.get(iav, r"\w"))
            else:  # charset/bigcharset only appear after compilation
                parts.append(r"\w")
        return "[" + ("^" if negate else "") + "".join(parts) + "]"
    if op is _c.BRANCH:
        return "(?:" + "|".join(_unparse(alt, flags) for alt in av[1]) + ")"
    if op is _c.SUBPATTERN:
        _group, add, rem, sub = av
        add &= _SCOPED_FLAGS & ~re.VERBOSE
        rem &= _SCOPED_FLAGS & ~re.VERBOSE
        mod = ""
        if add or rem:
            mod = _flag_letters(add) + ("-" + _flag_letters(rem) if rem else "")
        if mod:
            return f"(?{mod}:{_unparse(sub, flags)})"
        return f"({_unparse(sub, flags)})" if _group is not None else f"(?:{_unparse(sub, flags)})"
    if op in _REPEATS or (_POSSESSIVE is not None and op is _POSSESSIVE):
        lo, hi, sub = av
        body = _unparse(sub, flags)
        if not (len(sub) == 1 and sub[0][0] in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN, _c.SUBPATTERN)):
            body = f"(?:{body})"
        if (lo, hi) == (0, _c.MAXREPEAT):
            q = "*"
        elif (lo, hi) == (1, _c.MAXREPEAT):
            q = "+"
        elif (lo, hi) == (0, 1):
            q = "?"
        elif hi == _c.MAXREPEAT:
            q = f"{{{lo},}}"
        elif lo == hi:
            q = f"{{{lo}}}"
        else:
            q = f"{{{lo},{hi}}}"
        if op is _c.MIN_REPEAT:
            q += "?"
        elif op is not _c.MAX_REPEAT:
            q += "+"
        return body + q
    if op is _c.AT:
        return _AT_TEXT.get(av, "")
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        direction, sub = av
        head = {(_c.ASSERT, 1): "?=", (_c.ASSERT_NOT, 1): "?!",
                (_c.ASSERT, -1): "?<=", (_c.ASSERT_NOT, -1): "?<!"}[(op, direction)]
        return f"({head}{_unparse(sub, flags)})"
    if _ATOMIC is not None and op is _ATOMIC:
        return f"(?>{_unparse(av, flags)})"
    if op is _c.GROUPREF:
        return ""  # a back-reference: approximated as matching the empty string
    if op is _c.GROUPREF_EXISTS:
        _group, yes, no = av
        return "(?:" + _unparse(yes, flags) + "|" + (_unparse(no, flags) if no else "") + ")"
    return ""


def _flag_letters(flags: int) -> str:
    return "".join(letter for bit, letter in ((re.IGNORECASE, "i"), (re.DOTALL, "s"),
                                               (re.MULTILINE, "m"), (re.ASCII, "a")) if flags & bit)


# ------------------------------------------------------------------- node properties
@dataclass(frozen=True)
class _Info:
    nullable: bool
    first: frozenset[int]  # alphabet indexes that can start a match
    chars: frozenset[int]  # every alphabet index the node can consume


_EMPTY = frozenset()
_set_cache: dict[tuple[str, int], frozenset[int]] = {}


def _leaf_set(op, av, flags: int) -> frozenset[int]:
    text = _unparse_node(op, av, flags)
    key = (text, flags & (re.IGNORECASE | re.DOTALL | re.ASCII))
    found = _set_cache.get(key)
    if found is None:
        try:
            regex = re.compile(text, key[1])
            found = frozenset(i for i, ch in enumerate(_ALPHABET) if regex.fullmatch(ch))
        except re.error:
            found = _all()
        _set_cache[key] = found
    return found


def _all() -> frozenset[int]:
    return frozenset(range(len(_ALPHABET)))


def _literal_chars(items) -> set[str]:
    out: set[str] = set()
    for op, av in items:
        if op in (_c.LITERAL, _c.NOT_LITERAL):
            out.add(chr(av))
        elif op is _c.IN:
            for iop, iav in av:
                if iop is _c.LITERAL:
                    out.add(chr(iav))
                elif iop is _c.RANGE:
                    out.update({chr(iav[0]), chr(iav[1])})
        elif op is _c.BRANCH:
            for alt in av[1]:
                out |= _literal_chars(alt)
        elif op is _c.SUBPATTERN:
            out |= _literal_chars(av[3])
        elif _is_repeat(op):
            out |= _literal_chars(av[2])
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            out |= _literal_chars(av[1])
        elif _ATOMIC is not None and op is _ATOMIC:
            out |= _literal_chars(av)
        elif op is _c.GROUPREF_EXISTS:
            out |= _literal_chars(av[1]) | (_literal_chars(av[2]) if av[2] else set())
    return out


def _extend_alphabet(tree) -> None:
    """Add the pattern's own characters (CJK literals, say) to the alphabet sets are built on."""
    new = {ch for ch in _literal_chars(tree) if ch not in _ALPHABET_SET}
    for ch in new:
        for variant in {ch, ch.lower(), ch.upper()}:
            if len(variant) == 1 and variant not in _ALPHABET_SET:
                _ALPHABET.append(variant)
                _ALPHABET_SET.add(variant)
    if new:
        _set_cache.clear()


def _is_repeat(op) -> bool:
    return op in _REPEATS or (_POSSESSIVE is not None and op is _POSSESSIVE)


def _sub_flags(flags: int, av) -> int:
    _group, add, rem, _sub = av
    return (flags | add) & ~rem


class _Analyzer:
    def __init__(self, flags: int):
        self.flags = flags
        self._memo: dict[tuple[int, int], _Info] = {}

    def seq(self, items, flags: int) -> _Info:
        nullable, first, chars = True, set(), set()
        for op, av in items:
            info = self.node(op, av, flags)
            chars |= info.chars
            if nullable:
                first |= info.first
                nullable = info.nullable
        return _Info(nullable, frozenset(first), frozenset(chars))

    def node(self, op, av, flags: int) -> _Info:
        key = (id(av), flags) if not isinstance(av, int) else None
        if key is not None and key in self._memo:
            return self._memo[key]
        info = self._node(op, av, flags)
        if key is not None:
            self._memo[key] = info
        return info

    def _node(self, op, av, flags: int) -> _Info:
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            chars = _leaf_set(op, av, flags)
            return _Info(False, chars, chars)
        if op is _c.BRANCH:
            infos = [self.seq(alt, flags) for alt in av[1]]
            return _Info(any(i.nullable for i in infos), frozenset().union(*(i.first for i in infos)),
                         frozenset().union(*(i.chars for i in infos)))
        if op is _c.SUBPATTERN:
            return self.seq(av[3], _sub_flags(flags, av))
        if _is_repeat(op):
            lo, hi, sub = av
            if hi == 0:
                return _Info(True, _EMPTY, _EMPTY)
            body = self.seq(sub, flags)
            return _Info(lo == 0 or body.nullable, body.first, body.chars)
        if _ATOMIC is not None and op is _ATOMIC:
            return self.seq(av, flags)
        if op is _c.GROUPREF:
            return _Info(True, _all(), _all())
        if op is _c.GROUPREF_EXISTS:
            _group, yes, no = av
            a = self.seq(yes, flags)
            b = self.seq(no, flags) if no else _Info(True, _EMPTY, _EMPTY)
            return _Info(a.nullable or b.nullable, a.first | b.first, a.chars | b.chars)
        return _Info(True, _EMPTY, _EMPTY)  # AT, ASSERT, ASSERT_NOT: zero width


def _large(hi: int) -> bool:
    return hi == _c.MAXREPEAT or hi > LARGE_REPEAT


def _word_set(flags: int) -> frozenset[int]:
    return _leaf_set(_c.IN, [(_c.CATEGORY, _c.CATEGORY_WORD)], flags)


# --------------------------------------------------------------------- the static check
class _Checker:
    def __init__(self, pattern: str, flags: int):
        self.tree = _p.parse(pattern, flags)
        self.flags = self.tree.state.flags if hasattr(self.tree, "state") else flags
        self.an = _Analyzer(self.flags)
        self.findings: list[str] = []

    def add(self, text: str) -> None:
        if text not in self.findings:
            self.findings.append(text)

    def run(self) -> list[str]:
        items = list(self.tree)
        self._leading(items)
        self._walk(items, self.flags, cont=(), loop_follow=None)
        return self.findings

    # A pattern that can begin with an unbounded quantifier is retried at every offset.
    def _leading(self, items) -> None:
        for q, qflags, blockers in self._starts(items, self.flags, ()):
            lo, hi, sub = q[1]
            chars = self.an.seq(sub, qflags).chars
            if any(self._blocks_start(b, bflags, chars) for b, bflags in blockers):
                continue
            self.add(
                f"starts with the unbounded quantifier `{_unparse([q], qflags)}`: search() retries it "
                "at every offset, so a long run of matching text makes a failed search quadratic; "
                "drop it, bound it ({1,6}) or anchor it (^, \\b, a literal first)"
            )

    def _starts(self, items, flags, blockers) -> Iterator[tuple]:
        """Large repeats a match can begin with, and the zero-width items before them."""
        blockers = list(blockers)
        for op, av in items:
            if _is_repeat(op):
                lo, hi, sub = av
                if op is not _POSSESSIVE and _large(hi) and hi > lo:
                    yield (op, av), flags, tuple(blockers)
                else:
                    yield from self._starts(sub, flags, blockers)
                if not self.an.node(op, av, flags).nullable:
                    return
                continue
            if op is _c.SUBPATTERN:
                yield from self._starts(av[3], _sub_flags(flags, av), blockers)
            elif op is _c.BRANCH:
                for alt in av[1]:
                    yield from self._starts(alt, flags, blockers)
            elif op in (_c.AT, _c.ASSERT, _c.ASSERT_NOT):
                blockers.append(((op, av), flags))
                continue
            if not self.an.node(op, av, flags).nullable:
                return

    def _blocks_start(self, blocker, flags, chars: frozenset[int]) -> bool:
        op, av = blocker
        if op is _c.AT:
            if av in (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING):
                return True
            if av == _c.AT_BOUNDARY:
                word = _word_set(flags)
                return chars <= word or not (chars & word)
            return False
        if op is _c.ASSERT_NOT and av[0] == -1:  # (?<![...]) before the run
            return chars <= self.an.seq(av[1], flags).chars
        return False

    # Walk every sequence, with what can follow it.
    def _walk(self, items, flags, cont, loop_follow) -> None:
        items = list(items)
        for index, (op, av) in enumerate(items):
            rest = items[index + 1:]
            after = ((rest, flags),) + cont
            rest_info = self.an.seq(rest, flags)
            if loop_follow is None:
                inner_loop = None
            else:
                inner_loop = rest_info.first | (loop_follow if rest_info.nullable else _EMPTY)
            if _is_repeat(op):
                lo, hi, sub = av
                if op is not _POSSESSIVE and hi > lo and _large(hi):
                    self._adjacent((op, av), flags, after)
                if op is not _POSSESSIVE and hi >= 2:
                    self._nested((op, av), flags)
                body_first = self.an.seq(sub, flags).first
                # Inside the body, the next thing is the body again or whatever follows.
                self._walk(sub, flags, after, body_first if hi >= 2 else inner_loop)
            elif op is _c.SUBPATTERN:
                self._walk(av[3], _sub_flags(flags, av), after, inner_loop)
            elif op is _c.BRANCH:
                for alt in av[1]:
                    self._walk(alt, flags, after, inner_loop)
            elif _ATOMIC is not None and op is _ATOMIC:
                continue  # no backtracking into an atomic group
            elif op is _c.GROUPREF_EXISTS:
                for part in av[1:]:
                    if part:
                        self._walk(part, flags, after, inner_loop)
            elif op in (_c.ASSERT, _c.ASSERT_NOT):
                self._walk(av[1], flags, (), None)

    def _adjacent(self, q, flags, after) -> None:
        """A variable repeat followed, past only optional items, by an overlapping large one."""
        op, (lo, hi, sub) = q
        s1 = self.an.seq(sub, flags).chars
        if not s1:
            return
        shared, separated = s1, False
        for items, iflags in after:
            for nop, nav in items:
                if self._against(q, flags, shared, nop, nav, iflags) is not None:
                    return
                info = self.an.node(nop, nav, iflags)
                if info.nullable:
                    continue
                # One character the first repeat could have taken itself (`\s*[= ]\s*`): a run
                # of it still splits quadratically when the second repeat takes it too.
                single = self._single_chars(nop, nav, iflags)
                if not separated and single & s1:
                    shared, separated = s1 & single, True
                    continue
                return

    def _single_chars(self, op, av, flags) -> frozenset[int]:
        """Characters the item can match as a one-character string (`[= ]`, `(==|\\s)`)."""
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            return self.an.node(op, av, flags).chars
        if op is _c.SUBPATTERN and len(av[3]) == 1:
            (iop, iav), = av[3]
            return self._single_chars(iop, iav, _sub_flags(flags, av))
        if op is _c.BRANCH:
            out = frozenset()
            for alt in av[1]:
                if len(alt) == 1:
                    (iop, iav), = alt
                    out |= self._single_chars(iop, iav, flags)
            return out
        return _EMPTY

    def _against(self, q, qflags, s1, op, av, flags):
        """True: flagged; False: separated (stop); None: keep looking past this item."""
        if op is _c.AT:
            if av in (_c.AT_END, _c.AT_END_STRING, _c.AT_BEGINNING, _c.AT_BEGINNING_STRING):
                return False
            if av == _c.AT_BOUNDARY:
                word = _word_set(flags)
                if s1 <= word or not (s1 & word):
                    return False
            return None
        for r, rflags in self._leading_repeats(op, av, flags):
            lo2, hi2, sub2 = r[1]
            if _large(hi2) and (self.an.seq(sub2, rflags).first & s1):
                self.add(
                    f"overlapping quantifiers `{_unparse([q], qflags)}` then `{_unparse([r], rflags)}` "
                    "with nothing but optional items or one shared character between them: both can "
                    "take the same characters, so a "
                    "failing match tries every split (quadratic per start); put a literal or \\b "
                    "between them, make one exclude the other's characters, or bound one"
                )
                return True
        return None

    def _leading_repeats(self, op, av, flags) -> Iterator[tuple]:
        """Variable repeats at the very start of an item (through groups and optional items)."""
        if _is_repeat(op):
            lo, hi, sub = av
            if op is not _POSSESSIVE and hi > lo:
                yield (op, av), flags
            if op is not _POSSESSIVE and hi:
                for iop, iav in sub:
                    yield from self._leading_repeats(iop, iav, flags)
                    if not self.an.node(iop, iav, flags).nullable:
                        return
            return
        if op is _c.SUBPATTERN:
            inner, iflags = av[3], _sub_flags(flags, av)
            for iop, iav in inner:
                yield from self._leading_repeats(iop, iav, iflags)
                if not self.an.node(iop, iav, iflags).nullable:
                    return
        elif op is _c.BRANCH:
            for alt in av[1]:
                for iop, iav in alt:
                    yield from self._leading_repeats(iop, iav, flags)
                    if not self.an.node(iop, iav, flags).nullable:
                        break

    def _nested(self, r, flags) -> None:
        """A repeat whose body can match the same text in more than one way."""
        op, (lo, hi, sub) = r
        body = self.an.seq(sub, flags)
        text = _unparse([r], flags)
        if body.nullable and self._has_variable_repeat(sub, flags):
            self.add(f"quantified group `{text}` can match the empty string and contains a "
                     "quantifier: the engine can loop over empty iterations; make the body "
                     "consume at least one character")
            return
        # Inner repeats whose characters could also start what follows them in the loop.
        for q, qflags, follow in self._inner_repeats(sub, flags, body.first):
            qlo, qhi, qsub = q[1]
            if not (_large(hi) or _large(qhi)):
                continue
            if self.an.seq(qsub, qflags).chars & follow:
                self.add(
                    f"nested quantifier: `{_unparse([q], qflags)}` inside `{text}` - the inner and "
                    "outer repeats can split the same text in many ways (exponential backtracking); "
                    "make each iteration end with a character the inner repeat cannot match, or "
                    "drop the inner quantifier"
                )
                return
        if _large(hi):
            self._branches(r, flags)

    def _has_variable_repeat(self, items, flags) -> bool:
        for op, av in items:
            if _is_repeat(op) and av[1] > av[0]:
                return True
            if op is _c.SUBPATTERN and self._has_variable_repeat(av[3], _sub_flags(flags, av)):
                return True
            if op is _c.BRANCH and any(self._has_variable_repeat(a, flags) for a in av[1]):
                return True
        return False

    def _inner_repeats(self, items, flags, loop_follow) -> Iterator[tuple]:
        items = list(items)
        for index, (op, av) in enumerate(items):
            rest = self.an.seq(items[index + 1:], flags)
            follow = rest.first | (loop_follow if rest.nullable else _EMPTY)
            if _is_repeat(op):
                lo, hi, sub = av
                if op is not _POSSESSIVE and hi > lo:
                    yield (op, av), flags, follow
                # deeper repeats: their loop is their own; the outer rule fires on them separately
            elif op is _c.SUBPATTERN:
                yield from self._inner_repeats(av[3], _sub_flags(flags, av), follow)
            elif op is _c.BRANCH:
                for alt in av[1]:
                    yield from self._inner_repeats(alt, flags, follow)

    def _branches(self, r, flags) -> None:
        """(a|a)*, (a|aa)+: a body whose text can also be split into several iterations."""
        op, (lo, hi, sub) = r
        try:
            again = re.compile(f"(?:{_unparse(sub, flags)}){{2,}}", flags & ~re.VERBOSE)
        except re.error:
            again = None
        if again is not None:
            for sample in _samples(sub, flags, self.an):
                if sample and again.fullmatch(sample):
                    self.add(
                        f"repeated alternation `{_unparse([r], flags)}`: the text {sample!r} is one "
                        "iteration and also several (exponential backtracking); make the branches "
                        "start with different characters or merge them"
                    )
                    return
        for alt_items, bflags in self._branch_nodes(sub, flags):
            if self._alternatives_overlap(r, flags, alt_items, bflags):
                return

    def _alternatives_overlap(self, r, flags, alt_items, bflags) -> bool:
        texts = [_unparse(a, bflags) for a in alt_items]
        try:
            singles = [re.compile(f"(?:{t})", bflags & ~re.VERBOSE) for t in texts]
        except re.error:
            return False
        for i, alt in enumerate(alt_items):
            for sample in _samples(alt, bflags, self.an):
                if any(j != i and rx.fullmatch(sample) for j, rx in enumerate(singles)):
                    self.add(
                        f"repeated alternation `{_unparse([r], flags)}`: branches `{texts[i]}` and "
                        f"another both match {sample!r} (exponential backtracking); make the "
                        "branches start with different characters or merge them"
                    )
                    return True
        return False

    def _branch_nodes(self, items, flags) -> Iterator[tuple]:
        for op, av in items:
            if op is _c.BRANCH:
                yield av[1], flags
                for alt in av[1]:
                    yield from self._branch_nodes(alt, flags)
            elif op is _c.SUBPATTERN:
                yield from self._branch_nodes(av[3], _sub_flags(flags, av))


def check_pattern(pattern: str, flags: int = 0) -> list[str]:
    """Constructs in ``pattern`` that can backtrack catastrophically; empty when none.

    Each finding is one sentence naming the construct and a safe rewrite. ``flags`` are the
    ``re`` flags the engine compiles with (symptom patterns use ``re.IGNORECASE``).
    """
    try:
        re.compile(pattern, flags)
    except re.error as exc:
        return [f"does not compile: {exc}"]
    try:
        with _ALPHABET_LOCK:
            _extend_alphabet(_p.parse(pattern, flags))
            return _Checker(pattern, flags).run()
    except RecursionError:
        return ["pattern is nested too deeply to analyse"]


# ---------------------------------------------------------------------- input generation
def _representatives(chars: frozenset[int], limit: int = 2) -> list[str]:
    out = [ch for ch in _PREFERRED if _ALPHABET.index(ch) in chars] if chars else []
    if len(out) < limit:
        out += [_ALPHABET[i] for i in sorted(chars) if _ALPHABET[i] not in out and _ALPHABET[i].isprintable()]
    return out[:limit]


def _sample(items, flags, an: _Analyzer) -> str:
    """One short string the items match (approximate for look-arounds and back-references)."""
    out = []
    for op, av in items:
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            reps = _representatives(an.node(op, av, flags).chars, 1)
            out.append(reps[0] if reps else "")
        elif op is _c.BRANCH:
            out.append(_sample(av[1][0], flags, an))
        elif op is _c.SUBPATTERN:
            out.append(_sample(av[3], _sub_flags(flags, av), an))
        elif _is_repeat(op):
            lo, hi, sub = av
            out.append(_sample(sub, flags, an) * max(lo, 1 if hi else 0))
        elif _ATOMIC is not None and op is _ATOMIC:
            out.append(_sample(av, flags, an))
        elif op is _c.GROUPREF_EXISTS:
            out.append(_sample(av[1], flags, an))
    return "".join(out)


def _samples(items, flags, an: _Analyzer, limit: int = 12) -> list[str]:
    """A few strings the items match: the plain sample, then one part varied at a time
    (another branch, a repeat taken once more)."""
    items = list(items)
    options = [_item_variants(op, av, flags, an, limit) for op, av in items]
    base = [o[0] if o else "" for o in options]
    found = ["".join(base)]
    for index, variants in enumerate(options):
        for variant in variants[1:]:
            found.append("".join(base[:index]) + variant + "".join(base[index + 1:]))
    return list(dict.fromkeys(found))[:limit]


def _item_variants(op, av, flags, an: _Analyzer, limit: int) -> list[str]:
    if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
        reps = _representatives(an.node(op, av, flags).chars, 1)
        return reps or [""]
    if op is _c.BRANCH:
        out = []
        for alt in av[1][:6]:
            out += _samples(alt, flags, an, limit)
        return list(dict.fromkeys(out))[:limit]
    if op is _c.SUBPATTERN:
        return _samples(av[3], _sub_flags(flags, av), an, limit)
    if _ATOMIC is not None and op is _ATOMIC:
        return _samples(av, flags, an, limit)
    if _is_repeat(op):
        lo, hi, sub = av
        inner = _samples(sub, flags, an, limit)
        times = max(lo, 1 if hi else 0)
        out = [v * times for v in inner]
        if hi > times and times:
            out.append(inner[0] * (times + 1))
            out += [inner[0] * times + v for v in inner[1:]]
        return list(dict.fromkeys(out))[:limit]
    if op is _c.GROUPREF_EXISTS:
        return _samples(av[1], flags, an, limit)
    return [""]


def _repeat_sites(items, flags, an: _Analyzer, prefix: str) -> Iterator[tuple]:
    """Every variable repeat with the text that leads up to it and what follows it locally."""
    items = list(items)
    for index, (op, av) in enumerate(items):
        rest = items[index + 1:]
        if _is_repeat(op):
            lo, hi, sub = av
            if hi > lo:
                yield (op, av), flags, prefix, rest
            yield from _repeat_sites(sub, flags, an, prefix)
        elif op is _c.SUBPATTERN:
            yield from _repeat_sites(av[3], _sub_flags(flags, av), an, prefix)
        elif op is _c.BRANCH:
            for alt in av[1]:
                yield from _repeat_sites(alt, flags, an, prefix)
        prefix += _sample([(op, av)], flags, an)


def adversarial_inputs(pattern: str, flags: int = 0, size: int = INPUT_CHARS) -> list[str]:
    """Inputs of about ``size`` characters built to make ``pattern`` backtrack.

    For every repeat: the pattern's own text up to it, then a long run of what the repeat
    accepts (its body, the characters it shares with what follows, the rest of the pattern
    without its last character), then nothing or a character that fails. Also: the pattern's
    sample repeated without its last character, and long runs of each character it uses.
    """
    with _ALPHABET_LOCK:
        return _adversarial_inputs(pattern, flags, size)


def _adversarial_inputs(pattern: str, flags: int, size: int) -> list[str]:
    tree = _p.parse(pattern, flags)
    _extend_alphabet(tree)
    flags = tree.state.flags if hasattr(tree, "state") else flags
    an = _Analyzer(flags)
    out: list[str] = []

    def fill(unit: str) -> str:
        return unit * max(1, size // max(1, len(unit)))

    whole = _sample(tree, flags, an)
    if len(whole) > 1:
        out.append(fill(whole[:-1]))
        out.append(fill(whole[:-1] + "\x00"))
    for site, sflags, prefix, rest in _repeat_sites(tree, flags, an, ""):
        lo, hi, sub = site[1]
        body = an.seq(sub, sflags)
        rest_info = an.seq(rest, sflags)
        units = [_sample(sub, sflags, an)]
        units += _representatives(body.chars & rest_info.first, 2)
        units += _representatives(body.chars, 2)
        rest_text = _sample(rest, sflags, an)
        if len(rest_text) > 1:
            units.append(rest_text[:-1])
        units.append(_sample(sub, sflags, an) + (_representatives(rest_info.first, 1) or [""])[0])
        for unit in dict.fromkeys(u for u in units if u):
            run = fill(unit)[: max(1, size - len(prefix))]
            out.append(prefix + run)
            out.append(prefix + run + "\x00")
    leaves = set()
    for op, av in _leaves(tree, flags):
        leaves |= an.node(op, av, flags).chars
    for ch in _representatives(frozenset(leaves), 6):
        out.append(ch * size)
    return list(dict.fromkeys(out))[:80]


def _leaves(items, flags) -> Iterator[tuple]:
    for op, av in items:
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            yield op, av
        elif op is _c.BRANCH:
            for alt in av[1]:
                yield from _leaves(alt, flags)
        elif op is _c.SUBPATTERN:
            yield from _leaves(av[3], flags)
        elif _is_repeat(op):
            yield from _leaves(av[2], flags)


# ------------------------------------------------------------------------ measuring
class _Overrun(Exception):
    pass


def _raise_overrun(signum, frame):  # pragma: no cover - only runs when a search overruns
    raise _Overrun()


def _time_inputs(regex: re.Pattern[str], inputs: list[str], budget: float) -> float:
    worst = 0.0
    for text in inputs:
        start = time.perf_counter()
        try:
            regex.search(text)
        except _Overrun:
            return max(budget, time.perf_counter() - start)
        worst = max(worst, time.perf_counter() - start)
    return worst


def time_pattern(pattern: str, flags: int = 0, *, size: int = INPUT_CHARS, budget: float = 2.0) -> float:
    """The slowest ``search`` (seconds) of ``pattern`` over :func:`adversarial_inputs`.

    A search is cut off after ``budget`` seconds, and then ``budget`` (or a little more) is
    returned: read any result at or above :data:`SLOW_SECONDS` as "rewrite this pattern".
    In the main thread a timer interrupts the search; elsewhere it runs in a child process.
    """
    regex = re.compile(pattern, flags)
    inputs = adversarial_inputs(pattern, flags, size)
    in_main = threading.current_thread() is threading.main_thread()
    if in_main and hasattr(signal, "setitimer"):
        old_handler = signal.signal(signal.SIGALRM, _raise_overrun)
        old_timer = signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            worst = 0.0
            for text in inputs:
                signal.setitimer(signal.ITIMER_REAL, budget)
                try:
                    worst = max(worst, _time_inputs(regex, [text], budget))
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                if worst >= budget:
                    break
            return worst
        finally:
            signal.signal(signal.SIGALRM, old_handler)
            if old_timer[0]:
                signal.setitimer(signal.ITIMER_REAL, *old_timer)
    code = ("import sys; from nccl_doctor.kb.regex_safety import time_pattern as t; "
            "print(t(sys.argv[1], int(sys.argv[2]), size=int(sys.argv[3]), budget=float(sys.argv[4])))")
    try:
        done = subprocess.run([sys.executable, "-c", code, pattern, str(flags), str(size), str(budget)],
                              capture_output=True, text=True, timeout=budget * 4 + 10, check=True)
        return float(done.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return budget
    except (subprocess.CalledProcessError, ValueError, IndexError):
        return _time_inputs(regex, inputs, budget)  # unguarded, as a last resort


# ------------------------------------------------------------------------- the KB side
def kb_patterns(kb) -> list[tuple[str, str, int]]:
    """Every regex of a loaded KB as ``(where, pattern, flags)`` the way the engine compiles it."""
    out = []
    for sig in kb.signatures.values():
        out.append((f"{kb.origin(sig.id)} [{sig.id}]", sig.pattern, re.IGNORECASE if sig.ignore_case else 0))
    for sym in kb.symptoms.values():
        for pattern in sym.patterns:
            out.append((f"{kb.origin(sym.id)} [{sym.id}]", pattern, re.IGNORECASE))
    return out


def worst_inputs(pattern: str, flags: int = 0, *, size: int = INPUT_CHARS, budget: float = 1.0,
                 keep: int = 2) -> list[tuple[float, str]]:
    """The ``keep`` slowest :func:`adversarial_inputs` for ``pattern`` as ``(seconds, text)``,
    slowest first (for feeding the engine itself). Main thread only: searches are cut off
    after ``budget`` seconds by a timer."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        raise RuntimeError("worst_inputs needs the main thread (it interrupts searches with a timer)")
    regex = re.compile(pattern, flags)
    timed = []
    old_handler = signal.signal(signal.SIGALRM, _raise_overrun)
    try:
        for text in adversarial_inputs(pattern, flags, size):
            signal.setitimer(signal.ITIMER_REAL, budget)
            try:
                timed.append((_time_inputs(regex, [text], budget), text))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old_handler)
    timed.sort(key=lambda pair: -pair[0])
    return timed[:keep]
