"""Read the YAML knowledge base into one validated :class:`KnowledgeBase`.

YAML is read with the safe loader only. Every problem is reported with the file, the line and
the id of the item, and loading stops with :class:`KBError` listing all of them at once.
"""
from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import KBError
from .model import KnowledgeBase, freeze, without_examples

__all__ = ["KBError", "Problem", "DATA_DIR", "load_kb", "load_kb_with_regexes", "load_files", "kb_fingerprint"]

DATA_DIR = Path(__file__).with_name("data")
SECTIONS = ("facts", "symptoms", "signatures", "rules", "causes", "fixes")
_CACHE_FORMAT = b"nccl-doctor-kb-cache-4\n"


def _safe_loader():
    import yaml

    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the KB, located as precisely as we can."""

    file: str
    line: int
    item: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        item = f" [{self.item}]" if self.item else ""
        return f"{where}{item}: {self.message}"


def _item_lines(text: str) -> dict[tuple[str, int], tuple[int, str]]:
    """Map (section, index) to (1-based line, id) using YAML node marks."""
    yaml, loader = _safe_loader()
    lines: dict[tuple[str, int], tuple[int, str]] = {}
    node = yaml.compose(text, Loader=loader)
    if not isinstance(node, yaml.MappingNode):
        return lines
    for key, value in node.value:
        if not isinstance(value, yaml.SequenceNode):
            continue
        for index, item in enumerate(value.value):
            item_id = ""
            if isinstance(item, yaml.MappingNode):
                for k, v in item.value:
                    if getattr(k, "value", None) == "id" and isinstance(v, yaml.ScalarNode):
                        item_id = str(v.value)
            lines[(str(key.value), index)] = (item.start_mark.line + 1, item_id)
    return lines


def _parse_file(path: Path, problems: list[Problem]):
    from pydantic import ValidationError

    from .schema import KBFile

    yaml, loader = _safe_loader()
    name = path.name
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(name, 0, "", f"cannot read: {exc}"))
        return None, {}
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
        marks = _item_lines(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        problems.append(Problem(name, line, "", f"not valid YAML: {getattr(exc, 'problem', exc)}"))
        return None, {}
    if data is None:
        return KBFile(), marks
    if not isinstance(data, dict):
        problems.append(Problem(name, 1, "", "top level must be a mapping of sections"))
        return None, marks
    try:
        return KBFile.model_validate(data), marks
    except ValidationError as exc:
        for err in exc.errors():
            loc = err["loc"]
            line, item = 0, ""
            if len(loc) >= 2 and isinstance(loc[1], int):
                line, item = marks.get((str(loc[0]), loc[1]), (0, ""))
            where = ".".join(str(p) for p in loc)
            problems.append(Problem(name, line, item, f"{where}: {err['msg']}"))
        return None, marks


def load_files(paths: list[Path]) -> KnowledgeBase:
    """Validate and merge the given YAML files; raise :class:`KBError` on any problem."""
    problems: list[Problem] = []
    merged: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    origins: dict[str, str] = {}
    for path in sorted(paths, key=lambda p: p.name):
        parsed, marks = _parse_file(path, problems)
        if parsed is None:
            continue
        for section in SECTIONS:
            for index, item in enumerate(getattr(parsed, section)):
                line = marks.get((section, index), (0, ""))[0]
                where = f"{path.name}:{line}"
                if item.id in merged[section]:
                    problems.append(
                        Problem(path.name, line, item.id,
                                f"duplicate {section[:-1]} id (first at {origins[f'{section}:{item.id}']})")
                    )
                    continue
                merged[section][item.id] = item
                origins[f"{section}:{item.id}"] = where
                origins.setdefault(item.id, where)
    problems.extend(_regex_problems(merged, origins))
    if problems:
        raise KBError(problems)
    return KnowledgeBase(origins=origins, **{k: {i: freeze(v) for i, v in items.items()} for k, items in merged.items()})


def _regex_problems(merged: dict[str, dict[str, Any]], origins: dict[str, str]) -> list[Problem]:
    """Every regex in the KB compiles (checked whenever YAML is read, so caches are sound)."""
    import re

    problems = []
    for section, items in (("signatures", merged["signatures"]), ("symptoms", merged["symptoms"])):
        for item in items.values():
            patterns = [item.pattern] if section == "signatures" else list(item.patterns)
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    file, _, line = origins[f"{section}:{item.id}"].rpartition(":")
                    problems.append(Problem(file, int(line or 0), item.id, f"pattern {pattern!r} does not compile: {exc}"))
    return problems


def kb_files(directory: Path = DATA_DIR) -> list[Path]:
    """The YAML files of a KB folder."""
    if not directory.is_dir():
        raise KBError([Problem(str(directory), 0, "", "no such knowledge-base folder")])
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml"))


def kb_fingerprint(paths: list[Path]) -> str:
    """A hash of the files' names, sizes and modification times (for the compiled cache)."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nccl-doctor"


