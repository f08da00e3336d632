"""The nccl-doctor terminal UI: a conversation with an expert that ends in a fix plan.

``diagnose`` on a terminal (and ``diagnose tui``) calls :func:`run_tui`. The app is a thin view
over :class:`nccl_doctor.engine.Session`: it asks, shows and explains; the engine decides.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from textual.app import App
from textual.binding import Binding

from ..engine import Doctor
from .dialogs import HelpScreen
from .model import Conversation
from .start_screen import StartScreen

__all__ = ["DoctorApp", "run_tui"]


class DoctorApp(App[int]):
    """Screens: start ("what happened?") → conversation → plan; modals for help, why, how,
    changing answers, probes and export."""

    CSS_PATH = "app.tcss"
    TITLE = "nccl-doctor"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("question_mark,f1", "help", "Help"),
    ]

    def __init__(self, doctor: Doctor | None = None, *, symptom: str | None = None,
                 logs: Iterable[str] = (), export_dir: Path | None = None) -> None:
        super().__init__()
        if doctor is None:
            from .. import load_doctor

            doctor = load_doctor()
        self.conversation = Conversation(doctor)
        self.symptom = symptom
        self.logs = list(logs)
        self.export_dir = export_dir

    def on_mount(self) -> None:
        self.push_screen(StartScreen(self.conversation, self.symptom, self.logs))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_quit(self) -> None:
        self.exit(0)


def run_tui(symptom: str | None = None, logs: Iterable[str] = ()) -> int:
    """Open the TUI (optionally starting from a description and log files); the exit code."""
    from .. import load_doctor
    from ..kb import KBError

    try:
        doctor = load_doctor()
    except KBError as exc:
        print(f"nccl-doctor: the knowledge base cannot be loaded:\n{exc}", file=sys.stderr)
        return 2
    app = DoctorApp(doctor, symptom=symptom, logs=list(logs))
    result = app.run()
    return int(result or 0) if app.return_code in (None, 0) else int(app.return_code)


if __name__ == "__main__":
    raise SystemExit(run_tui())
