"""A minimal chat bot that talks to ``diagnose serve`` over HTTP (standard library only).

    diagnose serve --port 8000 &
    python examples/http_bot.py --url http://127.0.0.1:8000
    python examples/http_bot.py --stateless    # the bot keeps the state, the server keeps nothing

Type a description or paste log lines; answer the bot's question with yes / no / a choice /
"?" for don't know; "quit" ends.
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any


def call(url: str, method: str = "GET", body: Any = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return json.loads(raw) if raw else {}
    except urllib.error.HTTPError as exc:  # 4xx/5xx carry {"error": message}
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        return {"error": f"{exc.code}: {message}"}
    except (urllib.error.URLError, OSError) as exc:  # no server, refused, timed out
        return {"error": f"cannot reach {url}: {getattr(exc, 'reason', exc)}"}


def turn_for(message: str, question: dict[str, Any] | None) -> dict[str, Any]:
    """Map the user's message to a turn: an answer to the pending question, or text."""
    words = message.strip()
    if question is not None:
        if words in ("?", "dont know", "don't know"):
            return {"answers": [{"fact": question["id"], "dont_know": True}]}
        if words.lower() in ("yes", "no", "y", "n") or words in question["choices"]:
            return {"answers": [{"fact": question["id"], "value": words}]}
    return {"text": words}


def show(view: dict[str, Any]) -> dict[str, Any] | None:
    if "error" in view:
        print(f"Sorry: {view['error']}")
        return None
    tops = [f"- {d['title']} ({d['confidence']:.0%})" for d in view["diagnoses"][:3]]
    print("Most likely:\n" + "\n".join(tops) if tops else "Nothing stands out yet.")
    question = view.get("next_question")
    if question is None:
        for step in view["plan"]["steps"][:5]:
            print(f"{step['number']}. {step['title']}")
            for command in step["commands"][:3]:
                print(f"     $ {command}")
    else:
        choices = " / ".join(question["choices"]) or "yes / no / ?"
        print(f"{question['text']} [{choices}]")
    sys.stdout.flush()
    return question


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--stateless", action="store_true", help="keep the state here, not on the server")
    args = parser.parse_args(argv)
    base = args.url.rstrip("/")
    if "error" in call(base + "/healthz"):
        print(f"no nccl-doctor server at {base} (start one with: diagnose serve)")
        return 1
    session_id, state, question = None, None, None
    print("nccl-doctor bot: describe the problem (\"quit\" ends).")
    for message in sys.stdin:
        if message.strip().lower() in ("quit", "exit"):
            break
        if not message.strip():
            continue
        turn = turn_for(message, question)
        if args.stateless:
            view = call(base + "/stateless/turn", "POST", {**turn, **({"state": state} if state else {})})
            state = view.get("state", state)
        elif session_id is None:
            view = call(base + "/sessions", "POST", turn)
            session_id = view.get("id")
        elif "answers" in turn:
            view = call(f"{base}/sessions/{session_id}/answers", "POST", turn)
        else:
            view = call(f"{base}/sessions/{session_id}/text", "POST", turn)
        question = show(view) if "error" not in view else (show(view) or question)
    if session_id is not None:
        call(f"{base}/sessions/{session_id}", "DELETE")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
