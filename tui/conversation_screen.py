"""The conversation: the engine's questions one at a time, the leading causes beside them.

Every change to the session runs in a worker thread (:meth:`ConversationScreen.act`); the screen
draws the :class:`View` the worker hands back. While a worker runs, answers are ignored, so a
quick double press cannot answer the next question unseen.
"""
from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, RichLog, Static

from ..engine import Session, SessionError
from ..logs import LogProblem
from ..report import how_markdown, similar_markdown, why_markdown
from .answers import choice_label, read_answer
from .dialogs import AnswersScreen, ExplainScreen, ProbeScreen
from .model import Conversation, View
from .start_screen import load_input
from .widgets import MAX_CHOICE_KEYS, CausePanel, QuestionPanel, SimilarPanel, answer_label

__all__ = ["ConversationScreen"]


class ConversationScreen(Screen[None]):
    BINDINGS = [
        Binding("y", "answer('yes')", "Yes"),
        Binding("n", "answer('no')", "No"),
        *[Binding(str(i), f"answer('{i}')", f"Choice {i}", show=False) for i in range(1, MAX_CHOICE_KEYS + 1)],
        Binding("d", "answer('dk')", "Not sure"),
        Binding("w", "why", "Why?"),
        Binding("h", "how", "How?"),
        Binding("b", "back", "Back"),
        Binding("p", "probes", "Probes"),
        Binding("f", "plan", "Plan"),
        Binding("t", "type", "Type", show=False),
        Binding("c", "causes", "Causes", show=False),
        Binding("s", "similar", "Similar", show=False),
        Binding("escape", "focus_answers", "Answers", show=False),
    ]

    def __init__(self, conversation: Conversation, intro: list[str] | None = None) -> None:
        super().__init__()
        self.conversation = conversation
        self.intro = list(intro or [])
        self.view: View | None = None
        self.busy = False
        self.asked = 0
        self.guided = False  # the "not recognised" guidance is written once

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="conversation"):
            with Vertical(id="main"):
                yield RichLog(id="transcript", wrap=True, markup=False, min_width=20)
                yield Static("", id="probe-hint")
                yield QuestionPanel(id="question")
            with Vertical(id="side"):
                yield CausePanel(id="causes")
                yield SimilarPanel(id="similar")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "diagnosis"
        for line in self.intro:
            self.say(line)
        self.act(None)

    # ------------------------------------------------------------------ drawing
    def say(self, line: str, style: str = "") -> None:
        transcript = self.query_one("#transcript", RichLog)
        if line.startswith("You:"):
            style = style or "bold cyan"
        transcript.write(Text(line, style=style))

    def act(self, change: Callable | None, *, after: str = "", leaving: bool = False, locked: bool = True) -> None:
        """Apply ``change`` to the session in a worker thread, then redraw.

        ``change`` takes the session (called under the conversation's lock), or nothing when
        ``locked`` is False (it then takes the lock itself). A list of strings it returns is
        written to the transcript.
        """
        self.busy = True
        self._work(change, after, leaving, locked)

    @work(thread=True, exclusive=False, group="session")
    def _work(self, change: Callable | None, after: str, leaving: bool, locked: bool) -> None:
        notes: list[str] = []
        try:
            if change is not None:
                result = self.conversation.run(change) if locked else change()
                if isinstance(result, list) and all(isinstance(r, str) for r in result):
                    notes = result
            view = self.conversation.view(notes)
        except (SessionError, LogProblem) as exc:
            self.app.call_from_thread(self._failed, str(exc))
            return
        self.app.call_from_thread(self.show, view, after, leaving)

    def _failed(self, message: str) -> None:
        self.busy = False
        self.say(f"! {message}", "bold red")

    def show(self, view: View, after: str = "", leaving: bool = False) -> None:
        had_question = self.view is not None and self.view.question is not None
        self.view = view
        self.busy = False
        for note in view.notes:
            self.say(note, "dim")
        if after:
            self.say(after, "dim")
        self.query_one("#causes", CausePanel).show(view.diagnoses, view.lang)
        if not view.recognised and view.told and not self.guided:
            self.guided = True
            self.say(view.guidance, "yellow")
            for item in view.collect:
                self.say(f"  - {item['text']}", "yellow")
                self.say(f"      $ {item['command']}", "dim")
        titles = {c: cause.title for c, cause in self.conversation.doctor.kb.causes.items()}
        self.query_one("#similar", SimilarPanel).show(view.similar, titles)
        question = view.question
        current = None
        if question is not None and view.revisiting:
            if question.id in view.answers:
                current = answer_label(view.answers[question.id])
            elif question.id in view.unknown:
                current = "don't know"
        if question is not None and not view.revisiting:
            self.asked += 1
        counter = "Changing an answer" if view.revisiting else f"Question {self.asked}"
        panel = self.query_one("#question", QuestionPanel)
        panel.show(question, current=current, counter=counter, lang=view.lang)
        hint = self.query_one("#probe-hint", Static)
        if view.probes and question is not None:
            names = ", ".join(p["probe"] for p in view.probes)
            hint.update(Text.assemble(("p", "bold"), f" runs probes that can check this for you: {names}"))
            hint.display = True
        else:
            hint.display = False
        self.refresh_bindings()
        if not isinstance(self.focused, Input):
            panel.focus_answers()
        if question is None and had_question and not leaving:
            self.action_plan()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        question = self.view.question if self.view else None
        if action == "answer":
            key = str(parameters[0]) if parameters else ""
            if question is None:
                return False
            if key in ("yes", "no"):
                return question.type == "bool"
            if key.isdigit():
                return question.type == "choice" and int(key) <= len(question.choices)
            return True
        if action in ("why",):
            return question is not None
        if action == "probes":
            return bool(self.view and self.view.probes)
        return True

    # ---------------------------------------------------------------- answering
    def action_answer(self, key: str) -> None:
        question = self.view.question if self.view else None
        if self.busy or question is None:
            return
        if key == "yes":
            self._answer(question.id, True)
        elif key == "no":
            self._answer(question.id, False)
        elif key == "dk":
            self._dont_know(question.id)
        elif key.isdigit() and question.type == "choice" and int(key) <= len(question.choices):
            self._answer(question.id, question.choices[int(key) - 1])

    def _asked(self) -> None:
        """Write the question on screen into the transcript, before the answer to it."""
        question = self.view.question if self.view else None
        if question is not None:
            self.say(f"Q: {question.text}", "bold")

    def _answer(self, fact_id: str, value: object) -> None:
        self._asked()
        self.say(f"You: {answer_label(value)}")  # type: ignore[arg-type]
        self.conversation.revisit = None
        self.act(lambda s: s.answer(fact_id, value))

    def _dont_know(self, fact_id: str) -> None:
        self._asked()
        self.say("You: don't know")
        self.conversation.revisit = None
        self.act(lambda s: s.dont_know(fact_id))

    @on(QuestionPanel.Answered)
    def _answered(self, event: QuestionPanel.Answered) -> None:
        question = self.view.question if self.view else None
        if self.busy:
            return
        if event.kind == "plan":
            self.action_plan()
        elif question is None and event.kind != "words":
            return
        elif event.kind == "answer" and question is not None:
            self._answer(question.id, event.value)
        elif event.kind == "dont_know" and question is not None:
            self._dont_know(question.id)
        elif event.kind == "words":
            self._words(str(event.value))

    def _words(self, words: str) -> None:
        """The user's own words: an answer when they name one, else more to tell the engine."""
        question = self.view.question if self.view else None
        if question is not None:
            self._asked()
            reading = read_answer(question, words)
            if reading.kind == "answer":
                shown = answer_label(reading.value)
                self.say(f"You: {words}" + (f"  (→ {shown})" if shown.lower() != words.lower() else ""))
                self.conversation.revisit = None
                value = reading.value
                self.act(lambda s: s.answer(question.id, value))
                return
            if reading.kind == "dont_know":
                self.say(f"You: {words}  (→ don't know)")
                self._dont_know_quiet(question.id)
                return
            if reading.kind == "ambiguous":
                self.say(f"You: {words}")
                options = " or ".join(choice_label(c) for c in reading.candidates)
                self.say(f"That fits more than one answer ({options}); pick one.", "yellow")
                return
        self.say(f"You: {words}")
        self._tell(words)

    def _dont_know_quiet(self, fact_id: str) -> None:
        self.conversation.revisit = None
        self.act(lambda s: s.dont_know(fact_id))

    def _tell(self, words: str) -> None:
        before = self.view.question.id if self.view and self.view.question else None
        conversation = self.conversation

        def change() -> list[str]:
            notes = load_input(conversation, words, [])  # takes the lock itself
            if before and conversation.run(lambda s: before not in s.facts() and before not in s.unknown):
                notes.append("(Taken as more detail; the question still stands.)")
            return notes

        self.act(change, locked=False)

    # --------------------------------------------------------------- the extras
    def action_type(self) -> None:
        self.query_one("#own-words", Input).focus()

    def action_focus_answers(self) -> None:
        self.query_one("#question", QuestionPanel).focus_answers(words=False)

    def action_causes(self) -> None:
        self.query_one("#cause-list").focus()

    def action_similar(self) -> None:
        if self.view and self.view.similar:
            self.query_one("#similar-list").focus()

    @on(SimilarPanel.Opened)
    def _similar_opened(self, event: SimilarPanel.Opened) -> None:
        found = [i for i in (self.view.similar if self.view else []) if i.id == event.incident_id]
        titles = {c: cause.title for c, cause in self.conversation.doctor.kb.causes.items()}
        self.app.push_screen(ExplainScreen(similar_markdown(found, titles), "A similar reported incident"))

    def action_why(self) -> None:
        question = self.view.question if self.view else None
        if question is None or self.busy:
            return
        self._explain(lambda s: why_markdown(s.why(question.id)), "Why are you asking?")

    def action_how(self) -> None:
        cause_id = self.query_one("#causes", CausePanel).selected_cause()
        if cause_id is None:
            self.notify("No cause is raised yet.")
            return
        self._show_how(cause_id)

    @on(CausePanel.HowAsked)
    def _how_asked(self, event: CausePanel.HowAsked) -> None:
        self._show_how(event.cause_id)

    def _show_how(self, cause_id: str) -> None:
        self._explain(lambda s: how_markdown(s.how(cause_id)), "How did you conclude that?")

    @work(thread=True, group="explain")
    def _explain(self, render: Callable[[Session], str], title: str) -> None:
        try:
            markdown = self.conversation.run(render)
        except SessionError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(self.app.push_screen, ExplainScreen(markdown, title))

    def action_back(self) -> None:
        if self.busy:
            return
        kb = self.conversation.doctor.kb

        def rows(session: Session) -> list[tuple[str, str, str, bool]]:
            out = []
            answers = session.answers()
            for fact_id, value in answers.items():
                out.append((fact_id, kb.facts[fact_id].question or fact_id, answer_label(value), True))
            for fact_id in session.unknown:
                out.append((fact_id, kb.facts[fact_id].question or fact_id, "don't know", True))
            for fact_id, record in sorted(session.facts().items()):
                fact = kb.facts.get(fact_id)
                if fact_id in answers or record.source.kind not in ("text", "log", "probe") or not fact or not fact.question:
                    continue
                out.append((fact_id, fact.question, f"{answer_label(record.value)}", False))
            return out

        self.app.push_screen(AnswersScreen(self.conversation.run(rows)), self._back_chosen)

    def _back_chosen(self, choice: tuple[str, str] | None) -> None:
        if not choice:
            return
        what, fact_id = choice
        if what == "retract":
            self.say(f"You took back your answer to: {self.conversation.question_for(fact_id).text}", "yellow")
            self.conversation.revisit = None
            self.act(lambda s: s.retract(fact_id))
        else:
            self.conversation.revisit = fact_id
            self.say(f"Changing your answer to: {self.conversation.question_for(fact_id).text}", "yellow")
            self.act(None, leaving=True)

    def action_probes(self) -> None:
        if self.busy or not self.view or not self.view.probes:
            return
        self.app.push_screen(ProbeScreen(self.conversation, self.view.probes), self._probes_done)

    def _probes_done(self, lines: list[str] | None) -> None:
        if lines:
            for line in lines:
                self.say(line, "magenta")
            self.act(None, leaving=True)

    def action_plan(self) -> None:
        if self.busy:
            return
        from .plan_screen import PlanScreen

        self.app.push_screen(PlanScreen(self.conversation))
