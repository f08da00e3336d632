"""A session as a report: Markdown to paste into an issue or a ticket, and JSON.

The Markdown holds the diagnoses with their evidence and its sources, the fix plan with the
commands in code blocks, the questions answered, and what the user said and which logs were
read. ``redact=True`` replaces host names, IP addresses (v4 and v6) and tokens or secrets with
stable placeholders (``<host-1>``, ``<ip-2>``, ``<secret>``), so the same host keeps the same
name throughout one report. JSON is :meth:`Session.report` (the CLI's ``--json`` body), redacted
the same way on request.

Front ends (the TUI, the CLI) call :func:`session_markdown`, :func:`session_json` or
:func:`save_report`; :func:`plan_markdown`, :func:`how_markdown` and :func:`why_markdown` render
the pieces on their own.
"""
from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .engine import Diagnosis, How, Plan, Session, Why

__all__ = [
    "Redactor",
    "redact",
    "plan_markdown",
    "how_markdown",
    "why_markdown",
    "diagnoses_markdown",
    "session_markdown",
    "session_json",
    "save_report",
    "format_value",
]

MAX_TEXT_IN_REPORT = 4_000

# ----------------------------------------------------------------------------- redaction

_SECRET_VALUE = r"""("[^"\n]*"|'[^'\n]*'|[^\s"',;]+)"""
_SECRET_PATTERNS = [
    # key=value / key: value where the key names a secret (keep the key, hide the value)
    re.compile(
        r"(?i)\b([A-Z0-9_.-]*(?:token|secret|passwd|password|api[_-]?key|access[_-]?key|"
        r"private[_-]?key|credential)[A-Z0-9_.-]*)(\s*[=:]\s*)" + _SECRET_VALUE
    ),
    re.compile(r"(?i)\b(authorization:\s*(?:bearer|basic|token)?\s*|bearer\s+)([A-Za-z0-9._~+/=-]{8,})"),
]
_SECRET_TOKENS = re.compile(
    r"\b(?:"
    r"hf_[A-Za-z0-9]{30,}"                       # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"                # AWS access key id
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"            # Slack
    r"|sk-[A-Za-z0-9_-]{20,}"                    # OpenAI-style keys
    r"|glpat-[A-Za-z0-9_-]{20,}"                 # GitLab
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWT
    r")"
)
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S)
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+(?::[^/\s@]*)?@")

_IPV4 = re.compile(r"(?<![\w.])((?:\d{1,3}\.){3}\d{1,3})(?![\w.]*\d)")
_IPV6_CANDIDATE = re.compile(r"(?<![\w.])([0-9A-Fa-f]*:[0-9A-Fa-f]*:[0-9A-Fa-f:.]*)(?![\w:])")

