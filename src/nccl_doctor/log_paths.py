"""Turning ``--log`` arguments (files, ``-``, directories, globs) into the files to read.

An argument that names nothing (no such file, a pattern that matches nothing, an empty folder)
is an error: the user meant something else. What is found but cannot be read (a folder without
permission, a socket, a broken link) is skipped with a one-line reason. Directory walks and
``**`` patterns follow each symlinked folder once, so symlink loops end, and stop after
:data:`MAX_FILES` files, saying so.
"""
from __future__ import annotations

import errno
import fnmatch
import glob
import os
import stat
from dataclasses import dataclass, field

from .errors import LogProblem

__all__ = ["Skipped", "Expansion", "expand", "short_names", "MAX_FILES"]

MAX_FILES = 100_000
_MAGIC = "*?["


@dataclass(frozen=True)
class Skipped:
    """A path that was not read, and why (one line)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass
class Expansion:
    files: list[str] = field(default_factory=list)  # "-" stands for stdin
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def room(self) -> int:
        return MAX_FILES - len(self.files)


def expand(args: list[str]) -> Expansion:
    """The files the arguments name, sorted within each argument; raises :class:`LogProblem` for
    an argument that names nothing."""
    out = Expansion()
    for arg in args:
        if arg == "-":
            out.files.append("-")
            continue
        before = len(out.files) + len(out.skipped)
        try:
            info = os.stat(arg)
        except OSError as exc:
            if any(ch in arg for ch in _MAGIC):
                _glob(arg, out)
            elif exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise LogProblem(f"{arg}: no such file") from None
            else:
                out.skipped.append(Skipped(arg, _why(exc, arg)))
            continue
        if stat.S_ISDIR(info.st_mode):
            _walk(arg, out, lambda rel: True)
            if len(out.files) + len(out.skipped) == before:
                raise LogProblem(f"{arg}: directory has no files")
        elif stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode):
            out.files.append(arg)
        else:
            out.skipped.append(Skipped(arg, "not a regular file"))
    seen: dict[str, None] = dict.fromkeys(out.files)
    if len(seen) > MAX_FILES:
        out.notes.append(f"more than {MAX_FILES} files: only the first {MAX_FILES} are read")
    out.files = list(seen)[:MAX_FILES]
    return out


def _glob(pattern: str, out: Expansion) -> None:
    before = len(out.files)
    if "**" in pattern:
        root, parts = _split(pattern)
        if os.path.isdir(root or "."):
            _walk(root or ".", out, lambda rel: _match(rel.split("/"), parts), prefix=root)
    else:
        for match in sorted(glob.glob(pattern)):
            if len(out.files) >= MAX_FILES:
                break
            if os.path.isfile(match):
                out.files.append(match)
    if len(out.files) == before:
        blocked = _unreadable_parent(pattern)
        if blocked:
            out.skipped.append(Skipped(pattern, f"permission denied: cannot look inside {blocked}"))
            return
        raise LogProblem(f"{pattern}: no file matches this pattern")


def _split(pattern: str) -> tuple[str, list[str]]:
    """The folder before the first wildcard, and the pattern's parts after it."""
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if any(ch in part for ch in _MAGIC):
            return "/".join(parts[:i]) or ("/" if pattern.startswith("/") else ""), parts[i:]
    return pattern, []


def _match(names: list[str], parts: list[str]) -> bool:
    """Glob matching of path components, ``**`` standing for any number of folders."""
    if not parts:
        return not names
    if parts[0] == "**":
        return any(_match(names[i:], parts[1:]) for i in range(len(names) + 1))
    return bool(names) and fnmatch.fnmatchcase(names[0], parts[0]) and _match(names[1:], parts[1:])


def _walk(root: str, out: Expansion, wanted, prefix: str | None = None) -> None:
    """Files under ``root`` (hidden ones skipped), each real folder visited once."""
    visited: set[tuple[int, int]] = set()
    found: list[str] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            info = os.stat(folder)
            if (info.st_dev, info.st_ino) in visited:
                continue
            visited.add((info.st_dev, info.st_ino))
            with os.scandir(folder) as entries:
                items = sorted(entries, key=lambda e: e.name)
        except OSError as exc:
            out.skipped.append(Skipped(folder, _why(exc, folder)))
            continue
        subfolders = []
        for entry in items:
            if entry.name.startswith("."):
                continue
            path = entry.path
            rel = os.path.relpath(path, prefix or root).replace(os.sep, "/")
            try:
                if entry.is_dir():
                    subfolders.append(path)
                elif entry.is_file():
                    if wanted(rel):
                        found.append(path)
                        if len(found) >= out.room():
                            out.notes.append(f"{root}: stopped listing after {len(found)} files")
                            out.files.extend(sorted(found))
                            return
                elif entry.is_symlink():
                    if wanted(rel):
                        out.skipped.append(Skipped(path, "broken symbolic link"))
                elif wanted(rel):
                    out.skipped.append(Skipped(path, "not a regular file"))
            except OSError as exc:
                out.skipped.append(Skipped(path, _why(exc, path)))
        stack.extend(reversed(subfolders))
    out.files.extend(sorted(found))


def _unreadable_parent(pattern: str) -> str | None:
    """The first folder on the way to ``pattern`` that cannot be looked into, if any."""
    root, _ = _split(pattern)
    parts = (root or ".").split("/")
    for i in range(1, len(parts) + 1):
        path = "/".join(parts[:i]) or "/"
        try:
            info = os.stat(path)
        except PermissionError:
            return "/".join(parts[:i - 1]) or "/"
        except OSError:
            return None
        if stat.S_ISDIR(info.st_mode) and not os.access(path, os.R_OK | os.X_OK):
            return path
    return None


def _why(exc: OSError, path: str) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        parent = _unreadable_parent(path)
        return f"permission denied: cannot look inside {parent}" if parent and parent != path else "permission denied"
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file"
    return (exc.strerror or str(exc)).lower()


def short_names(paths: list[str]) -> dict[str, str]:
    """Each path's shortest ending (file name, then with its folders) that no other path shares:
    evidence reads ``rank0.log:12``, and ``0/stderr.log:12`` where torchrun's layout needs it."""
    parts = {p: p.replace(os.sep, "/").split("/") for p in paths}
    names: dict[str, str] = {}
    for path, split in parts.items():
        for depth in range(1, len(split) + 1):
            tail = split[-depth:]
            if not any(q != path and other[-depth:] == tail for q, other in parts.items()):
                break
        names[path] = "stdin" if path == "-" else "/".join(tail) or path
    return names
