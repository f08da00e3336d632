"""Benchmark: time per answer as the KB grows from 1,000 to 10,000 rules.

Generates KBs (rules : causes = 5 : 1, like the issue's 10,000 rules and 2,000 causes) with
bool facts, chained rules and evidence for and against, then plays sessions of 10 answers:
each answer is next_question() + answer() + diagnoses() + plan(). Prints the median time per
answer per size and its ratio to the 1,000-rule KB measured in the same run (flat is the aim).

    python benchmarks/bench_engine_scale.py [--sizes 1000,2000,5000,10000] [--sessions 5]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from nccl_doctor.engine import Doctor
from nccl_doctor.kb.artifact import KnowledgeBase, runtime
from nccl_doctor.kb.schema import Action, Cause, Condition, Evidence, Fact, Fix, Rule
from nccl_doctor.kb.schema import KnowledgeBase as MergedKB


def generate(rules: int, seed: int = 0) -> KnowledgeBase:
    rng = random.Random(seed)
    n_causes, n_facts = rules // 5, max(rules // 4, 50)
    facts = {f"f{i}": Fact(id=f"f{i}", type="bool", question=f"Is f{i} true?") for i in range(n_facts)}
    facts.update({f"d{i}": Fact(id=f"d{i}", type="bool") for i in range(rules // 10)})  # derived facts
    causes = {f"c{i}": Cause(id=f"c{i}", title=f"Cause {i}", area="network", explanation="x", fixes=[f"x{i}"],
                             references=["https://example.org"], prior=rng.uniform(0.01, 0.2))
              for i in range(n_causes)}
    fixes = {f"x{i}": Fix(id=f"x{i}", title=f"Fix {i}", steps=[f"step {i}"], kind=rng.choice(["check", "change"]))
             for i in range(n_causes)}
    out: dict[str, Rule] = {}
    for i in range(rules):
        picks = rng.sample(range(n_facts), 2)
        parts = [Condition(fact=f"f{p}") for p in picks]
        if i % 10 == 0:  # a chaining rule
            then = Action(set={f"d{i // 10}": True})
        else:
            cause = f"c{(i * 7919) % n_causes}"
            then = Action(evidence=[Evidence(cause=cause, strength=rng.choice([0.2, 0.4, 0.6, -0.5]))])
            if i % 10 == 5 and i // 10 > 0:
                parts.append(Condition(fact=f"d{rng.randrange(i // 10)}"))
        op = "all" if i % 3 else "any"
        out[f"r{i}"] = Rule(id=f"r{i}", when=Condition(**{op: parts}), then=then)
    merged = MergedKB(facts=facts, symptoms={}, signatures={}, rules=out, causes=causes, fixes=fixes)
    return runtime(merged.model_dump(mode="json"))


def play(doctor: Doctor, seed: int, answers: int = 10) -> list[float]:
    rng = random.Random(seed)
    session = doctor.session()
    for name in rng.sample([f for f in doctor.kb.facts if f.startswith("f")], 12):
        session.set_fact(name, True)
    times = []
    for _ in range(answers):
        start = time.perf_counter()
        question = session.next_question()
        if question is None:
            break
        session.answer(question.id, rng.random() < 0.5)
        session.diagnoses()
        session.plan()
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000,5000,10000")
    parser.add_argument("--sessions", type=int, default=5)
    opts = parser.parse_args()
    sizes = [int(s) for s in opts.sizes.split(",")]
    results = {}
    print(f"{'rules':>7} {'causes':>7} {'build s':>8} {'ms/answer':>10} {'ratio':>6}")
    for size in sizes:
        start = time.perf_counter()
        doctor = Doctor(generate(size))
        build = time.perf_counter() - start
        per_answer = [t for s in range(opts.sessions) for t in play(doctor, s)]
        if not per_answer:
            print(f"{size:>7}: no session found a question worth asking")
            continue
        results[size] = statistics.median(per_answer) * 1000
        print(f"{size:>7} {size // 5:>7} {build:>8.2f} {results[size]:>10.2f} {results[size] / next(iter(results.values())):>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