# Where logs name hosts: NCCL's "host:pid:tid [dev]" prefix, AWS "ip-10-0-0-1" names, FQDNs
# under common private suffixes, and launcher settings.
_HOST_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]:?\s*)*([A-Za-z][A-Za-z0-9_.-]{1,62}):\d+:\d+\s+\[\d+\]", re.M)
_AWS_HOST = re.compile(r"\bip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(?:\.[A-Za-z0-9-]+)*\b")
_FQDN = re.compile(
    r"\b((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"(?:internal|local|lan|corp|intra|intranet|cluster|compute|localdomain|home|"
    r"com|net|org|io|ai|cloud|edu|gov))\b"
)
_HOST_SETTINGS = [
    re.compile(r"(?i)\b(?:MASTER_ADDR|MASTER_HOST|HOSTNAME|HOST|NODE_NAME|SLURMD_NODENAME)\s*[=:]\s*[\"']?([A-Za-z][A-Za-z0-9_.-]{1,62})"),
    re.compile(r"(?i)--(?:master[_-]addr|rdzv[_-]endpoint|host(?:s|file)?)[= ]+[\"']?([A-Za-z][A-Za-z0-9_.-]{1,62})"),
    re.compile(r"(?i)\b(?:hostname|host name|node|on host|from host)\s*[=:]?\s*'?([A-Za-z][A-Za-z0-9-]*\d[A-Za-z0-9-]*)\b"),
]
_NOT_HOSTS = {"localhost", "ip", "rank", "node", "nodes", "host", "hosts", "none", "null", "true", "false"}


class Redactor:
    """Replaces host names, IP addresses and secrets with placeholders that stay stable across
    every string it redacts (so ``<host-1>`` is the same machine throughout a report)."""

    def __init__(self, hosts: Iterable[str] = ()):
        self._names: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._hosts: set[str] = {h for h in hosts if h}

    def learn_hosts(self, text: str) -> None:
        """Collect host names from the places logs and launch commands name them."""
        for pattern in [_HOST_PREFIX, *_HOST_SETTINGS]:
            for match in pattern.finditer(text):
                name = match.group(1).rstrip(".")
                if name.lower() not in _NOT_HOSTS and len(name) >= 3 and not _is_ip(name):
                    self._hosts.add(name)

    def _placeholder(self, kind: str, value: str) -> str:
        key = f"{kind}\0{value.lower()}"
        if key not in self._names:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            self._names[key] = f"<{kind}-{self._counts[kind]}>"
        return self._names[key]

    def __call__(self, text: str) -> str:
        text = _PRIVATE_KEY.sub("<private key>", text)
        text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + "<secret>@", text)
        for pattern in _SECRET_PATTERNS:
            text = pattern.sub(_hide_secret, text)
        text = _SECRET_TOKENS.sub("<secret>", text)
        text = _AWS_HOST.sub(lambda m: self._placeholder("host", m.group(0)), text)
        for host in sorted(self._hosts, key=len, reverse=True):
            text = re.sub(rf"(?<![\w<-]){re.escape(host)}(?![\w>-])", lambda m: self._placeholder("host", m.group(0)), text)
        text = _FQDN.sub(self._fqdn, text)
        text = _IPV6_CANDIDATE.sub(self._ipv6, text)
        text = _IPV4.sub(self._ipv4, text)
        return text

    def _fqdn(self, match: re.Match[str]) -> str:
        name = match.group(1)
        labels = name.split(".")
        # "train.py"-like names and dotted Python modules are not hosts: ask for a digit or a
        # private-network suffix, and at least three labels for public suffixes.
        private = labels[-1].lower() in {"internal", "local", "lan", "corp", "intra", "intranet", "cluster",
                                         "compute", "localdomain", "home"}
        if private or (len(labels) >= 3 and any(ch.isdigit() for ch in labels[0])):
            return self._placeholder("host", name)
        return name

    def _ipv4(self, match: re.Match[str]) -> str:
        value = match.group(1)
        if not _is_ip(value):
            return value
        if value in ("0.0.0.0", "127.0.0.1", "255.255.255.255"):
            return value
        return self._placeholder("ip", value)

    def _ipv6(self, match: re.Match[str]) -> str:
        value = match.group(1)
        tail = ""
        while value.endswith((".", ":")) and not value.endswith("::"):
            value, tail = value[:-1], value[-1] + tail
        if "::" not in value and value.count(":") != 7:
            return value + tail  # times (12:34:56) and "host:pid:tid" prefixes are not addresses
        if not _is_ip(value) or value in ("::", "::1"):
            return value + tail
        return self._placeholder("ip", value) + tail

    def data(self, value: Any) -> Any:
        """Redact every string inside a JSON-like structure (keys included)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, Mapping):
            return {self(str(k)) if isinstance(k, str) else k: self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


def _hide_secret(match: re.Match[str]) -> str:
    if match.lastindex == 3:
        value = match.group(3).strip("\"'")
        if value.lower() in ("true", "false", "none", "null", "") or value.isdigit():
            return match.group(0)  # TOKENIZERS_PARALLELISM=false is not a secret
        return match.group(1) + match.group(2) + "<secret>"
    return match.group(1) + "<secret>"


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def redact(text: str, *, hosts: Iterable[str] = ()) -> str:
    """``text`` with host names, IP addresses and secrets replaced by placeholders."""
    redactor = Redactor(hosts)
    redactor.learn_hosts(text)
    return redactor(text)


# ------------------------------------------------------------------------------ Markdown

def format_value(value: Any) -> str:
    """A fact value as a person reads it."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return str(value)


def _fence(lines: Iterable[str], info: str = "") -> str:
    body = "\n".join(lines)
    ticks = "```"
    while ticks in body:
        ticks += "`"
    return f"{ticks}{info}\n{body}\n{ticks}"


