"""The end of the conversation: the fix plan as Markdown, with export and copy."""
from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Markdown

from ..engine import Session
from ..engine.language import phrase
from ..report import format_value, plan_markdown
from .dialogs import ExportScreen
from .model import Conversation

__all__ = ["PlanScreen", "plan_page"]

REPORT_MD = "nccl-doctor-report.md"
REPORT_JSON = "nccl-doctor-report.json"


def plan_page(session: Session) -> str:
    """The plan screen's Markdown: the leading causes in one line each, then the plan."""
    diagnoses = session.diagnoses()
    plan = session.plan()
    titles = {d.id: d.title for d in diagnoses}
    parts = []
    supported = [d for d in diagnoses if d.supported]
    related = [d for d in diagnoses if not d.supported]
    if supported:
        lines = [f"{i}. **{d.title}** — {round(max(d.confidence, 0) * 100)}%"
                 for i, d in enumerate(supported[:4], start=1)]
        parts.append("## " + ("最可能的原因" if plan.lang == "zh" else "Most likely") + "\n\n" + "\n".join(lines))
    if related:
        lines = [f"- {d.title} — {round(max(d.confidence, 0) * 100)}%" for d in related[:3]]
        parts.append(f"## {phrase('possibly_related', plan.lang)}\n\n" + "\n".join(lines))
    parts.append(plan_markdown(plan, titles, show_causes=False))
    answers = session.answers()
    if answers or session.unknown:
        kb = session.doctor.kb
        rows = [f"- {kb.facts[f].question or f} **{format_value(v)}**" for f, v in answers.items()]
        rows += [f"- {kb.facts[f].question or f} **don't know**" for f in session.unknown]
        parts.append("## Your answers\n\n" + "\n".join(rows))
    return "\n\n".join(parts)


def plan_commands(session: Session) -> str:
    """Every command and environment setting of the plan, as one block of shell text."""
    lines = []
    for step in session.plan().steps:
        if step.commands or step.env:
            lines.append(f"# {step.number}. {step.title}")
            lines.extend(step.commands)
            lines.extend(f"export {k}={v}" for k, v in step.env.items())
    return "\n".join(lines)


class PlanScreen(Screen[None]):
    BINDINGS = [
        Binding("escape,b", "back", "Back to questions"),
        Binding("e", "export('md')", "Export .md"),
        Binding("j", "export('json')", "Export .json"),
        Binding("k", "copy", "Copy commands"),
        Binding("h", "how", "How?", show=False),
    ]

    def __init__(self, conversation: Conversation, directory: Path | None = None) -> None:
        super().__init__()
        self.conversation = conversation
        self.directory = directory

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="plan-scroll"):
            yield Markdown("Building the plan…", id="plan")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "fix plan"
        self.query_one("#plan-scroll").focus()
        self._build()

    @work(thread=True, exclusive=True, group="plan")
    def _build(self) -> None:
        markdown = self.conversation.run(plan_page)
        self.app.call_from_thread(self.query_one("#plan", Markdown).update, markdown)

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_how(self) -> None:
        self.app.pop_screen()
        self.app.screen.run_action("how")

    def _default(self, name: str) -> str:
        return str(self.directory / name) if self.directory else name

    def action_export(self, kind: str) -> None:
        path = self._default(REPORT_JSON if kind == "json" else REPORT_MD)
        self.app.push_screen(ExportScreen(self.conversation, path), self._exported)

    def _exported(self, saved: Path | None) -> None:
        if saved is not None:
            self.notify(f"Saved {saved}", title="Exported")

    def action_copy(self) -> None:
        commands = self.conversation.run(plan_commands)
        if not commands:
            self.notify("The plan has no commands to copy.")
            return
        self.app.copy_to_clipboard(commands)
        self.notify(f"Copied {len(commands.splitlines())} lines to the clipboard.")
