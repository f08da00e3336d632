"""The conversation's widgets: the question with its quick answers, the causes panel and the
similar reported incidents.

Attributes down, messages up: the screen hands each widget what to show; the widgets post
:class:`QuestionPanel.Answered` / :class:`CausePanel` / :class:`SimilarPanel` selections back up.
"""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.message import Message
from textual import events
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from ..engine import Diagnosis, Question, SimilarIncident
from ..engine.values import Value
from ..report import format_value
from .answers import choice_label

__all__ = ["QuestionPanel", "CausePanel", "SimilarPanel", "WordsInput", "confidence_bar", "MAX_CHOICE_KEYS", "LABELS"]

#: The panel's own words, by language (questions and choices come translated from the KB).
LABELS = {
    "en": {"yes": "Yes (y)", "no": "No (n)", "dont_know": "Not sure (d)", "plan": "Show the fix plan (f)",
           "own_words": "…or answer in your own words (t)", "type_here": "Type the answer here and press Enter (t)",
           "paste_here": "Paste the lines here (several lines are fine) and press Enter (t)",
           "so_far": "Your answer so far: {}. ", "done": "Nothing more worth asking.",
           "done_help": "Press [b]f[/b] for the fix plan, [b]b[/b] to change an answer, or add more in your own words.",
           "related": "possibly related", "causes": "Leading causes", "none_yet": "None yet: answer a question or add a log."},
    "zh": {"yes": "是 (y)", "no": "否 (n)", "dont_know": "不确定 (d)", "plan": "查看修复方案 (f)",
           "own_words": "……或用自己的话回答 (t)", "type_here": "在这里输入答案后按回车 (t)",
           "paste_here": "把相关行粘贴到这里（可以多行），然后按回车 (t)",
           "so_far": "你之前的回答：{}。", "done": "没有更值得问的问题了。",
           "done_help": "按 [b]f[/b] 查看修复方案，按 [b]b[/b] 修改回答，或继续用自己的话补充。",
           "related": "可能相关", "causes": "可能的原因", "none_yet": "暂无：请回答问题或提供日志。"},
}


def labels(lang: str) -> dict[str, str]:
    return LABELS.get(lang, LABELS["en"])


class WordsInput(Input):
    """The own-words box: a paste of several lines (log lines for an evidence question) is taken
    whole, where a plain Input would keep only its first line."""

    class Pasted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def _on_paste(self, event: events.Paste) -> None:
        if "\n" in event.text.strip():
            event.stop()
            self.post_message(self.Pasted(event.text.strip()))
            return
        super()._on_paste(event)

MAX_CHOICE_KEYS = 9
BAR_WIDTH = 16
TITLE_CHARS = 52  # two lines of the side panel at 80 columns


def confidence_bar(confidence: float, width: int = BAR_WIDTH) -> Text:
    """``█████░░░░░  52%`` as styled text."""
    value = max(0.0, min(confidence, 1.0))
    filled = round(value * width)
    bar = Text()
    bar.append("█" * filled, style="bold green" if value >= 0.5 else "yellow" if value >= 0.25 else "dim yellow")
    bar.append("░" * (width - filled), style="dim")
    bar.append(f" {round(value * 100):3d}%")
    return bar


class QuestionPanel(Vertical):
    """One question, its quick answers as buttons, and a box for the user's own words."""

    class Answered(Message):
        """The user picked an answer (``kind`` is answer / dont_know / words / plan)."""

        def __init__(self, kind: str, value: Value | str | None = None) -> None:
            super().__init__()
            self.kind = kind
            self.value = value

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.question: Question | None = None
        self.lang = "en"
        self._shape: tuple | None = None  # the answer buttons on screen, to skip rebuilding them

    def compose(self) -> ComposeResult:
        yield Static("", id="question-text")
        yield Static("", id="question-help")
        yield Grid(id="answers")
        yield WordsInput(placeholder=LABELS["en"]["own_words"], id="own-words", compact=True)

    def show(self, question: Question | None, *, current: str | None = None, counter: str = "",
             lang: str = "en") -> None:
        """Draw ``question`` (None: nothing left to ask). ``current`` is the answer on record."""
        self.question = question
        words = labels(lang)
        text = self.query_one("#question-text", Static)
        help_ = self.query_one("#question-help", Static)
        grid = self.query_one("#answers", Grid)
        self.border_title = counter or "Question"
        shape = None if question is None else (question.type, tuple(question.choices), lang)
        rebuild = shape != self._shape or not grid.children
        self._shape = shape
        if rebuild:
            grid.remove_children()
        if question is None:
            self.border_title = "Done"
            text.update(words["done"])
            help_.update(words["done_help"])
            help_.display = True
            if rebuild:
                grid.mount(Button(words["plan"], name="ans-plan", variant="success", compact=True))
            return
        text.update(Text(question.text, style="bold"))
        extra = words["so_far"].format(current) if current else ""
        help_.update(Text(extra + (question.help or ""), style="italic"))
        help_.display = bool(extra or question.help)
        if not rebuild:
            return
        buttons: list[Button] = []
        if question.type == "bool":
            buttons += [Button(words["yes"], name="ans-yes", variant="primary", compact=True),
                        Button(words["no"], name="ans-no", variant="primary", compact=True)]
        elif question.type == "choice":
            for index, choice in enumerate(question.choices, start=1):
                key = f"{index} " if index <= MAX_CHOICE_KEYS else ""
                label = question.choice_labels.get(choice) or choice_label(choice)
                buttons.append(Button(f"{key}{label}", name=f"ans-choice-{index}", compact=True))
        buttons.append(Button(words["dont_know"], name="ans-dk", compact=True))
        longest = max(len(str(b.label)) for b in buttons)
        grid.styles.grid_size_columns = 3 if longest <= 13 else 2
        grid.mount_all(buttons)
        self.query_one("#own-words", Input).placeholder = (
            words["own_words"] if question.type in ("bool", "choice")
            else words["paste_here"] if question.kind == "evidence" else words["type_here"]
        )

    def focus_answers(self, *, words: bool = True) -> None:
        """Put the focus on the words box for a typed answer (``words``), else on the first quick
        answer - Escape uses that to leave the words box, so the keys work again."""
        buttons = self.query("#answers Button")
        if words and self.question is not None and self.question.type not in ("bool", "choice"):
            self.query_one("#own-words", Input).focus()
        elif buttons:
            buttons.first().focus()

    @on(Button.Pressed, "#answers Button")
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        button_id = event.button.name or ""
        question = self.question
        if button_id == "ans-plan":
            self.post_message(self.Answered("plan"))
        elif question is None:
            return
        elif button_id == "ans-yes":
            self.post_message(self.Answered("answer", True))
        elif button_id == "ans-no":
            self.post_message(self.Answered("answer", False))
        elif button_id == "ans-dk":
            self.post_message(self.Answered("dont_know"))
        elif button_id.startswith("ans-choice-"):
            index = int(button_id.rsplit("-", 1)[1]) - 1
            self.post_message(self.Answered("answer", question.choices[index]))

    @on(WordsInput.Pasted)
    def _pasted(self, event: WordsInput.Pasted) -> None:
        event.stop()
        self.post_message(self.Answered("words", event.text))

    @on(Input.Submitted, "#own-words")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        words = event.value.strip()
        if words:
            event.input.value = ""
            self.post_message(self.Answered("words", words))


