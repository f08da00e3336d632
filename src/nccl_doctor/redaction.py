"""Hiding what is private in a report: host names, addresses, user names and secrets.

A :class:`Redactor` works in two steps. It first *learns* private names from what the user gave
(descriptions, log lines, fact values, probe and hang reports): host names where the text says
they are hosts (an NCCL line prefix, ``MASTER_ADDR=``, ``ssh host``, "master on titan"), IP
addresses, SLURM node lists. It then replaces those names wherever they appear, with stable
placeholders (``<host-1>`` is the same machine throughout one report), and hides by their shape,
everywhere, what is private whatever its context: passwords, tokens and keys (``key=value``,
``"key": "value"``, ``--password X``, ``mysql -pX``, ``wandb login KEY``, well-known token
formats, private-key blocks, credentials in URLs), e-mail addresses, the user in home paths and
SLURM node lists. The knowledge base's own example addresses stay readable unless the user gave
the same ones.

Time is linear in the text: every pattern either starts only where a run of its characters
starts or has bounded repetition, and learned names are looked up per token in a dict, never
searched for one by one.
"""
from __future__ import annotations

import bisect
import functools
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["Redactor", "redact", "is_host_key", "session_redactor", "NOTE"]

NOTE = "*Host names, IP addresses, user names and secrets were redacted.*"

# ------------------------------------------------------------------------------- secrets
_BLOCK = re.compile(r"-----(BEGIN|END) [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_URL_CREDENTIALS = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,30}://)[^/\s:@]{1,256}(?::[^/\s@]{0,256})?@")
_AUTHORIZATION = re.compile(
    r"(?i)(?<![\w-])(authorization[\"']?\s{0,5}[:=]\s{0,5}[\"']?(?:(?:bearer|basic|token)\s{1,5})?|bearer\s{1,5})"
    r"([A-Za-z0-9._~+/=-]{8,4096})")
_SECRET_WORD = (r"(?:token|secret|passw(?:or)?d|pwd|passphrase|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
                r"|credentials?|auth[_-]?key|session[_-]?key)")
_QUOTED = r"\"(?:[^\"\\\n]|\\.){0,4096}\"?|'[^'\n]{0,4096}'?"
# key=value, key: value, "key": "value", 'key': 'value' (env files, YAML, JSON, Python dicts)
_KEY_VALUE = re.compile(
    r"(?i)(?<![A-Za-z0-9_.-])([\"']?)([A-Za-z0-9_.-]{0,40}?" + _SECRET_WORD + r"[A-Za-z0-9_.-]{0,40})\1"
    r"(\s{0,5}[=:]\s{0,5})(" + _QUOTED + r"|[^\s\"',;&)}\]]{1,4096})")
# --password X, --password=X, -token X (command lines)
_FLAG_VALUE = re.compile(
    r"(?i)(?<![\w-])(--?[A-Za-z0-9_-]{0,30}?" + _SECRET_WORD + r"[A-Za-z0-9_-]{0,30})(=|\s{1,5})"
    r"(" + _QUOTED + r"|[^\s\"';&|-][^\s\"';&|]{0,4095})")
_SECRET_KEY = re.compile(r"(?i)" + _SECRET_WORD)
_NOT_SECRET_KEYS = re.compile(r"(?i)tokeni[sz]|_?(?:file|path|dir|env|length|len|type|count|limit|size)$|^o?ldpwd$|^pwd$")
_NOT_SECRET_VALUES = re.compile(r"(?i)(?:true|false|none|null|yes|no|\*+|<[^<>]{0,40}>|\$\{?[A-Za-z_]\w{0,40}\}?|\d{1,12})")
# `mysql -pX` / `docker login -p X`: -p is a password only on these command lines
# (mysql takes the password glued, -pX: `mysql -p db` prompts and names a database)
_PASSWORD_COMMAND = re.compile(r"(?i)(?<![\w-])(?:(mysql\w{0,10}|mariadb\w{0,10})|(?:docker|podman|helm)\s{1,5}login)(?![\w-])")
_SHORT_P = re.compile(r"(?<![\w-])-p(\s{1,5})?(?=[^\s-])(\S{1,4096})")
_LOGIN_KEY = re.compile(
    r"(?i)(?<![\w-])((?:wandb|huggingface-cli|hf)\s{1,5}(?:auth\s{1,5})?login(?:\s{1,5}--?[a-z-]{1,20}(?!\S))*\s{1,5})"
    r"([A-Za-z0-9_-]{16,4096})")