def _bullets(items: Iterable[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def _percent(value: float) -> str:
    return f"{round(max(value, 0.0) * 100)}%"


def plan_markdown(plan: Plan, titles: Mapping[str, str] | None = None, *, heading: str = "##") -> str:
    """The fix plan: numbered steps, commands and environment in code blocks."""
    titles = titles or {}
    out = [f"{heading} Fix plan"]
    if not plan.steps:
        out.append(plan.note or "Nothing to change yet.")
        return "\n\n".join(out)
    if plan.causes:
        out.append("For: " + ", ".join(f"**{titles.get(c, c)}**" for c in plan.causes))
    if plan.note:
        out.append(f"> {plan.note}")
    kinds = {"check": "Check", "change": "Change", "workaround": "Workaround"}
    for step in plan.steps:
        part = [f"{heading}# {step.number}. {kinds.get(step.kind, step.kind.title())}: {step.title}"]
        if len(plan.causes) > 1:
            part.append("*For " + ", ".join(titles.get(c, c) for c in step.for_causes) + ".*")
        part.append("\n".join(f"{i}. {s}" for i, s in enumerate(step.steps, start=1)))
        if step.commands:
            part.append(_fence(step.commands))
        if step.env:
            part.append("Environment:\n\n" + _fence(f"export {k}={v}" for k, v in step.env.items()))
        if step.verify:
            part.append("**Verify:**\n\n" + _bullets(step.verify))
        if step.caveats:
            part.append("**Caveats:**\n\n" + _bullets(step.caveats))
        if step.if_not_fixed:
            part.append("**If this does not fix it:**\n\n" + _bullets(step.if_not_fixed))
        out.append("\n\n".join(part))
    return "\n\n".join(out)


def _evidence_line(item: Any) -> str:
    sign = "+" if item.strength > 0 else "−"
    facts = ", ".join(
        f"`{name}` = {format_value(info['value'])} ({info['source']})" for name, info in item.facts.items()
    )
    text = item.description or item.rule
    return f"{sign}{abs(item.strength):.2f} {text}" + (f" — {facts}" if facts else "")


def diagnoses_markdown(diagnoses: list[Diagnosis], *, heading: str = "##") -> str:
    """The ranked causes, each with its explanation and the evidence with sources."""
    out = [f"{heading} Diagnoses"]
    if not diagnoses:
        out.append("No cause is raised yet.")
    for rank, diagnosis in enumerate(diagnoses, start=1):
        part = [f"{heading}# {rank}. {diagnosis.title} ({_percent(diagnosis.confidence)})",
                f"`{diagnosis.id}` · {diagnosis.area}", diagnosis.explanation.strip()]
        if diagnosis.evidence:
            part.append("**Evidence:**\n\n" + _bullets(_evidence_line(e) for e in diagnosis.evidence))
        if diagnosis.references:
            part.append("**References:** " + ", ".join(diagnosis.references))
        out.append("\n\n".join(part))
    return "\n\n".join(out)


def _how_facts(steps: list[dict[str, Any]], depth: int = 0) -> list[str]:
    lines = []
    for step in steps:
        derived = f", derived by rule `{step['derived_by']}`" if step.get("derived_by") else ""
        lines.append(f"{'  ' * depth}- `{step['fact']}` = {format_value(step['value'])} "
                     f"(from {step['source']}{derived})")
        lines.extend(_how_facts(step.get("from_facts", []), depth + 1))
    return lines


def how_markdown(how: How) -> str:
    """How a cause was weighed: each rule, its contribution, the facts and their sources."""
    out = [f"## How I concluded: {how.title}", f"Confidence now: **{_percent(how.confidence)}**"]
    if not how.rules:
        out.append("No rule has weighed on this cause yet.")
    for rule in how.rules:
        sign = "for" if rule["contribution"] > 0 else "against"
        head = f"**{rule['description'] or rule['rule']}** — {abs(rule['contribution']):.2f} {sign}"
        facts = "\n".join(_how_facts(rule["facts"]))
        out.append(head + f"  \n*rule `{rule['rule']}` ({rule['defined_at']})*" + (f"\n\n{facts}" if facts else ""))
    return "\n\n".join(out)


def why_markdown(why: Why) -> str:
    """Why a question is asked: the causes each answer would move, now and after."""
    out = [f"## Why I am asking", f"*{why.text}*"]
    if not why.causes:
        out.append("No leading cause depends on this answer any more.")
        return "\n\n".join(out)
    out.append("The answer separates these causes (confidence now, and after each answer):")
    answers = list(why.causes[0]["by_answer"])
    header = "| Cause | now | " + " | ".join(f"if {a if a not in ('True', 'False') else format_value(a == 'True')}"
                                            for a in answers) + " |"
    rule = "|---|---|" + "---|" * len(answers)
    rows = [
        f"| {c['title']} | {_percent(c['now'])} | " + " | ".join(_percent(c["by_answer"].get(a, 0.0)) for a in answers) + " |"
        for c in why.causes
    ]
    out.append("\n".join([header, rule, *rows]))
    return "\n\n".join(out)


def _answers_markdown(session: Session) -> str:
    kb = session.doctor.kb
    lines = []
    for fact_id, value in session.answers().items():
        fact = kb.facts.get(fact_id)
        question = fact.question if fact and fact.question else fact_id
        lines.append(f"- {question} **{format_value(value)}**")
    for fact_id in session.unknown:
        fact = kb.facts.get(fact_id)
        question = fact.question if fact and fact.question else fact_id
        lines.append(f"- {question} **don't know**")
    return "\n".join(lines)


def _given_markdown(session: Session) -> str:
    parts = []
    for text in session.texts:
        shown = text if len(text) <= MAX_TEXT_IN_REPORT else text[:MAX_TEXT_IN_REPORT] + "\n[...]"
        if "\n" in shown.strip():
            parts.append(_fence(shown.rstrip("\n").splitlines()))
        else:
            parts.append("> " + shown.strip())
    for log in session.logs:
        hits = "; ".join(f"`{sig}` ×{info['count']} (first at {info['first']})" for sig, info in log.hits.items())
        parts.append(f"- log `{log.name}`: {log.lines:,} lines" + (f"; recognised {hits}" if hits else "; nothing recognised"))
    return "\n\n".join(parts)


def session_markdown(session: Session, *, redact: bool = False, title: str = "nccl-doctor report") -> str:
    """The whole session as one Markdown document (optionally redacted)."""
    diagnoses = session.diagnoses()
    titles = {d.id: d.title for d in diagnoses}
    parts = [f"# {title}"]
    top = diagnoses[0] if diagnoses else None
    if top is not None:
        parts.append(f"**Most likely:** {top.title} ({_percent(top.confidence)})")
    parts.append(plan_markdown(session.plan(), titles))
    parts.append(diagnoses_markdown(diagnoses))
    answers = _answers_markdown(session)
    if answers:
        parts.append("## Answers\n\n" + answers)
    given = _given_markdown(session)
    if given:
        parts.append("## What was reported\n\n" + given)
    facts = session.facts()
    if facts:
        rows = [f"| `{name}` | {format_value(r.value)} | {r.source} |" for name, r in sorted(facts.items())]
        parts.append("## Facts\n\n| Fact | Value | Source |\n|---|---|---|\n" + "\n".join(rows))
    text = "\n\n".join(parts) + "\n"
    if redact:
        redactor = Redactor()
        for given_text in session.texts:
            redactor.learn_hosts(given_text)
        redactor.learn_hosts(text)
        text = redactor(text)
        text += "\n*Host names, IP addresses and secrets were redacted.*\n"
    return text


def session_json(session: Session, *, redact: bool = False, indent: int | None = 2) -> str:
    """:meth:`Session.report` as JSON text (optionally redacted)."""
    data: Any = session.report()
    if redact:
        redactor = Redactor()
        for given_text in session.texts:
            redactor.learn_hosts(given_text)
        redactor.learn_hosts(json.dumps(data, ensure_ascii=False))
        data = redactor.data(data)
        data["redacted"] = True
    return json.dumps(data, ensure_ascii=False, indent=indent, sort_keys=False) + "\n"


def save_report(session: Session, path: str | Path, *, redact: bool = False) -> Path:
    """Write the report to ``path``: JSON when it ends in ``.json``, Markdown otherwise."""
    target = Path(path).expanduser()
    body = session_json(session, redact=redact) if target.suffix.lower() == ".json" else session_markdown(session, redact=redact)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return target
