"""The JSON bodies the HTTP server accepts (pydantic models; they make the OpenAPI description).

Unknown fields are refused, so a typo is a 422 naming the field instead of silently ignored.
"""
from __future__ import annotations

from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..engine.session import MAX_TEXT_CHARS

__all__ = ["Answer", "Turn", "StatelessTurn", "TextBody", "LogBody", "AnswersBody",
           "MAX_ANSWERS_PER_REQUEST", "MAX_NAME_CHARS"]

MAX_ANSWERS_PER_REQUEST = 100
MAX_NAME_CHARS = 200


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Answer(_Body):
    """One answer: a value, or ``dont_know: true``, or ``retract: true`` to take one back."""

    fact: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="fact id, as in a question's `id`")
    value: Union[bool, int, float, str, None] = Field(None, description="the answer (yes/no, a choice, a number, a version)")
    dont_know: bool = Field(False, description="the user cannot tell; the question is not asked again")
    retract: bool = Field(False, description="take back an earlier answer")

    @model_validator(mode="after")
    def _one_kind(self) -> "Answer":
        kinds = (self.value is not None) + self.dont_know + self.retract
        if kinds != 1:
            raise ValueError("give exactly one of `value`, `dont_know: true` or `retract: true`")
        return self


class Turn(_Body):
    """What one message from the user adds: free text, a log, answers (all optional)."""

    text: str | None = Field(None, description=f"the user's words or pasted lines (at most {MAX_TEXT_CHARS} characters)")
    log: str | None = Field(None, description="log text (NCCL_DEBUG output, tracebacks); size-limited")
    log_name: str = Field("log", min_length=1, max_length=MAX_NAME_CHARS, description="shown as the source of log evidence")
    answers: list[Answer] = Field(default_factory=list, max_length=MAX_ANSWERS_PER_REQUEST)
    questions: int = Field(3, ge=0, le=20, description="how many next questions to return")


class StatelessTurn(Turn):
    """A turn for a client that keeps the state itself; send back the `state` you got."""

    state: Union[dict[str, Any], str, None] = Field(None, description="the `state` of the previous reply; omit to start")


class TextBody(_Body):
    text: str = Field(description=f"at most {MAX_TEXT_CHARS} characters")
    questions: int = Field(3, ge=0, le=20)


class LogBody(_Body):
    log: str
    name: str = Field("log", min_length=1, max_length=MAX_NAME_CHARS)
    questions: int = Field(3, ge=0, le=20)


class AnswersBody(_Body):
    answers: list[Answer] = Field(min_length=1, max_length=MAX_ANSWERS_PER_REQUEST)
    questions: int = Field(3, ge=0, le=20)