_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"hf_[A-Za-z0-9]{30,256}"                               # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{30,256}|github_pat_[A-Za-z0-9_]{40,256}"  # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"                             # AWS access key id
    r"|xox[abposr]-[A-Za-z0-9-]{10,256}"                      # Slack
    r"|sk-[A-Za-z0-9_-]{20,256}"                              # OpenAI-style keys
    r"|glpat-[A-Za-z0-9_-]{20,256}"                           # GitLab
    r"|eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,4096}"  # JWT
    r")")

# ------------------------------------------------------------------------ people, nodes
_EMAIL = re.compile(r"(?<![\w.+%-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}(?![\w-])")
_HOME = re.compile(r"(?<![\w.~-])(/home/|/Users/|/export/home/|/usr/home/|/data/home/|[A-Za-z]:\\\\?Users\\\\?)"
                   r"([^/\\\s\"'<>:;,|]{1,64})")
_TILDE_USER = re.compile(r"(?<![\w~])~([a-z_][a-z0-9_.-]{0,31})(?=/)")
_NODE_LIST = re.compile(r"(?<![\w.-])([A-Za-z][A-Za-z0-9_-]{0,40})\[(\d{1,6}(?:-\d{1,6})?(?:,\d{1,6}(?:-\d{1,6})?){0,64})\]"
                        r"(?![\w\[])")
_NODE_LIST_HINT = re.compile(r"\[\d{1,6}[-,]")
_GENERIC_USERS = {"root", "ubuntu", "user", "users", "admin", "ec2-user", "centos", "debian", "azureuser",
                  "jovyan", "runner", "nobody", "shared", "public", "linuxbrew", "opc", "cloud-user"}

# ------------------------------------------------------------------------ learned names
_IPV4 = re.compile(r"(?<![\w.])(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})(?:\.\d{1,5})?(?!\.?\w)")
# runs of word characters with a colon in them, starting where the run starts (an IPv6 address
# is looked for inside by _ipv6_in, which is cheap: a run longer than an address is skipped)
_IPV6_CHARS = re.compile(r"[0-9A-Fa-f:.]{2,45}")
_COLON_RUN = re.compile(r"(?<![\w.:%])[\w.%]*:[\w.:%]*")
_HOST_PREFIX = re.compile(
    r"^[ \t]{0,8}(?:\[[^\]\n]{0,40}\]:?[ \t]{0,4}){0,4}([A-Za-z][A-Za-z0-9_.-]{1,62}):\d{1,10}:\d{1,10}[ \t]{1,4}\[\d{1,4}\]",
    re.M)
_AWS_HOST = re.compile(r"(?<![\w.-])ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(?:\.[A-Za-z0-9-]{1,63}){0,6}(?![\w-])")
_PRIVATE_SUFFIXES = {"internal", "local", "lan", "corp", "intra", "intranet", "cluster", "compute", "localdomain",
                     "home"}
_FQDN = re.compile(
    r"(?<![\w.-])((?:[A-Za-z0-9][A-Za-z0-9-]{0,62}\.){1,8}"
    r"(?:internal|local|lan|corp|intra|intranet|cluster|compute|localdomain|home|com|net|org|io|ai|cloud|edu|gov))"
    r"(?![\w-]|\.\w)")
