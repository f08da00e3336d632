"""The first screen: "what happened?" — free text, pasted log lines, or log files to open."""
from __future__ import annotations

import os
import shlex

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Static, TextArea

from ..engine import SessionError
from ..log_paths import expand
from ..logs import LogProblem
from .answers import log_paths
from .model import Conversation, learned_facts

__all__ = ["StartScreen", "PromptArea", "load_input"]



class PromptArea(TextArea):
    """A text box where Enter submits; pasted text keeps its line breaks."""

    class Submitted(Message):
        pass

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted())
            return
        if event.key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)


def load_input(conversation: Conversation, text: str, paths: list[str], progress=None) -> list[str]:
    """Tell the session what the user wrote and read the log files into it (nccl_doctor.ingest:
    the KB's signatures and the hang analysis, as the one-shot CLI does).

    Runs in a worker thread. ``text`` that is nothing but file paths opens them as logs.
    Returns lines for the transcript; raises :class:`LogProblem` / :class:`SessionError`.
    """
    from ..ingest import ingest_paths

    notes: list[str] = []
    files = list(paths)
    as_paths = log_paths(text) if text else None
    if as_paths:
        files = as_paths + files
        text = ""
    if text.strip():
        conversation.run(lambda s: s.tell(text))
    if files:
        def report(p) -> None:
            if progress is not None:
                total = f" of {p.total_bytes / 2**20:,.0f}" if p.total_bytes else ""
                progress(f"Reading {os.path.basename(p.current) or p.current}: {p.done_bytes / 2**20:,.0f}{total} MB…")

        if progress is not None:
            progress(f"Reading {len(files)} file(s)…")
        before = conversation.run(lambda s: len(s.logs))
        result = conversation.run(lambda s: ingest_paths(s, files, progress=report))
        for summary in conversation.run(lambda s: s.logs[before:]):
            name = os.path.basename(summary.name) or summary.name
            found = ", ".join(f"{sig} (first at {info['first']})" for sig, info in list(summary.hits.items())[:4])
            more = f" and {len(summary.hits) - 4} more" if len(summary.hits) > 4 else ""
            notes.append(f"Read {name}: {summary.lines:,} lines; "
                         + (f"recognised {found}{more}." if found else "no known error lines."))
        notes += [f"Skipped {s}" for s in result.skipped[:10]]
        if result.partial:
            notes.append(f"Partial: {'; '.join(result.partial_reasons[:3])}")
        if result.hang_lines:
            notes.append("Hang analysis: " + " ".join(result.hang_lines[:4]))
    learned = conversation.run(learned_facts)
    if learned:
        shown = ", ".join(f"{name} = {_show(value)}" for name, value, _ in learned[:12])
        notes.append(f"I noted: {shown}" + (" …" if len(learned) > 12 else "") + ".")
    elif text.strip() or files:
        notes.append("I did not recognise anything specific yet; the questions will narrow it down.")
    return notes


def _show(value: object) -> str:
    return "yes" if value is True else "no" if value is False else str(value)


class StartScreen(Screen[None]):
    """Ask what happened, then hand over to the conversation."""

    BINDINGS = [Binding("ctrl+s", "start", "Start", show=False)]

    def __init__(self, conversation: Conversation, symptom: str | None = None, logs: list[str] | None = None) -> None:
        super().__init__()
        self.conversation = conversation
        self.symptom = symptom or ""
        self.logs = list(logs or [])
        self.busy = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="start"):
            yield Static("[b]What happened?[/b]", id="start-title")
            yield Static(
                "Describe the failure in your own words, paste log lines, or give the path of a log "
                "file. Enter starts.", id="start-hint",
            )
            yield PromptArea(self.symptom, id="what", placeholder="e.g. training on 2 nodes hangs at init_process_group")
            yield Static("Log files (optional, space-separated paths, directories or globs):", classes="hint")
            yield Input(" ".join(shlex.quote(p) for p in self.logs), id="log-paths", placeholder="rank0.log logs/")
            with Horizontal(classes="buttons"):
                yield Button("Start (Enter)", id="start-button", variant="primary", compact=True)
                yield Button("Help (?)", id="help-button", compact=True)
                yield Button("Quit (Ctrl+Q)", id="quit-button", compact=True)
            yield Static("", id="start-status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "what happened?"
        self.query_one("#what", PromptArea).focus()
        if self.symptom or self.logs:
            self.action_start()

    @on(PromptArea.Submitted)
    @on(Input.Submitted, "#log-paths")
    @on(Button.Pressed, "#start-button")
    def action_start(self) -> None:
        if self.busy:
            return
        text = self.query_one("#what", PromptArea).text
        raw = self.query_one("#log-paths", Input).value.strip()
        status = self.query_one("#start-status", Static)
        try:
            paths = [os.path.expanduser(p) for p in shlex.split(raw)] if raw else []
            expand(paths)  # an argument that names nothing is said at once, before any reading
        except (LogProblem, ValueError) as exc:
            status.update(f"[red]{exc}[/red]")
            return
        self.busy = True
        status.update("Reading…")
        self._load(text, paths)

    @on(Button.Pressed, "#help-button")
    def _help(self) -> None:
        self.app.action_help()

    @on(Button.Pressed, "#quit-button")
    def _quit(self) -> None:
        self.app.exit(0)

    @work(thread=True, exclusive=True, group="load")
    def _load(self, text: str, paths: list[str]) -> None:
        def progress(message: str) -> None:
            self.app.call_from_thread(self.query_one("#start-status", Static).update, message)

        try:
            notes = load_input(self.conversation, text, paths, progress)
        except (LogProblem, SessionError) as exc:
            self.app.call_from_thread(self._failed, str(exc))
            return
        self.app.call_from_thread(self._done, text, notes)

    def _failed(self, message: str) -> None:
        self.busy = False
        self.query_one("#start-status", Static).update(f"[red]{message}[/red]")

    def _done(self, text: str, notes: list[str]) -> None:
        from .conversation_screen import ConversationScreen

        said = text.strip()
        intro = []
        if said:
            first = said.splitlines()[0]
            more = len(said.splitlines()) - 1
            intro.append(f"You: {first[:200]}" + (f" (+{more} more lines)" if more else ""))
        self.app.switch_screen(ConversationScreen(self.conversation, intro + notes))
