"""The knowledge base as a start reads it: one compiled artifact, built on first use.

Reading YAML and validating it with pydantic takes longer than a whole one-shot diagnosis, so
the KB is compiled once into a plain artifact (:mod:`kb.artifact`: plain data and JSON texts,
checksummed) kept in the user's cache (``$XDG_CACHE_HOME/nccl-doctor``). The artifact is keyed
by the KB files' contents (a hash of every file's name and bytes), never by sizes or times, so
any edit is seen; only the most recently used artifacts are kept. Before an artifact is written,
every rule condition and regex is compiled once, so a cached KB is known to work. A cached file
that is damaged or not ours is rebuilt, with one line on stderr saying so.
``NCCL_DOCTOR_NO_CACHE=1`` turns the cache off.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .kb.artifact import (ARTIFACT_VERSION, ArtifactError, KnowledgeBase, build_artifact, read_artifact, read_plain,
                          write_artifact)
from .kb.load import DATA_DIR, content_key, kb_files, load_models

__all__ = ["load_knowledge", "kb_source", "cache_dir", "KEEP_ARTIFACTS", "SUFFIX"]

KEEP_ARTIFACTS = 16  # several KB folders (--kb DIR, checkouts) each keep theirs
SUFFIX = ".kb"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nccl-doctor"


def kb_source(directory: str | Path | None = None) -> tuple[Path, list[Path], str]:
    """The KB folder (the packaged one by default), its YAML files and the artifact key: a hash
    of the files' contents and of the code that builds the artifact. A start computes this once."""
    folder = Path(directory or DATA_DIR)
    paths = kb_files(folder)
    return folder, paths, f"{ARTIFACT_VERSION}-{content_key(paths + _builder_sources(), folder)}"


def load_knowledge(directory: str | Path | None = None, *, use_cache: bool = True,
                   source: tuple[Path, list[Path], str] | None = None) -> tuple[KnowledgeBase, dict[str, Any]]:
    """The KB folder (the packaged one by default) and the artifact's start-up parts (symptom
    needles, the relevance index, the incidents' profiles), from the cache or compiled now.
    ``source`` is :func:`kb_source` of the folder when the caller has it already.
    Raises ``KBError``."""
    folder, paths, key = source if source is not None else kb_source(directory)
    use_cache = use_cache and not os.environ.get("NCCL_DOCTOR_NO_CACHE")
    path = cache_dir() / f"kb-{key}{SUFFIX}"
    if use_cache:
        cached = _read(path, key)
        if cached is not None:
            return cached
    data = write_artifact(_compile(paths, folder, key))
    if use_cache:
        _write(path, data)
    return read_artifact(data, key=key)  # read as a cached start reads it


def _builder_sources() -> list[Path]:
    """The code whose output the artifact holds (the KB's loader and the whole engine, which
    derives the layout and indexes): a change to it rebuilds the artifact too."""
    from .kb import artifact

    kb_dir = Path(artifact.__file__).resolve().parent  # found through the import system: editable or not
    found = [Path(__file__).resolve()]
    for folder in (kb_dir, kb_dir.parent / "engine"):
        with os.scandir(folder) as entries:
            found += sorted(Path(e.path) for e in entries if e.name.endswith(".py"))
    return found


def _compile(paths: list[Path], folder: Path, key: str) -> dict[str, Any]:
    """YAML to artifact, with every condition and regex compiled once as a check."""
    from .engine.compiled import compile_kb, export_layout
    from .engine.consult_model import artifact_part
    from .engine.questions import answer_options
    from .engine.relevance import RelevanceIndex
    from .engine.session import Doctor

    artifact = build_artifact(load_models(paths, folder), key=key)
    kb, _ = read_plain(artifact)
    compiled = compile_kb(kb, validate=True)
    artifact["layout"] = export_layout(compiled)
    artifact["options"] = answer_options(compiled)
    artifact["consult"] = artifact_part(compiled)  # question statistics, incl. what evidence questions showed
    artifact["relevance"] = RelevanceIndex(kb).state()
    artifact["library_relevance"] = RelevanceIndex(kb, library=True).state()
    artifact["similarity"] = Doctor(kb).incidents.state()  # the incidents read once, not at every start
    return artifact


def _read(path: Path, key: str) -> tuple[KnowledgeBase, dict[str, Any]] | None:
    """Our own artifact: trusted only if this user owns it and nobody else can write it. None
    when there is none (first use) or it cannot be used (then stderr says why)."""
    try:
        with open(path, "rb", buffering=0) as handle:
            stat = os.fstat(handle.fileno())
            if stat.st_uid != os.getuid() or stat.st_mode & 0o022:
                raise ArtifactError("not written by this user alone")
            found = read_artifact(handle.readall(), key=key)
    except FileNotFoundError:
        return None
    except (OSError, ArtifactError) as exc:
        sys.stderr.write(f"nccl-doctor: rebuilding the cached knowledge base {path}: {exc}\n")
        return None
    try:
        os.utime(path)  # "recently used", for eviction
    except OSError:
        pass
    return found


def _write(path: Path, data: bytes) -> None:
    """Write atomically (a reader never sees half a file), then drop all but the newest few."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
        _evict(path.parent, keep=path)
    except OSError:
        pass


def _evict(folder: Path, keep: Path) -> None:
    """Keep the newest few artifacts, of this format or the JSON one before it (another
    installed version may share the cache); pickles, the format before that, all go."""
    found = sorted((p for p in folder.glob("kb-*") if p != keep and p.suffix in (SUFFIX, ".json", ".pickle")),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    stale = [p for p in found if p.suffix == ".pickle"] + [p for p in found if p.suffix != ".pickle"][KEEP_ARTIFACTS - 1:]
    for p in stale:
        try:
            p.unlink()
        except OSError:
            pass
