"""The knowledge base as a start reads it: one compiled JSON artifact, built on first use.

Reading YAML and validating it with pydantic takes longer than a whole one-shot diagnosis, so
the KB is compiled once into a plain JSON artifact (:mod:`kb.artifact`) kept in the user's cache
(``$XDG_CACHE_HOME/nccl-doctor``). The artifact is keyed by the KB files' contents (a hash of
every file's name and bytes), never by sizes or times, so any edit is seen; only the most
recently used artifacts are kept. Before an artifact is written, every rule condition and regex is compiled
once, so a cached KB is known to work. ``NCCL_DOCTOR_NO_CACHE=1`` turns the cache off.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .kb.artifact import ARTIFACT_VERSION, ArtifactError, KnowledgeBase, build_artifact, read_artifact
from .kb.load import DATA_DIR, content_key, kb_files, load_models

__all__ = ["load_knowledge", "kb_source", "cache_dir", "KEEP_ARTIFACTS"]

KEEP_ARTIFACTS = 16  # several KB folders (--kb DIR, checkouts) each keep theirs


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
    path = cache_dir() / f"kb-{key}.json"
    if use_cache:
        cached = _read(path, key)
        if cached is not None:
            return cached
    artifact = _compile(paths, folder, key)
    # ASCII with \u escapes: the Chinese texts would make the whole text a wide string, which
    # decodes and parses about a fifth slower (54 against 43 ms CPU for the packaged KB)
    text = json.dumps(artifact, ensure_ascii=True, separators=(",", ":"))
    if use_cache:
        _write(path, text)
    return read_artifact(text, key=key)


def _builder_sources() -> list[Path]:
    """The code whose output the artifact holds: a change to it rebuilds the artifact too."""
    from .kb import artifact

    kb_dir = Path(artifact.__file__).resolve().parent  # found through the import system: editable or not
    engine_dir = kb_dir.parent / "engine"
    return [Path(__file__).resolve(), kb_dir / "schema.py", kb_dir / "load.py", kb_dir / "artifact.py", kb_dir / "needles.py",
            engine_dir / "relevance.py", engine_dir / "matching.py", engine_dir / "compiled.py",
            engine_dir / "conditions.py", engine_dir / "questions.py", engine_dir / "values.py",
            engine_dir / "consult_model.py", engine_dir / "chaining.py", engine_dir / "certainty.py",
            engine_dir / "similarity.py", engine_dir / "session.py"]


def _compile(paths: list[Path], folder: Path, key: str) -> dict[str, Any]:
    """YAML to artifact, with every condition and regex compiled once as a check."""
    from .engine.compiled import compile_kb, export_layout
    from .engine.consult_model import artifact_part
    from .engine.questions import answer_options
    from .engine.relevance import RelevanceIndex
    from .engine.session import Doctor

    artifact = build_artifact(load_models(paths, folder), key=key)
    kb, _ = read_artifact(json.dumps(artifact))
    compiled = compile_kb(kb, validate=True)
    artifact["layout"] = export_layout(compiled)
    artifact["options"] = answer_options(compiled)
    artifact["consult"] = artifact_part(compiled)  # question statistics, incl. what evidence questions showed
    artifact["relevance"] = RelevanceIndex(kb).state()
    artifact["similarity"] = Doctor(kb).incidents.state()  # the incidents read once, not at every start
    return artifact


def _read(path: Path, key: str) -> tuple[KnowledgeBase, dict[str, Any]] | None:
    """Our own artifact: trusted only if this user owns it and nobody else can write it."""
    try:
        stat = path.stat()
        if stat.st_uid != os.getuid() or stat.st_mode & 0o022:
            return None
        found = read_artifact(path.read_bytes(), key=key)
    except (OSError, ArtifactError):
        return None
    try:
        os.utime(path)  # "recently used", for eviction
    except OSError:
        pass
    return found


def _write(path: Path, text: str) -> None:
    """Write atomically, then drop all but the newest few artifacts (and old pickle caches)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
        _evict(path.parent, keep=path)
    except OSError:
        pass


def _evict(folder: Path, keep: Path) -> None:
    old = sorted((p for p in folder.glob("kb-*") if p != keep and p.suffix in (".json", ".pickle")),
                 key=lambda p: p.stat().st_mtime, reverse=True)
    stale = [p for p in old if p.suffix == ".pickle"] + [p for p in old if p.suffix == ".json"][KEEP_ARTIFACTS - 1:]
    for p in stale:
        try:
            p.unlink()
        except OSError:
            pass
