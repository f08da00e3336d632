"""The compiled knowledge base: one plain artifact that a start reads without YAML or pydantic.

:func:`build_artifact` turns the validated, merged KB (the pydantic models of :mod:`kb.schema`,
the format's one definition) into JSON-ready data: every item with every field, defaults filled
in, plus what a start would otherwise recompute — the text index behind relevance evidence and
the literal needles of every symptom pattern. :func:`read_plain` reads that data back as
:class:`Record` trees: read-only dicts whose keys read as attributes (``rule.when.all``), so the
engine needs no second description of the format.

The cache file (:func:`write_artifact`, :func:`read_artifact`) holds the same data, laid out so
that a start reads only what it uses: a header line (format, version, key, payload length and
CRC-32), then the payload in :mod:`marshal` format, which holds plain data only (dicts, lists,
strings, numbers). The engine's start-up parts (layout, indexes) are plain data as they are;
the facts, symptoms and signatures, which every description is matched against, are one JSON
text per section; rules, causes, fixes and incidents, of which a one-shot touches a few, are one
JSON text per item (:class:`DeferredItems`), parsed when first read; the items' origins stay
marshal bytes until an explanation or an error message reads one (:class:`DeferredMap`). A file
that is not such an artifact, or whose checksum fails, raises :class:`ArtifactError` before
anything is parsed.
"""
from __future__ import annotations

import json
import marshal
import zlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from ..errors import KBError

if TYPE_CHECKING:  # pragma: no cover
    from . import schema

__all__ = ["Record", "KnowledgeBase", "DeferredItems", "DeferredMap", "ARTIFACT_FORMAT", "ARTIFACT_VERSION", "build_artifact",
           "read_plain", "write_artifact", "read_artifact", "runtime", "ArtifactError"]

ARTIFACT_FORMAT = "nccl-doctor-kb"
ARTIFACT_VERSION = 4
#: The sections every description is matched against: parsed when the artifact is read.
EAGER = ("facts", "symptoms", "signatures")
#: The sections a diagnosis reads a few items of: each item parsed when first read.
DEFERRED = ("rules", "causes", "fixes", "incidents", "versions")
_MAGIC = ARTIFACT_FORMAT.encode() + b"\n"
_VERSION = f"{ARTIFACT_VERSION}.{marshal.version}"  # the interpreter's marshal format too
_HEADER_MAX = 256


