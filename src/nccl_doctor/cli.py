"""The ``diagnose`` command: one-shot diagnosis, KB tools, and the doors to the TUI and server.

Start-up is kept fast: heavy packages (textual, torch, fastapi) are imported only by the
sub-commands that use them.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

from .errors import DoctorError, UsageError

__all__ = ["main"]

USAGE = """\
diagnose --symptom TEXT [--log PATH|DIR|GLOB|- ...] [--fact NAME=VALUE ...] [--facts REPORT.json]
                [--probe [NAME ...]] [--no-probes] [--json] [--no-input] [--markdown|--json] [--redact|--no-redact]
diagnose tui [--symptom TEXT] [--log PATH ...]
diagnose kb lint|stats|schema [--kb DIR]
diagnose probes
diagnose serve [--host 127.0.0.1] [--port 8000]
diagnose mcp [--http PORT]"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _fail(message: str) -> int:
    print(f"diagnose: error: {message}", file=sys.stderr)
    return 2


class _Terminated(BaseException):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C so every ``finally`` runs (probe groups are killed),
    but is not caught where Ctrl-C is (Ctrl-C during probes keeps what finished; this stops)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated(signum)


@contextlib.contextmanager
def _terminations_unwind() -> Iterator[None]:
    """While probes run, SIGTERM and SIGHUP unwind like Ctrl-C, so the probe groups are killed on
    the way out and the tool says why it stopped (each probe child also kills its own group
    when the tool dies of anything)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _raise_terminated) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 3600:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0 and at most 3600, got {text!r}")
    return value


# --------------------------------------------------------------------------------- one-shot
def _one_shot_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="diagnose", usage=USAGE, description="Why does distributed training hang, time out or crash?")
    parser.add_argument("--symptom", "-s", action="append", default=[], metavar="TEXT",
                        help="what happened, in your words (may repeat)")
    parser.add_argument("--log", "-l", action="extend", nargs="+", default=[], metavar="PATH",
                        help="log files, directories, globs, or - for stdin")
    parser.add_argument("--fact", "-f", action="append", default=[], metavar="NAME=VALUE",
                        help="a fact you already know, e.g. multi_node=yes")
    parser.add_argument("--facts", action="append", default=[], metavar="REPORT.json",
                        help="facts from a probe report (diagnose --probe --json, or the cluster probe)")
    parser.add_argument("--probe", nargs="*", default=None, metavar="NAME",
                        help="run host probes (all, or the named ones) and use their findings")
    parser.add_argument("--no-probes", action="store_true", help="never run probes (the default)")
    parser.add_argument("--probe-deadline", type=_seconds, default=5.0, metavar="SECONDS",
                        help="the least time each probe is given (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown report")
    parser.add_argument("--redact", action=argparse.BooleanOptionalAction, default=None,
                        help="hide host names, addresses, user names and secrets (default: on for --markdown, "
                             "off for --json)")
    parser.add_argument("--no-input", action="store_true", help="never ask questions")
    parser.add_argument("--lang", choices=["en", "zh"], help="answer in this language (default: the one you write)")
    parser.add_argument("--kb", metavar="DIR", help="use another knowledge-base folder")
    parser.add_argument("--version", action="store_true", help="print the version")
    return parser


def _parse_fact(session: Any, spec: str) -> None:
    from .engine import SessionError

    name, sep, value = spec.partition("=")
    if not sep or not name.strip():
        raise UsageError(f"--fact {spec!r}: expected NAME=VALUE")
    try:
        session.set_fact(name.strip(), value.strip(), source="cli")
    except SessionError as exc:
        raise UsageError(f"--fact {spec!r}: {exc}") from None


def _add_logs(session: Any, args: list[str]) -> Any:
    """Read every log into the session (nccl_doctor.ingest); the IngestResult, None without logs.
    Skipped files and a partial read are said on stderr, one line each."""
    if not args:
        return None
    from .ingest import ingest_paths
    from .logs import LogProblem

    progress = _ProgressLine() if sys.stderr.isatty() else None
    try:
        result = ingest_paths(session, args, progress=progress)
    except LogProblem as exc:
        raise UsageError(str(exc)) from None
    finally:
        if progress is not None:
            progress.clear()
    for skipped in result.skipped[:20]:
        print(f"diagnose: skipped {skipped}", file=sys.stderr)
    if len(result.skipped) > 20:
        print(f"diagnose: skipped {len(result.skipped) - 20} more files", file=sys.stderr)
    if result.partial:
        print(f"diagnose: partial result: {'; '.join(result.partial_reasons[:3])}", file=sys.stderr)
    return result


class _ProgressLine:
    """Bytes read, rate and time left on stderr, for logs over 200 MB (never on stdout)."""

    MIN_BYTES = 200 << 20

    def __init__(self) -> None:
        self.shown = 0.0
        self.used = False

    def __call__(self, p: Any) -> None:
        import time

        if (p.total_bytes or 0) < self.MIN_BYTES or time.monotonic() - self.shown < 0.25:
            return
        self.shown, self.used = time.monotonic(), True
        eta = f", {p.eta:.0f} s left" if p.eta is not None else ""
        sys.stderr.write(f"\rreading logs: {p.done_bytes / 2**20:,.0f} of {p.total_bytes / 2**20:,.0f} MB, "
                         f"{p.rate / 2**20:,.0f} MB/s{eta}   ")
        sys.stderr.flush()

    def clear(self) -> None:
        if self.used:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _run_probes(session: Any, names: list[str], deadline: float, quiet: bool) -> list[dict]:
    try:
        from .probes.api import apply_results, run_probes
    except ImportError as exc:
        raise UsageError(f"probes are not available: {exc}") from None

    def progress(result: Any) -> None:
        if not quiet:
            print(f"  probe {result.name}: {result.status}", file=sys.stderr)

    try:
        with _terminations_unwind():
            results = run_probes(names or None, deadline=deadline, on_result=progress)
    except DoctorError as exc:  # an unknown probe name
        raise UsageError(f"--probe: {exc}") from None
    apply_results(session, results)
    return [r.to_dict() for r in results]


def _load_reports(session: Any, paths: list[str]) -> None:
    if not paths:
        return
    try:
        from .probes.api import apply_results, load_report
    except ImportError as exc:
        raise UsageError(f"probe reports cannot be read: {exc}") from None
    for path in paths:
        try:
            results = load_report(path)
        except DoctorError as exc:  # the message names the file
            raise UsageError(f"--facts: {exc}") from None
        apply_results(session, results)


_PROMPTS = {
    "en": {"yes_no": "yes/no", "dont_know": "? = don't know", "stop": "Enter = stop",
           "paste": "paste it, then an empty line", "skipped": "skipped", "pick": "that fits more than one answer:",
           "noted": "noted as more detail; the question still stands"},
    "zh": {"yes_no": "是/否", "dont_know": "? = 不知道", "stop": "直接回车 = 结束",
           "paste": "粘贴后再输入一个空行", "skipped": "已跳过", "pick": "这个回答对应多个选项：",
           "noted": "已作为补充信息记录；问题仍然有效"},
}


def _ask(session: Any, limit: int = 8) -> None:
    """Plain prompts on a terminal: an answer in words (yes/no, a choice or its number, a value,
    pasted lines for an evidence question), '?' for don't know, an empty line to stop. Only the
    engine's next question is ever asked, so nothing already known or implied comes up."""
    from .engine import SessionError
    from .tui.answers import read_answer

    for _ in range(limit):
        question = session.next_question()
        if question is None:
            return
        words = _PROMPTS.get(session.language, _PROMPTS["en"])
        if question.kind == "evidence":
            hint = words["paste"]
        elif question.type == "bool":
            hint = words["yes_no"]
        elif question.choices:
            hint = " ".join(f"{i}) {question.choice_labels.get(c, c)}" for i, c in enumerate(question.choices, start=1))
        else:
            hint = question.type
        print(f"\n? {question.text} [{hint}; {words['dont_know']}; {words['stop']}]")
        if question.help:
            print(f"  ({question.help})")
        try:
            reply = input("> ").strip()
            if question.kind == "evidence" and reply and reply != "?":
                more = [reply]
                while (line := input("  ").rstrip()):
                    more.append(line)
                reply = "\n".join(more)
        except EOFError:
            return
        if not reply:
            return
        reading = read_answer(question, reply)
        try:
            if reading.kind == "dont_know":
                session.dont_know(question.id)
            elif reading.kind == "answer":
                session.answer(question.id, reading.value)
            elif reading.kind == "ambiguous":
                print(f"  {words['pick']} {', '.join(question.choice_labels.get(c, c) for c in reading.candidates)}")
            else:
                session.tell(reply)
                print(f"  ({words['noted']})")
        except SessionError as exc:
            print(f"  {exc}; {words['skipped']}")
            session.dont_know(question.id)


