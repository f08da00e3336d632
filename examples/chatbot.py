"""A minimal chat bot that embeds nccl-doctor in-process.

Each user message is one turn. Like a real bot (Slack, a ticket system), it keeps nothing in
memory between messages: the conversation state lives in a JSON file (a bot would keep it in
its own store, keyed by thread), restored with ``Session.from_json`` on every message.

    python examples/chatbot.py                    # chat on the terminal
    printf 'allreduce hangs on 2 nodes\\nyes\\nquit\\n' | python examples/chatbot.py

Type a description or paste log lines; answer the bot's question with yes / no / a choice /
"?" for don't know; "plan" shows the fix plan; "quit" ends.
"""
from __future__ import annotations

import sys
from pathlib import Path

from nccl_doctor import Session, SessionError, StateError, load_doctor

STATE = Path(".chatbot-state.json")
DOCTOR = load_doctor()  # once per process: immutable and shared by every conversation


def load() -> Session:
    if STATE.exists():
        try:
            return Session.from_json(DOCTOR, STATE.read_text())
        except StateError as exc:  # an old or damaged state: start over, say so
            print(f"(starting a new conversation: {exc})")
    return DOCTOR.session()


def reply(session: Session, message: str) -> str:
    """One bot turn: the user's message in, the bot's answer out."""
    pending = session.next_question()
    words = message.strip()
    if pending is not None and (words.lower() in ("yes", "no", "y", "n", "?", "dont know", "don't know")
                                or words in pending.choices or _is_number(words)):
        try:
            if words in ("?", "dont know", "don't know"):
                session.dont_know(pending.id)
            else:
                session.answer(pending.id, words)
        except SessionError as exc:
            return f"Sorry, {exc}. {pending.text}"
    elif words.lower() == "plan":
        return _plan(session)
    else:
        try:
            session.tell(words)
        except SessionError as exc:
            return f"Sorry: {exc}"
    lines = []
    for diagnosis in session.diagnoses(limit=3):
        lines.append(f"- {diagnosis.title} ({diagnosis.confidence:.0%})")
    head = "Most likely:\n" + "\n".join(lines) if lines else "Nothing stands out yet."
    question = session.next_question()
    if question is None:
        return head + "\n" + _plan(session)
    choices = f" [{' / '.join(question.choices)}]" if question.choices else " [yes / no / ?]"
    return f"{head}\n{question.text}{choices}"


def _plan(session: Session) -> str:
    plan = session.plan()
    if not plan.steps:
        return "No plan yet: tell me more (what fails, where, the error text)."
    out = ["Plan:"]
    for step in plan.steps[:5]:
        out.append(f"{step.number}. {step.title}")
        out += [f"     $ {command}" for command in step.commands[:3]]
        out += [f"     export {name}={value}" for name, value in step.env.items()]
    return "\n".join(out)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def main() -> int:
    print("nccl-doctor bot: describe the problem (\"quit\" ends).")
    for message in sys.stdin:
        if message.strip().lower() in ("quit", "exit"):
            break
        if not message.strip():
            continue
        session = load()
        print(reply(session, message), flush=True)
        STATE.write_text(session.to_json())
    STATE.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
