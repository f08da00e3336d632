"""The session API as an embedding story: what a chat bot or portal relies on.

One Doctor shared by many threads with isolated sessions; session state that survives JSON and
refuses (never crashes on) old, foreign or damaged states; a documented, typed public surface.
"""
from __future__ import annotations

import copy
import inspect
import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import nccl_doctor
import nccl_doctor.engine as engine
from nccl_doctor import Session, SessionError, StateError, load_doctor
from nccl_doctor.engine.session import STATE_FORMAT, STATE_VERSION

CASES = [
    ("NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888) in docker",
     "multi_node", False),
    ("all_reduce times out with DistBackendError, and after I set NCCL_SOCKET_IFNAME it fails at once "
     "with ncclInvalidUsage saying the interface cannot be found", "multi_node", True),
    ("ncclInvalidUsage: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
     "container", "none"),
    ("RuntimeError: Distributed package doesn't have NCCL built in", "container", "docker"),
    ("training on 2 nodes hangs at init; ping works between the nodes", "ping_works", True),
]
LOG = (
    "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600018 milliseconds\n"
    "node1:123:456 [0] NCCL INFO NCCL version 2.18.3+cuda12.1\n"
)


def _run(doctor, index: int) -> tuple:
    text, fact, value = CASES[index % len(CASES)]
    session = doctor.session()
    session.tell(text)
    session.add_log(LOG.splitlines(), name=f"rank{index}.log")
    session.answer(fact, value)
    return (tuple(d.id for d in session.diagnoses()),
            tuple(sorted((k, str(r.value)) for k, r in session.facts().items())),
            tuple(q.id for q in session.questions()),
            tuple(s.fix for s in session.plan().steps))


# ------------------------------------------------------------------------- threading
def test_one_doctor_many_threads_isolated_results(doctor):
    expected = {i: _run(doctor, i) for i in range(len(CASES))}
    assert len({e[0][:1] for e in expected.values()}) >= 3, "the cases should reach different causes"
    barrier = threading.Barrier(16)

    def work(i: int):
        if i < 16:
            barrier.wait()  # start the first wave together
        return i, _run(doctor, i)

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(work, range(160)))
    for i, got in results:
        assert got == expected[i % len(CASES)], f"session {i} differs from the same case run alone"


def test_load_doctor_is_shared_and_immutable():
    first = load_doctor()
    with ThreadPoolExecutor(max_workers=8) as pool:
        doctors = list(pool.map(lambda _: load_doctor(), range(16)))
    assert all(d is first for d in doctors)
    with pytest.raises(Exception):
        first.kb.causes[next(iter(first.kb.causes))].title = "changed"  # frozen models


# ------------------------------------------------------------------ state round trip
def _full_session(doctor) -> Session:
    session = doctor.session()
    session.tell(CASES[1][0])
    session.add_log(LOG.splitlines(), name="rank0.log")
    session.answer("multi_node", True)
    question = session.next_question()
    if question is not None and question.id != "multi_node":
        session.dont_know(question.id)
    session.set_fact("container", "docker", source="probe", detail="host.container")
    return session


def test_state_round_trips_through_json(doctor):
    session = _full_session(doctor)
    text = session.to_json()
    data = json.loads(text)
    assert data["format"] == STATE_FORMAT and data["version"] == STATE_VERSION
    restored = Session.from_json(doctor, text)
    assert restored.to_json() == text
    assert restored.report() == session.report()
    # The restored session carries on like the original.
    for s in (session, restored):
        s.tell("it runs inside docker containers on two nodes")
    assert restored.report() == session.report()
    # bytes and an already-parsed dict work too
    assert Session.from_json(doctor, text.encode()).to_json() == text
    assert Session.from_json(doctor, data).to_json() == text


