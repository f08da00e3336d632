"""Where log bytes come from: each file opened once, sniffed once, read once in whole-line chunks.

A source is a file, ``-`` (stdin) or text already in memory. :func:`open_source` opens a file and
looks at its first bytes once: binary files and zstd archives are refused with a reason, gzip is
decompressed as it streams, Flight Recorder dumps are recognised. :func:`chunks` then hands out
big chunks of whole lines, each with a few KB of the lines around it for records that span lines,
so that every consumer reads the same bytes and none reads the file again. Lines longer than
:data:`MAX_LINE_BYTES` keep their head; the rest of such a line is dropped unread into memory.

FIFOs, devices and pseudo-files that may never end (``/proc/kmsg``) are read while data keeps
coming and closed after :data:`IDLE_SECONDS` of silence, said to be partial. Expanding paths,
directories and globs is :mod:`nccl_doctor.log_paths`' job.
"""
from __future__ import annotations

import os
import select
import stat
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .errors import LogProblem

__all__ = ["LogProblem", "Source", "Chunk", "open_source", "text_source", "stdin_source", "stdin_is_big", "chunks",
           "LineCounter", "looks_binary", "expect_big_reads", "CHUNK_BYTES", "MAX_LINE_BYTES", "CONTEXT_BYTES",
           "IDLE_SECONDS", "BIG_READ_BYTES", "READ_PIECE"]

CHUNK_BYTES = 8 << 20
MAX_LINE_BYTES = 64 << 10
CONTEXT_BYTES = 8 << 10  # lines kept before and after each chunk for multi-line records
IDLE_SECONDS = 2.0  # a FIFO or device silent this long is taken to have said all it will
PAUSE_SECONDS = 0.05  # a stream silent this long in the middle of a chunk: what came is handed out
HEAD_BYTES = 64 << 10
_GZIP, _ZSTD = b"\x1f\x8b", b"\x28\xb5\x2f\xfd"


_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 13)) + b"\x7f"


def looks_binary(head: bytes) -> bool:
    """True when the first bytes of a file look like anything but text."""
    sample = head[:8192]
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    text_like = len(sample.translate(None, _CONTROL))
    return text_like / len(sample) < 0.85


@dataclass
class Source:
    """One opened input: its first bytes (already read, decompressed) and a reader for the rest."""

    name: str  # how evidence names it: the path, "stdin", or the name given with the text
    kind: str  # "log" or "dump" (a Flight Recorder dump: pickle or JSON)
    head: bytes
    read: Callable[[int], bytes]  # the next bytes after ``head``; b"" at the end
    size: int | None = None  # bytes on disk (compressed size for .gz), for progress
    position: Callable[[], int] = field(default=lambda: 0)  # bytes consumed on disk so far
    endless: bool = False  # a FIFO, device or pseudo-file: stopped after IDLE_SECONDS of silence
    stopped: str | None = None  # why reading stopped before the end, once it has
    close: Callable[[], None] = field(default=lambda: None)
    # fills a buffer (no copy), where the source can; ``more=True``: the call goes on with a read under
    # way, and a stream whose writer is quiet for PAUSE_SECONDS returns 0 at once, not at its end
    readinto: Callable[..., int] | None = None
    path: str | None = None  # the file, when it is one


class _Idle(Exception):
    pass


def open_source(path: str) -> Source:
    """Open a file once and sniff it. Raises :class:`LogProblem` naming the file and the reason
    it cannot be read (permission, binary content, zstd, not a file)."""
    try:
        # non-blocking, so that opening a FIFO nobody writes to does not wait for a writer
        handle = os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb", buffering=0)
    except OSError as exc:
        raise LogProblem(f"{path}: cannot open: {_why(exc)}") from None
    try:
        info = os.fstat(handle.fileno())
        regular = stat.S_ISREG(info.st_mode)
        if not (regular or stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode)):
            raise LogProblem(f"{path}: not a regular file")
        endless = not regular or (info.st_size == 0 and _pseudo(path))
        consumed = [0]  # counted here: tell() would wait for the reading thread's read to finish

        def raw_read(n: int, read=_idle_reader(handle.fileno(), IDLE_SECONDS) if endless else handle.read) -> bytes:
            data = read(n)
            consumed[0] += len(data)
            return data

        def readinto(view: memoryview, more: bool = False) -> int:
            got = handle.readinto(view) or 0
            consumed[0] += got
            return got

        source = _sniffed(path, raw_read, info.st_size if regular and not endless else None,
                          lambda: consumed[0], endless, handle.close)
        if regular and not endless and source.read is raw_read:
            source.readinto = readinto
        source.path = path
    except LogProblem:
        handle.close()
        raise
    except OSError as exc:
        handle.close()
        raise LogProblem(f"{path}: cannot read: {_why(exc)}") from None
    return source


