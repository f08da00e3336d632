"""Modal screens: help, an explanation (why / how), changing an earlier answer, export, probes."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Markdown, OptionList, ProgressBar, RichLog, Static
from textual.widgets.option_list import Option

from ..report import save_report
from .model import Conversation

__all__ = ["HelpScreen", "ExplainScreen", "AnswersScreen", "ExportScreen", "ProbeScreen", "HELP_MARKDOWN"]

HELP_MARKDOWN = """\
## Keys

| Key | Where | What it does |
|---|---|---|
| `Enter` | start | begin with what you typed (text, pasted log lines, or a log file path) |
| `y` / `n` | question | answer yes / no |
| `1`…`9` | question | pick a choice |
| `d` | question | not sure / don't know (the question is not asked again) |
| `t` | question | type an answer in your own words, or add more text / a log path |
| `Esc` | anywhere | leave the text box, close a window, go back |
| `w` | question | why are you asking this? |
| `h` | anywhere | how did you conclude that? (the highlighted cause in the side panel) |
| `c` | question | focus the causes panel (↑/↓ to move, `Enter` = how) |
| `s` | question | focus the similar reported incidents (`Enter` = what happened, with the link) |
| `b` | anywhere | go back and change (or take back) an earlier answer |
| `p` | question | run the suggested probes on this machine |
| `f` | question | show the fix plan now |
| `e` / `j` | plan | export the report as Markdown / JSON (with redaction) |
| `k` | plan | copy the plan's commands to the clipboard |
| `Tab` | anywhere | move between buttons; `Enter` or a click presses one |
| `?` / `F1` | anywhere | this help |
| `Ctrl+Q` | anywhere | quit |
"""


class HelpScreen(ModalScreen[None]):
    """The keys, in one table."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide tall") as box:
            box.border_title = "Help"
            with VerticalScroll():
                yield Markdown(HELP_MARKDOWN)
            yield Button("Close (Esc)", id="close", compact=True)

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss()


