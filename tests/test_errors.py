"""One error hierarchy: every exception a user or a bot can see derives from DoctorError."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import nccl_doctor
from nccl_doctor.errors import DoctorError, InputError, KBError

# Exceptions that never leave the module that raises them (control flow, not reported errors).
INTERNAL = {"Skip", "ValueProblem"}
# Modules whose optional dependencies may be missing; they are checked when importable.
OPTIONAL = {"nccl_doctor.tui", "nccl_doctor.server", "nccl_doctor.mcp_server"}


def _modules():
    for info in pkgutil.walk_packages(nccl_doctor.__path__, "nccl_doctor."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        try:
            yield importlib.import_module(info.name)
        except ImportError:
            if not any(info.name.startswith(o) for o in OPTIONAL):
                raise


def test_every_public_exception_derives_from_the_one_base():
    strays = []
    for module in _modules():
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__
                    and not name.startswith("_") and name not in INTERNAL and not issubclass(obj, DoctorError)):
                strays.append(f"{module.__name__}.{name}")
    assert not strays, f"exceptions outside the DoctorError hierarchy: {strays}"


def test_bad_input_is_still_a_value_error_and_kb_errors_list_problems():
    from nccl_doctor import SessionError
    from nccl_doctor.engine.compiled import CompileError

    assert issubclass(SessionError, InputError) and issubclass(SessionError, ValueError)
    error = CompileError(["a.yaml:3 [r]: unknown fact 'x'"])
    assert isinstance(error, KBError) and error.problems == ["a.yaml:3 [r]: unknown fact 'x'"]
    assert "1 problem" in str(error)
    assert str(KBError("artifact damaged")) == "artifact damaged" and KBError("x").problems == ["x"]
