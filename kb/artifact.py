"""The compiled knowledge base: one plain JSON artifact that a start reads without YAML or pydantic.

:func:`build_artifact` turns the validated, merged KB (the pydantic models of :mod:`kb.schema`,
the format's one definition) into JSON-ready data: every item with every field, defaults filled
in, plus what a start would otherwise recompute — the text index behind relevance evidence and
the literal needles of every symptom pattern. :func:`read_artifact` reads it back as
:class:`Record` trees: read-only dicts whose keys read as attributes (``rule.when.all``), so the
engine needs no second description of the format.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from . import schema

__all__ = ["Record", "KnowledgeBase", "ARTIFACT_FORMAT", "ARTIFACT_VERSION", "build_artifact", "read_artifact",
           "runtime", "ArtifactError"]

ARTIFACT_FORMAT = "nccl-doctor-kb"
ARTIFACT_VERSION = 2


class ArtifactError(ValueError):
    """An artifact that is not ours, or of another version (rebuilt, never shown to users)."""


_DICT_NAMES = frozenset(dir(dict))


class Record(dict):
    """One KB item (or a map of items) as plain data: fields read as attributes; read-only.

    The instance's attribute dictionary is the record itself, so ``rule.when`` is a plain
    C-level lookup (a start reads tens of thousands of fields). A map whose keys could hide a
    dict method (a BM25 document of terms, env variables: ``items``, ``keys``) keeps its methods
    and is read by key only. The class itself is the JSON object hook: no Python call per
    object beyond this constructor (a start builds about 12,000 of them).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        dict.__init__(self, *args, **kwargs)
        if _DICT_NAMES.isdisjoint(self):
            object.__setattr__(self, "__dict__", self)

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("the knowledge base is read-only")

    __setattr__ = __delattr__ = __setitem__ = __delitem__ = _read_only  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = __ior__ = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return (type(self), (dict(self),))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"


class KnowledgeBase(Record):
    """The merged KB: ``facts``, ``symptoms``, ``signatures``, ``rules``, ``causes``, ``fixes``,
    ``incidents`` (each a map of id to item) and ``origins`` (id to ``file:line``)."""

    def origin(self, item_id: str) -> str:
        """Where an item is defined, as ``file:line`` (or ``?``)."""
        return self["origins"].get(item_id, "?")


def runtime(data: dict[str, Any]) -> KnowledgeBase:
    """Plain (JSON-shaped) KB data as a :class:`KnowledgeBase` of :class:`Record` items."""
    return KnowledgeBase(json.loads(json.dumps(data), object_hook=Record))


def build_artifact(kb: "schema.KnowledgeBase", *, key: str, examples: bool = False) -> dict[str, Any]:
    """The JSON-ready artifact of a validated KB; without ``examples`` the items' examples are
    dropped (a diagnosis needs none; lint and the example tests keep them)."""
    from .needles import needles

    data = kb.model_dump(mode="json")
    if not examples:
        empty = {"fires": [], "silent": []}
        for section in ("rules", "symptoms", "signatures"):
            for item in data[section].values():
                item["examples"] = empty
    return {
        "format": ARTIFACT_FORMAT,
        "version": ARTIFACT_VERSION,
        "key": key,
        "kb": data,
        "symptom_needles": {
            sym_id: [needles(p) for p in sym["patterns"]] for sym_id, sym in data["symptoms"].items()
        },
    }


def read_artifact(text: str | bytes, *, key: str | None = None) -> tuple[KnowledgeBase, dict[str, Any]]:
    """The KB and the artifact's other parts (needles, relevance index) from its JSON text.

    Raises :class:`ArtifactError` when the text is not an artifact of this version (or of
    another ``key``), so the caller rebuilds it.
    """
    try:
        data = json.loads(text, object_hook=Record)
    except (TypeError, ValueError) as exc:
        raise ArtifactError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != ARTIFACT_FORMAT:
        raise ArtifactError("not a knowledge-base artifact")
    if data.get("version") != ARTIFACT_VERSION:
        raise ArtifactError(f"artifact version {data.get('version')!r}, this build reads {ARTIFACT_VERSION}")
    if key is not None and data.get("key") != key:
        raise ArtifactError("artifact of other KB files")
    kb = data.get("kb")
    if not isinstance(kb, dict) or not all(isinstance(kb.get(s), dict) for s in
                                           ("facts", "symptoms", "signatures", "rules", "causes", "fixes")):
        raise ArtifactError("artifact without a KB")
    return KnowledgeBase(kb), {k: v for k, v in data.items() if k != "kb"}
