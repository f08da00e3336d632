"""Typed fact values: coercion from user input and comparison, versions included."""
from __future__ import annotations

import math
import re
from typing import Union

__all__ = ["Value", "coerce", "parse_version", "compare", "equals", "ValueProblem"]

Value = Union[bool, int, float, str]

_TRUE = {"true", "yes", "y", "1", "on", "t"}
_FALSE = {"false", "no", "n", "0", "off", "f"}
_VERSION = re.compile(r"\d+(?:\.\d+)*")
MAX_VERSION_DIGITS = 9
_MAX_NUMBER_CHARS = 30
MAX_VERSION_PARTS = 8
_MAX_VERSION_TEXT = 200


class ValueProblem(ValueError):
    """A value does not fit the fact's type."""


def parse_version(text: object) -> tuple[int, ...] | None:
    """``"2.18.3+cuda12.1"`` -> ``(2, 18, 3)``; None when there is no number in it, or when it is
    no plausible version (a part of more than :data:`MAX_VERSION_DIGITS` digits, too many parts)."""
    found = _VERSION.search(str(text)[:_MAX_VERSION_TEXT])
    if not found:
        return None
    parts = found.group(0).split(".")
    if len(parts) > MAX_VERSION_PARTS or any(len(part) > MAX_VERSION_DIGITS for part in parts):
        return None
    return tuple(int(part) for part in parts)


def coerce(value: object, fact_type: str, choices: list[str] | tuple[str, ...] = ()) -> Value:
    """Turn ``value`` (often a string from a CLI flag, a regex capture or a JSON body) into
    the fact's type, or raise :class:`ValueProblem` naming what was expected."""
    if fact_type == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueProblem(f"expected yes/no, got {value!r}")
    if fact_type == "number":
        if isinstance(value, bool):
            raise ValueProblem(f"expected a number, got {value!r}")
        if isinstance(value, int) and abs(value) < 10 ** _MAX_NUMBER_CHARS:
            return value
        if isinstance(value, int):  # too large to show or to hold as a float
            raise ValueProblem(f"expected a number of at most {_MAX_NUMBER_CHARS} digits")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueProblem(f"expected a finite number, got {value!r}")
        text = str(value).strip().replace(",", "")
        if len(text) > _MAX_NUMBER_CHARS:
            raise ValueProblem(f"expected a number, got {len(text)} characters")
        try:
            number = float(text)
        except ValueError:
            raise ValueProblem(f"expected a number, got {value!r}") from None
        if not math.isfinite(number):
            raise ValueProblem(f"expected a finite number, got {value!r}")
        return int(number) if number.is_integer() else number
    if fact_type == "choice":
        text = str(value).strip().lower()
        for choice in choices:
            if choice.lower() == text:
                return choice
        raise ValueProblem(f"expected one of {', '.join(choices)}, got {value!r}")
    if fact_type == "version":
        text = str(value).strip()
        if parse_version(text) is None:
            raise ValueProblem(f"expected a version such as 2.18.3, got {value!r}")
        return text
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def equals(actual: Value, expected: object, fact_type: str) -> bool:
    """Equality in the fact's terms: case-insensitive text, numeric versions."""
    if fact_type == "version":
        return parse_version(actual) == parse_version(expected)
    if fact_type == "bool":
        return actual is expected or (isinstance(expected, str) and str(actual).lower() == expected.lower())
    if fact_type == "number":
        try:
            return float(actual) == float(expected)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
    return str(actual).lower() == str(expected).lower()


def compare(actual: Value, op: str, bound: object, fact_type: str) -> bool | None:
    """``actual <op> bound`` for numbers and versions; None when they cannot be compared."""
    if fact_type == "version":
        left, right = parse_version(actual), parse_version(bound)
        if left is None or right is None:
            return None
        width = max(len(left), len(right))
        left, right = left + (0,) * (width - len(left)), right + (0,) * (width - len(right))
    else:
        try:
            left, right = float(actual), float(bound)  # type: ignore[arg-type,assignment]
        except (TypeError, ValueError):
            return None
    if op == "lt":
        return left < right
    if op == "le":
        return left <= right
    if op == "gt":
        return left > right
    return left >= right
