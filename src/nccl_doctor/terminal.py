"""Report blocks (:mod:`.document`) drawn on a terminal with rich.

Colour and wrapping only where the output is a terminal: piped or redirected output is plain
text with one line per paragraph and commands never broken, so it can be pasted and grepped.
rich is imported here only, by the one-shot's text output.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import IO

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table as RichTable
from rich.text import Text

from .document import Block, Code, Heading, Inline, ItemList, Paragraph, Quote, Span, Table

__all__ = ["print_blocks", "render"]

_STYLES = {"bold": "bold", "em": "italic", "code": "cyan"}
_ROLES = {"muted": "dim", "good": "green", "bad": "red"}


def _text(text: Inline, style: str = "") -> Text:
    spans = [Span(text)] if isinstance(text, str) else text
    out = Text(style=style)
    for span in spans:
        out.append(span.text, style=f"link {span.text}" if span.style == "link" else _STYLES.get(span.style, ""))
    return out


def _indented(renderable: RenderableType, left: int) -> RenderableType:
    return Padding(renderable, (0, 0, 0, left), expand=False) if left else renderable


def render(blocks: Iterable[Block]) -> list[RenderableType]:
    """rich renderables for the blocks; a heading opens a section whose body is indented one
    step further (a level-2 heading at the margin, its body and level-3 headings at 2, ...)."""
    out: list[RenderableType] = []
    indent = 0
    for block in blocks:
        if isinstance(block, Heading):
            if out and block.level <= 2:
                out.append(Text(""))
            style = "bold underline" if block.level <= 2 else "bold"
            out.append(_indented(_text(block.text, style), max(0, block.level - 2) * 2))
            indent = max(0, block.level - 1) * 2
        elif isinstance(block, Paragraph):
            out.append(_indented(_text(block.text, _ROLES.get(block.role, "")), indent))
        elif isinstance(block, Quote):
            out.append(_indented(_text(block.text, "italic"), indent))
        elif isinstance(block, ItemList):
            depths = list(block.depths) or [0] * len(block.items)
            for number, (item, depth) in enumerate(zip(block.items, depths), start=1):
                mark = f"{number}. " if block.numbered else "• "
                out.append(_indented(Text(mark) + _text(item), indent + 2 * depth))
        elif isinstance(block, Code):  # one line at a time: no padding after a short line
            out += [_indented(Text(line, style="cyan", no_wrap=True, overflow="ignore"), indent + 2)
                    for line in block.lines]
        elif isinstance(block, Table):
            table = RichTable(*block.header, box=None, pad_edge=False, show_edge=False)
            for row in block.rows:
                table.add_row(*(_text(cell) for cell in row))
            out.append(_indented(table, indent))
    return out


_UNWRAPPED = 1_000_000  # the width given to a pipe: a line is never wrapped or cut


def print_blocks(blocks: Iterable[Block], file: IO[str] | None = None) -> None:
    """Print the blocks: styled and wrapped on a terminal, plain unwrapped lines otherwise."""
    console = Console(file=file, highlight=False, emoji=False)
    if not console.is_terminal:
        console = Console(file=file, highlight=False, emoji=False, width=_UNWRAPPED)
    console.print(Group(*render(blocks)), soft_wrap=not console.is_terminal)
