"""Version tables lowered into rules: one rule per row, so chaining, explanations and questions
treat version knowledge like any other rule (see :class:`kb.schema.VersionTable`).

A row covers the releases of the table's key from its ``version`` up to, not including, its
``until`` (or the next row's ``version``; the last row of a lookup or minimum table is
open-ended). Comparisons are the engine's numeric release comparisons (``2.10`` is after ``2.9``;
``2.4.2`` is within ``2.4``-``2.4.6``); a known bug fixed in a patch release needs the stated
release to name its patch unless its whole series is affected (``2.4`` may be 2.4.8).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .schema import Condition, Rule, VersionRow, VersionTable

__all__ = ["table_rules", "rule_ids", "row_rule_id"]


def row_rule_id(table: "VersionTable", row: "VersionRow", fact: str = "") -> str:
    """The id of the rule a row becomes: a known bug's own id; else the table's id, the release
    and (lookup) the fact it gives: ``torch_wheel_ships_2_8_nccl_version``."""
    if table.kind == "known_bugs":
        return row.id
    name = f"{table.id}_{row.version.replace('.', '_')}"
    return f"{name}_{fact}" if fact else name


def rule_ids(table: "VersionTable") -> list[str]:
    """The ids of the rules ``table`` becomes, in row order."""
    if table.kind == "lookup":
        return [row_rule_id(table, row, fact) for row in table.rows for fact in row.set]
    return [row_rule_id(table, row) for row in table.rows]


def _span(table: "VersionTable", index: int) -> tuple[str, str]:
    row = table.rows[index]
    if row.until or table.kind == "known_bugs":
        return row.version, row.until
    following = table.rows[index + 1].version if index + 1 < len(table.rows) else ""
    return row.version, following


def _range_text(key: str, first: str, end: str) -> str:
    return f"{key} {first} up to {end}" if end else f"{key} {first} or later"


def _precise_enough(key: str, end: str) -> list["Condition"]:
    """A fix in a patch release (2.4.6) splits its series: a release stated as the series only
    ("NCCL 2.4") may be 2.4.8, so it counts only when the whole series is before the fix (2.3)."""
    from .schema import Condition

    parts = end.split(".")
    if len(parts) < 3 or not any(int(p) for p in parts[2:]):
        return []
    series = ".".join(parts[:2])
    return [Condition(any=[Condition(fact=key, matches=r"^\d+\.\d+\.\d+"), Condition(fact=key, lt=series)])]


def table_rules(table: "VersionTable") -> list["Rule"]:
    """The rules of one version table (pure: the same table always gives the same rules)."""
    from .schema import Action, Condition, Evidence, Rule

    rules = []
    for index, row in enumerate(table.rows):
        first, end = _span(table, index)
        span: list[Condition] = [Condition(fact=table.key, ge=first)]
        if end:
            span.append(Condition(fact=table.key, lt=end))
        extra = [c for c in (table.when, row.when) if c is not None]
        references = list(row.references) or list(table.references)
        covered = _range_text(table.key, first, end)
        if table.kind == "lookup":
            for fact, value in row.set.items():
                rules.append(Rule(
                    id=row_rule_id(table, row, fact),
                    description=f"{table.description} ({covered}: {fact} = {value})",
                    when=Condition(all=[*span, *extra, Condition(fact=fact, known=False)]),
                    then=Action(set={fact: value}), certainty=table.certainty,
                    references=references, examples=row.examples))
            continue
        strength = row.strength if row.strength is not None else table.strength
        evidence = [Evidence(cause=table.cause, strength=strength)]
        if table.kind == "known_bugs":
            conditions = [*span, *_precise_enough(table.key, end), *extra]
            description = f"{row.what} ({covered}; fixed in {end}: upgrade to {end} or later)"
            target = end
        else:
            conditions = [*span, Condition(fact=table.compare, lt=row.needs), *extra]
            note = f"; {row.what}" if row.what else ""
            description = f"{table.description} ({covered} needs {table.compare} {row.needs} or later{note})"
            target = row.needs
        rules.append(Rule(
            id=row_rule_id(table, row), description=description,
            when=Condition(all=conditions) if len(conditions) > 1 else conditions[0],
            then=Action(evidence=evidence, set={table.target: target} if table.target else {}),
            references=references, examples=row.examples))
    return rules