EMPTY_HINT = "No cause raised yet. Describe what happened (--symptom), add logs (--log), or state facts (--fact)."


def _print_text(session: Any, hang: dict | None, hang_lines: list[str], probes: list[dict], redact: bool) -> None:
    """The one-shot's terminal view: the same blocks as the Markdown report, in brief."""
    from .document import map_text
    from .redaction import session_redactor
    from .report import session_blocks
    from .terminal import print_blocks

    blocks = session_blocks(session, hang_lines=hang_lines, probes=probes, brief=True, empty_hint=EMPTY_HINT)
    if redact:
        blocks = map_text(blocks, session_redactor(session, hang, hang_lines, probes))
    print_blocks(blocks)


def _one_shot(argv: list[str]) -> int:
    opts = _one_shot_parser().parse_args(argv)
    if opts.version:
        from . import __version__

        print(f"nccl-doctor {__version__}")
        return 0
    if opts.probe is not None and opts.no_probes:
        raise UsageError("--probe and --no-probes contradict each other")
    doctor = _doctor(opts.kb)
    session = doctor.session(lang=opts.lang)
    from .engine import SessionError

    for text in opts.symptom:
        try:
            session.tell(text)
        except SessionError as exc:
            raise UsageError(f"--symptom: {exc}") from None
    for spec in opts.fact:
        _parse_fact(session, spec)
    _load_reports(session, opts.facts)
    ingest = _add_logs(session, opts.log)
    hang = session.hang  # the session owns the hang analysis of every log read into it
    hang_lines = ingest.hang_lines if ingest is not None else []
    probes = []
    if opts.probe is not None:
        probes = _run_probes(session, opts.probe, opts.probe_deadline, quiet=opts.json)
    interactive = not (opts.json or opts.markdown or opts.no_input) and sys.stdin.isatty() and sys.stdout.isatty()
    if interactive:
        _print_text(session, hang, hang_lines, probes, redact=bool(opts.redact))
        _ask(session)
        print("\n" + "=" * 72)
    if opts.json:
        from .contract import report_data

        data = report_data(session, hang=hang, probes=probes, redact=bool(opts.redact),
                           ingest=ingest.to_dict() if ingest is not None else None)
        json.dump(data, sys.stdout, ensure_ascii=False, indent=1, default=str)
        sys.stdout.write("\n")
    elif opts.markdown:
        from .report import session_markdown

        print(session_markdown(session, redact=opts.redact is not False, hang_lines=hang_lines, probes=probes,
                               hang=hang), end="")
    else:
        _print_text(session, hang, [] if interactive else hang_lines, [] if interactive else probes,
                    redact=bool(opts.redact))
    return 0