# Each (hint, pattern): the hint, searched in the lower-cased text first, is cheap (it starts with
# a literal) and the pattern runs only where it is found.
_FQDN_HINT = re.compile(r"\.(?:internal|local|lan|corp|intra|cluster|compute|home|com|net|org|io|ai|cloud|edu|gov)\b")
_HOST_SETTINGS = [
    (re.compile(r"(?:addr|host|name|nodelist|comm_id)[\"']?\s{0,3}[=:]"), re.compile(r"(?i)(?<![\w-])(?:MASTER_ADDR|MASTER_HOST|HOSTNAME|HOST|NODE_NAME|SLURMD_NODENAME|SLURM_NODELIST"
               r"|SLURM_JOB_NODELIST|NCCL_COMM_ID|PET_MASTER_ADDR)[\"']?\s{0,3}[=:]\s{0,3}[\"']?"
               r"([A-Za-z][A-Za-z0-9_.-]{1,62})")),
    (re.compile(r"--(?:master|rdzv|host|nodelist|w\b)"), re.compile(r"(?i)(?<![\w-])--(?:master[_-]addr|rdzv[_-]endpoint|host(?:s|file)?|nodelist|w)[= ]{1,3}[\"']?"
               r"([A-Za-z][A-Za-z0-9_.-]{1,62})")),
    (re.compile(r"host"), re.compile(r"(?i)(?<![\w-])(?:hostname|host name|on host|from host|host)\s{0,3}[=:]?\s{0,3}'?"
               r"([A-Za-z][A-Za-z0-9-]{0,40}\d[A-Za-z0-9-]{0,20})(?![\w-])")),
    (re.compile(r"ssh|scp|rsync|pdsh|mosh"), re.compile(r"(?i)(?<![\w-])(?:ssh|scp|rsync|pdsh|mosh)\s{1,5}(?:-\S{1,20}(?:\s{1,5}[^\s-]\S{0,40})?\s{1,5}){0,6}"
               r"(?:[\w.-]{1,32}@)?"
               r"([A-Za-z][A-Za-z0-9_.-]{1,62})")),
]
# Machine names in free text: a word such as node / gpu / worker in the name, ending in a number
# (gpu-node-07, worker-3, node01, dgx-a100-12); "gpu0" or "rank1" alone are not hosts.
_NAMED_HOST = re.compile(r"(?<![\w.-])([a-z][a-z0-9-]{1,80}\d)(?![\w-])")
_NAMED_HOST_SHAPE = re.compile(r"(?=.*(?:node|gpu|worker|host|compute|master|dgx|hgx|server|srv|login|head))"
                               r"[a-z][a-z0-9-]*(?:-\d+|[a-z]\d{2,})")
# Roles in prose: "master on titan", "workers on atlas and hermes", "the head node is zeus".
_ROLE_WORDS = ("master", "head", "worker", "node", "host", "server", "machine", "box", "launcher", "driver", "rank")
_ROLE_HOSTS = re.compile(
    r"(?i)(?=[mhwnsbldr])(?<![\w-])(?:master|head(?: node)?|workers?|nodes?|hosts?|servers?|machines?|boxes|box|launcher|driver"
    r"|login node|ranks?|rank \d{1,5}|rank\d{1,5})\s{1,3}(?:(?:is|are|runs?|running|lives|sits)\s{1,3})?(?:on|at|=|:|@)\s{1,3}"
    r"(?=([A-Za-z][A-Za-z0-9_-]{1,62}(?:\s{0,2}(?:,|\band\b|&)\s{1,3}[A-Za-z][A-Za-z0-9_-]{1,62}){0,8}))")
