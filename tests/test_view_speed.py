"""The shortcuts that make a session's view cheap give exactly what the plain computation gives.

Each fast path is checked against the slow one it replaces, on real incident texts of the
packaged library (a spread of them, with their logs and answers), so a speed change can never
quietly change a diagnosis, a similar incident or a question.
"""
from __future__ import annotations

import itertools
import math

import pytest

from nccl_doctor.engine.questions import _Beliefs as _BELIEFS  # the class a test patches over
from nccl_doctor.engine.session import incident_profile


def _spread(doctor, step: int = 7) -> list[str]:
    return sorted(doctor.kb.incidents)[::step]


def test_similarity_from_postings_equals_the_pairwise_comparison(doctor):
    index = doctor.incidents
    profiles = []
    for incident_id in _spread(doctor):
        session = doctor.session()
        session.tell(doctor.kb.incidents[incident_id].reporter)
        profiles.append((incident_id, session.profile()))
        profiles.append((incident_id, incident_profile(doctor, incident_id)))
    compared = 0
    for incident_id, profile in profiles:
        query = index._vector(profile)
        norm = math.sqrt(sum(w * w for w in query.values()))
        for exclude in ((), (incident_id,), (doctor.kb.incidents[incident_id].source,)):
            fast = index.scores(profile, exclude)
            plain = index._pairwise_scores(profile, query, norm, exclude)
            assert fast == plain and list(fast) == list(plain), incident_id
            compared += len(plain)
    assert index._postings is not None  # the postings path was the one taken
    assert compared > 1000  # the spread really compares incidents


def test_similar_incidents_from_arrays_equal_the_postings_scores(doctor):
    """Once the postings are built, the incidents at or above MIN_SIMILARITY are scored with numpy
    arrays: the same incidents with the same scores, to the last bit, as the postings path."""
    pytest.importorskip("numpy")
    from nccl_doctor.engine.similarity import MIN_SIMILARITY

    index = doctor.incidents
    index.scores(incident_profile(doctor, _spread(doctor)[0]))  # the postings exist from the second query on
    index.scores(incident_profile(doctor, _spread(doctor)[1]))
    compared = 0
    for incident_id in _spread(doctor, step=5):
        session = doctor.session()
        session.tell(doctor.kb.incidents[incident_id].reporter)
        for profile in (session.profile(), incident_profile(doctor, incident_id)):
            for exclude in ((), (incident_id,), (doctor.kb.incidents[incident_id].source,)):
                fast = index._similar_scores(profile, exclude)
                plain = {i: s for i, s in index.scores(profile, exclude).items() if s >= MIN_SIMILARITY}
                assert fast == plain, incident_id
                assert all(type(s) is float for s in fast.values())
                compared += len(plain)
    assert index._numpy  # the arrays were the path taken
    assert compared > 500


def test_work_kept_from_a_sessions_texts_is_what_computing_it_gives(doctor):
    """Relevance evidence, pasted lines' signatures and words are kept per texts between turns; a
    session restored from its state shows what a fresh computation shows, and a session that
    takes more text afterwards does not change what the next restore reads."""
    from nccl_doctor.engine import session as sessions

    text = ("all_reduce hangs on 2 nodes\n"
            "node1:1:1 [0] NCCL WARN Bootstrap : no socket interface found")
    first = doctor.session()
    first.tell(text)
    state = first.to_json()
    expected = (first.profile(), first.report())
    sessions._TEXT_WORK.pop(doctor, None)
    for _ in range(2):  # computed, then read from what was kept
        restored = sessions.Session.from_json(doctor, state)
        assert (restored.profile(), restored.report()) == expected
    restored.tell("ncclInternalError: NCCL WARN Call to ibv_create_qp failed")  # grows its own signatures
    again = sessions.Session.from_json(doctor, state)
    assert again.profile() == expected[0] and again.profile().signatures != restored.profile().signatures
    assert (("signatures", (text,)) in sessions._TEXT_WORK[doctor]
            and ("relevance", (text,)) in sessions._TEXT_WORK[doctor])