class CausePanel(Vertical):
    """The leading causes, best first, each with a confidence bar; Enter asks how."""

    class HowAsked(Message):
        def __init__(self, cause_id: str) -> None:
            super().__init__()
            self.cause_id = cause_id

    def compose(self) -> ComposeResult:
        yield OptionList(id="cause-list")

    def on_mount(self) -> None:
        self.border_title = "Leading causes"

    def show(self, diagnoses: list[Diagnosis], lang: str = "en") -> None:
        words = labels(lang)
        self.border_title = words["causes"]
        options = self.query_one("#cause-list", OptionList)
        keep = options.highlighted_option.id if options.highlighted_option is not None else None
        ids = [d.id for d in diagnoses]
        prompts = []
        for diagnosis in diagnoses:
            title = diagnosis.title if len(diagnosis.title) <= TITLE_CHARS else diagnosis.title[:TITLE_CHARS - 1].rstrip() + "…"
            prompt = Text(title, style="" if diagnosis.supported else "dim italic")
            if not diagnosis.supported:
                prompt.append(f" ({words['related']})", style="dim")
            prompt.append("\n")
            prompt.append_text(confidence_bar(diagnosis.confidence))
            prompts.append(prompt)
        shown = [options.get_option_at_index(i).id for i in range(options.option_count)]
        if ids and shown == ids:  # same causes, same order: only the bars move
            for cause_id, prompt in zip(ids, prompts):
                options.replace_option_prompt(cause_id, prompt)
            return
        options.clear_options()
        if not diagnoses:
            options.add_option(Option(Text(words["none_yet"], style="dim"), disabled=True))
            return
        options.add_options([Option(p, id=i) for i, p in zip(ids, prompts)])
        options.highlighted = ids.index(keep) if keep in ids else 0

    def selected_cause(self) -> str | None:
        """The highlighted cause, or the top one."""
        options = self.query_one("#cause-list", OptionList)
        option = options.highlighted_option
        if option is not None and option.id:
            return option.id
        for index in range(options.option_count):
            found = options.get_option_at_index(index)
            if found.id:
                return found.id
        return None

    @on(OptionList.OptionSelected, "#cause-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(self.HowAsked(event.option.id))


class SimilarPanel(Vertical):
    """Reported incidents like this one: what happened (linked to the thread), its cause and
    how similar it is; Enter opens the details. Hidden while there are none."""

    class Opened(Message):
        def __init__(self, incident_id: str) -> None:
            super().__init__()
            self.incident_id = incident_id

    def compose(self) -> ComposeResult:
        yield OptionList(id="similar-list")

    def on_mount(self) -> None:
        self.border_title = "Similar incidents"
        self.display = False

    def show(self, similar: list[SimilarIncident], titles: dict[str, str] | None = None) -> None:
        """Draw the incidents (``titles``: cause id to title)."""
        options = self.query_one("#similar-list", OptionList)
        self.display = bool(similar)
        shown = [options.get_option_at_index(i).id for i in range(options.option_count)]
        if shown == [i.id for i in similar]:
            return
        options.clear_options()
        prompts = []
        for incident in similar:
            summary = incident.summary if len(incident.summary) <= TITLE_CHARS else incident.summary[:TITLE_CHARS - 1].rstrip() + "…"
            prompt = Text(summary, style=f"link {incident.source}")
            cause = (titles or {}).get(incident.cause, incident.cause)
            prompt.append(f"\n{round(incident.score * 100)}% alike · {cause}", style="dim")
            prompts.append(Option(prompt, id=incident.id))
        options.add_options(prompts)
        if prompts:
            options.highlighted = 0

    @on(OptionList.OptionSelected, "#similar-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(self.Opened(event.option.id))


def answer_label(value: Value | None) -> str:
    return "don't know" if value is None else choice_label(format_value(value))