class ExplainScreen(ModalScreen[None]):
    """An explanation rendered as Markdown: why a question is asked, how a cause was weighed."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, markdown: str, title: str) -> None:
        super().__init__()
        self.markdown = markdown
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide tall") as box:
            box.border_title = self.title_text
            with VerticalScroll(id="explain-scroll"):
                yield Markdown(self.markdown, id="explain")
            yield Button("Close (Esc)", id="close", compact=True)

    def on_mount(self) -> None:
        self.query_one("#explain-scroll").focus()

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss()


class AnswersScreen(ModalScreen["tuple[str, str] | None"]):
    """The answers so far; Enter asks one again, `x` takes it back."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close"),
        Binding("x,delete", "retract", "Take back"),
    ]

    def __init__(self, rows: list[tuple[str, str, str, bool]]) -> None:
        """``rows``: (fact id, question, answer shown, answered by the user)."""
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide") as box:
            box.border_title = "Change an earlier answer"
            yield Static("Enter: ask it again   x: take the answer back   Esc: close", classes="hint")
            options = [
                Option(Text.assemble((question, "bold"), "\n  → ", (shown, "green" if mine else "cyan"),
                                     ("" if mine else "  (from what you said or the log)", "dim")), id=fact_id)
                for fact_id, question, shown, mine in self.rows
            ]
            if not options:
                options = [Option("Nothing answered yet.", disabled=True)]
            yield OptionList(*options, id="answer-list")

    def on_mount(self) -> None:
        answers = self.query_one("#answer-list", OptionList)
        answers.focus()
        if answers.highlighted is None and self.rows:
            answers.highlighted = 0  # x works at once on the first row

    @on(OptionList.OptionSelected, "#answer-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.dismiss(("change", event.option.id))

    def action_retract(self) -> None:
        option = self.query_one("#answer-list", OptionList).highlighted_option
        if option is not None and option.id:
            mine = {fact_id: m for fact_id, _, _, m in self.rows}
            if mine.get(option.id):
                self.dismiss(("retract", option.id))
            else:
                self.notify("That came from what you said or a log: press Enter to answer it yourself.")


class ExportScreen(ModalScreen["Path | None"]):
    """Save the report: a path (``.md`` for Markdown, ``.json`` for JSON) and redaction."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, conversation: Conversation, default_path: str) -> None:
        super().__init__()
        self.conversation = conversation
        self.default_path = default_path

    def compose(self) -> ComposeResult:
        kind = "JSON" if self.default_path.endswith(".json") else "Markdown"
        with Vertical(id="dialog") as box:
            box.border_title = f"Export the report as {kind}"
            yield Static("Save to (Enter saves):", classes="hint")
            yield Input(self.default_path, id="export-path")
            yield Checkbox("Redact host names, IP addresses and tokens", True, id="redact", compact=True)
            with Horizontal(classes="buttons"):
                yield Button("Save", id="save", variant="primary", compact=True)
                yield Button("Cancel (Esc)", id="cancel", compact=True)
            yield Static("", id="export-error", classes="error")

    def on_mount(self) -> None:
        self.query_one("#export-path", Input).focus()

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#save")
    def _save(self) -> None:
        path = self.query_one("#export-path", Input).value.strip()
        if not path:
            self.query_one("#export-error", Static).update("Give a file name.")
            return
        redact = self.query_one("#redact", Checkbox).value
        try:
            saved = self.conversation.run(lambda s: save_report(s, path, redact=redact))
        except OSError as exc:
            self.query_one("#export-error", Static).update(f"Cannot write {path}: {exc.strerror or exc}")
            return
        self.dismiss(saved)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


class ProbeScreen(ModalScreen["list[str] | None"]):
    """Offer the suggested probes, run them in a thread with progress, show results as they
    arrive, then hand them to the session. Returns lines to note in the transcript."""

    BINDINGS = [Binding("escape", "close", "Close"), Binding("r", "run", "Run")]
    DEADLINE_S = 10.0  # seconds per probe (each gets at least its own deadline)

    def __init__(self, conversation: Conversation, suggestions: list[dict[str, Any]]) -> None:
        super().__init__()
        self.conversation = conversation
        self.suggestions = suggestions
        self.running = False
        self.summary: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide") as box:
            box.border_title = "Probes"
            lines = ["These read-only checks run on this machine and can settle open questions:"]
            for entry in self.suggestions:
                facts = ", ".join(entry["facts"][:2]) + (" …" if len(entry["facts"]) > 2 else "")
                lines.append(f"  • {entry['probe']} ({facts})")
            yield Static("\n".join(lines), id="probe-offer")
            yield ProgressBar(total=max(len(self.suggestions), 1), show_eta=False, id="probe-progress")
            yield RichLog(id="probe-log", wrap=True, markup=False, min_width=20)
            with Horizontal(classes="buttons"):
                yield Button("Run (r)", id="run", variant="primary", compact=True)
                yield Button("Close (Esc)", id="close", compact=True)

    def on_mount(self) -> None:
        self.query_one("#run", Button).focus()

    @on(Button.Pressed, "#run")
    def action_run(self) -> None:
        if self.running or self.summary:
            return
        try:
            from ..probes.api import apply_results, run_probes  # noqa: F401 - imported to check
        except Exception as exc:  # noqa: BLE001 - any failure means the same to the user
            self.query_one("#probe-log", RichLog).write(f"Probes unavailable: {exc}")
            self.summary = [f"Probes unavailable: {exc}"]
            return
        self.running = True
        self.query_one("#run", Button).disabled = True
        self.query_one("#probe-log", RichLog).write("Running…")
        self._run([entry["probe"] for entry in self.suggestions])

    @work(thread=True, exclusive=True, group="probes")
    def _run(self, names: list[str]) -> None:
        from ..probes.api import apply_results, run_probes

        def arrived(result: Any) -> None:
            self.app.call_from_thread(self._arrived, result)

        started = time.monotonic()
        try:
            results = run_probes(names, deadline=self.DEADLINE_S, on_result=arrived)
            self.conversation.run(lambda s: apply_results(s, results))
        except Exception as exc:  # noqa: BLE001 - a probe failure must not take the UI down
            self.app.call_from_thread(self._finished, [f"Probes failed: {exc}"])
            return
        took = time.monotonic() - started
        lines = [f"probe {r.name}: {r.status}" + (f" — {'; '.join(map(str, r.findings))}" if r.findings else "")
                 for r in results]
        self.app.call_from_thread(self._finished, lines, took)

    def _arrived(self, result: Any) -> None:
        self.query_one("#probe-progress", ProgressBar).advance(1)
        findings = "; ".join(str(f) for f in (getattr(result, "findings", None) or []))
        self.query_one("#probe-log", RichLog).write(
            f"{getattr(result, 'name', '?')}: {getattr(result, 'status', '?')}" + (f" — {findings}" if findings else "")
        )

    def _finished(self, lines: list[str], took: float | None = None) -> None:
        self.running = False
        self.summary = lines or ["Probes found nothing to add."]
        log = self.query_one("#probe-log", RichLog)
        log.write("Done." if took is None else f"Done in {took:.1f} s. Esc returns to the questions.")
        progress = self.query_one("#probe-progress", ProgressBar)
        progress.update(progress=progress.total or 0)
        self.query_one("#close", Button).focus()

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        if self.running:
            self.notify("Probes are still running; they stop at their deadline.")
            return
        self.dismiss(self.summary or None)
