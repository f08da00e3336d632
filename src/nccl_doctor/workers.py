"""Reading many log files in worker processes that never outlive the tool.

Each worker rebuilds the reading plan from plain data (the KB's signatures), reads whole files and
sends back what it found. Workers ignore Ctrl-C (the tool decides: it stops them and keeps what is
done) and die with their parent whatever kills it: on Linux the kernel sends them SIGKILL when the
parent goes (``PR_SET_PDEATHSIG``), and a watchdog thread checks the parent elsewhere.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["read_in_workers"]

_PLAN: Any = None


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent went before the line above took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _init_worker(specs: list, use_hyperscan: bool, parent: int) -> None:
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _PLAN
    if _PLAN is None:  # spawned: build it; forked: the parent's is here already
        from .ingest import ReadingPlan

        _PLAN = ReadingPlan(specs, use_hyperscan=use_hyperscan)
    _PLAN.read_ahead = False  # the workers keep every core busy: a reading thread would only add switches


def _read(job: tuple[int, str, str]) -> tuple[int, Any]:
    from .ingest import open_and_read

    index, path, name = job
    return index, open_and_read(_PLAN, path, name)


def read_in_workers(plan: Any, paths: list[str], names: dict[str, str], sizes: dict[str, int | None], *, jobs: int,
                    progress: Callable | None) -> tuple[list, bool]:
    """Read the files in ``jobs`` processes; (results in the order of ``paths``, interrupted).

    Workers are forked when this process runs no other thread (they start at once, with the
    plan already built); otherwise they are spawned afresh, as forking a threaded process is
    unsafe."""
    from .ingest import Progress

    global _PLAN
    from .logs import expect_big_reads

    expect_big_reads()  # imported once here, shared by forked workers
    fork = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if fork else "spawn")
    _PLAN = plan if fork else None
    total = sum(s for s in sizes.values() if s) or None
    done: dict[int, Any] = {}
    start, read_bytes, interrupted = time.monotonic(), 0, False
    pool = context.Pool(jobs, initializer=_init_worker,
                        initargs=(plan.specs, plan.prefilter.backend == "hyperscan", os.getpid()))
    try:
        for index, result in pool.imap_unordered(_read, [(i, p, names[p]) for i, p in enumerate(paths)], chunksize=1):
            done[index] = result
            read_bytes += sizes.get(paths[index]) or result.bytes
            if progress is not None:
                progress(Progress(read_bytes, total, len(done), len(paths), time.monotonic() - start, paths[index]))
        pool.close()
    except KeyboardInterrupt:
        interrupted = True
        pool.terminate()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
        _PLAN = None
    return [done[i] for i in sorted(done)], interrupted