def _doctor(kb_dir: str | None):
    from . import KBError, load_doctor

    try:
        return load_doctor(kb_dir)
    except KBError as exc:
        raise UsageError(f"the knowledge base cannot be used ({exc.__class__.__name__}); "
                         f"run `{_lint_command(kb_dir)}` for details") from None


def _lint_command(kb_dir: str | None) -> str:
    """The lint command for the KB folder this run used (``--kb`` or ``$NCCL_DOCTOR_KB``)."""
    import shlex

    folder = kb_dir or os.environ.get("NCCL_DOCTOR_KB")
    return "diagnose kb lint" + (f" --kb {shlex.quote(folder)}" if folder else "")


# ---------------------------------------------------------------------------------- kb tools
def _kb(argv: list[str]) -> int:
    parser = _Parser(prog="diagnose kb", usage="diagnose kb lint|stats|schema [--kb DIR] [--check] [--json]")
    parser.add_argument("action", choices=["lint", "stats", "schema"])
    parser.add_argument("--kb", metavar="DIR")
    parser.add_argument("--check", action="store_true", help="schema: fail if the committed schema.json is stale")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(argv)
    from pathlib import Path

    from .kb.lint import lint_kb, schema_text, stats

    directory = Path(opts.kb) if opts.kb else None
    if opts.action == "lint":
        problems = lint_kb(directory)
        for problem in problems:
            print(problem)
        if problems:
            print(f"{len(problems)} problem(s)", file=sys.stderr)
            return 1
        print("knowledge base OK")
        return 0
    if opts.action == "stats":
        figures = stats(directory)
        if opts.json:
            print(json.dumps(figures, indent=1))
        else:
            for key, value in figures.items():
                if isinstance(value, dict):
                    print(f"{key}:")
                    for k, v in value.items():
                        print(f"  {k:<14} {v}")
                else:
                    print(f"{key:<16} {value}")
        return 0
    from .kb.lint import SCHEMA_PATH

    text, target = schema_text(), SCHEMA_PATH
    if opts.check:
        if not target.exists() or target.read_text() != text:
            print(f"{target} is stale: run `diagnose kb schema`", file=sys.stderr)
            return 1
        print("schema.json is current")
        return 0
    target.write_text(text)
    print(f"wrote {target}")
    return 0