def stdin_source() -> Source:
    """Standard input (``--log -``), read as it comes (``kubectl logs -f`` never ends: Ctrl-C
    stops it, and what came before is used)."""
    fd = sys.stdin.buffer.fileno()
    consumed = [0]

    def readinto(view: memoryview, more: bool = False) -> int:
        """Fill ``view``, or as much as arrives before the writer pauses; 0 at the end (and, with
        ``more``, when nothing comes within the pause)."""
        got = 0
        while got < len(view):
            if (got or more) and not select.select([fd], [], [], PAUSE_SECONDS)[0]:
                break
            with view[got:] as free:
                n = os.readv(fd, [free])
            if n == 0:
                break
            got += n
        consumed[0] += got
        return got

    def read(n: int) -> bytes:
        buffer = bytearray(n)
        with memoryview(buffer) as view:
            got = readinto(view)
        return bytes(buffer[:got])

    _wider_pipe(fd)
    source = _sniffed("stdin", read, None, lambda: consumed[0], False, lambda: None)
    if source.read is read:
        source.readinto = readinto
    return source


def stdin_is_big() -> bool:
    """Whether standard input looks like a big log: a file of :data:`BIG_READ_BYTES` or more, or a
    pipe its writer has already filled (64 KB waiting, Linux's default pipe size)."""
    try:
        fd = sys.stdin.buffer.fileno()
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            return info.st_size >= BIG_READ_BYTES
        if stat.S_ISFIFO(info.st_mode):
            import fcntl
            import termios

            waiting = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
            return int.from_bytes(waiting, sys.byteorder) >= 64 << 10
    except (OSError, ValueError, AttributeError, ImportError):
        pass
    return False


PIPE_MAX_FILE = "/proc/sys/fs/pipe-max-size"


def _wider_pipe(fd: int) -> int | None:
    """Grow the pipe ``fd`` reads from (Linux: 64 KB by default) to as much as an unprivileged
    process may ask (``/proc/sys/fs/pipe-max-size``, 1 MB by default; at most one chunk), so that
    the writer can run ahead and each read takes more. Its size after, or None where ``fd`` is
    no pipe (a file, a terminal) or the size cannot be asked for; never raises."""
    try:
        import fcntl

        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        get_size, set_size = getattr(fcntl, "F_GETPIPE_SZ", 1032), getattr(fcntl, "F_SETPIPE_SZ", 1031)
        size = fcntl.fcntl(fd, get_size)
    except (OSError, ValueError, ImportError):
        return None
    for wanted in (min(_pipe_max(), CHUNK_BYTES), 1 << 20):
        if wanted <= size:
            break
        try:
            return fcntl.fcntl(fd, set_size, wanted)
        except OSError:  # over the per-user limit on pipe memory, or a kernel without it
            continue
    return size


def _pipe_max() -> int:
    try:
        with open(PIPE_MAX_FILE, "rb") as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 1 << 20


def text_source(text: str | bytes, name: str = "log") -> Source:
    """Text already in memory (an upload, a paste): read like a file, never refused as binary."""
    data = text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)
    view = memoryview(data)
    at = [HEAD_BYTES]

    def read(n: int) -> bytes:
        piece = bytes(view[at[0]:at[0] + n])
        at[0] += len(piece)
        return piece

    return Source(name=name, kind="log", head=data[:HEAD_BYTES], read=read, size=len(data),
                  position=lambda: min(at[0], len(data)))


def _sniffed(name: str, raw_read: Callable[[int], bytes], size: int | None, position: Callable[[], int],
             endless: bool, close: Callable[[], None]) -> Source:
    from .forensics.frdump import looks_like_dump

    source = Source(name=name, kind="log", head=b"", read=raw_read, size=size, position=position,
                    endless=endless, close=close)
    try:
        head = raw_read(HEAD_BYTES)
    except _Idle:
        head, source.stopped = b"", f"no data for {IDLE_SECONDS:g} s"
    if head.startswith(_ZSTD):
        raise LogProblem(f"{name}: compressed with zstd; decompress it first (zstd -d)")
    if head.startswith(_GZIP):
        source.read = _gunzip(head, raw_read, name)
        head = source.read(HEAD_BYTES)
    source.head = head
    kind = looks_like_dump(head)
    if kind:
        source.kind = "dump"
    elif looks_binary(head):
        raise LogProblem(f"{name}: looks like a binary file, not a text log")
    return source


