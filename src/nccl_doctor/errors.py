"""Every error nccl-doctor reports to a person or a program, under one base.

Front ends catch :class:`DoctorError` and show its message as one line (exit status 2 in the CLI,
a 4xx naming the problem over HTTP or MCP); anything else escaping is a bug. The message of each
error names the problem and, where there is one, what to do about it.

    DoctorError
    ├── InputError               bad input from a user, a bot or a file (also a ValueError)
    │   ├── SessionError         what a session refused
    │   │   ├── UnknownFact
    │   │   ├── InputTooLarge
    │   │   └── StateError       a saved session that cannot be restored
    │   ├── LogProblem           a log argument or file that cannot be read
    │   │   └── DumpProblem      a Flight Recorder dump that cannot be read
    │   │       └── UnsafeDump   a pickle asking for more than plain data
    │   └── UsageError           bad command-line arguments
    ├── KBError                  the knowledge base cannot be used (``problems`` lists why)
    └── ProbeError               a probe could not complete its check
"""
from __future__ import annotations

__all__ = [
    "DoctorError",
    "InputError",
    "SessionError",
    "UnknownFact",
    "InputTooLarge",
    "StateError",
    "LogProblem",
    "DumpProblem",
    "UnsafeDump",
    "UsageError",
    "KBError",
    "ProbeError",
]


class DoctorError(Exception):
    """The base of every error nccl-doctor reports; its message is one line for the user."""


class InputError(DoctorError, ValueError):
    """Input that cannot be used: the message names which input and why."""


class SessionError(InputError):
    """Bad input to a session; the message names the problem."""


class UnknownFact(SessionError):
    """A fact name the KB does not define."""


class InputTooLarge(SessionError):
    """Text or state beyond a size limit."""


class StateError(SessionError):
    """A saved session that cannot be restored."""


class LogProblem(InputError):
    """A log argument or file that cannot be read; the message says which and why."""


class DumpProblem(LogProblem):
    """A Flight Recorder dump that cannot be read (the message says why)."""


class UnsafeDump(DumpProblem):
    """A pickle that asks for anything but plain data (it could run code): refused."""


class UsageError(InputError):
    """Bad command-line arguments: reported as one line, exit status 2."""


class KBError(DoctorError):
    """The knowledge base cannot be used; ``problems`` lists why (each a string or a located problem)."""

    def __init__(self, problems: list | str) -> None:
        if isinstance(problems, str):  # one problem, already a sentence: the message is that line
            self.problems = [problems]
            super().__init__(problems)
            return
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems[:50])
        more = f"\n  ... and {len(self.problems) - 50} more" if len(self.problems) > 50 else ""
        super().__init__(f"knowledge base has {len(self.problems)} problem(s):\n{lines}{more}")


class ProbeError(DoctorError):
    """Raised by a probe whose check could not be completed or found the path broken."""