_ROLE_SPLIT = re.compile(r"\s{0,2}(?:,|\band\b|&)\s{1,3}", re.I)
_NOT_HOSTS = {
    "localhost", "ip", "rank", "ranks", "node", "nodes", "host", "hosts", "none", "null", "true", "false", "the", "a",
    "an", "this", "that", "these", "those", "same", "each", "every", "all", "both", "one", "two", "three", "four",
    "other", "another", "different", "separate", "its", "their", "my", "our", "your", "port", "ports", "init",
    "startup", "start", "boot", "gpu", "gpus", "cpu", "cpus", "it", "them", "first", "second", "last", "slurm",
    "kubernetes", "k8s", "docker", "aws", "gcp", "azure", "ec2", "premise", "prem", "site", "cloud", "bare",
    "metal", "premises", "demand", "spot", "time", "least", "most", "top", "worker", "workers", "master", "head", "server",
    "machine", "machines", "box", "eth0", "eth1", "ib0", "ib1", "lo", "random", "rendezvous", "different",
    "several", "many", "multiple", "any", "some", "no", "not", "only", "just", "here", "there", "which", "what",
    "default", "runtime", "launch", "exit", "shutdown", "failure", "error", "timeout", "completion", "barrier",
    "step", "epoch", "rank0", "rank1", "into", "to", "from", "with", "in", "on", "at", "via", "over", "and", "or",
    "is", "was", "are", "be", "for", "of", "as", "by", "keys", "key", "agent", "config", "access", "connection",
}
_DEVICE_LIKE = re.compile(r"(?i)(?:gpu|cuda|cpu|mlx\d{0,2}_?|eth|ib|ens|enp|eno|bond|lo|hca|nic|dev|device|rank)\d{0,4}")
_ENV_NAME = re.compile(r"[A-Z0-9_]*_[A-Z0-9_]*")
_HOST_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_DOTTED_QUAD = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_LOOPBACK_V4 = re.compile(r"127\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_NOT_ADDRESSES = {"0.0.0.0", "255.255.255.255", "::", "::1"}
_HOST_KEY = re.compile(r"(?i)host|(?:^|_)(?:ip|addr|address|nodelist|node_?name|nodes)$|master_?addr")

# tokens looked up among learned names
_SECRET_HIT = re.compile(_SECRET_WORD)  # searched in the lower-cased text
_HOME_MARKS = ("home", "Users")
_DOTTED_PREFIX = re.compile(r"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})\.\d")
_MAX_TRIE_NAMES = 5_000
# one pass over candidate tokens (past _MAX_TRIE_NAMES names): a run with a colon, else a run of
# host-name characters
_LEARNED_RUN = re.compile(r"(?<![\w.:%])[\w.%]*:[\w.:%]*|[A-Za-z0-9][A-Za-z0-9_.-]{0,253}(?<![.-])")


def is_host_key(name: str) -> bool:
    """A field name whose value is a host or an address (``host``, ``hosts``, ``master_addr``...)."""
    return bool(_HOST_KEY.search(name))


class Redactor:
    """Learns private names from what the user gave, then replaces them — and secrets, e-mail
    addresses, home-directory users and node lists by their shape — in any text, with
    placeholders that stay the same across every string it redacts."""

    def __init__(self, hosts: Iterable[str] = ()) -> None:
        self._names: dict[str, str] = {}    # lower-cased learned name -> its kind (host, ip, user)
        self._holders: dict[str, str] = {}  # kind + value -> placeholder
        self._counts: dict[str, int] = {}
        self._rejected: set[tuple[str, bool | None]] = set()  # candidates already judged
        self._pattern: re.Pattern[str] | None = None
        self._pattern_size = 0
        for host in hosts:
            self._add_host(host)

    # -------------------------------------------------------------------- learning
    def learn(self, text: str) -> None:
        """Collect host names, addresses and user names from text the user gave."""
        if not text:
            return
        low = text.lower()  # for the cheap checks that skip patterns whose keywords are absent
        for match in _HOST_PREFIX.finditer(text):
            self._add_host(match.group(1).rstrip("."))
        for hint, pattern in _HOST_SETTINGS:
            if hint.search(low):
                for match in pattern.finditer(text):
                    self._add_host(match.group(1).rstrip("."))
        if "ip-" in text:
            for match in _AWS_HOST.finditer(text):
                self._add_host(match.group(0))
                self._add_host(match.group(0).split(".")[0])
        for match in _NAMED_HOST.finditer(text):
            if _NAMED_HOST_SHAPE.fullmatch(match.group(1)):
                self._add_host(match.group(1))
        if _FQDN_HINT.search(low):
            for match in _FQDN.finditer(text):
                if _looks_like_host(match.group(1)):
                    self._add_host(match.group(1))
        if _any(low, _ROLE_WORDS):
            for match in _ROLE_HOSTS.finditer(text):
                for name in _ROLE_SPLIT.split(match.group(1)):
                    self._add_host(name.strip())
        if _NODE_LIST_HINT.search(text):
            for match in _NODE_LIST.finditer(text):
                if _is_node_list(match):
                    for name in _expand_node_list(match.group(1), match.group(2)):
                        self._add_host(name, named=True)
        if "." in text:
            for match in _IPV4.finditer(text):
                self._add_address(match.group(1))
        if ":" in text:
            for match in _COLON_RUN.finditer(text):
                found = _ipv6_in(match.group(0))
                if found:
                    self._add_address(found[2])
        if _any(text, _HOME_MARKS):
            for match in _HOME.finditer(text):
                self._add_user(match.group(2))

    learn_hosts = learn

    def learn_data(self, value: Any, key: str = "") -> None:
        """Learn from every string in a JSON-like structure; values (and keys) under a host-like
        key (``host``, ``hosts``, ``master_addr``, ...) are taken as hosts or addresses."""
        host_key = is_host_key(key)
        if isinstance(value, str):
            self.learn(value)
            if host_key:
                self.add_name(value)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                name = str(k)
                if host_key:
                    self.add_name(name)
                self.learn_data(v, name)
        elif isinstance(value, (list, tuple)):
            for item in value:
                self.learn_data(item, key)

    def add_name(self, value: str) -> None:
        """Take ``value`` as a host name or an address (a fact or field known to hold one)."""
        value = value.strip().strip("[]")
        if _is_address_like(value):
            self._add_address(value)
        else:
            for part in re.split(r"[\s,]+", value)[:64]:
                if ":" in part and not _is_address_like(part):
                    part = part.rsplit(":", 1)[0]  # host:port
                if _is_address_like(part):
                    self._add_address(part)
                else:
                    self._add_host(part, named=True)

    def _add_host(self, name: str, *, named: bool = False) -> None:
        """Learn a host; ``named`` when the text itself said so (a node list, a host field), so a
        name such as gpu03 is taken even though it looks like a device."""
        name = name.strip().rstrip(".")
        lower = name.lower()
        if lower in self._names or (lower, named) in self._rejected:
            return
        self._rejected.add((lower, named))  # until shown otherwise below; each name is judged once
        if (3 <= len(name) <= 253 and lower not in _NOT_HOSTS and not _is_address_like(name)
                and (named or not _DEVICE_LIKE.fullmatch(name))
                and not _ENV_NAME.fullmatch(name)  # MASTER_PORT is not a host
                and _HOST_CHARS.fullmatch(name)):
            self._names.setdefault(lower, "host")

    def _add_address(self, value: str) -> None:
        value = value.split("%")[0]
        if value.lower() in self._names or (value, None) in self._rejected:
            return
        self._rejected.add((value, None))
        if value in _NOT_ADDRESSES or _LOOPBACK_V4.fullmatch(value) or not _is_address_like(value):
            return
        self._names[value.lower()] = "ip"

    def _add_user(self, name: str) -> None:
        if len(name) >= 2 and name.lower() not in _GENERIC_USERS:
            self._names.setdefault(name.lower(), "user")

    # -------------------------------------------------------------------- replacing
    def placeholder(self, kind: str, value: str) -> str:
        """The stable placeholder for ``value`` (``<host-1>``, ``<ip-2>``, ``<email-1>``...)."""
        if kind == "user":
            return "<user>"
        key = f"{kind}\0{value.lower()}"
        holder = self._holders.get(key)
        if holder is None:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            holder = self._holders[key] = f"<{kind}-{self._counts[kind]}>"
        return holder

    def __call__(self, text: str) -> str:
        if not text:
            return text
        low = text.lower()  # for the cheap checks that skip patterns whose keywords are absent
        if "PRIVATE KEY-----" in text:
            text = _hide_private_keys(text)
        if "://" in text:
            text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + "<secret>@", text)
        if "authorization" in low or "bearer" in low:
            text = _AUTHORIZATION.sub(lambda m: m.group(1) + "<secret>", text)
        text = _on_lines_with(text, text.lower(), _SECRET_HIT, _hide_keyed_secrets)
        if "-p" in text and _any(low, ("mysql", "mariadb", "login")):
            text = _hide_short_p(text)
        if "login" in low:
            text = _LOGIN_KEY.sub(lambda m: m.group(1) + "<secret>", text)
        text = _TOKEN_SHAPES.sub("<secret>", text)
        if "@" in text:
            text = _EMAIL.sub(lambda m: self.placeholder("email", m.group(0)), text)
        if _any(text, _HOME_MARKS):
            text = _HOME.sub(lambda m: m.group(1) + "<user>", text)
        if "~" in text:
            text = _TILDE_USER.sub("~<user>", text)
        if _NODE_LIST_HINT.search(text):
            text = _NODE_LIST.sub(self._node_list, text)
        if self._names:
            text = self._learned_pattern().sub(self._learned, text)
        return text

    def _learned_pattern(self) -> re.Pattern[str]:
        """One regex for every learned name (a trie of them, so each position costs at most the
        longest name); past a few thousand names, every token is looked up instead."""
        if self._pattern is None or self._pattern_size != len(self._names):
            if len(self._names) > _MAX_TRIE_NAMES:
                self._pattern = _LEARNED_RUN
            else:
                self._pattern = re.compile(r"(?i)(?<![\w.<-])(?:" + _trie_regex(self._names) + r")(?![\w>-])")
            self._pattern_size = len(self._names)
        return self._pattern

    def _field(self, key: Any, value: Any) -> Any:
        """A value in a JSON object: all of it hidden under a secret's key (``"password"``)."""
        if (isinstance(key, str) and isinstance(value, str) and _SECRET_KEY.search(key)
                and not _NOT_SECRET_KEYS.search(key) and value and not _NOT_SECRET_VALUES.fullmatch(value)):
            return "<secret>"
        return self.data(value)

    def _node_list(self, match: re.Match[str]) -> str:
        return self.placeholder("nodes", match.group(0)) if _is_node_list(match) else match.group(0)

    def _learned(self, match: re.Match[str]) -> str:
        token = match.group(0)
        start, text = match.start(), match.string
        if start and text[start - 1] == "<" and text[match.end():match.end() + 1] == ">":
            return token  # a placeholder already
        if ":" in token and match.re is _LEARNED_RUN:
            found = _ipv6_in(token)
            if found and self._names.get(found[2].lower()) == "ip":
                return token[:found[0]] + self.placeholder("ip", found[2]) + token[found[1]:]
            return token
        kind = self._names.get(token.lower())
        if kind is not None:
            return self.placeholder(kind, token)
        head, dot, rest = token.partition(".")
        if dot and self._names.get(head.lower()) == "host" and not _is_address_like(token):
            return self.placeholder("host", head) + dot + rest  # titan.cluster.local
        quad = _DOTTED_PREFIX.match(token)
        if quad and self._names.get(quad.group(1)) == "ip":
            return self.placeholder("ip", quad.group(1)) + token[quad.end(1):]  # 10.0.0.1.29500 (tcpdump)
        return token

    def data(self, value: Any) -> Any:
        """Redact every string inside a JSON-like structure (keys included)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, Mapping):
            return {self(k) if isinstance(k, str) else k: self._field(k, v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


def session_redactor(session: Any, *extra: Any) -> Redactor:
    """A :class:`Redactor` that has learned what the user gave a session (descriptions, log names
    and lines, fact values and sources) and from ``extra`` JSON-like data (a hang report, probe
    results)."""
    redactor = Redactor()
    for text in session.texts:
        redactor.learn(text)
    for log in session.logs:
        redactor.learn(log.name)
        for info in log.hits.values():
            redactor.learn(str(info.get("line", "")))
            for value in (info.get("captures") or {}).values():
                redactor.learn(str(value))
    for name, record in session.facts().items():
        if record.source.kind == "rule":
            continue
        redactor.learn(record.source.detail)
        if isinstance(record.value, str):
            redactor.learn(record.value)
            if is_host_key(name):
                redactor.add_name(record.value)
    for data in extra:
        if data is not None:
            redactor.learn_data(data)
    return redactor


def redact(text: str, *, hosts: Iterable[str] = ()) -> str:
    """``text`` with host names, addresses, user names and secrets replaced by placeholders."""
    redactor = Redactor(hosts)
    redactor.learn(text)
    return redactor(text)


# ------------------------------------------------------------------------------ helpers
def _trie_regex(words: Iterable[str]) -> str:
    """A regex matching exactly ``words``, factored by common prefixes (longest match first)."""
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body  # a word may end here, or go on

    return emit(trie)


def _any(text: str, words: Iterable[str]) -> bool:
    return any(word in text for word in words)


def _hide_private_keys(text: str) -> str:
    """Each BEGIN ... END PRIVATE KEY block (or BEGIN to the end, if cut off) becomes a placeholder."""
    if "PRIVATE KEY-----" not in text:
        return text
    out, last, start = [], 0, None
    for match in _BLOCK.finditer(text):
        if match.group(1) == "BEGIN" and start is None:
            start = match.start()
        elif match.group(1) == "END" and start is not None:
            out += [text[last:start], "<private key>"]
            last, start = match.end(), None
    if start is not None:
        out += [text[last:start], "<private key>"]
        last = len(text)
    return "".join(out) + text[last:]


_LINES_ONE_BY_ONE = 64
_CHARS_PER_LINE_VISIT = 40  # a visit to one line costs about as much as a pattern pass over 40 characters


def _on_lines_with(text: str, low: str, keyword: re.Pattern[str], fn: Callable[[str], str]) -> str:
    """``fn`` applied to each line of ``text`` where ``keyword`` occurs in ``low`` (its lower-cased
    copy); other lines are left alone. Each line is looked at once, so this stays linear."""
    if len(low) != len(text):  # lower-casing changed a length (rare Unicode): fall back to all of it
        return fn(text)
    out, last = [], 0
    for lines, hit in enumerate(keyword.finditer(low)):
        if hit.start() < last:
            continue
        if lines > _LINES_ONE_BY_ONE and lines * _CHARS_PER_LINE_VISIT > len(text) - last:
            # the keyword is on so many lines that one pass over the rest is cheaper
            out += [fn(text[last:])]
            return "".join(out)
        start = text.rfind("\n", last, hit.start()) + 1 or last
        start = max(start, last)
        end = text.find("\n", hit.end())
        end = len(text) if end < 0 else end
        out += [text[last:start], fn(text[start:end])]
        last = end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _hide_keyed_secrets(line: str) -> str:
    return _FLAG_VALUE.sub(_hide_flag_value, _KEY_VALUE.sub(_hide_key_value, line))


def _unquoted(value: str) -> str:
    return value.strip("\"'")


def _hide_key_value(match: re.Match[str]) -> str:
    quote, key, sep, value = match.group(1), match.group(2), match.group(3), match.group(4)
    bare = _unquoted(value)
    if _NOT_SECRET_KEYS.search(key) or not bare or _NOT_SECRET_VALUES.fullmatch(bare):
        return match.group(0)
    hidden = "<secret>"
    if value[:1] in "\"'":
        hidden = value[0] + hidden + (value[0] if len(value) > 1 and value[-1] == value[0] else "")
    return f"{quote}{key}{quote}{sep}{hidden}"


def _hide_flag_value(match: re.Match[str]) -> str:
    flag, sep, value = match.group(1), match.group(2), match.group(3)
    if _NOT_SECRET_KEYS.search(flag.lstrip("-")) or _NOT_SECRET_VALUES.fullmatch(_unquoted(value)):
        return match.group(0)
    return f"{flag}{sep}<secret>"


def _hide_short_p(text: str) -> str:
    """``-pX`` / ``-p X`` after mysql, mariadb or ``docker login`` on the same line."""
    found = list(_PASSWORD_COMMAND.finditer(text))
    if not found:
        return text
    commands = [m.start() for m in found]
    glued_only = [m.group(1) is not None for m in found]
    newlines = [m.start() for m in re.finditer("\n", text)]

    def hide(match: re.Match[str]) -> str:
        at = match.start()
        line = bisect.bisect_left(newlines, at)
        line_start = newlines[line - 1] + 1 if line else 0
        before = bisect.bisect_left(commands, at) - 1
        if (before < 0 or commands[before] < line_start or (match.group(1) and glued_only[before])
                or _NOT_SECRET_VALUES.fullmatch(match.group(2))):
            return match.group(0)
        return match.group(0)[: match.start(2) - at] + "<secret>"

    return _SHORT_P.sub(hide, text)


def _is_node_list(match: re.Match[str]) -> bool:
    """``gpu[01-04]`` or ``node[1,3]``, not ``tensor[0]`` or ``ranks[0-3]``."""
    return ("-" in match.group(2) or "," in match.group(2)) and match.group(1).lower() not in ("rank", "ranks")


def _expand_node_list(prefix: str, ranges: str, limit: int = 256) -> list[str]:
    """``gpu``, ``01-03,07`` -> gpu01, gpu02, gpu03, gpu07 (at most ``limit`` names)."""
    names: list[str] = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        width = len(low)
        stop = int(high or low)
        for number in range(int(low), min(stop, int(low) + limit) + 1):
            names.append(f"{prefix}{number:0{width}d}")
            if len(names) >= limit:
                return names
    return names


def _looks_like_host(name: str) -> bool:
    """``train.py`` and dotted Python modules are not hosts: ask for a private-network suffix, or
    at least three labels with a digit in the first (node01.example.com)."""
    labels = name.split(".")
    if labels[-1].lower() in _PRIVATE_SUFFIXES:
        return True
    return len(labels) >= 3 and any(ch.isdigit() for ch in labels[0])


@functools.lru_cache(maxsize=4096)  # logs repeat the same few runs on every line
def _ipv6_in(run: str) -> tuple[int, int, str] | None:
    """(start, end, address) of the IPv6 address in a run such as ``ib0:fe80::1%ib0``, if any."""
    if len(run) > 100 or ("::" not in run and run.count(":") < 7):
        return None
    end = run.find("%")
    end = len(run) if end < 0 else end
    start = 0
    while start < end:
        candidate = run[start:end]
        if candidate.count(":") >= 2 and _IPV6_CHARS.fullmatch(candidate) and _is_address_like(candidate):
            return start, end, candidate
        start = run.find(":", start, end) + 1
        if start <= 0:
            return None
    return None


def _is_address_like(text: str) -> bool:
    """An IP address, or four dotted numbers that only look like one (``10.0.0.300``)."""
    if _DOTTED_QUAD.fullmatch(text):
        return True
    if ":" not in text or len(text) > 64:
        return False
    try:
        ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return False
    return True
