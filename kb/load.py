"""Read the YAML knowledge base into one validated, merged KB.

YAML is read with the safe loader only, once per file. Every problem is reported with the file
(relative to the KB folder), the line and the id of the item, and loading stops with
:class:`KBError` listing all of them at once. Symptoms and signatures that weigh causes directly
(``evidence``) become a fact and a rule named after them here, and so does each row of a version
table (kb/versions.py): the engine sees only rules.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import KBError
from .artifact import KnowledgeBase, build_artifact, read_plain

if TYPE_CHECKING:  # pragma: no cover
    from . import schema

__all__ = ["KBError", "Problem", "DATA_DIR", "SECTIONS", "kb_files", "content_key", "load_models", "load_files"]

DATA_DIR = Path(__file__).parent
SECTIONS = ("facts", "symptoms", "signatures", "rules", "causes", "fixes", "incidents", "versions")
#: The order a file's sections are merged in: version tables first, so their rows' rules come
#: before the file's own rules in the agenda order.
_FILE_ORDER = ("versions", "facts", "symptoms", "signatures", "rules", "causes", "fixes", "incidents")
#: Folders of the packaged layout, in load order (derivation rules first: the first value set wins).
LAYOUT = ("vocabulary", "causes", "incidents")


def _safe_loader():
    import yaml

    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Problem(NamedTuple):
    """One thing wrong with the KB, located as precisely as we can."""

    file: str
    line: int
    item: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        item = f" [{self.item}]" if self.item else ""
        return f"{where}{item}: {self.message}"


def kb_files(directory: Path = DATA_DIR) -> list[Path]:
    """The YAML files of a KB folder, recursively: vocabulary/, then causes/, then incidents/,
    then any other file (a flat folder of files, as tests write them), each group by path.
    Hidden files and folders are skipped; symbolic links to folders are not followed."""
    directory = Path(directory)
    if not directory.is_dir():
        raise KBError([Problem(str(directory), 0, "", "no such knowledge-base folder")])
    found: list[tuple[int, str, Path]] = []
    pending = [(str(directory), "")]
    while pending:  # os.scandir: a start walks this folder every time, pathlib's rglob costs more
        folder, prefix = pending.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                label = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, label + "/"))
                elif entry.name.endswith((".yaml", ".yml")) and entry.is_file():
                    top = label.split("/", 1)[0]
                    found.append((LAYOUT.index(top) if top in LAYOUT else len(LAYOUT), label, Path(entry.path)))
    found.sort(key=lambda item: item[:2])
    return [path for _, _, path in found]


def _label(path: Path, root: Path | None) -> str:
    if root is None:
        return path.name
    text, base = str(path), str(root).rstrip(os.sep)
    if text.startswith(base + os.sep):
        return text[len(base) + 1:].replace(os.sep, "/")
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def content_key(paths: list[Path], root: Path | None = None) -> str:
    """A hash of the files' names and contents: any edit changes it, whatever the timestamps.

    The hash is the one Python keeps in hash-based ``.pyc`` files to tell a changed source
    (:func:`importlib.util.source_hash`, 64 bits, keyed by the interpreter's bytecode version,
    so each Python keeps its own artifact): a start reads and hashes every KB file, and this
    spares it loading OpenSSL for :mod:`hashlib` (~3 ms)."""
    from importlib.util import source_hash

    digests = [source_hash(_label(path, root).encode() + b"\0" + _read_bytes(path)) for path in paths]
    return source_hash(b"".join(digests)).hex()


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, read without a buffered file object (a start reads ~200 small files)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 18):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _item_lines(text: str) -> dict[tuple[str, int], tuple[int, str]]:
    """Map (section, index) to (1-based line, id) using YAML node marks (``cause`` is index 0)."""
    yaml, loader = _safe_loader()
    lines: dict[tuple[str, int], tuple[int, str]] = {}
    node = yaml.compose(text, Loader=loader)
    if not isinstance(node, yaml.MappingNode):
        return lines
    for key, value in node.value:
        items = value.value if isinstance(value, yaml.SequenceNode) else [value] if isinstance(value, yaml.MappingNode) else []
        for index, item in enumerate(items):
            item_id = ""
            if isinstance(item, yaml.MappingNode):
                for k, v in item.value:
                    if getattr(k, "value", None) == "id" and isinstance(v, yaml.ScalarNode):
                        item_id = str(v.value)
            lines[(str(key.value), index)] = (item.start_mark.line + 1, item_id)
    return lines


def _parse_file(path: Path, label: str, problems: list[Problem]):
    from pydantic import ValidationError

    from .schema import KBFile

    yaml, loader = _safe_loader()
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(label, 0, "", f"cannot read: {exc}"))
        return None, {}
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
        marks = _item_lines(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        problems.append(Problem(label, line, "", f"not valid YAML: {getattr(exc, 'problem', exc)}"))
        return None, {}
    except RecursionError:
        problems.append(Problem(label, 0, "", "not valid YAML: nested too deeply"))
        return None, {}
    if data is None:
        return KBFile(), marks
    if not isinstance(data, dict):
        problems.append(Problem(label, 1, "", "top level must be a mapping of sections"))
        return None, marks
    try:
        return KBFile.model_validate(data), marks
    except ValidationError as exc:
        for err in exc.errors():
            loc = err["loc"]
            line, item = 0, ""
            if len(loc) >= 2 and isinstance(loc[1], int):
                line, item = marks.get((str(loc[0]), loc[1]), (0, ""))
            elif loc and loc[0] == "cause":
                line, item = marks.get(("cause", 0), (0, ""))
            where = ".".join(str(p) for p in loc)
            problems.append(Problem(label, line, item, f"{where}: {err['msg']}"))
        return None, marks


def load_models(paths: list[Path], root: Path | None = None) -> "schema.KnowledgeBase":
    """Validate and merge the given YAML files into the schema's :class:`KnowledgeBase`;
    raise :class:`KBError` on any problem."""
    from .schema import KnowledgeBase as MergedKB

    problems: list[Problem] = []
    merged: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    origins: dict[str, str] = {}
    for path in paths:
        label = _label(path, root)
        parsed, marks = _parse_file(path, label, problems)
        if parsed is None:
            continue
        entries = [("causes", 0, parsed.cause, ("cause", 0))] if parsed.cause is not None else []
        for section in _FILE_ORDER:
            entries += [(section, i, item, (section, i)) for i, item in enumerate(getattr(parsed, section))]
        for section, _, item, mark in entries:
            line = marks.get(mark, (0, ""))[0]
            where = f"{label}:{line}"
            if item.id in merged[section]:
                problems.append(Problem(label, line, item.id,
                                        f"duplicate {section[:-1]} id (first at {origins[f'{section}:{item.id}']})"))
                continue
            merged[section][item.id] = item
            origins[f"{section}:{item.id}"] = where
            origins.setdefault(item.id, where)
            if section == "versions":
                problems.extend(_version_rules(item, where, merged, origins))
    problems.extend(_direct_evidence(merged, origins))
    problems.extend(_regex_problems(merged, origins))
    if problems:
        raise KBError(problems)
    return MergedKB(origins=origins, **merged)


def _direct_evidence(merged: dict[str, dict[str, Any]], origins: dict[str, str]) -> list[Problem]:
    """A symptom or signature with ``evidence`` becomes a fact and a rule of its own id: the
    match sets the fact, the rule weighs the causes (so chaining, explanations and questions
    treat it like any rule)."""
    from .schema import Action, Condition, Fact, Rule

    problems = []
    for section in ("symptoms", "signatures"):
        for item_id, item in list(merged[section].items()):
            if not item.evidence:
                continue
            file, _, line = origins[f"{section}:{item_id}"].rpartition(":")
            clash = "facts" if item_id in merged["facts"] else "rules" if item_id in merged["rules"] else ""
            if clash:
                problems.append(Problem(file, int(line or 0), item_id,
                                        f"a {section[:-1]} with evidence needs an id no {clash[:-1]} has"))
                continue
            merged["facts"][item_id] = Fact(id=item_id, type="bool",
                                            description=f"The {section[:-1]} {item_id} matched.")
            merged[section][item_id] = item.model_copy(update={"sets": {**item.sets, item_id: True}})
            merged["rules"][item_id] = Rule(id=item_id, description=item.description,
                                            when=Condition(fact=item_id), then=Action(evidence=item.evidence),
                                            references=item.references)
            origins[f"rules:{item_id}"] = origins[f"facts:{item_id}"] = origins[f"{section}:{item_id}"]
    return problems


def _version_rules(table: Any, where: str, merged: dict[str, dict[str, Any]], origins: dict[str, str]) -> list[Problem]:
    """A version table's rows become rules (kb/versions.py), located at the table and ordered before
    the rules of its file: a rule that reads what a row sets (``driver_minimum`` known or not) is
    tested after the row."""
    from .versions import table_rules

    problems = []
    file, _, line = where.rpartition(":")
    for rule in table_rules(table):
        if rule.id in merged["rules"]:
            problems.append(Problem(file, int(line or 0), table.id, f"row rule {rule.id!r} has the id of another rule"))
            continue
        merged["rules"][rule.id] = rule
        origins[f"rules:{rule.id}"] = where
        origins.setdefault(rule.id, where)
    return problems


def _regex_problems(merged: dict[str, dict[str, Any]], origins: dict[str, str]) -> list[Problem]:
    """Every regex in the KB compiles with RE2 (checked whenever YAML is read, so artifacts are
    sound): linear-time matching, so no pattern can be driven into backtracking."""
    from .patterns import pattern_problem

    problems = []
    for section in ("signatures", "symptoms"):
        for item in merged[section].values():
            patterns = [item.pattern] if section == "signatures" else list(item.patterns) + list(item.unless)
            for pattern in patterns:
                problem = pattern_problem(pattern)
                if problem:
                    file, _, line = origins[f"{section}:{item.id}"].rpartition(":")
                    problems.append(Problem(file, int(line or 0), item.id, f"pattern {pattern!r} does not compile: {problem}"))
    return problems


def load_files(paths: list[Path], root: Path | None = None, *, examples: bool = True) -> KnowledgeBase:
    """The KB of the given YAML files as the engine reads it (with the items' examples by default,
    for lint and tests; :func:`nccl_doctor.knowledge.load_knowledge` is the cached path)."""
    models = load_models(list(paths), root)
    return read_plain(build_artifact(models, key="", examples=examples))[0]