class ArtifactError(KBError, ValueError):
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
    ``incidents`` (each a map of id to item: a :class:`Record`, or :class:`DeferredItems` when
    read from the cache file) and ``origins`` (id to ``file:line``; a :class:`DeferredMap` when
    read from the cache file)."""

    def origin(self, item_id: str) -> str:
        """Where an item is defined, as ``file:line`` (or ``?``)."""
        return self["origins"].get(item_id, "?")


class DeferredItems(Mapping):
    """A KB section read from the cache file: item id to :class:`Record`, each item's JSON text
    parsed the first time the item is read (ids, ``in`` and ``len`` need no parsing).

    Read-only like a :class:`Record` section. Threads may read one concurrently: the first
    parsed copy of an item is kept and every reader gets that one.
    """

    __slots__ = ("_texts", "_items")

    def __init__(self, texts: Mapping[str, str]):
        self._texts = texts
        self._items: dict[str, Record] = {}

    def __getitem__(self, key: str) -> Record:
        try:
            return self._items[key]
        except KeyError:
            item = _decode(self._texts[key])
        return self._items.setdefault(key, item)

    def __contains__(self, key: object) -> bool:
        return key in self._texts

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def keys(self):  # type: ignore[override] - the ids, without parsing any item
        return self._texts.keys()

    def __reduce__(self) -> tuple:
        return (type(self), (dict(self._texts),))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} items)"


class DeferredMap(Mapping):
    """A plain map kept as :mod:`marshal` bytes until first read (the items' origins, which
    only explanations and error messages read), then a :class:`Record`."""

    __slots__ = ("_data", "_map")

    def __init__(self, data: bytes):
        self._data = data
        self._map: Record | None = None

    def _loaded(self) -> Record:
        if self._map is None:
            self._map = Record(marshal.loads(self._data))
        return self._map

    def __getitem__(self, key: str) -> Any:
        return self._loaded()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._loaded()

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())

    def __reduce__(self) -> tuple:
        return (type(self), (self._data,))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} items)"


_decode = json.JSONDecoder(object_hook=Record).decode


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
        for table in data["versions"].values():
            table["examples"] = empty
            for row in table["rows"]:
                row["examples"] = empty
    return {
        "format": ARTIFACT_FORMAT,
        "version": ARTIFACT_VERSION,
        "key": key,
        "kb": data,
        "symptom_needles": {
            sym_id: [needles(p) for p in sym["patterns"]] for sym_id, sym in data["symptoms"].items()
        },
    }


def read_plain(artifact: Mapping[str, Any]) -> tuple[KnowledgeBase, dict[str, Any]]:
    """The KB and the artifact's other parts from :func:`build_artifact`'s data (every item
    parsed now; the cache file's reader, :func:`read_artifact`, defers most of them)."""
    data = json.loads(json.dumps(artifact), object_hook=Record)
    return KnowledgeBase(data["kb"]), {k: v for k, v in data.items() if k not in ("format", "version", "key", "kb")}


def _text(value: Any) -> str:
    # ASCII with \u escapes: the Chinese texts would make the text a wide string, which parses
    # about a fifth slower
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def write_artifact(artifact: Mapping[str, Any]) -> bytes:
    """The cache file's bytes for :func:`build_artifact`'s data (with the engine's parts added)."""
    kb = artifact["kb"]
    # JSON-shaped parts as JSON would give them back (tuples as lists, Counters as dicts); the
    # engine's layout as it is (export_layout makes it plain data, tuples where the engine wants them)
    parts = json.loads(json.dumps({k: v for k, v in artifact.items() if k not in ("format", "version", "key", "kb", "layout")}))
    if "layout" in artifact:
        parts["layout"] = artifact["layout"]
    parts["kb"] = {
        **{name: _text(kb[name]) for name in EAGER},
        **{name: {item_id: _text(item) for item_id, item in kb[name].items()} for name in DEFERRED},
        "origins": marshal.dumps(dict(kb["origins"])),
    }
    payload = marshal.dumps(parts)
    header = f"{_VERSION} {artifact['key']} {len(payload)} {zlib.crc32(payload):08x}\n"
    return _MAGIC + header.encode("ascii") + payload


def read_artifact(data: bytes, *, key: str | None = None) -> tuple[KnowledgeBase, dict[str, Any]]:
    """The KB and the artifact's other parts (needles, layout, indexes) from a cache file's bytes.

    Raises :class:`ArtifactError`, saying why, when the bytes are not an artifact of this
    version (or of another ``key``), are damaged, or do not hold what an artifact holds; the
    caller then rebuilds it.
    """
    if not data.startswith(_MAGIC):
        raise ArtifactError("not a knowledge-base artifact")
    end = data.find(b"\n", len(_MAGIC), len(_MAGIC) + _HEADER_MAX)
    fields = data[len(_MAGIC):end].split() if end > 0 else []
    if len(fields) != 4:
        raise ArtifactError("not a knowledge-base artifact (no header)")
    version, file_key, length, crc = (f.decode("ascii", "replace") for f in fields)
    if version != _VERSION:
        raise ArtifactError(f"artifact version {version!r}, this build reads {_VERSION}")
    if key is not None and file_key != key:
        raise ArtifactError("artifact of other KB files")
    payload = memoryview(data)[end + 1:]
    if str(len(payload)) != length or f"{zlib.crc32(payload):08x}" != crc:
        raise ArtifactError("damaged: its length or checksum does not match its header")
    try:
        parts = marshal.loads(payload)
    except (EOFError, ValueError, TypeError) as exc:
        raise ArtifactError(f"damaged: {exc}") from None
    kb = parts.get("kb") if isinstance(parts, dict) else None
    if not (isinstance(kb, dict) and all(isinstance(kb.get(s), str) for s in EAGER)
            and all(isinstance(kb.get(s), dict) for s in DEFERRED) and isinstance(kb.get("origins"), bytes)):
        raise ArtifactError("artifact without a KB")
    try:
        sections: dict[str, Any] = {name: _decode(kb[name]) for name in EAGER}
    except ValueError as exc:
        raise ArtifactError(f"damaged: {exc}") from None
    if not all(isinstance(section, dict) for section in sections.values()):
        raise ArtifactError("artifact without a KB")
    sections.update({name: DeferredItems(kb[name]) for name in DEFERRED})
    sections["origins"] = DeferredMap(kb["origins"])
    return KnowledgeBase(sections), {k: v for k, v in parts.items() if k != "kb"}