def _tui(argv: list[str]) -> int:
    parser = _Parser(prog="diagnose tui", usage="diagnose tui [--symptom TEXT] [--log PATH ...]")
    parser.add_argument("--symptom", "-s", default=None)
    parser.add_argument("--log", "-l", action="extend", nargs="+", default=[])
    opts = parser.parse_args(argv)
    try:
        from .tui.app import run_tui
    except ImportError as exc:
        return _fail(f"the terminal UI is not available: {exc}")
    return run_tui(opts.symptom, opts.log)


def _probes(argv: list[str]) -> int:
    if argv:
        raise UsageError(f"diagnose probes takes no arguments (got {' '.join(argv)})")
    try:
        from .probes.api import list_probes
    except ImportError as exc:
        return _fail(f"probes are not available: {exc}")
    for info in list_probes():
        print(f"{info.name:<24} {info.title}  (facts: {', '.join(info.facts)})")
    return 0


def _serve(argv: list[str]) -> int:
    try:
        from .server import serve_main
    except ImportError as exc:
        return _fail(f"the server is not available ({exc}); pip install 'nccl-doctor[serve]'")
    return serve_main(argv)


def _mcp(argv: list[str]) -> int:
    from .mcp_server import mcp_main

    return mcp_main(argv)


COMMANDS = {"kb": _kb, "tui": _tui, "probes": _probes, "serve": _serve, "mcp": _mcp}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if not argv:
            if sys.stdin.isatty() and sys.stdout.isatty():
                return _tui([])
            print(USAGE, file=sys.stderr)
            return 2
        if argv[0] in ("-h", "--help", "help"):
            _one_shot_parser().print_help()
            return 0
        if argv[0] in COMMANDS:
            return COMMANDS[argv[0]](argv[1:])
        return _one_shot(argv)
    except DoctorError as exc:
        return _fail((str(exc).strip().splitlines() or [type(exc).__name__])[0])
    except KeyboardInterrupt:
        print("diagnose: interrupted", file=sys.stderr)
        return 130
    except _Terminated as exc:
        print(f"diagnose: stopped by {signal.Signals(exc.signum).name}", file=sys.stderr)
        return 128 + exc.signum
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the interpreter's flush
        except OSError:
            pass
        return 0


def run() -> None:
    """The console entry point: :func:`main`, then leave without the interpreter's teardown.

    Freeing the compiled KB's many small objects at exit cost about as long as the diagnosis
    itself; every file is closed by then, so flushing the two streams is all that is left.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: the reader has gone
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
