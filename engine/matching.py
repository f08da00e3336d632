"""Turning the user's words and log lines into facts (pure string work, no I/O).

Symptom phrases match word by word: a phrase word matches a word of the text that starts with
it ("hang" ~ "hanging", "init" ~ "initialization") or is within a small edit distance of it
(rapidfuzz, for typos; a text word that the phrase word merely extends, "connect" for
"connectx" or "batch" for "sbatch", does not count), and all the phrase's words must occur close
together. Phrases in Chinese (or any text without spaces) match as substrings, fuzzily when long
enough. Symptom regexes (RE2, linear time) run line by line over lines cut to 2,000 characters.
Every match, phrase or pattern, goes through one negation and hedging check (engine/negation.py),
and none counts where one of the symptom's ``unless`` near misses overlaps it.
"""
from __future__ import annotations

import bisect
import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple, TypeVar

from . import fuzzy
from ..kb.needles import needle_groups
from .compiled import CompiledKB, SymptomPattern
from .fuzzy import close_words, partial_ratio
from .negation import fine_after, fine_before, negated_span, negated_words

__all__ = ["SymptomMatch", "SignatureHit", "match_symptoms", "scan_lines", "clean_line", "tokens", "last_error_line", "LAST_ERROR"]

_WORD = re.compile(r"[a-z0-9][a-z0-9_'+/.]*[a-z0-9]|[a-z0-9]")
#: Kana, CJK ideographs and Hangul: a phrase holding one is matched as CJK text. Tested by code
#: point, not by a regex: compiling a character class this wide costs a start ~3 ms.
_CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x9FFF), (0xAC00, 0xD7AF))
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_STOP = frozenset("a an the of to in on at is are was be it my our with for and or by as".split())
_WINDOW_SLACK = 4
_FUZZY_LIMIT = 20_000  # unique words; beyond this only exact and prefix matches count
_MAX_STARTS = 2_000
_PATTERN_LINE_CHARS = 2_000
_CLOSE = 85  # the ratio (0-100) at which a text word is a typo of a phrase word
_CJK_CUTOFF = 85  # the partial ratio (0-100) at which a CJK phrase matches fuzzily
_ZH_NEGATION_CHARS = frozenset("不没未无非别")  # a fuzzy CJK match keeps these (see _cjk_score)
LAST_ERROR = "Last error:"
_T = TypeVar("_T")
_RANK_PREFIX = re.compile(r"^\s*(\[(default)?\d+\]:\s*)?\[rank\d+\]:\s*")


class SymptomMatch(NamedTuple):
    symptom: str
    phrase: str
    score: float  # 0..1
    captures: dict[str, str]


class SignatureHit(NamedTuple):
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


def _narrows(word: str, candidate: str) -> bool:
    """True when one word is the other with letters added in front or around it: the phrase
    word a more specific name than the text's ("connectx" vs "connect", "sbatch" vs "batch"),
    or the text word another word that contains the phrase word ("installed" for "stalled") -
    not a typo either way (a plural -s still counts as a typo; letters added at the end of the
    text word are a prefix match, counted before fuzzy ones)."""
    return (candidate in word and word != candidate + "s") or (word in candidate and not candidate.startswith(word))


class _Vocabulary:
    """The KB's phrase words long enough to be matched fuzzily, and for each text word met so far
    those within the edit distance of it. Once rapidfuzz is in (a server), a text is compared
    with the vocabulary one new word at a time (one rapidfuzz call over ~500 words), instead of
    each phrase word with the text's words (one call per phrase word, ~330 a description); the
    ratio is symmetric, so the pairs found are the same."""

    _KEPT = 50_000  # text words remembered, then forgotten all at once

    def __init__(self, words: Iterable[str]):
        self.words = frozenset(words)
        self.longest = max(map(len, self.words), default=0)
        self._sorted = sorted(self.words)
        self._near: dict[str, list[tuple[str, float]]] = {}
        self._classes: dict[frozenset[str], tuple[frozenset[str], frozenset[str], frozenset[str]]] = {}

    def classes(self, words: frozenset[str]) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        """Of ``words``: those longer than any phrase word, those of 5+ letters, and those of 5+
        letters that are no phrase word of the vocabulary (for :meth:`_TextIndex.may_occur_among`)."""
        found = self._classes.get(words)
        if found is None:
            longest = max(self.longest, 4)
            fives = frozenset(w for w in words if len(w) >= 5)
            found = self._classes[words] = (frozenset(w for w in words if len(w) > longest), fives,
                                            fives - self.words)
        return found

    def near(self, text_word: str) -> list[tuple[str, float]]:
        """(phrase word, ratio) for each phrase word at least ``_CLOSE`` like ``text_word``."""
        found = self._near.get(text_word)
        if found is None:
            fuzz, process = fuzzy._imported()
            found = [(w, score) for w, score, _ in process.extract(text_word, self._sorted, scorer=fuzz.ratio,
                                                                   score_cutoff=_CLOSE, limit=None)]
            if len(self._near) >= self._KEPT:
                self._near.clear()
            self._near[text_word] = found
        return found