def _gunzip(head: bytes, raw_read: Callable[[int], bytes], name: str) -> Callable[[int], bytes]:
    """A reader of the decompressed bytes, producing at most ``n`` bytes per call, so that a small
    archive that expands enormously never sits in memory whole. Concatenated members are read on."""
    state = {"d": zlib.decompressobj(zlib.MAX_WBITS | 32), "input": head}

    def read(n: int) -> bytes:
        parts, got = [], 0
        while got < n:
            d = state["d"]
            data, state["input"] = d.unconsumed_tail or state["input"], b""
            if not data:
                data = raw_read(CHUNK_BYTES)
                if not data:
                    break
            try:
                piece = d.decompress(data, n - got)
            except zlib.error as exc:
                raise LogProblem(f"{name}: damaged gzip data: {exc}") from None
            parts.append(piece)
            got += len(piece)
            if d.eof:
                state["d"], state["input"] = zlib.decompressobj(zlib.MAX_WBITS | 32), d.unused_data
        return b"".join(parts)

    return read


def _idle_reader(fd: int, idle: float) -> Callable[[int], bytes]:
    """Read what a FIFO or device offers; raise :class:`_Idle` after ``idle`` seconds of silence."""
    import time

    def read(n: int) -> bytes:
        out = bytearray()
        quiet_until = time.monotonic() + idle
        while len(out) < n:
            wait = max(0.0, quiet_until - time.monotonic()) if not out else 0.05
            ready, _, _ = select.select([fd], [], [], wait)
            piece = None
            if ready:
                try:
                    piece = os.read(fd, n - len(out))
                except BlockingIOError:  # nothing after all (a FIFO between writers)
                    piece = None
            if piece is None:
                if out:
                    break
                if time.monotonic() >= quiet_until:
                    raise _Idle()
                continue
            if not piece:
                break
            out += piece
        return bytes(out)

    return read


def _pseudo(path: str) -> bool:
    """Files of /proc and /sys report size 0 and some never end (``/proc/kmsg``)."""
    real = os.path.realpath(path)
    return real.startswith(("/proc/", "/sys/", "/dev/"))


