"""The Doctor: one compiled knowledge base, shared by every session, thread and front end."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..kb.artifact import KnowledgeBase
from .compiled import CompiledKB, compile_kb
from .consult_model import ConsultModel
from .matching import prepare as prepare_matching
from .questions import answer_options
from .relevance import RelevanceIndex
from .similarity import IncidentIndex
from .values import Value

if TYPE_CHECKING:
    from .session import Session

__all__ = ["Doctor"]


class Doctor:
    """A compiled knowledge base; share one between threads and sessions.

    What a Doctor holds never changes after construction, except caches filled on first use
    (compiled rule conditions and regexes, KB items parsed from the cache file, the relevance
    and incident indexes, the consultation model): each is computed from the read-only KB
    alone, so concurrent first uses at worst compute an equal value twice. ``extras`` are the
    KB artifact's start-up parts (symptom needles, the rule layout, the relevance index, the
    incidents' similarity index, the consultation model's statistics).
    """

    def __init__(self, kb: KnowledgeBase, *, validate: bool = False, extras: Mapping[str, Any] | None = None):
        extras = extras or {}
        self._ckb = compile_kb(kb, validate=validate, symptom_needles=extras.get("symptom_needles"),
                               layout=extras.get("layout"))
        saved_options = extras.get("options")
        self._options = {k: list(v) for k, v in saved_options.items()} if saved_options is not None else answer_options(self._ckb)
        self._consult: ConsultModel | None = None
        self._consult_saved = extras.get("consult")
        saved = extras.get("relevance")
        self._relevance: RelevanceIndex | None = RelevanceIndex(state=saved) if saved else None
        saved = extras.get("library_relevance")
        self._library_relevance: RelevanceIndex | None = RelevanceIndex(state=saved) if saved else None
        self._incidents_state: Mapping[str, Any] | None = extras.get("similarity")
        self._incidents: IncidentIndex | None = None

    @property
    def relevance(self) -> RelevanceIndex:
        """The KB's text index for relevance evidence (built on first use when the artifact had none)."""
        if self._relevance is None:
            self._relevance = RelevanceIndex(self._ckb.kb)
        return self._relevance

    @property
    def library_relevance(self) -> RelevanceIndex:
        """The text index of the library's incidents' words per cause (built on first use when
        the artifact had none)."""
        if self._library_relevance is None:
            self._library_relevance = RelevanceIndex(self._ckb.kb, library=True)
        return self._library_relevance

    @property
    def consult_model(self) -> ConsultModel:
        """What question ranking needs from the KB (built on first use)."""
        if self._consult is None:
            self._consult = ConsultModel(self._ckb, self._options, self._consult_saved)
        return self._consult

    @property
    def incidents(self) -> IncidentIndex:
        """The incident library's profiles for case-based evidence: read from the artifact on first
        use, or computed when it had none (each incident's description read like a session's)."""
        if self._incidents is None:
            library = self.kb.get("incidents", {})
            if self._incidents_state is not None:
                self._incidents = IncidentIndex.from_state(self._incidents_state, library)
            else:
                from .session import incident_profile

                self._incidents = IncidentIndex({i: incident_profile(self, i) for i in library}, library)
        return self._incidents

    def prepare(self) -> None:
        """Do now what is otherwise done on first use (see the class docstring): compile every
        regex and condition, read every KB item and build the indexes. For a long-running
        process that serves many sessions; a one-shot run is faster without it."""
        self._ckb.prepare()
        prepare_matching(self._ckb)
        kb = self.kb
        for section in ("facts", "causes", "rules", "fixes", "symptoms", "signatures"):
            items = kb.get(section, {})
            for key in items:
                items[key]
        _ = self.relevance, self.library_relevance, self.consult_model
        self.incidents.prepare()

    @property
    def kb(self) -> KnowledgeBase:
        return self._ckb.kb

    @property
    def compiled(self) -> CompiledKB:
        return self._ckb

    @property
    def answer_options(self) -> Mapping[str, list[Value]]:
        return self._options

    def session(self, *, lang: str | None = None, leave_out: Iterable[str] = (), case_based: bool = True) -> "Session":
        """Start a new conversation (in ``lang``; by default the language the user writes; see
        :class:`Session` for the other options)."""
        from .session import Session

        return Session(self, lang=lang, leave_out=leave_out, case_based=case_based)