class _TextIndex:
    """The words of one text, indexed so phrase lookups stay near-linear on long input."""

    def __init__(self, words: list[str], vocabulary: _Vocabulary | None = None):
        self.words = words
        self.positions: dict[str, list[int]] = {}
        for i, w in enumerate(words):
            self.positions.setdefault(w, []).append(i)
        self.unique = sorted(self.positions)
        self._cache: dict[str, list[tuple[int, float]]] = {}
        self._vocabulary = vocabulary
        self._near: dict[str, list[tuple[str, float]]] | None = None
        self._possible: set[str] | None = None  # words, prefixes of 4+ letters, typos (see may_occur)
        self._typos_known = False

    def _close_words(self, word: str) -> Iterable[tuple[str, float]]:
        """The text's words within the edit distance of ``word`` (a phrase word), with their ratio."""
        vocabulary = self._vocabulary
        if vocabulary is None or fuzzy._rapidfuzz is None or word not in vocabulary.words:
            return close_words(word, self.unique, _CLOSE)
        if self._near is None:
            near: dict[str, list[tuple[str, float]]] = {}
            for candidate in self.unique:
                for phrase_word, score in vocabulary.near(candidate):
                    near.setdefault(phrase_word, []).append((candidate, score))
            self._near = near
        return self._near.get(word, ())

    def _possible_words(self) -> set[str]:
        """The text's words, their prefixes of 4+ letters and (when known) the phrase words
        they are typos of (see :meth:`may_occur`), found once."""
        possible = self._possible
        if possible is None:
            vocabulary = self._vocabulary
            assert vocabulary is not None
            longest = max(vocabulary.longest, 4)  # a longer prefix is no phrase word
            possible = self._possible = set(self.positions).union(
                *({w[:k] for k in range(4, min(len(w), longest) + 1)} for w in self.unique))
            self._typos_known = (fuzzy._rapidfuzz is not None and len(self.unique) <= _FUZZY_LIMIT
                                 and bool(vocabulary.words))
            if self._typos_known:  # the text's typos of the phrase vocabulary, found once
                self._close_words(next(iter(vocabulary.words)))
                possible.update(self._near)
        return possible

    def may_occur(self, word: str) -> bool:
        """False only when :meth:`occurrences` of ``word`` is sure to be empty: it is no word of
        the text, no prefix (4+ letters) of one, and (5+ letters) no typo of one; one set lookup
        for most of the ~700 phrases a description is tried against. The prefixes kept are at
        most as long as the longest phrase word, so a 200,000-letter word costs no more than a
        short one (any longer ``word`` is answered True)."""
        vocabulary = self._vocabulary
        if vocabulary is None:  # no phrase vocabulary to bound the prefixes by: anything may
            return True
        possible = self._possible_words()
        if word in possible or len(word) > max(vocabulary.longest, 4):
            return True  # (a word longer than the prefixes kept is no phrase word: not known)
        if len(word) < 5 or len(self.unique) > _FUZZY_LIMIT:
            return False
        return not (self._typos_known and word in vocabulary.words)  # else typos are found word by word

    def may_occur_among(self, words: frozenset[str]) -> set[str]:
        """``{w for w in words if self.may_occur(w)}`` (``words``: the same set every text, such
        as the phrases' first words), by set operations."""
        vocabulary = self._vocabulary
        if vocabulary is None:
            return set(words)
        found = self._possible_words() & words
        too_long, fives, fives_unknown = vocabulary.classes(words)
        if len(self.unique) > _FUZZY_LIMIT:  # only words longer than the prefixes kept
            found |= too_long
        elif self._typos_known:  # and words of 5+ letters outside the vocabulary (typos unknown)
            found |= too_long | fives_unknown
        else:  # and every word of 5+ letters (its typos are found word by word)
            found |= fives
        return found

    def occurrences(self, word: str) -> list[tuple[int, float]]:
        """Sorted (position, score) of text words matching a phrase word."""
        found = self._cache.get(word)
        if found is not None:
            return found
        scores: dict[str, float] = {}
        if word in self.positions:
            scores[word] = 1.0
        if len(word) >= 4:
            start = bisect.bisect_left(self.unique, word)
            for candidate in self.unique[start:]:
                if not candidate.startswith(word):
                    break
                scores[candidate] = 1.0
        if len(word) >= 5 and len(self.unique) <= _FUZZY_LIMIT:
            for candidate, ratio in self._close_words(word):
                if len(candidate) >= 4 and not _narrows(word, candidate):
                    scores.setdefault(candidate, ratio / 100)
        found = sorted((i, s) for w, s in scores.items() for i in self.positions[w])
        self._cache[word] = found
        return found