def _why(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower() if exc.errno else str(exc)


@dataclass
class Chunk:
    """Whole lines ``data[start:end]`` of a source, with up to :data:`CONTEXT_BYTES` of the lines
    before and after them in ``data`` (read them, never report them: the next chunk owns them)."""

    data: bytes | bytearray
    start: int
    end: int
    first_line: int  # line number of data[start]
    offset: int  # byte offset of data[start] in the (decompressed) stream
    lines: int = 0  # newlines in data[start:end]

    def line_of(self, pos: int) -> int:
        """Line number of the line holding ``pos`` (counts newlines: call it for few positions)."""
        return self.first_line + self.data.count(b"\n", self.start, pos)


class LineCounter:
    """Line numbers of positions in a chunk, counting newlines only from the nearest known point
    (the last position asked, the chunk's start or its end), so a hit near either end is cheap."""

    def __init__(self, chunk: Chunk) -> None:
        self.chunk = chunk
        self._pos, self._line = chunk.start, chunk.first_line

    def __call__(self, pos: int) -> int:
        chunk = self.chunk
        if pos < self._pos:
            self._pos, self._line = chunk.start, chunk.first_line
        if chunk.end - pos < pos - self._pos:  # nearer the end: count back from it
            self._pos, self._line = pos, chunk.first_line + chunk.lines - chunk.data.count(b"\n", pos, chunk.end)
            return self._line
        self._line += chunk.data.count(b"\n", self._pos, pos)
        self._pos = pos
        return self._line


def chunks(source: Source, *, chunk_bytes: int = CHUNK_BYTES, keep: int = 0,
           buffers: list[bytearray] | None = None, read_ahead: bool = True) -> Iterator[Chunk]:
    """Whole-line chunks of a source, each byte read once. A chunk is handed out only once the
    lines after it are read too (its look-ahead), except at the end.

    The caller may hold on to its last ``keep`` chunks; older chunks' buffers are reused for
    reading (no allocation, no page faults per chunk), so their ``data`` must not be used after.
    ``buffers`` (owned by the caller, one thread's) carries those buffers over to the next source,
    which must then be read only once the caller is done with this one's chunks.
    Big sources are read ahead by a thread (reading and counting lines while the caller scans
    the previous chunk) unless ``read_ahead`` is off (worker processes already keep every core busy). At the end ``source.stopped`` says why reading stopped early (a FIFO
    that went quiet), if it did; a read error raises LogProblem."""
    if read_ahead and source.readinto is not None and chunk_bytes >= 1 << 20 and (
            source.size is None or source.size > chunk_bytes):
        return _read_ahead(_chunks(source, chunk_bytes, keep + 2 + _AHEAD, buffers))
    return _chunks(source, chunk_bytes, keep + 2, buffers)


_AHEAD = 2  # chunks a reading thread may have ready before the caller takes them


def _read_ahead(produce: Iterator[Chunk]) -> Iterator[Chunk]:
    """The items of a generator, produced by a thread up to :data:`_AHEAD` ahead (the thread
    spends its time in read() and counting, which leave the interpreter free for the caller)."""
    import queue

    ready: queue.Queue = queue.Queue(maxsize=_AHEAD)
    stop = threading.Event()
    done = object()

    def run() -> None:
        try:
            for item in produce:
                while not stop.is_set():
                    try:
                        ready.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            item = done
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
            item = exc
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    worker = threading.Thread(target=run, daemon=True, name="log-reader")
    worker.start()
    try:
        while True:
            item = ready.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join(timeout=0.2)  # a thread still waiting on a silent pipe is left to end with the process


def _chunks(source: Source, chunk_bytes: int, slots: int, buffers: list[bytearray] | None) -> Iterator[Chunk]:
    look = min(CONTEXT_BYTES, max(1, chunk_bytes // 2))
    pending, skip, line, offset = b"", 0, 1, 0
    head = memoryview(source.head)
    ring: list[bytearray] = buffers if buffers is not None else []
    scratch: list = []
    while True:
        if head:  # the bytes read when the source was sniffed come first
            more, head = head[:chunk_bytes], head[chunk_bytes:]
            data, ended = bytes(pending) + bytes(more), False
            fresh = None
        else:
            data, fresh = _read_after(source, pending, chunk_bytes, ring, slots, scratch)
            ended = len(data) == len(pending)
        paused = len(data) - len(pending) < chunk_bytes  # a stream that paused: hand out what came
        if ended:
            cut = len(data)
        else:
            cut = data.rfind(b"\n", skip, len(data) if paused else max(skip, len(data) - look)) + 1
            if cut <= skip:  # no whole line with enough after it yet
                if data.find(b"\n", skip) < 0 and len(data) - skip > MAX_LINE_BYTES:
                    data, ended = _cut_long_line(source, data, skip, chunk_bytes)
                    cut = len(data) if ended else data.rfind(b"\n") + 1
                    fresh = None
                else:
                    pending = bytes(data)
                    continue
        if fresh is None:
            lines = _newlines(data, skip, cut, scratch)
        else:  # counted as read: add the lines carried over, take off those left for the next chunk
            lines = fresh + data.count(b"\n", skip, len(pending)) - data.count(b"\n", cut, len(data))
        if cut > skip:
            yield Chunk(data, skip, cut, line, offset, lines)
        if ended:
            return
        line += lines
        offset += cut - skip
        keep_from = data.rfind(b"\n", 0, max(0, cut - look)) + 1
        pending, skip = bytes(data[keep_from:]), cut - keep_from


_SLACK = 256 << 10  # room in each read buffer for the lines carried over from the previous read
READ_PIECE = 1 << 20  # read this much at a time and count its lines at once, while it is in cache
BIG_READ_BYTES = 64 << 20  # past this much read in a process, lines are counted with numpy
_COUNTED = [0]  # bytes this process has counted lines in
_NUMPY: list = []  # [numpy or None], imported once this process reads big logs


_LOADING: list = []  # the thread that imports numpy, once started
_LOADING_LOCK = threading.Lock()


def expect_big_reads(*, wait: bool = True) -> None:
    """Import what counting big logs uses (numpy) now: before forking workers, so that they share
    it, or, with ``wait=False``, in a thread while the caller does other work (building the
    reading plan: compiling hyperscan's database leaves the interpreter free), rather than in the
    middle of the reading. A count that needs it, or a call with ``wait``, waits for it."""
    _COUNTED[0] = max(_COUNTED[0], BIG_READ_BYTES)
    with _LOADING_LOCK:
        if _NUMPY:
            return
        if not _LOADING:
            _LOADING.append(threading.Thread(target=_load_numpy, daemon=True, name="numpy-import"))
            _LOADING[0].start()
    if wait:
        _LOADING[0].join()


def _load_numpy() -> None:
    try:
        numpy = _import_numpy()
    except Exception:  # noqa: BLE001 - a broken install: count with bytes.count
        numpy = None
    _NUMPY.append(numpy)


def _import_numpy():
    """numpy, or None. OpenBLAS, which numpy loads and nccl-doctor never uses, starts a thread per
    core that spins for about 0.1 s before it sleeps, taking a core from the reading on a small
    machine: it is told to sleep at once (``OPENBLAS_THREAD_TIMEOUT``, for this import only,
    unless the environment sets it)."""
    had = os.environ.get("OPENBLAS_THREAD_TIMEOUT")
    if had is None and "numpy" not in sys.modules:
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"  # the least it takes: 2**4 cycles
    try:
        import numpy
    except ImportError:
        numpy = None
    finally:
        if had is None:
            os.environ.pop("OPENBLAS_THREAD_TIMEOUT", None)
    return numpy


def _newlines(data: bytes | bytearray, start: int, end: int, scratch: list) -> int:
    """Newlines in ``data[start:end]``: numpy's vector compare (``pip install 'nccl-doctor[fast]'``,
    about four times ``bytes.count``) once this process has counted 64 MB, so small runs do not pay
    for its import; ``bytes.count`` otherwise. ``scratch`` keeps the compare's output array."""
    _COUNTED[0] += end - start
    if end - start >= 64 << 10 and _COUNTED[0] >= BIG_READ_BYTES:
        if not _NUMPY:
            expect_big_reads()
        np = _NUMPY[0]
        if np is not None:
            if not scratch or len(scratch[0]) < end - start:
                scratch[:] = [np.empty(end - start + _SLACK, dtype=bool)]
            out = scratch[0][:end - start]
            np.equal(np.frombuffer(data, np.uint8, end - start, start), 10, out=out)
            return int(np.count_nonzero(out))
    return data.count(b"\n", start, end)


def _read_after(source: Source, pending: bytes, n: int, ring: list[bytearray], slots: int,
                scratch: list) -> tuple[bytes | bytearray, int | None]:
    """``pending`` followed by up to ``n`` more bytes of the source, and the newlines in those
    bytes (None when not counted here). Where the source can fill a buffer itself, the bytes are
    read straight into one of ``slots`` buffers used in turn, :data:`READ_PIECE` at a time, each
    piece's newlines counted while it is still in the CPU's cache. Buffers keep their memory from
    one read to the next: resizing them within it costs neither a copy nor the page faults of
    fresh memory. A piece that comes back short (the end, or a stream that paused) ends the read."""
    if source.readinto is None:
        more = _read(source, n)
        return (pending + more if pending else more), None
    size = len(pending) + n
    if n < (1 << 20) or len(ring) < slots:
        buffer = bytearray(size + _SLACK)
        if n >= (1 << 20):
            ring.append(buffer)
    else:
        buffer = ring.pop(0)
        ring.append(buffer)
    if len(buffer) > size:
        del buffer[size:]  # at least half of what it holds: CPython keeps the memory
    elif len(buffer) < size:
        buffer.extend(bytes(size - len(buffer)))
    buffer[:len(pending)] = pending
    got = newlines = 0
    with memoryview(buffer) as view:
        while got < n:
            at, want = len(pending) + got, min(READ_PIECE, n - got)
            with view[at:at + want] as piece:
                try:
                    took = source.readinto(piece, more=got > 0) or 0
                except OSError as exc:
                    raise LogProblem(f"{source.name}: cannot read: {_why(exc)}") from None
            if took:
                newlines += _newlines(buffer, at, at + took, scratch)
            got += took
            if took < want:
                break
    if got < n:
        if len(pending) + got < len(buffer) // 2:  # a short end: copy it out, keep the buffer whole
            with memoryview(buffer) as view:
                return view[:len(pending) + got].tobytes(), newlines
        del buffer[len(pending) + got:]
    return buffer, newlines


def _read(source: Source, n: int) -> bytes:
    try:
        return source.read(n)
    except _Idle:
        source.stopped = f"no more data for {IDLE_SECONDS:g} s (a stream that does not end)"
        return b""
    except OSError as exc:
        raise LogProblem(f"{source.name}: cannot read: {_why(exc)}") from None


def _cut_long_line(source: Source, data: bytes, skip: int, chunk_bytes: int) -> tuple[bytes, bool]:
    """A line with no end in sight: keep its head, drop the rest up to its newline."""
    head = data[:skip + MAX_LINE_BYTES] + b"\n"
    while True:
        more = _read(source, chunk_bytes)
        if not more:
            return head, True
        cut = more.find(b"\n")
        if cut >= 0:
            return head + more[cut + 1:], False
