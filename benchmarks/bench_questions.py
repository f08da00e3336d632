"""Benchmark: questions until the right cause leads, information gain vs a fixed order.

For every cause in the KB a simulated user answers truthfully: a fact that some rule raising
the cause tests (directly, or through the rules deriving it) gets the value that rule wants;
anything else is "don't know". Starting from nothing, the engine asks its best question each
turn; the baseline asks every askable fact in KB order. A run stops when the cause is ranked
first or after --max questions. Prints the mean number of questions (over the causes reached)
and how many causes each strategy reached.

    python benchmarks/bench_questions.py [--max 25]
"""
from __future__ import annotations

import argparse
import statistics
import sys

from nccl_doctor import load_doctor
from nccl_doctor.engine.conditions import comparisons


def wanted(cond, out: dict) -> None:
    """The fact values that make ``cond`` true (first value wins)."""
    if cond.all is not None:
        for part in cond.all:
            wanted(part, out)
    elif cond.any is not None:
        wanted(cond.any[0], out)
    elif cond.not_ is not None:
        inner = cond.not_
        if inner.fact is not None and not comparisons(inner):
            out.setdefault(inner.fact, False)
    elif cond.fact is not None:
        if cond.known is not None:
            return
        if not comparisons(cond):
            out.setdefault(cond.fact, True)
        elif cond.eq is not None:
            out.setdefault(cond.fact, cond.eq)
        elif cond.in_:
            out.setdefault(cond.fact, cond.in_[0])
        elif cond.gt is not None:
            out.setdefault(cond.fact, float(cond.gt) + 1 if not isinstance(cond.gt, str) or cond.gt.replace(".", "").isdigit() else cond.gt)
        elif cond.ge is not None:
            out.setdefault(cond.fact, cond.ge)
        elif cond.lt is not None and not isinstance(cond.lt, str):
            out.setdefault(cond.fact, float(cond.lt) - 1)
        elif cond.le is not None:
            out.setdefault(cond.fact, cond.le)


def profile(kb, cause: str) -> dict:
    """What a user whose problem is ``cause`` would truthfully answer."""
    values: dict = {}
    setters: dict[str, list] = {}
    for rule in kb.rules.values():
        for name in rule.then.set:
            setters.setdefault(name, []).append(rule)
    for rule in kb.rules.values():
        if any(e.cause == cause and e.strength > 0 for e in rule.then.evidence):
            wanted(rule.when, values)
    for _ in range(3):  # derived facts: answer what the deriving rules test
        for name in list(values):
            for rule in setters.get(name, [])[:1]:
                wanted(rule.when, values)
    return {k: v for k, v in values.items() if kb.facts[k].question}


def run(doctor, cause: str, truth: dict, fixed: list[str] | None, limit: int) -> int | None:
    session = doctor.session()
    order = iter(fixed or [])
    for asked in range(limit + 1):
        ranked = session.diagnoses(limit=1)
        if ranked and ranked[0].id == cause:
            return asked
        if fixed is None:
            question = session.next_question()
            fact = question.id if question else None
        else:
            fact = next((f for f in order if f not in session.facts()), None)
        if fact is None:
            return None
        if fact in truth:
            try:
                session.answer(fact, truth[fact])
            except ValueError:
                session.dont_know(fact)
        else:
            session.dont_know(fact)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=25)
    opts = parser.parse_args()
    doctor = load_doctor()
    kb = doctor.kb
    fixed = [f.id for f in kb.facts.values() if f.question]
    engine, baseline = [], []
    for cause in kb.causes:
        truth = profile(kb, cause)
        engine.append(run(doctor, cause, truth, None, opts.max))
        baseline.append(run(doctor, cause, truth, fixed, opts.max))

    def describe(results: list) -> str:
        reached = [r for r in results if r is not None]
        mean = statistics.mean(reached) if reached else float("nan")
        return f"mean {mean:5.2f} questions, reached {len(reached)}/{len(results)} causes"

    print(f"causes: {len(kb.causes)}, askable facts: {len(fixed)}, limit {opts.max} questions")
    print(f"information gain : {describe(engine)}")
    print(f"fixed KB order   : {describe(baseline)}")
    both = [(e, b) for e, b in zip(engine, baseline) if e is not None and b is not None]
    if both:
        ratio = statistics.mean(e for e, _ in both) / max(statistics.mean(b for _, b in both), 1e-9)
        print(f"ratio on causes both reached (engine / fixed): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