def _phrase_score(phrase_words: list[str], index: _TextIndex, fine_cancels: bool = False,
                  blocked: frozenset[int] = frozenset()) -> float:
    """Best score of the phrase's words occurring together in the text; 0 when absent. Words
    at ``blocked`` positions (inside a near miss) do not take part."""
    if not phrase_words:
        return 0.0
    occurrences = []
    for word in phrase_words:  # a word with no occurrence settles it: the rest are not looked up
        found = index.occurrences(word)
        if not found:
            return 0.0
        occurrences.append(found)
    window = len(phrase_words) + _WINDOW_SLACK
    keys = [[i for i, _ in o] for o in occurrences]
    best = 0.0
    for start, first_score in occurrences[0][:_MAX_STARTS]:
        total, lo, hi, ok = first_score, start, start, True
        for found, found_keys in zip(occurrences[1:], keys[1:]):
            a = bisect.bisect_left(found_keys, start - window)
            b = bisect.bisect_right(found_keys, start + window)
            if a == b:
                ok = False
                break
            i, s = max(found[a:b], key=lambda p: (p[1], -abs(p[0] - start)))
            total += s
            lo, hi = min(lo, i), max(hi, i)
        if not ok or hi - lo >= window:
            continue
        if blocked and any(i in blocked for i in range(lo, hi + 1)):
            continue
        if negated_words(index.words, lo, hi, phrase_words):
            continue
        if fine_cancels and fine_after(" ".join(index.words[hi + 1:hi + 6]), 0):
            continue
        best = max(best, total / len(phrase_words))
        if best >= 1.0:
            break
    return best


def _cjk_score(phrase: str, text: str, fine_cancels: bool = False, chars: Counter[str] | None = None) -> float:
    at = text.find(phrase)
    while at >= 0:
        end = at + len(phrase)
        if not negated_span(text, at, end) and not (fine_cancels and fine_after(text, end)):
            return 1.0
        at = text.find(phrase, at + 1)
    if phrase in text:
        return 0.0
    # fuzzily only where the text holds one of its CJK characters: a phrase mostly in ASCII
    # ("存checkpoint", "第一次allreduce") would otherwise match the English word alone; and never
    # without its negation: "ping 不通" is one character away from "ping 是通的"
    if (len(phrase) >= 4 and any(c in text for c in phrase if not c.isascii())
            and all(c in text for c in phrase if c in _ZH_NEGATION_CHARS)):
        score = partial_ratio(phrase, text, _CJK_CUTOFF, chars)
        if score >= _CJK_CUTOFF:
            return score / 100
    return 0.0


def _is_cjk(phrase: str) -> bool:
    """Whether a (short) KB phrase holds a kana, CJK ideograph or Hangul character."""
    return not phrase.isascii() and any(lo <= ord(c) <= hi for c in phrase for lo, hi in _CJK_RANGES)


_PREPARED: dict[int, tuple[object, "_Prepared"]] = {}


