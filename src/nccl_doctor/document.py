"""A report as a few kinds of blocks (named tuples: cheap to define at start-up), written out as Markdown here or drawn on a terminal by
:mod:`.terminal`: what a diagnosis or a plan shows is decided once (in :mod:`.report`), and
each output only decides how it looks.

Text inside blocks is a list of :class:`Span` (plain, bold, emphasis, code or a link whose text
is its address), or a plain string where no markup is needed.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

__all__ = ["Span", "Inline", "Heading", "Paragraph", "Quote", "ItemList", "Code", "Table", "Block",
           "bold", "em", "code", "link", "to_markdown", "plain_text", "map_text"]


class Span(NamedTuple):
    text: str
    style: str = ""  # "" | "bold" | "em" | "code" | "link" (the text is the address)


Inline = str | Sequence[Span]


def bold(text: str) -> Span:
    return Span(text, "bold")


def em(text: str) -> Span:
    return Span(text, "em")


def code(text: str) -> Span:
    return Span(text, "code")


def link(url: str) -> Span:
    return Span(url, "link")


class Heading(NamedTuple):
    level: int  # 1 is the document's title
    text: Inline


class Paragraph(NamedTuple):
    text: Inline
    role: str = ""  # a hint for the terminal: "" | "muted" | "good" | "bad"


class Quote(NamedTuple):
    text: Inline


class ItemList(NamedTuple):
    items: Sequence[Inline]
    numbered: bool = False
    depths: Sequence[int] = ()  # nesting of each item (all 0 when empty)


class Code(NamedTuple):
    lines: Sequence[str]


class Table(NamedTuple):
    header: Sequence[str]
    rows: Sequence[Sequence[Inline]]


Block = Heading | Paragraph | Quote | ItemList | Code | Table


# ------------------------------------------------------------------------------ Markdown
def _spans(text: Inline) -> Sequence[Span]:
    return [Span(text)] if isinstance(text, str) else text


def inline_markdown(text: Inline) -> str:
    marks = {"bold": ("**", "**"), "em": ("*", "*"), "code": ("`", "`"), "link": ("<", ">")}
    return "".join(f"{marks.get(s.style, ('', ''))[0]}{s.text}{marks.get(s.style, ('', ''))[1]}" if s.text else ""
                   for s in _spans(text))


def plain_text(text: Inline) -> str:
    return "".join(s.text for s in _spans(text))


def _fence(lines: Sequence[str]) -> str:
    body = "\n".join(lines)
    ticks = "```"
    while ticks in body:
        ticks += "`"
    return f"{ticks}\n{body}\n{ticks}"


def block_markdown(block: Block) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + inline_markdown(block.text)
    if isinstance(block, Paragraph):
        return inline_markdown(block.text)
    if isinstance(block, Quote):
        return "> " + inline_markdown(block.text)
    if isinstance(block, ItemList):
        depths = list(block.depths) or [0] * len(block.items)
        return "\n".join(f"{'  ' * depth}{f'{i}.' if block.numbered else '-'} {inline_markdown(item)}"
                         for i, (item, depth) in enumerate(zip(block.items, depths), start=1))
    if isinstance(block, Code):
        return _fence(block.lines)
    if isinstance(block, Table):
        rows = [f"| {' | '.join(block.header)} |", "|" + "---|" * len(block.header)]
        rows += [f"| {' | '.join(inline_markdown(cell) for cell in row)} |" for row in block.rows]
        return "\n".join(rows)
    raise TypeError(f"not a block: {block!r}")


def to_markdown(blocks: Iterable[Block]) -> str:
    """The blocks as Markdown, separated by blank lines."""
    return "\n\n".join(block_markdown(block) for block in blocks)


# ------------------------------------------------------------------------------ rewriting
def map_text(blocks: Iterable[Block], fn: Callable[[str], str]) -> list[Block]:
    """The blocks with ``fn`` applied to every piece of text (redaction, for one)."""

    def span(text: Inline) -> Inline:
        return fn(text) if isinstance(text, str) else [Span(fn(s.text), s.style) for s in text]

    out: list[Block] = []
    for block in blocks:
        if isinstance(block, (Heading, Paragraph, Quote)):
            out.append(block._replace(text=span(block.text)))
        elif isinstance(block, ItemList):
            out.append(ItemList([span(item) for item in block.items], block.numbered, block.depths))
        elif isinstance(block, Code):
            out.append(Code([fn(line) for line in block.lines]))
        elif isinstance(block, Table):
            out.append(Table([fn(h) for h in block.header], [[span(c) for c in row] for row in block.rows]))
    return out
