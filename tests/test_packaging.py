"""A normal (non-editable) install must work when run from the repository root.

Python puts the current directory first on ``sys.path``; a top-level ``nccl_doctor/`` folder
there (without ``engine/`` and ``kb/``, which live at the root by the user's layout) used to hide
the installed package, so ``import nccl_doctor.engine`` failed after ``pip install .``.
"""
from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_repository_root_holds_no_half_package():
    assert importlib.machinery.PathFinder.find_spec("nccl_doctor", [str(ROOT)]) is None


@pytest.mark.slow
def test_plain_install_imports_from_the_repository_root(tmp_path):
    target = tmp_path / "site"
    # build from a clean copy: pip builds in the source tree, and a stale build/ there would leak in
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".venv"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
         "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    if built.returncode != 0:
        pytest.skip(f"pip cannot build here: {built.stderr.strip()[-300:]}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    code = ("import nccl_doctor, nccl_doctor.engine, nccl_doctor.kb; "
            "print(nccl_doctor.__file__); "
            "s = nccl_doctor.load_doctor().session(); s.tell('hang at init'); print(len(s.diagnoses()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert str(target) in done.stdout.splitlines()[0]