class _Prepared(NamedTuple):
    """What matching reads of the symptoms, read once per compiled KB (see :func:`_prepared`)."""

    needles: frozenset[str]
    symptoms: list[tuple]
    vocabulary: _Vocabulary
    gated_by_needle: dict[str, tuple[tuple[int, SymptomPattern], ...]]  # a needle -> (symptom position, gate) it gates
    by_trigram: dict[str, tuple[str, ...]]  # the needles of 3+ characters by their first three
    short_needles: tuple[str, ...]  # the others
    always: frozenset[int]  # symptoms with an ungated pattern or a CJK phrase: always tried
    always_ascii: frozenset[int]  # of those, the ones that may match an ASCII text (see ascii_blind)
    ascii_blind: frozenset[str]  # the CJK phrases (lower case): each scores 0 on an ASCII text
    by_first_word: dict[str, tuple[int, ...]]  # a phrase's first word -> the symptoms with it
    first_words: frozenset[str]
    gate_groups: dict[tuple[str, int], tuple[frozenset[str], ...]]  # filled on a gate's first use
    groups_known: bool  # gate_groups holds every gate's, and the trigram index their literals


def prepare(ckb: CompiledKB) -> None:
    """Read now what matching reads of the symptoms, with every gated pattern's needle groups
    (a long-running process: a one-shot run parses only the patterns its text reaches)."""
    _prepared(ckb, every_group=True)


def _prepared(ckb: CompiledKB, every_group: bool = False) -> _Prepared:
    """What matching reads of the symptoms, read once per compiled KB: every literal of their
    gates; per symptom (in KB order) its gates and its phrases as matched (the phrase, its lower
    case, whether it is CJK, its words); the phrase words matched fuzzily; and the indexes that
    find the few symptoms a text may match (by a gate's literal or a phrase's first word). With
    ``every_group``, each gated pattern's needle groups too (see :func:`_gate_groups`)."""
    patterns = ckb.symptom_patterns
    kept = _PREPARED.get(id(patterns))
    if kept is None or kept[0] is not patterns or (every_group and not kept[1].groups_known):
        needles = frozenset(n for gates in patterns.values() for gate in gates for n in gate.needles)
        symptoms = [(symptom, patterns.get(symptom.id, ()),
                     tuple((phrase, phrase.lower(), *_phrase_words(phrase)) for phrase in symptom.phrases))
                    for symptom in ckb.kb.symptoms.values()]
        vocabulary = _Vocabulary(w for _, _, phrases in symptoms for *_, words in phrases for w in words if len(w) >= 5)
        by_needle: dict[str, list[tuple[int, SymptomPattern]]] = {}
        by_first_word: dict[str, list[int]] = {}
        always, always_ascii, ascii_blind = set(), set(), set()
        for i, (_, gates, phrases) in enumerate(symptoms):
            for gate in gates:
                if not gate.needles:
                    always.add(i)
                    always_ascii.add(i)
                for needle in gate.needles:
                    by_needle.setdefault(needle, []).append((i, gate))
            for _, phrase_lower, cjk, words in phrases:
                if cjk:  # it needs one of its CJK characters in the text (see _cjk_score)
                    always.add(i)
                    ascii_blind.add(phrase_lower)
                elif words:
                    by_first_word.setdefault(words[0], []).append(i)
        groups: dict[tuple[str, int], tuple[frozenset[str], ...]] = {}
        if every_group:
            for _, gates, _ in symptoms:
                for gate in gates:
                    if gate.needles:
                        groups[(gate.symptom, gate.index)] = _other_groups(ckb, gate)
        looked_for = needles.union(*(g for found in groups.values() for g in found))
        by_trigram: dict[str, list[str]] = {}
        for needle in sorted(looked_for):
            if len(needle) >= 3:
                by_trigram.setdefault(needle[:3], []).append(needle)
        kept = _PREPARED[id(patterns)] = (patterns, _Prepared(
            needles, symptoms, vocabulary, {n: tuple(dict.fromkeys(v)) for n, v in by_needle.items()},
            {g: tuple(v) for g, v in by_trigram.items()}, tuple(sorted(n for n in looked_for if len(n) < 3)),
            frozenset(always), frozenset(always_ascii), frozenset(ascii_blind),
            {w: tuple(dict.fromkeys(v)) for w, v in by_first_word.items()}, frozenset(by_first_word), groups,
            every_group))
    return kept[1]


def _gate_groups(ckb: CompiledKB, prepared: _Prepared, gate) -> tuple[frozenset[str], ...]:
    """Every needle set of a gated pattern (:func:`kb.needles.needle_groups`), found on the
    gate's first use: a pattern runs only when the text holds a literal of each."""
    key = (gate.symptom, gate.index)
    groups = prepared.gate_groups.get(key)
    if groups is None:
        groups = prepared.gate_groups[key] = _other_groups(ckb, gate)
    return groups