@pytest.mark.parametrize("state,words", [
    ({"format": STATE_FORMAT, "version": 0}, "version"),
    ({"format": STATE_FORMAT, "version": STATE_VERSION + 1}, "version"),
    ({"format": STATE_FORMAT, "version": "1"}, "version"),
    ({"format": STATE_FORMAT}, "version"),
    ({"format": "something-else", "version": STATE_VERSION}, "format"),
    ({}, "format"),
    ([], "format"),
    ("null", "format"),
    ("{not json", "not JSON"),
    ("", "not JSON"),
    (b"\xff\xfe", "not JSON"),
])
def test_old_or_foreign_state_is_a_clear_state_error(doctor, state, words):
    text = json.dumps(state) if isinstance(state, (dict, list)) else state
    with pytest.raises(StateError) as err:
        Session.from_json(doctor, text)
    assert words.lower() in str(err.value).lower()
    assert isinstance(err.value, SessionError) and isinstance(err.value, ValueError)


_JUNK = [None, 0, -1, 1.5, "", "x", [], {}, [1, 2], {"a": 1}, True, "\x00", 10**30, [{"name": 1}]]


def _mutations(data, rng: random.Random, count: int):
    """Damaged copies of a valid state: a value anywhere replaced, a key dropped or added."""
    paths = []

    def walk(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                paths.append(path + [key])
                walk(value, path + [key])
        elif isinstance(node, list):
            for index, value in enumerate(node):
                paths.append(path + [index])
                walk(value, path + [index])

    walk(data, [])
    for _ in range(count):
        broken = copy.deepcopy(data)
        path = rng.choice(paths)
        parent = broken
        for step in path[:-1]:
            parent = parent[step]
        action = rng.random()
        if action < 0.6:
            parent[path[-1]] = rng.choice(_JUNK)
        elif action < 0.85 and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent["unexpected_" + str(rng.randrange(100))] = rng.choice(_JUNK)
        else:
            parent[path[-1]] = rng.choice(_JUNK)
        yield broken


def test_damaged_state_never_crashes(doctor):
    data = _full_session(doctor).to_dict()
    rng = random.Random(7)
    for broken in _mutations(data, rng, 400):
        try:
            session = Session.from_json(doctor, json.dumps(broken))
        except StateError:
            continue
        # Accepted states must be usable, not time bombs.
        session.report()
        session.to_json()
        session.tell("hang")


# ------------------------------------------------------------------ public surface
@pytest.mark.parametrize("module", [nccl_doctor, engine], ids=["nccl_doctor", "nccl_doctor.engine"])
def test_all_names_exist_and_are_documented(module):
    assert len(module.__all__) == len(set(module.__all__)), "duplicate names in __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{module.__name__}.__all__ names missing attributes: {missing}"
    undocumented = [n for n in module.__all__
                    if (inspect.isclass(getattr(module, n)) or inspect.isfunction(getattr(module, n)))
                    and not inspect.getdoc(getattr(module, n))]
    assert not undocumented, f"{module.__name__}: no docstring on {undocumented}"


ENTRY_POINTS = [
    nccl_doctor.load_doctor,
    nccl_doctor.Doctor.session,
    *(getattr(Session, name) for name in (
        "tell", "add_log", "answer", "dont_know", "set_fact", "retract", "facts", "diagnoses",
        "questions", "next_question", "plan", "how", "why", "report", "to_json", "from_json", "answers",
    )),
]


# Missing docstrings reported to engine/session.py's owner; drop a name once it is documented.
_DOC_PENDING: set[str] = set()


@pytest.mark.parametrize("func", [
    pytest.param(f, marks=pytest.mark.xfail(reason="docstring pending in engine/session.py", strict=False))
    if f.__qualname__ in _DOC_PENDING else f
    for f in ENTRY_POINTS
], ids=lambda f: f.__qualname__)
def test_entry_points_are_documented_and_typed(func):
    assert inspect.getdoc(func), f"{func.__qualname__} has no docstring"
    signature = inspect.signature(func)
    untyped = [p.name for p in signature.parameters.values()
               if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    assert not untyped, f"{func.__qualname__}: parameters without type hints: {untyped}"
    assert signature.return_annotation is not inspect.Signature.empty, f"{func.__qualname__}: no return type"
