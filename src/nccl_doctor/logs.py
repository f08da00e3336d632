"""Reading the logs users hand over: streamed, never whole, whatever their encoding.

Handles plain files, ``-`` (stdin), directories and globs; CRLF and ANSI colours are handled by
the engine's line cleaner; bytes that are not UTF-8 are replaced; a file that looks binary is
refused with a clear message instead of being scanned.
"""
from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from .errors import LogProblem

__all__ = ["LogProblem", "expand_log_args", "read_lines", "looks_binary", "CHUNK_BYTES", "MAX_LINE_BYTES"]

CHUNK_BYTES = 4 << 20
MAX_LINE_BYTES = 64 << 10
_LOG_SUFFIXES = {".log", ".txt", ".out", ".err", ""}


def looks_binary(head: bytes) -> bool:
    """True when the first bytes of a file look like anything but text."""
    if not head:
        return False
    if b"\x00" in head[:8192]:
        return True
    text_like = sum(1 for b in head[:8192] if b in (9, 10, 13) or 32 <= b < 127 or b >= 128)
    return text_like / min(len(head), 8192) < 0.85


def expand_log_args(args: list[str]) -> list[str]:
    """Turn ``--log`` arguments (files, ``-``, directories, globs) into a sorted file list.

    A directory contributes its regular files (recursively, skipping hidden ones); a glob its
    matches. Raises :class:`LogProblem` for an argument that names nothing.
    """
    out: list[str] = []
    for arg in args:
        if arg == "-":
            out.append(arg)
            continue
        path = Path(arg)
        if path.is_dir():
            found = sorted(
                str(p) for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                raise LogProblem(f"{arg}: directory has no files")
            out.extend(found)
        elif path.exists():
            if not path.is_file():
                raise LogProblem(f"{arg}: not a regular file")
            out.append(str(path))
        elif any(ch in arg for ch in "*?["):
            matches = sorted(p for p in glob.glob(arg, recursive=True) if os.path.isfile(p))
            if not matches:
                raise LogProblem(f"{arg}: no file matches this pattern")
            out.extend(matches)
        else:
            raise LogProblem(f"{arg}: no such file")
    return list(dict.fromkeys(out))


def read_lines(path: str) -> Iterator[str]:
    """Yield decoded lines of a file (or stdin for ``-``), streaming in chunks.

    Lines longer than :data:`MAX_LINE_BYTES` are cut. Raises :class:`LogProblem` when the file
    cannot be opened or looks binary.
    """
    if path == "-":
        stream = sys.stdin.buffer
        close = False
    else:
        try:
            stream = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise LogProblem(f"{path}: cannot open: {exc.strerror or exc}") from None
        close = True
    try:
        first = True
        pending = b""
        while True:
            chunk = stream.read(CHUNK_BYTES)
            if first:
                first = False
                if looks_binary(chunk):
                    raise LogProblem(f"{path}: looks like a binary file, not a text log")
            if not chunk:
                break
            data = pending + chunk
            lines = data.split(b"\n")
            pending = lines.pop()
            for raw in lines:
                yield raw[:MAX_LINE_BYTES].decode("utf-8", "replace")
            if len(pending) > MAX_LINE_BYTES:
                # A line with no end in sight: keep its head, drop the rest until a newline.
                yield pending[:MAX_LINE_BYTES].decode("utf-8", "replace")
                pending = b""
                while True:
                    chunk = stream.read(CHUNK_BYTES)
                    if not chunk:
                        break
                    cut = chunk.find(b"\n")
                    if cut >= 0:
                        pending = chunk[cut + 1:]
                        break
                # continue the outer loop with what follows the newline
        if pending:
            yield pending[:MAX_LINE_BYTES].decode("utf-8", "replace")
    finally:
        if close:
            stream.close()