def _other_groups(ckb: CompiledKB, gate) -> tuple[frozenset[str], ...]:
    pattern = ckb.kb.symptoms[gate.symptom].patterns[gate.index]
    return tuple(frozenset(g) for g in needle_groups(pattern) if set(g) != set(gate.needles))


@functools.lru_cache(maxsize=16_384)
def _phrase_words(phrase: str) -> tuple[bool, list[str]]:
    """Whether a KB phrase is matched as CJK text, else the words it is matched by (read once
    per phrase, not once per text; the list is only read)."""
    if _is_cjk(phrase):
        return True, []
    return False, [w for w in tokens(phrase) if w not in _STOP] or tokens(phrase)


def match_symptoms(ckb: CompiledKB, text: str) -> list[SymptomMatch]:
    """Every symptom the text mentions, best phrase per symptom, in KB order."""
    lowered = text.lower()
    prepared = _prepared(ckb)
    symptoms, vocabulary = prepared.symptoms, prepared.vocabulary
    index = _TextIndex(tokens(text), vocabulary)
    # Patterns see one line at a time, each cut to a bounded length, so no pattern can be
    # driven into long backtracking by a huge run of text.
    lines = [line[:_PATTERN_LINE_CHARS] for line in text.splitlines() if line.strip()]
    matches: list[SymptomMatch] = []
    chars: Counter[str] | None = None  # the text's characters, counted once for fuzzy CJK phrases
    # each literal looked for once: those of 3+ characters only if the text has their first three
    present = {n for n in prepared.short_needles if n in lowered}
    by_trigram = prepared.by_trigram
    present.update(n for n in _by_first_three(lowered, by_trigram) if n in lowered)
    # CJK phrases cannot score on an ASCII text (most texts are)
    blind = prepared.ascii_blind if lowered.isascii() else frozenset()
    # The symptoms that may match: one with a gated pattern whose literals the text holds (one of
    # each of its needle groups: no match can lack them all, so any other pattern is skipped), one
    # with a phrase whose first word occurs in the text (any other phrase scores 0), or one
    # always tried; a symptom with none of these matches nothing.
    candidates = set(prepared.always_ascii if blind else prepared.always)
    looked: dict[str, bool] = {}  # the other literals of a gated pattern, each looked for once
    groups_known, gate_groups = prepared.groups_known, prepared.gate_groups
    gated = prepared.gated_by_needle
    passing: set[tuple[str, int]] = set()  # the gated patterns to run: (symptom id, index)
    tried: set[tuple[str, int]] = set()
    for needle in present:
        for position, gate in gated.get(needle, ()):  # (present also holds the other groups' literals)
            key = (gate.symptom, gate.index)
            if key in tried:
                continue
            tried.add(key)
            if groups_known:
                if any(present.isdisjoint(group) for group in gate_groups[key]):
                    continue
            elif not all(any(looked[n] if n in looked else looked.setdefault(n, n in lowered) for n in group)
                         for group in _gate_groups(ckb, prepared, gate)):
                continue
            passing.add(key)
            candidates.add(position)
    by_first_word = prepared.by_first_word
    # the phrases' first words that occur in the text (may_occur() rules most out with one set
    # operation; occurrences() is kept per word)
    occurrences = index.occurrences
    first_words = {word for word in index.may_occur_among(prepared.first_words) if occurrences(word)}
    for word in first_words:
        candidates.update(by_first_word[word])
    contrasts: list[SymptomMatch] = []  # matches only in a clause about the setup that works
    for position in sorted(candidates):
        symptom, gates, phrases = symptoms[position]
        best: SymptomMatch | None = None
        contrast: SymptomMatch | None = None
        for gate in gates:
            if gate.needles and (gate.symptom, gate.index) not in passing:
                continue
            regex = ckb.symptom_regexes[(gate.symptom, gate.index)]
            found, working = _first_standing(ckb, regex, lines, symptom)
            if found:
                caps = {k: v for k, v in found.groupdict().items() if v is not None}
                if working:
                    contrast = contrast or SymptomMatch(symptom.id, found.group(0), 1.0, caps)
                    continue
                best = SymptomMatch(symptom.id, found.group(0), 1.0, caps)
                break
        if best is None and contrast is not None:
            contrasts.append(contrast)
            continue
        if best is None:
            blocked: frozenset[int] | None = None if symptom.unless else frozenset()
            for phrase, phrase_lower, cjk, phrase_words in phrases:
                if cjk:
                    if phrase_lower in blind:
                        continue  # it scores 0 here
                    if chars is None:
                        chars = Counter(lowered)
                    score = _cjk_score(phrase_lower, lowered, symptom.fine_cancels, chars)
                elif not phrase_words or phrase_words[0] not in first_words:
                    continue  # its first word is not in the text: it scores 0
                else:
                    score = _phrase_score(phrase_words, index, symptom.fine_cancels)
                    if score > 0 and blocked is None:  # a near miss matters only once a phrase matched
                        blocked = _near_miss_words(ckb, symptom, text)
                    if score > 0 and blocked:
                        score = _phrase_score(phrase_words, index, symptom.fine_cancels, blocked)
                if score > 0 and (best is None or score > best.score):
                    best = SymptomMatch(symptom.id, phrase, score, {})
        if best is not None:
            matches.append(best)
    return _with_contrasts(ckb, matches, contrasts) if contrasts else matches