def test_work_kept_from_texts_outlasts_a_round_of_concurrent_sessions(doctor):
    """A server worker takes every session's turns in turn: what 300 sessions' texts gave (three
    kinds each: 900 entries) is still kept when the first session's next turn comes (512 entries
    were kept, oldest first dropped, so each was computed again); a read keeps an entry longest,
    and the characters kept in all stay within their bound (the oldest go first)."""
    from nccl_doctor.engine import session as sessions

    sessions._TEXT_WORK.pop(doctor, None)
    computed: list[tuple[str, str]] = []

    def work(kind: str, text: str):
        return sessions._from_texts(doctor, kind, [text], lambda: computed.append((kind, text)) or (kind, text))

    texts = [f"session {n}: all_reduce hangs on 2 nodes" for n in range(300)]
    for text in texts:
        for kind in ("relevance", "signatures", "words"):
            work(kind, text)
    assert len(computed) == 900
    for text in texts:  # the next turn of every session reads what its first one kept
        for kind in ("relevance", "signatures", "words"):
            assert work(kind, text) == (kind, text)
    assert len(computed) == 900
    long = "x" * (sessions._TEXT_WORK_CHARS - 10)
    recent = texts[0]
    for n in range(sessions._TEXT_WORK_KEPT_CHARS // len(long) + 5):
        work("relevance", recent)  # read between the long ones: kept as the most recently used
        work("words", long[:-3] + f"{n:03d}")
    held = sum(len(key[1][0]) for key in sessions._TEXT_WORK[doctor])
    assert held <= sessions._TEXT_WORK_KEPT_CHARS
    assert ("relevance", (recent,)) in sessions._TEXT_WORK[doctor]
    assert ("words", (texts[1],)) not in sessions._TEXT_WORK[doctor]
    assert sessions._TEXT_WORK_SIZE[doctor][0] == held
    sessions._TEXT_WORK.pop(doctor, None)

def _sessions(doctor, step: int = 7):
    """Sessions at several stages: a reporter's words, then the incident's log, then an answer."""
    for incident_id in _spread(doctor, step):
        incident = doctor.kb.incidents[incident_id]
        session = doctor.session()
        session.tell(incident.reporter)
        yield session
        if incident.log:
            session.add_log(incident.log.splitlines(), name=f"{incident_id}.log")
            yield session
        asked = session.next_question()
        if asked is not None:
            if asked.type == "bool":
                session.answer(asked.id, True)
            elif asked.type == "choice":
                session.answer(asked.id, asked.choices[-1])
            else:
                session.dont_know(asked.id)
            yield session


def test_a_views_json_is_the_plain_encoding_of_the_report(doctor):
    """The server encodes each diagnosis with its KB part kept per cause; the bytes are those of
    encoding the whole report dict (English and Chinese sessions, every stage)."""
    from nccl_doctor.server import work

    zh = doctor.session()
    zh.tell("两台机器训练时 NCCL 超时，all_reduce 卡住，日志里有 Connection refused")
    checked = 0
    for session in itertools.chain(_sessions(doctor, step=13), [zh]):  # each stage as it is reached
        for questions in (0, 3):
            report = session.report(questions=max(questions, 1))
            asked = report["questions"]
            report["next_question"] = asked[0] if asked else None
            report["questions"] = asked[:questions]
            report["answers"] = session.answers()
            report["unknown"] = session.unknown
            assert work._view(session, questions) == work._encode(report)
            checked += len(report["diagnoses"])
    assert zh.language == "zh" and checked > 100


# ------------------------------------------------------------------ chaining and question ranking
def _plain_run(ckb, state, start) -> None:
    """Forward chaining as the engine's docstring states it, with no shortcut: every rule reading a
    changed fact is tried, earliest first, and fires at most once."""
    import heapq

    from nccl_doctor.engine.chaining import Firing
    from nccl_doctor.engine.memory import FactRecord, Source

    rules = ckb.rules
    heap = sorted((rules[i].order, i) for i in start if rules[i].id not in state.fired_ids)
    while heap:
        _, index = heapq.heappop(heap)
        rule = rules[index]
        if rule.id in state.fired_ids:
            continue
        truth, premise = rule.predicate(state.facts)
        if truth is not True:
            continue
        state.fired_ids.add(rule.id)
        used = tuple(sorted(n for n in rule.reads if n in state.facts))
        state.fired.append(Firing(rule.id, premise, used))
        for cause, strength in rule.evidence:
            state.evidence.setdefault(cause, []).append((rule.id, strength * premise))
        for name, value in rule.sets:
            if name not in state.facts:
                state.facts[name] = FactRecord(name, value, Source("rule", rule.id), premise * rule.certainty, used)
                for dependent in ckb.rules_by_fact.get(name, ()):
                    if (rules[dependent].order, dependent) not in heap:
                        heapq.heappush(heap, (rules[dependent].order, dependent))


def _plain_infer(ckb, base):
    from nccl_doctor.engine.chaining import Inference

    state = Inference(facts=dict(base))
    _plain_run(ckb, state, set(ckb.absence_rules) | {i for name in base for i in ckb.rules_by_fact.get(name, ())})
    return state


def _plain_extend(ckb, state, new):
    out = state.copy()
    fresh = {name: record for name, record in new.items() if name not in out.facts}
    out.facts.update(fresh)
    _plain_run(ckb, out, {i for name in fresh for i in ckb.rules_by_fact.get(name, ())})
    return out


def test_chaining_skips_only_rules_that_could_not_fire(doctor):
    """Inference skips a rule while a fact it needs is unknown; on a spread of incidents it fires
    the same rules, in the same order, to the same facts and evidence as trying every rule."""
    from nccl_doctor.engine.chaining import infer

    fired = 0
    for session in _sessions(doctor, step=9):
        base = session._base()
        fast, slow = infer(doctor.compiled, base), _plain_infer(doctor.compiled, base)
        assert (fast.facts, fast.fired, fast.evidence) == (slow.facts, slow.fired, slow.evidence)
        fired += len(fast.fired)
    assert fired > 300


def _plain_ready_rules(ckb, state, facts):
    """Every unfired rule reading the fact: no shortcut on what they need."""
    return {name: [i for i in ckb.rules_by_fact.get(name, ()) if ckb.rules[i].id not in state.fired_ids]
            for name in facts}


def _plain_consequences(ckb, state, new, ready=None):
    """What a simulated answer adds, by chaining a full copy of the inference, trying every rule
    that reads a new fact."""
    after = _plain_extend(ckb, state, new)
    added = {name: record for name, record in after.facts.items() if name not in state.facts}
    evidence = {}
    for cause, items in after.evidence.items():
        fresh = [value for _, value in items[len(state.evidence.get(cause, ())):]]
        if fresh:
            evidence[cause] = fresh
    return added, evidence


def _plain_fact_gain(beliefs, moves, known=None):
    """The expected entropy drop exactly as the module docstring of engine.questions writes it."""
    n = len(moves)
    if n == 0:
        return 0.0
    known = known or (lambda cause, moved: 1.0)
    moved = set().union(*moves)
    norm = {x: sum(m.get(x, 1.0) for m in moves) for x in moved}
    chance = {x: known(x, True) for x in moved}
    unmoved = (beliefs.total - sum(beliefs.w.get(x, 0.0) for x in moved)) * known(None, False)
    gain = 0.0
    for move in moves:
        likely = unmoved / n + sum(beliefs.w.get(x, 0.0) * chance[x] * move.get(x, 1.0) / norm[x] for x in moved)
        gain += likely / beliefs.total * (beliefs.entropy - beliefs.entropy_with(move))
    return gain


def _ranked(session):
    from nccl_doctor.engine.questions import rank_questions

    state = session._inference()
    found = rank_questions(session.doctor.compiled, state, session._model(), skip=session.unknown, limit=10,
                           lang=session.language)
    return [(q.id, round(q.gain, 9), q.separates) for q in found]


def test_ranked_questions_are_those_of_the_plain_simulation(doctor, monkeypatch):
    """Question ranking simulates answers with shortcuts (only rules ready to fire, chaining that
    copies facts alone, once for all the answers to a fact, answers that move nothing skipped in
    the gain, the causes a question separates found only for those returned); on real incident texts,
    logs and answers it picks the same questions, with the same gains and causes, as simulating
    each answer by chaining a full copy of the inference."""
    from nccl_doctor.engine import questions

    compared = 0
    for session in _sessions(doctor, step=9):  # each stage as it is reached
        fast = _ranked(session)
        with monkeypatch.context() as plain:
            plain.setattr(questions, "ready_rules", _plain_ready_rules)
            plain.setattr(questions, "answers_evidence", lambda ckb, state, name, records, ready: [
                _plain_consequences(ckb, state, {name: record})[1] for record in records])
            plain.setattr(questions, "fact_gain", _plain_fact_gain)
            assert fast == _ranked(session)
        compared += len(fast)
    assert compared > 500  # the spread asks many questions



class _PlainBeliefs:
    """``w(x)`` computed over every cause at every turn, entropy changes through the mapping."""

    def __init__(self, ckb, certainties):
        from nccl_doctor.engine.questions import SHARPNESS, _clamp

        self.cf = certainties
        self.w = {c: ckb.priors[c] * math.exp(SHARPNESS * _clamp(certainties.get(c, 0.0), 1.0)) for c in ckb.kb.causes}
        self.total = sum(self.w.values()) or 1.0
        self._w_ln_w = {c: v * math.log(v) for c, v in self.w.items() if v > 0}
        self.s = sum(self._w_ln_w.values())
        self.entropy_with = _BELIEFS.entropy_with.__get__(self)
        self.mass = _BELIEFS.mass.__get__(self)
        self.entropy = self.entropy_with({})

    def entropy_one(self, cause, f):
        return self.entropy_with({cause: f})


def _plain_evidence_gain(beliefs, reach):
    """An evidence question's gain with every lift computed and every entropy through the mapping."""
    from nccl_doctor.engine.certainty import combine
    from nccl_doctor.engine.questions import SHARPNESS, _clamp

    gain = 0.0
    for cause, rate in reach.rate.items():
        p_shows = rate * beliefs.w.get(cause, 0.0) / beliefs.total
        if p_shows <= 1e-6:
            continue
        now = beliefs.cf.get(cause, 0.0)
        lift = math.exp(SHARPNESS * _clamp(combine(now, reach.strength[cause]) - now, 2.0))
        gain += p_shows * (beliefs.entropy - beliefs.entropy_with({cause: lift}))
    return gain


def test_beliefs_and_evidence_gains_are_those_of_the_plain_computation(doctor, monkeypatch):
    """Question ranking starts the beliefs from the priors kept per KB (only causes with a
    certainty are weighed again), keeps the lift of each cause with no certainty per evidence
    question and changes the entropy for one cause without a mapping; the questions, their gains
    to the last bit and the causes they separate are those of computing each afresh."""
    from nccl_doctor.engine import questions

    def ranked(session):
        state = session._inference()
        return [(q.id, q.gain, q.separates) for q in questions.rank_questions(
            session.doctor.compiled, state, session._model(), skip=session.unknown, limit=10, lang=session.language)]

    compared = evidence = 0
    for session in _sessions(doctor, step=9):
        fast = ranked(session)
        beliefs = questions._Beliefs(doctor.compiled, session._inference().certainties())
        plain = _PlainBeliefs(doctor.compiled, session._inference().certainties())
        assert (beliefs.w, beliefs._w_ln_w, beliefs.total, beliefs.s, beliefs.entropy) == (
            plain.w, plain._w_ln_w, plain.total, plain.s, plain.entropy)
        assert list(beliefs.w) == list(plain.w) and list(beliefs._w_ln_w) == list(plain._w_ln_w)
        for fact_id in session._model().evidence:
            reach = session._model().reach(fact_id, session._inference().facts)
            assert questions.evidence_gain(beliefs, reach) == _plain_evidence_gain(plain, reach)
            evidence += 1
        with monkeypatch.context() as slow:
            slow.setattr(questions, "_Beliefs", _PlainBeliefs)
            slow.setattr(questions, "evidence_gain", _plain_evidence_gain)
            assert fast == ranked(session)
        compared += len(fast)
    assert compared > 500 and evidence > 100


class _NeverDisjoint(frozenset):
    """A row's causes that always share a cause with those weighed: its sums are taken afresh."""

    def isdisjoint(self, other):
        return False


def test_sums_kept_per_fact_are_those_of_summing_the_weights_each_turn(doctor, monkeypatch):
    """Question ranking takes a fact's Σ w(c) sums from its row (kept per KB) when none of its causes
    has a certainty; summing the weights at every turn gives the same questions, with the same
    gains and scores to the last bit, and the same causes."""
    from nccl_doctor.engine import questions

    def ranked(session):
        return questions.rank_questions(session.doctor.compiled, session._inference(), session._model(),
                                        skip=session.unknown, limit=10, lang=session.language)

    kept_rows = questions._rows
    compared = 0
    for session in _sessions(doctor, step=9):
        fast = ranked(session)
        with monkeypatch.context() as plain:
            plain.setattr(questions, "_rows", lambda model: [row._replace(causes=_NeverDisjoint(row.causes))
                                                             for row in kept_rows(model)])
            assert fast == ranked(session)
        compared += len(fast)
    assert compared > 500


def test_questions_made_when_read_are_those_ranked_at_once(doctor):
    """A session ranks ten questions and makes each into a Question only when it is read: reading
    three then ten gives what a fresh session reading ten at once gives, and the same three first."""
    for session in _sessions(doctor, step=23):
        three = session.questions(3)
        state = session.to_json()
        ten = session.questions(10)
        fresh = type(session).from_json(session.doctor, state).questions(10)
        assert three == ten[:3] and ten == fresh
        assert session.next_question() == (ten[0] if ten else None)


def test_one_added_fact_whose_rules_set_nothing_gives_the_chainings_consequences(doctor):
    """Simulating an answer whose ready rules that fire set no new fact tries each once, in agenda
    order, on a copy of the facts (else it chains as the agenda does); what it adds and the evidence per cause are those of chaining a full copy
    of the inference, and in the same order as the agenda's general path gives them."""
    from nccl_doctor.engine.chaining import _readers, answers_evidence, consequences, ready_rules

    assert _readers(doctor.compiled)[1]  # this KB's rules read in agenda order: the short path is taken
    model = None
    checked = moved = 0
    for session in _sessions(doctor, step=11):
        state = session._inference()
        model = session._model()
        facts = [f for f in model.records if f not in state.facts]
        ready = ready_rules(doctor.compiled, state, facts)
        for fact_id in facts:
            each = [consequences(doctor.compiled, state, {fact_id: record}, ready)[1] for record in model.records[fact_id]]
            together = answers_evidence(doctor.compiled, state, fact_id, model.records[fact_id], ready)
            assert together == each and [list(e) for e in together] == [list(e) for e in each], fact_id
            for record in model.records[fact_id]:
                fast = consequences(doctor.compiled, state, {fact_id: record}, ready)
                plain = _plain_consequences(doctor.compiled, state, {fact_id: record})
                general = consequences(doctor.compiled, state, {fact_id: record})
                assert fast == plain == general and list(fast[1]) == list(general[1]), fact_id
                checked += 1
                moved += bool(fast[1])
    assert checked > 5000 and moved > 500


def test_relevance_from_postings_equals_scoring_every_cause(doctor):
    """BM25 relevance summed from per-term postings gives the floats, terms and cause order of
    scoring every cause over every query term, on every incident description and log; the
    evidence (terms found only for the causes that get some) is what those scores give."""
    from nccl_doctor.engine.relevance import _B, _K1, MIN_BEST, MIN_SHARE, TOP, WEIGHT, _terms

    index = doctor.relevance

    def plain(text):
        query = sorted({t for t in _terms(text) if t in index._idf})
        out = {}
        for cause_id, doc in index._docs.items():
            score, matched = 0.0, []
            norm = _K1 * (1 - _B + _B * index._lengths[cause_id] / index._average)
            for term in query:
                tf = doc.get(term)
                if tf:
                    score += index._idf[term] * tf * (_K1 + 1) / (tf + norm)
                    matched.append(term)
            if score > 0:
                out[cause_id] = (score, tuple(matched))
        return out

    def plain_evidence(scored):  # what evidence() makes of every cause's score and terms
        if not scored or max(score for score, _ in scored.values()) < MIN_BEST:
            return {}
        best = max(score for score, _ in scored.values())
        ranked = sorted(scored.items(), key=lambda item: -item[1][0])[:TOP]
        return {cause_id: (round(WEIGHT * (score / best) ** 2, 4), words)
                for cause_id, (score, words) in ranked if score >= MIN_SHARE * best}

    scored = 0
    for incident in doctor.kb.incidents.values():
        for text in (incident.reporter, incident.log or "", incident.reporter + "\n" + incident.summary):
            fast, expected = index.scores(text), plain(text)
            assert fast == expected and list(fast) == list(expected), incident.id
            assert list(index.evidence([text]).items()) == list(plain_evidence(expected).items()), incident.id
            scored += len(expected)
    assert scored > 10_000


# ------------------------------------------------------------------ symptom matching
def test_fuzzy_phrase_words_found_from_the_vocabulary_equal_comparing_each_word(doctor):
    """With rapidfuzz in, a text's words are compared with the KB's phrase vocabulary once each;
    the phrase words' occurrences (exact, prefix, typo) are those of comparing every phrase word
    with the text's words, on every incident description and log."""
    from nccl_doctor.engine import fuzzy
    from nccl_doctor.engine.matching import _prepared, _TextIndex, tokens

    fuzzy._imported()
    vocabulary = _prepared(doctor.compiled).vocabulary
    found = 0
    for incident in doctor.kb.incidents.values():
        for text in (incident.reporter, incident.log or ""):
            words = tokens(text)
            fast, plain = _TextIndex(words, vocabulary), _TextIndex(words)
            for word in vocabulary.words:
                expected = plain.occurrences(word)
                assert fast.occurrences(word) == expected, (incident.id, word)
                found += bool(expected)
    assert found > 5000


# ------------------------------------------------------------------ rule conditions
def _fact_tests(cond):
    """Every comparison of one fact in a condition (as the layout or the KB holds it)."""
    if cond.get("fact") is not None:
        yield cond
        return
    for part in cond.get("all") or cond.get("any") or ([cond["not_"]] if cond.get("not_") is not None else []):
        yield from _fact_tests(part)


def test_fact_tests_written_out_answer_as_equals_does(doctor):
    """Bare bools and eq / ne / in on bools, choices and text are compiled to one function each;
    for every such test in the KB's rules and question premises, on every value a session could
    hold for the fact (its choices, the literals the rules use, yes/no, other text, other cases),
    it answers what the comparison through ``values.equals`` answers."""
    from nccl_doctor.engine.conditions import _compile_fact_test
    from nccl_doctor.engine.memory import FactRecord, Source
    from nccl_doctor.engine.values import coerce, equals

    facts = doctor.kb.facts
    layout_when = {r.id: r.rule.when for r in doctor.compiled.rules}
    conditions = list(layout_when.values()) + [f.asked_when for f in facts.values() if f.get("asked_when") is not None]
    checked = 0
    for cond in conditions:
        for test in _fact_tests(cond):
            fact = facts[test["fact"]]
            op = next((k for k in ("eq", "ne", "in_") if test.get(k) is not None), None)
            if fact.type in ("number", "version") or test.get("known") is not None or test.get("matches") is not None \
                    or any(test.get(k) is not None for k in ("lt", "le", "gt", "ge")):
                continue
            literals = list(test.get("in_") or []) if op == "in_" else ([test[op]] if op else [])
            values = [True, False, "something else", *fact.choices, *(str(v).upper() for v in fact.choices),
                      *(str(v) for v in literals)]
            compiled = _compile_fact_test(test, facts)
            expected_literals = [coerce(v, fact.type, fact.choices) for v in literals]
            for value in values:
                record = FactRecord(fact.id, value, Source("text"), 0.7)
                if op is None:
                    want = value is True
                elif op == "in_":
                    want = any(equals(value, o, fact.type) for o in expected_literals)
                else:
                    want = equals(value, expected_literals[0], fact.type) == (op == "eq")
                assert compiled({fact.id: record}) == (want, 0.7), (test, value)
                checked += 1
            assert compiled({}) == (None, 0.0)
    assert checked > 2000


def test_a_phrase_word_said_not_to_occur_has_no_occurrence(doctor):
    """Symptom matching skips a phrase whose first word may_occur() rules out; on every incident
    description and log, each phrase word it rules out has no occurrence in the text (exact,
    prefix or typo), with the vocabulary's typos and with typos found word by word."""
    from nccl_doctor.engine import fuzzy
    from nccl_doctor.engine.matching import _prepared, _TextIndex, tokens

    fuzzy._imported()
    prepared = _prepared(doctor.compiled)
    symptoms, vocabulary = prepared.symptoms, prepared.vocabulary
    phrase_words = {w for _, _, phrases in symptoms for *_, words in phrases for w in words}
    ruled_out = 0
    for incident in doctor.kb.incidents.values():
        for text in (incident.reporter, incident.log or ""):
            words = tokens(text)
            for index in (_TextIndex(words, vocabulary), _TextIndex(words)):
                for word in phrase_words:
                    if not index.may_occur(word):
                        assert not index.occurrences(word), (incident.id, word)
                        ruled_out += 1
    assert ruled_out > 100_000



def test_may_occur_among_a_set_answers_as_may_occur_does_word_by_word(doctor):
    from nccl_doctor.engine import fuzzy
    from nccl_doctor.engine.matching import _FUZZY_LIMIT, _prepared, _TextIndex, tokens

    fuzzy._imported()
    prepared = _prepared(doctor.compiled)
    words = prepared.first_words | {"x" * 300, "zzzzzz", "nccl", "hangs"}
    checked = 0
    for incident in list(doctor.kb.incidents.values())[::3]:
        for text in (incident.reporter, incident.log or ""):
            for typos in (True, False):
                index = _TextIndex(tokens(text), prepared.vocabulary)
                if not typos:  # as when rapidfuzz is not in or the text has too many words
                    index._possible_words()
                    index._typos_known = False
                assert index.may_occur_among(frozenset(words)) == {w for w in words if index.may_occur(w)}
                checked += 1
    many = _TextIndex([f"w{i}" for i in range(_FUZZY_LIMIT + 1)], prepared.vocabulary)
    assert many.may_occur_among(frozenset(words)) == {w for w in words if many.may_occur(w)}
    assert fuzzy._rapidfuzz is not None and checked > 300


def test_matching_only_the_candidate_symptoms_finds_what_trying_every_symptom_finds(doctor, monkeypatch):
    """A text is matched against the symptoms a gate literal (of each needle group) or a phrase's
    first word lets through, looking for the literals by their first three characters and
    leaving out CJK phrases that cannot score on ASCII text; trying every symptom, pattern,
    phrase and literal finds the same matches, on every incident description and the KB's
    examples."""
    from nccl_doctor.engine import matching

    ckb = doctor.compiled
    monkeypatch.delitem(matching._PREPARED, id(ckb.symptom_patterns), raising=False)
    prepared = matching._prepared(ckb)  # gate needle groups read as texts reach them
    texts = [i.reporter for i in doctor.kb.incidents.values()] + [
        example.get("text") for item in doctor.kb.symptoms.values()
        for example in list(item.examples.fires) + list(item.examples.silent) if example.get("text")]
    fast = [matching.match_symptoms(ckb, text) for text in texts]
    monkeypatch.delitem(matching._PREPARED, id(ckb.symptom_patterns))
    matching.prepare(ckb)  # every gate's needle groups read up front, their literals in the index
    assert matching._prepared(ckb).groups_known and not prepared.groups_known
    assert [matching.match_symptoms(ckb, text) for text in texts] == fast
    every = prepared._replace(
        always=frozenset(range(len(prepared.symptoms))), always_ascii=frozenset(range(len(prepared.symptoms))),
        ascii_blind=frozenset(), by_trigram={}, short_needles=tuple(prepared.needles),
        gate_groups={(g.symptom, g.index): () for _, gates, _ in prepared.symptoms for g in gates})
    monkeypatch.setitem(matching._PREPARED, id(ckb.symptom_patterns), (ckb.symptom_patterns, every))
    monkeypatch.setattr(matching._TextIndex, "may_occur_among", lambda self, words: set(words))
    assert [matching.match_symptoms(ckb, text) for text in texts] == fast
    assert sum(map(len, fast)) > 1000


def test_signatures_tried_on_a_line_by_its_literals_find_what_checking_each_signature_finds(doctor, monkeypatch):
    """Pasted lines are matched against the signatures whose literals the line holds, looked for by
    their first three characters; checking every signature's literals on every line finds the
    same hits in the same order, on every incident description and log."""
    from nccl_doctor.engine import matching

    ckb = doctor.compiled
    texts = [i.reporter for i in doctor.kb.incidents.values()] + [i.log for i in doctor.kb.incidents.values() if i.log]
    fast = [list(matching.scan_lines(ckb, text.splitlines())) for text in texts]
    table = matching._signature_table(ckb)[0]

    def every_signature(gate, line, lowered):  # the literal check, signature by signature
        return [position for position, (_, needles, caseless) in enumerate(table)
                if not needles or any(n in (lowered if caseless else line) for n in needles)]

    monkeypatch.setattr(matching, "_may_match", every_signature)
    assert [list(matching.scan_lines(ckb, text.splitlines())) for text in texts] == fast
    assert sum(map(len, fast)) > 300


def test_a_cjk_phrase_left_out_on_ascii_text_scores_nothing_there(doctor):
    """Matching leaves every phrase holding a CJK character out on an ASCII text: scored, each
    gives 0 on every incident description and log line, also where most of the phrase is ASCII
    and the rest of it is in the text ("第一次allreduce" on "the allreduce hangs")."""
    from nccl_doctor.engine.matching import _cjk_score, _is_cjk, _prepared

    prepared = _prepared(doctor.compiled)
    cjk = {p.lower() for item in doctor.kb.symptoms.values() for p in item.phrases or () if _is_cjk(p)}
    assert cjk and cjk <= prepared.ascii_blind and prepared.always_ascii < prepared.always
    texts = [t.lower() for i in doctor.kb.incidents.values() for t in (i.reporter, i.log or "") if t.isascii()]
    texts += ["the allreduce hangs after two hours", "all ranks block in the checkpoint restore"]
    assert len(texts) > 500
    assert not [(p, t) for p in cjk for t in texts if _cjk_score(p, t)]
    assert _cjk_score("第一次allreduce", "第一次allreduce就卡住") == 1.0
    assert _cjk_score("第一次allreduce", "第一次allreduc就卡住") > 0  # a typo, with its CJK characters
    assert _cjk_score("ping 不通", "ping 是通的") == 0  # one character off, but that one is the negation


def test_a_prepared_doctor_compiles_nothing_later_and_answers_the_same(doctor):
    """``Doctor.prepare`` (a server's workers, before their first client) compiles every regex and
    condition up front; sessions on it report exactly what they report on a lazy Doctor."""
    from nccl_doctor.engine import Doctor
    from nccl_doctor.engine.compiled import LazyRegexes, _LazyPredicate
    from nccl_doctor.knowledge import load_knowledge

    kb, extras = load_knowledge()
    prepared = Doctor(kb, extras=extras)
    prepared.prepare()
    ckb = prepared.compiled
    for regexes in (ckb.symptom_regexes, ckb.unless_regexes, ckb.signature_regexes):
        assert isinstance(regexes, LazyRegexes) and len(regexes) == len(regexes._patterns) > 0
    predicates = [rule.predicate for rule in ckb.rules] + list(ckb.premises.values())
    assert all(p._compiled is not None for p in predicates if isinstance(p, _LazyPredicate))
    assert prepared.incidents._postings is not None
    for incident_id in _spread(doctor, 41):
        incident = doctor.kb.incidents[incident_id]
        reports = []
        for one in (doctor, prepared):
            session = one.session()
            session.tell(incident.reporter)
            if incident.log:
                session.add_log(incident.log.splitlines())
            reports.append(session.report(questions=5))
        assert reports[0] == reports[1], incident_id


def test_kept_answer_chances_follow_the_incidents_left_out(doctor):
    """``known_given`` keeps what it computed; a model with incidents left out learns other rates
    and must not read the full model's kept values."""
    from nccl_doctor.engine.consult_model import DONT_KNOW, PRIOR_WEIGHT

    model = doctor.consult_model
    pairs = [(f, c) for f, causes in list(model.bears_on.items())[:40] for c in sorted(causes)[:3]]
    for fact_id, cause in pairs:
        model.known_given(fact_id, cause, True)
    cause_of = {c for _, c in pairs}
    left = model.leaving_out([i for i, inc in doctor.kb.incidents.items() if inc.cause in cause_of][:30])
    assert left is not model
    for one in (model, left):
        for fact_id, cause in pairs:
            for moved in (True, False):
                base = (one.known_relevant if moved else one.known).get(fact_id, 1 - DONT_KNOW)
                seen = one._per_cause.get(cause, 0)
                plain = base if not seen else (one._knew.get(fact_id, {}).get(cause, 0) + PRIOR_WEIGHT * base) / (seen + PRIOR_WEIGHT)
                assert one.known_given(fact_id, cause, moved) == plain
    assert any(model.known_given(f, c, True) != left.known_given(f, c, True) for f, c in pairs)


def _looped_copy(predicate):
    """The same condition with every generated ``all``/``any`` replaced by the plain loop."""
    from nccl_doctor.engine.conditions import _looped

    parts = getattr(predicate, "parts", None)
    if parts is None:
        return predicate
    kind = "all" if "all" in predicate.__code__.co_filename else "any"
    return _looped(kind, [_looped_copy(p) for p in parts])


def test_generated_conditions_equal_the_looped_ones_on_every_rule(doctor):
    """Rule conditions are generated as one function per ``all``/``any`` with the common tests
    written out; on every rule and question premise of the KB, over memories built from the
    values the KB tests (each fact absent, or one of its values, with varied certainties), they
    give exactly the truth and certainty the plain loop over the parts gives."""
    import random

    from nccl_doctor.engine.conditions import compile_condition, condition_facts
    from nccl_doctor.engine.memory import FactRecord, Source

    ckb = doctor.compiled
    options = doctor.answer_options
    source = Source("answer", "test")
    rng = random.Random(15)
    checked = grouped = 0
    conditions = [rule.rule.when for rule in ckb.rules] + [f.asked_when for f in ckb.kb.facts.values()
                                                            if f.get("asked_when") is not None]
    for cond in conditions:
        fast = compile_condition(cond, ckb.kb.facts)
        plain = _looped_copy(fast)
        grouped += plain is not fast
        names = sorted(condition_facts(cond))
        for _ in range(12):
            memory = {}
            for name in names:
                fact = ckb.kb.facts[name]
                values = list(options.get(name, [])) or ([True, False] if fact.type == "bool" else list(fact.choices) or ["x"])
                if rng.random() < 0.75:
                    value = rng.choice(values + ["other", 3])
                    if type(value) is str and rng.random() < 0.3:
                        value = value.upper()  # text tests compare without case
                    memory[name] = FactRecord(name, value, source, rng.choice([1.0, 0.9, 0.55, 0.3, 0.0]))
            got, want = fast(memory), plain(memory)
            assert got == want and type(got[0]) is type(want[0]), (cond, memory)
            checked += 1
    assert grouped > 500 and checked > 10_000


def test_chaining_that_starts_with_ready_rules_only_fires_the_same(doctor):
    """An inference queues at its start only the rules whose needed facts are all known; queueing
    every rule that reads a given fact (and skipping the others when they come up) fires the same
    rules in the same order, with the same facts and evidence."""
    import heapq

    from nccl_doctor.engine.chaining import Inference, infer
    from nccl_doctor.engine.memory import FactRecord, Source

    ckb = doctor.compiled

    def plain(base):
        state = Inference(facts=dict(base))
        rules = ckb.rules
        heap = sorted({(rules[i].order, i) for i in set(ckb.absence_rules).union(
            *(ckb.rules_by_fact.get(n, ()) for n in base))})
        queued = {i for _, i in heap}
        while heap:
            _, index = heapq.heappop(heap)
            queued.discard(index)
            rule = rules[index]
            if rule.id in state.fired_ids or not rule.needs <= state.facts.keys():
                continue
            truth, premise = rule.predicate(state.facts)
            if truth is not True:
                continue
            state.fired_ids.add(rule.id)
            used = tuple(sorted(n for n in rule.reads if n in state.facts))
            state.fired.append((rule.id, premise, used))
            for cause, strength in rule.evidence:
                state.evidence.setdefault(cause, []).append((rule.id, strength * premise))
            for name, value in rule.sets:
                if name not in state.facts:
                    state.facts[name] = FactRecord(name, value, Source("rule", rule.id), premise * rule.certainty, used)
                    for dependent in ckb.rules_by_fact.get(name, ()):
                        other = rules[dependent]
                        if other.needs <= state.facts.keys() and dependent not in queued and other.id not in state.fired_ids:
                            heapq.heappush(heap, (other.order, dependent))
                            queued.add(dependent)
        return state

    compared = fired = 0
    for incident_id in _spread(doctor, 3):
        incident = doctor.kb.incidents[incident_id]
        session = doctor.session()
        session.tell(incident.reporter)
        if incident.log:
            session.add_log(incident.log.splitlines())
        base = session._base()
        fast, slow = infer(ckb, base), plain(base)
        assert [tuple(f) for f in fast.fired] == slow.fired and fast.evidence == slow.evidence, incident_id
        assert fast.facts == slow.facts and list(fast.facts) == list(slow.facts), incident_id
        compared += 1
        fired += len(slow.fired)
    assert compared > 100 and fired > 500