def _read_cache(path: Path) -> tuple[KnowledgeBase, dict] | None:
    """Our own compiled cache: trusted only if this user owns it and nobody else can write it."""
    try:
        stat = path.stat()
        if stat.st_uid != os.getuid() or stat.st_mode & 0o022:
            return None
        data = path.read_bytes()
        if not data.startswith(_CACHE_FORMAT):
            return None
        kb, codes = pickle.loads(data[len(_CACHE_FORMAT):])  # noqa: S301 - written by load_kb, checked above
        return (kb, codes) if isinstance(kb, KnowledgeBase) and isinstance(codes, dict) else None
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError, ImportError):
        return None


def _write_cache(path: Path, kb: KnowledgeBase, codes: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(_CACHE_FORMAT + pickle.dumps((kb, codes), protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)
    except OSError:
        pass


def _start_artifacts(kb: KnowledgeBase) -> dict:
    """What a start can reuse instead of rebuilding: exported regexes and the relevance index."""
    import re

    from ..engine.regex_code import export_all

    from ..engine.relevance import RelevanceIndex

    patterns = [(s.pattern, re.IGNORECASE if s.ignore_case else 0) for s in kb.signatures.values()]
    patterns += [(p, re.IGNORECASE) for s in kb.symptoms.values() for p in s.patterns]
    codes = export_all(patterns)
    codes["relevance"] = RelevanceIndex(kb).state()  # the text index, so a one-shot start skips it
    return codes


def _check_compiles(kb: KnowledgeBase, codes: dict) -> None:
    """Compile every rule condition and regex once, so that a KB read from YAML - and so every
    cached KB - is known to work when the engine later compiles conditions lazily."""
    from ..engine.compiled import compile_kb

    compile_kb(kb, validate=True, regex_codes=codes)


def load_kb(directory: Path | None = None, *, use_cache: bool = True) -> KnowledgeBase:
    """Load the KB folder (see :func:`load_kb_with_regexes`)."""
    return load_kb_with_regexes(directory, use_cache=use_cache)[0]


def load_kb_with_regexes(directory: Path | None = None, *, use_cache: bool = True) -> tuple[KnowledgeBase, dict]:
    """The KB folder (the packaged one by default) and what a start reuses (compiled regexes, the
    relevance text index), through a cache.

    The examples beside rules, symptoms and signatures are left out (lint and the example
    tests read them with :func:`load_files`).

    The cache (in ``$XDG_CACHE_HOME/nccl-doctor``) is keyed by the files' names, sizes and
    modification times, so an edited file is always re-read; a cache that cannot be read or
    written, or that another user could have written, is ignored. ``NCCL_DOCTOR_NO_CACHE=1``
    turns it off.
    """
    folder = Path(directory or DATA_DIR)
    paths = kb_files(folder)
    cache = None
    if use_cache and not os.environ.get("NCCL_DOCTOR_NO_CACHE"):
        key = hashlib.sha256(f"{folder.resolve()}|{kb_fingerprint(paths)}".encode())
        cache = _cache_dir() / f"kb-{key.hexdigest()[:24]}.pickle"
        cached = _read_cache(cache)
        if cached is not None:
            return cached
    kb = without_examples(load_files(paths))
    codes = _start_artifacts(kb)
    _check_compiles(kb, codes)
    if cache is not None:
        _write_cache(cache, kb, codes)
    return kb, codes