def _with_contrasts(ckb: CompiledKB, matches: list[SymptomMatch], contrasts: list[SymptomMatch]) -> list[SymptomMatch]:
    """Add the matches found only where the user says what works ("fine when the containers are
    on different hosts") unless a match elsewhere sets one of the same facts: then the user is
    contrasting the working setup with the failing one, which the other match names. Alone
    ("works on up to 4 nodes, fails on more") it is still true of the failing setup."""
    symptoms = ckb.kb.symptoms
    told = {fact for m in matches for fact in symptoms[m.symptom].sets}
    kept = [m for m in contrasts if told.isdisjoint(symptoms[m.symptom].sets)]
    if not kept:
        return matches
    order = {symptom_id: i for i, symptom_id in enumerate(symptoms)}
    return sorted([*matches, *kept], key=lambda m: order[m.symptom])  # KB order, as documented


def _near_miss_words(ckb: CompiledKB, symptom, text: str) -> frozenset[int]:
    """Positions (in :func:`tokens` order) of the text's words that a near miss (``unless``) of
    the symptom covers; its patterns run line by line, as the symptom's own patterns do."""
    lowered = text.lower().replace("\u2019", "'")
    spans = []
    offset = 0
    for line in lowered.splitlines(keepends=True):
        cut = line[:_PATTERN_LINE_CHARS]
        for i in range(len(symptom.unless)):
            spans.extend((offset + m.start(), offset + m.end())
                         for m in ckb.unless_regexes[(symptom.id, i)].finditer(cut))
        offset += len(line)
    if not spans:
        return frozenset()
    return frozenset(i for i, word in enumerate(_WORD.finditer(lowered))
                     if any(a < word.end() and b > word.start() for a, b in spans))


def _first_standing(ckb: CompiledKB, regex, lines: list[str], symptom):
    """The first match of a symptom pattern that stands: not negated, not hedged away, not
    overlapped by a near miss (``unless``), not refused by ``differ`` (captures that must differ);
    with whether it stands only in a clause about what works (the first such match, when no
    other stands)."""
    working = None
    for line in lines:
        lowered = None
        near_misses = None
        for found in regex.finditer(line):
            start, end = found.start(), found.end()
            lowered = lowered if lowered is not None else line.lower()
            if negated_span(lowered, start, end):
                continue
            if symptom.fine_cancels and fine_after(lowered, end):
                continue
            groups = found.groupdict()
            if any(groups.get(a) is not None and groups.get(a) == groups.get(b) for a, b in symptom.differ):
                continue
            if symptom.unless:
                if near_misses is None:
                    near_misses = [(m.start(), m.end()) for i in range(len(symptom.unless))
                                   for m in ckb.unless_regexes[(symptom.id, i)].finditer(line)]
                if any(a < end and b > start for a, b in near_misses):
                    continue
            if fine_before(lowered, start):
                working = working or found
                continue
            return found, False
    return working, working is not None


_SIGNATURE_TABLES: dict[int, tuple[object, tuple]] = {}


