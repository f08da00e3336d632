"""The example bots in examples/ run: in-process, and over HTTP against the real server."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

# one worker runs the module: one server for the example bots
pytestmark = pytest.mark.xdist_group("server_examples")
ROOT = Path(__file__).resolve().parents[1]
SEED_002 = ("all_reduce times out with DistBackendError, and after I set NCCL_SOCKET_IFNAME it fails "
            "at once with ncclInvalidUsage saying the interface cannot be found")
CONVERSATION = f"{SEED_002}\nyes\n?\nplan\nquit\n"


def test_in_process_chatbot(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "chatbot.py")], input=CONVERSATION,
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "NCCL_SOCKET_IFNAME" in done.stdout
    assert "Plan:" in done.stdout
    assert not (tmp_path / ".chatbot-state.json").exists()  # cleaned up on quit


@pytest.fixture(scope="module")
def server_url():
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    code = "import sys; from nccl_doctor.server import serve_main; sys.exit(serve_main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "--port", "0"], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline, banner = time.monotonic() + 60, ""
    while time.monotonic() < deadline and "http://" not in banner:
        line = proc.stderr.readline()
        if not line:
            break
        banner += line
    found = re.search(r"http://127\.0\.0\.1:\d+", banner)
    if found is None:
        proc.kill()
        pytest.fail(f"server did not start: {banner}")
    yield found.group(0)
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.parametrize("mode", [[], ["--stateless"]], ids=["sessions", "stateless"])
def test_http_bot(server_url, mode):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "http_bot.py"), "--url", server_url, *mode],
                          input=CONVERSATION, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "NCCL_SOCKET_IFNAME" in done.stdout
    assert "Sorry" not in done.stdout, done.stdout


def test_http_bot_without_server():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "http_bot.py"), "--url", "http://127.0.0.1:9"],
                          input="hello\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "no nccl-doctor server" in done.stdout
