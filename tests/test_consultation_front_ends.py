"""The consultation through every front end on the packaged KB: the TUI (Pilot) and the CLI's
terminal prompts never ask what is known or implied, ask for evidence first when no log was given,
speak Chinese to a Chinese description, and say "not recognised" for what is out of scope."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from nccl_doctor import cli
from nccl_doctor.tui.app import DoctorApp
from nccl_doctor.tui.conversation_screen import ConversationScreen

HAN = re.compile(r"[\u4e00-\u9fff]")
DIAGNOSE = [sys.executable, "-m", "nccl_doctor.cli"]


def diagnose_json(*args: str) -> dict:
    done = subprocess.run([*DIAGNOSE, *args, "--json", "--no-probes"], capture_output=True, timeout=60,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


@pytest.fixture
def anyio_backend():
    return "asyncio"


# --------------------------------------------------------------------------- the one-shot
def test_one_shot_json_speaks_chinese_to_a_chinese_description():
    out = diagnose_json("--symptom", "训练在初始化阶段卡住")
    assert out["lang"] == "zh"
    assert out["questions"] and all(HAN.search(q["text"]) for q in out["questions"])
    assert all(q["texts"]["en"]["text"] for q in out["questions"])  # the JSON carries both
    english = diagnose_json("--symptom", "训练在初始化阶段卡住", "--lang", "en")
    assert not any(HAN.search(q["text"]) for q in english["questions"])


def test_one_shot_json_says_a_printer_jam_is_not_recognised():
    out = diagnose_json("--symptom", "the office printer jams on page 2")
    assert out["recognised"] is False
    assert all(d["confidence"] <= 0.3 for d in out["diagnoses"])
    assert out["plan"]["collect"] and not out["plan"]["steps"]


def test_one_shot_text_says_not_recognised_in_words():
    done = subprocess.run([*DIAGNOSE, "--symptom", "CUDA out of memory in my single-GPU training script", "--no-input"],
                          capture_output=True, timeout=60)
    text = done.stdout.decode()
    assert done.returncode == 0 and "Not recognised" in text and "NCCL_DEBUG=INFO" in text


# ---------------------------------------------------------------------- terminal prompts
def prompted(monkeypatch, session, replies: list[str]) -> list:
    """Run the one-shot's prompts with typed ``replies``; return the questions asked, checking
    each against what the session knew at that moment."""
    asked = []
    ask = session.next_question

    def checked():
        question = ask()
        if question is not None:
            known = session.facts()
            assert question.id not in known, f"asked {question.id}, already {known[question.id].value}"
            asked.append(question)
        return question

    monkeypatch.setattr(session, "next_question", checked)
    typed = iter(replies)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed, ""))
    cli._ask(session, limit=len(replies))
    return asked


def test_cli_prompts_never_ask_the_known_and_start_with_evidence(doctor, monkeypatch, capsys):
    session = doctor.session()
    session.tell("2-node DDP training launched with torchrun hangs at init_process_group")
    asked = prompted(monkeypatch, session, ["?"] * 8 + ["no"] * 4)
    assert asked[0].kind == "evidence"
    ids = [q.id for q in asked]
    assert not {"launcher", "multi_node", "fails_after_long_run", "training_finished", "symptom_hang"} & set(ids)
    assert "don't know" in capsys.readouterr().out


def test_cli_prompts_take_a_pasted_error_line(doctor, monkeypatch):
    session = doctor.session()
    session.tell("the job errors out during NCCL set-up, inside Docker")
    asked = prompted(monkeypatch, session, ["Error while creating shared memory segment /dev/shm/nccl-pZafXL (size 9637888)", ""])
    assert asked[0].id == "first_error_line"
    assert session.diagnoses()[0].id == "shm_too_small"


def test_cli_prompts_in_chinese(doctor, monkeypatch, capsys):
    session = doctor.session()
    session.tell("训练在初始化阶段卡住")
    prompted(monkeypatch, session, ["?", "否", "不知道"])
    out = capsys.readouterr().out
    assert HAN.search(out.split("?", 1)[1]) and "不知道" in out


# --------------------------------------------------------------------------------- the TUI
async def settle(pilot) -> None:
    for _ in range(4):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0)


async def tell(pilot, text: str) -> None:
    await pilot.pause()
    pilot.app.screen.query_one("#what").insert(text)
    await pilot.press("enter")
    await settle(pilot)


@pytest.mark.anyio
async def test_tui_never_asks_the_known_and_starts_with_evidence():
    app = DoctorApp()
    async with app.run_test(size=(100, 32)) as pilot:
        await tell(pilot, "2-node DDP training launched with torchrun hangs at init_process_group")
        screen = app.screen
        assert isinstance(screen, ConversationScreen)
        session = app.conversation.session
        first = screen.view.question
        assert first.kind == "evidence"
        for _ in range(10):
            question = screen.view.question
            if question is None:
                break
            known = session.facts()
            assert question.id not in known, f"asked {question.id}, already {known[question.id].value}"
            if question.type in ("bool", "choice"):
                screen.action_answer("dk")
            else:
                screen._words("don't know")
            await settle(pilot)
        assert {"launcher", "multi_node", "fails_after_long_run"}.isdisjoint(session.answers() | dict.fromkeys(session.unknown))


@pytest.mark.anyio
async def test_tui_speaks_chinese_to_a_chinese_description():
    app = DoctorApp()
    async with app.run_test(size=(100, 32)) as pilot:
        await tell(pilot, "训练在初始化阶段卡住")
        screen = app.screen
        assert HAN.search(screen.view.question.text)
        buttons = " ".join(str(b.label) for b in screen.query("#answers Button"))
        assert "不确定" in buttons


@pytest.mark.anyio
async def test_tui_says_not_recognised():
    app = DoctorApp()
    async with app.run_test(size=(100, 32)) as pilot:
        await tell(pilot, "the office printer jams on page 2")
        log = app.screen.query_one("#transcript")
        text = "\n".join(strip.text for strip in log.lines)
        assert "Not recognised" in text and "NCCL_DEBUG=INFO" in text