class _SignatureGate(NamedTuple):
    """Which signatures a line may match, found from the literals it holds (see :func:`scan_lines`)."""

    always: tuple[int, ...]  # positions (in the table) of signatures without literals: tried on every line
    lower: dict[str, tuple[tuple[str, int], ...]]  # caseless literals (lower case) by their first three characters
    raw: dict[str, tuple[tuple[str, int], ...]]  # case-sensitive ones, likewise
    short_lower: tuple[tuple[str, int], ...]  # literals under three characters, with their signature's position
    short_raw: tuple[tuple[str, int], ...]


def _signature_table(ckb: CompiledKB) -> tuple[list[tuple[str, tuple[str, ...], bool]], list[str], _SignatureGate]:
    """(signature id, needles as matched, ignore case) for every signature, the ids of those
    that read a "Last error:" line's continuation, and the gate that finds the signatures a line
    may match: built once per compiled KB, not per text."""
    signatures = ckb.kb.signatures
    kept = _SIGNATURE_TABLES.get(id(signatures))
    if kept is None or kept[0] is not signatures:
        table = [(sig.id, tuple(n.lower() for n in sig.needles) if sig.ignore_case else tuple(sig.needles),
                  sig.ignore_case) for sig in signatures.values()]
        always: list[int] = []
        by_first: tuple[dict[str, list[tuple[str, int]]], dict[str, list[tuple[str, int]]]] = ({}, {})
        short: tuple[list[tuple[str, int]], list[tuple[str, int]]] = ([], [])
        for position, (_, needles, caseless) in enumerate(table):
            if not needles:
                always.append(position)
            for needle in needles:
                side = 0 if caseless else 1
                if len(needle) >= 3:
                    by_first[side].setdefault(needle[:3], []).append((needle, position))
                else:
                    short[side].append((needle, position))
        gate = _SignatureGate(tuple(always), *({k: tuple(v) for k, v in found.items()} for found in by_first),
                              tuple(short[0]), tuple(short[1]))
        kept = _SIGNATURE_TABLES[id(signatures)] = (signatures, (table, [sid for sid, needles, _ in table
                                                                          if LAST_ERROR in needles], gate))
    return kept[1]


def _by_first_three(text: str, index: Mapping[str, tuple[_T, ...]]) -> Iterator[_T]:
    """The entries of ``index`` (literals keyed by their first three characters) whose key occurs
    in ``text``: the only literals of three or more characters the text may hold."""
    for trigram in {text[i:i + 3] for i in range(len(text) - 2)}.intersection(index):
        yield from index[trigram]


def _may_match(gate: _SignatureGate, line: str, lowered: str) -> list[int]:
    """The positions, in order, of the signatures that have a literal in the line (caseless ones
    in its lower case) or none at all: the others cannot match it. Literals of three or more
    characters are looked for only where the line holds their first three."""
    found = set(gate.always)
    for text, by_first, short in ((lowered, gate.lower, gate.short_lower), (line, gate.raw, gate.short_raw)):
        if by_first:
            found.update(position for needle, position in _by_first_three(text, by_first)
                         if position not in found and needle in text)
        found.update(position for needle, position in short if position not in found and needle in text)
    return sorted(found)


def last_error_line(line: str) -> str:
    """PyTorch prints the NCCL error text on the line after a bare "Last error:"; that next line
    as one "Last error: <text>" line, for the signatures that read it."""
    return f"{LAST_ERROR} {_RANK_PREFIX.sub('', line).strip()}"


def scan_lines(ckb: CompiledKB, lines: Iterable[str], first_line: int = 1) -> Iterator[SignatureHit]:
    """Run every log signature over the lines; yield one hit per (line, signature)."""
    signatures, continuing, gate = _signature_table(ckb)
    regexes = ckb.signature_regexes
    previous = ""
    for line_no, raw in enumerate(lines, start=first_line):
        line = clean_line(raw)
        if not line:
            continue
        after_last_error = previous.rstrip().endswith(LAST_ERROR)
        previous = line
        if after_last_error:
            joined = last_error_line(line)
            for sig_id in continuing:
                found = regexes[sig_id].search(joined)
                if found:
                    yield SignatureHit(sig_id, line_no, joined, {k: v for k, v in found.groupdict().items() if v is not None})
        for position in _may_match(gate, line, line.lower()):
            sig_id = signatures[position][0]
            found = regexes[sig_id].search(line)
            if found:
                caps = {k: v for k, v in found.groupdict().items() if v is not None}
                yield SignatureHit(sig_id, line_no, line, caps)
