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
# Free-text machine names: a word such as node / gpu / worker in the name, ending in a number
# (gpu-node-07, worker-3, node01, dgx-a100-12); "gpu0" or "rank1" alone are not hosts.
_NAMED_HOST = re.compile(
    r"(?<![\w.-])((?=[a-z0-9-]*(?:node|gpu|worker|host|compute|master|dgx|hgx|server|srv|login|head))"
    r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?:-\d+|[a-z]\d{2,}))(?![\w-])"
)
_NOT_HOSTS = {"localhost", "ip", "rank", "node", "nodes", "host", "hosts", "none", "null", "true", "false"}


class Redactor:
    """Replaces host names, IP addresses and secrets with placeholders that stay stable across
    every string it redacts (so ``<host-1>`` is the same machine throughout a report).

    Host names and addresses are first *learned* from what the user gave (descriptions, log
    lines, fact values), then replaced wherever they appear; so the example addresses in the
    knowledge base's commands stay readable. Secrets are recognised by their shape everywhere.
    """

    def __init__(self, hosts: Iterable[str] = ()):
        self._names: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._hosts: set[str] = {h for h in hosts if h}
        self._ips: set[str] = set()

    def learn(self, text: str) -> None:
        """Collect host names and IP addresses from text the user gave."""
        for pattern in [_HOST_PREFIX, *_HOST_SETTINGS]:
            for match in pattern.finditer(text):
                self._add_host(match.group(1).rstrip("."))
        for match in _AWS_HOST.finditer(text):
            self._add_host(match.group(0))
        for match in _NAMED_HOST.finditer(text):
            self._add_host(match.group(1))
        for match in _FQDN.finditer(text):
            if _looks_like_host(match.group(1)):
                self._add_host(match.group(1))
        for match in _IPV4.finditer(text):
            value = match.group(1)
            if _is_ip(value) and value not in ("0.0.0.0", "127.0.0.1", "255.255.255.255"):
                self._ips.add(value)
        for match in _IPV6_CANDIDATE.finditer(text):
            value = match.group(1).rstrip(".")
            if value.endswith(":") and not value.endswith("::"):
                value = value[:-1]
            if ("::" in value or value.count(":") == 7) and _is_ip(value) and value not in ("::", "::1"):
                self._ips.add(value)

    learn_hosts = learn

    def _add_host(self, name: str) -> None:
        if (len(name) >= 3 and name.lower() not in _NOT_HOSTS and not _is_ip(name)
                and not re.fullmatch(r"[A-Z0-9_]*_[A-Z0-9_]*", name)):  # MASTER_PORT is not a host
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
        for host in sorted(self._hosts, key=len, reverse=True):
            text = re.sub(rf"(?<![\w<.-]){re.escape(host)}(?![\w>-]|\.\w)",
                          lambda m: self._placeholder("host", m.group(0)), text)
        for ip in sorted(self._ips, key=len, reverse=True):
            guard = r"(?<![\w.])"
            after = r"(?![\w:])" if ":" in ip else r"(?!\.?\d)"
            text = re.sub(guard + re.escape(ip) + after, lambda m: self._placeholder("ip", m.group(0)), text)
        return text

    def data(self, value: Any) -> Any:
        """Redact every string inside a JSON-like structure (keys included)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, Mapping):
            return {self(str(k)) if isinstance(k, str) else k: self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


_PRIVATE_SUFFIXES = {"internal", "local", "lan", "corp", "intra", "intranet", "cluster", "compute",
                     "localdomain", "home"}


def _looks_like_host(name: str) -> bool:
    """``train.py`` and dotted Python modules are not hosts: ask for a private-network suffix, or
    at least three labels with a digit in the first (node01.example.com)."""
    labels = name.split(".")
    if labels[-1].lower() in _PRIVATE_SUFFIXES:
        return True
    return len(labels) >= 3 and any(ch.isdigit() for ch in labels[0])


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
    redactor.learn(text)
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


def plan_markdown(plan: Plan, titles: Mapping[str, str] | None = None, *, heading: str = "##",
                  show_causes: bool = True) -> str:
    """The fix plan: numbered steps, commands and environment in code blocks."""
    titles = titles or {}
    out = [f"{heading} Fix plan"]
    if not plan.steps:
        out.append(plan.note or "Nothing to change yet.")
        return "\n\n".join(out)
    if plan.causes and show_causes:
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


def _learn_session(redactor: Redactor, session: Session) -> None:
    """Learn private names from what the user gave: descriptions, log lines, fact values."""
    for text in session.texts:
        redactor.learn(text)
    for log in session.logs:
        redactor.learn(log.name)
        for info in log.hits.values():
            redactor.learn(str(info.get("line", "")))
            redactor.learn(" ".join(str(v) for v in (info.get("captures") or {}).values()))
    for record in session.facts().values():
        if record.source.kind != "rule" and isinstance(record.value, str):
            redactor.learn(record.value)


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
        _learn_session(redactor, session)
        text = redactor(text)
        text += "\n*Host names, IP addresses and secrets were redacted.*\n"
    return text


def session_json(session: Session, *, redact: bool = False, indent: int | None = 2) -> str:
    """:meth:`Session.report` as JSON text (optionally redacted)."""
    data: Any = session.report()
    if redact:
        redactor = Redactor()
        _learn_session(redactor, session)
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
