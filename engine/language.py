"""The user's language: detected from their words, and the engine's own sentences in it.

The KB carries English text and, in ``zh`` blocks, Chinese (questions, help, choice labels, cause
and fix titles). A session answers in Chinese when the user writes Chinese (any two CJK ideographs
in what they told it), unless a language was chosen explicitly. Every result carries both
languages (``texts``); ``text``/``title`` are in the session's language, falling back to English
where the KB has no Chinese.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["LANGUAGES", "detect", "fact_texts", "cause_texts", "fix_texts", "phrase", "pick"]

LANGUAGES = ("en", "zh")
_HAN = r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"  # compiled on first non-ASCII text (a wide class costs ~3 ms)

#: The engine's own sentences (plan notes, "not recognised" guidance, what to collect next).
_PHRASES: dict[str, dict[str, str]] = {
    "plan_empty": {
        "en": "No cause is raised yet: describe the failure, add a log, or answer the questions.",
        "zh": "还没有可以确定的原因：请描述故障现象、提供日志，或回答下面的问题。",
    },
    "plan_low": {
        "en": "Confidence is low: answer the open questions or add NCCL_DEBUG=INFO logs to narrow it down.",
        "zh": "置信度较低：请回答剩下的问题，或提供 NCCL_DEBUG=INFO 日志以缩小范围。",
    },
    "not_recognised": {
        "en": "Not recognised: nothing in the knowledge base explains what you describe; causes that only "
              "share words with your description are listed as possibly related, not as a diagnosis.",
        "zh": "未能识别：知识库中没有能解释所述现象的原因；仅与描述用词相近的原因列为“可能相关”，不作为诊断结论。",
    },
    "possibly_related": {"en": "Possibly related (shared words only)", "zh": "可能相关（仅用词相近）"},
    "collect_next": {"en": "What to collect next", "zh": "接下来请收集"},
    "fix_plan": {"en": "Fix plan", "zh": "修复方案"},
    "narrow_down": {"en": "Answering these would narrow it down (diagnose --fact NAME=VALUE)",
                    "zh": "回答下面的问题可以缩小范围（diagnose --fact 名称=值）"},
    "collect_debug": {
        "en": "Rerun with NCCL_DEBUG=INFO (and TORCH_DISTRIBUTED_DEBUG=DETAIL for PyTorch) and keep the log of every rank.",
        "zh": "设置 NCCL_DEBUG=INFO 重新运行（PyTorch 另加 TORCH_DISTRIBUTED_DEBUG=DETAIL），保存每个 rank 的日志。",
    },
    "collect_first_rank": {
        "en": "Find the rank that failed first (earliest timestamp) and its first error or NCCL WARN line.",
        "zh": "找出最先出错的 rank（时间戳最早），以及它的第一条报错或 NCCL WARN 行。",
    },
    "collect_flight_recorder": {
        "en": "For hangs and timeouts: PyTorch Flight Recorder dumps from every rank (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1).",
        "zh": "若是卡住或超时：收集每个 rank 的 PyTorch Flight Recorder 转储（TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1）。",
    },
    "collect_versions": {
        "en": "Versions of NCCL, PyTorch, CUDA and the driver on every node.",
        "zh": "每个节点上的 NCCL、PyTorch、CUDA 和驱动版本。",
    },
}

#: The one-liners that go with the collection steps above.
COLLECT_COMMANDS: dict[str, str] = {
    "collect_debug": "NCCL_DEBUG=INFO NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log TORCH_DISTRIBUTED_DEBUG=DETAIL <your launch command>",
    "collect_first_rank": "grep -m1 -HnE 'NCCL WARN|Error|error:' /tmp/nccl.*.log",
    "collect_flight_recorder": "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 <your launch command>",
    "collect_versions": "python -c \"import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, "
                        "'nccl', '.'.join(map(str, torch.cuda.nccl.version())))\"; nvidia-smi | grep 'Driver Version'",
}


def detect(texts: Iterable[str]) -> str:
    """"zh" when the user's words hold at least two CJK ideographs, else "en"."""
    count = 0
    for text in texts:
        text = text[:20_000]
        if text.isascii():
            continue
        count += len(re.findall(_HAN, text))
        if count >= 2:
            return "zh"
    return "en"


def phrase(key: str, lang: str) -> str:
    """One of the engine's own sentences in ``lang`` (English when there is no translation)."""
    entry = _PHRASES[key]
    return entry.get(lang) or entry["en"]


def pick(texts: Mapping[str, Mapping[str, Any]], field: str, lang: str) -> Any:
    """``texts[lang][field]``, falling back to English when the translation is missing or empty."""
    value = texts.get(lang, {}).get(field)
    return value if value else texts["en"].get(field)


def fact_texts(fact: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A question's text, help and choice labels in every language."""
    zh = fact.get("zh") or {}
    labels = {c: c.replace("_", " ") for c in fact.get("choices") or ()}
    return {
        "en": {"text": fact.get("question") or fact["id"], "help": fact.get("help") or "", "choices": labels},
        "zh": {"text": zh.get("question") or "", "help": zh.get("help") or "",
               "choices": {c: (zh.get("choices") or {}).get(c) or labels[c] for c in labels}},
    }


def cause_texts(cause: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """A cause's title and explanation in every language."""
    zh = cause.get("zh") or {}
    return {
        "en": {"title": cause["title"], "explanation": cause.get("explanation") or ""},
        "zh": {"title": zh.get("title") or "", "explanation": zh.get("explanation") or ""},
    }


def fix_texts(fix: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A fix's title and steps in every language (commands stay as they are)."""
    zh = fix.get("zh") or {}
    return {
        "en": {"title": fix["title"], "steps": list(fix.get("steps") or ())},
        "zh": {"title": zh.get("title") or "", "steps": list(zh.get("steps") or ())},
    }
