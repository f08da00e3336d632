"""Tiny torch.distributed (gloo, CPU) jobs whose ranks misbehave on purpose, for the forensics tests.

``python _forensics_worker.py launch OUTDIR`` imports torch once, then forks every rank of every
scenario (fork keeps the tests fast on two cores); each rank's stdout/stderr (Python and c10d's C++
log) go to its own log file. ``python _forensics_worker.py rank`` runs one rank from the env
(used under torchrun). Scenarios:

skip      2 ranks, TORCH_DISTRIBUTED_DEBUG=DETAIL: rank 1 stays busy and never enters all_reduce #4
skip_fr   2 ranks, Flight Recorder on: same, dumps written like TORCH_NCCL_DUMP_ON_TIMEOUT does
mismatch  3 ranks, DETAIL: rank 2 calls broadcast where ranks 0 and 1 call all_reduce
size_fr   3 ranks, Flight Recorder on: rank 2 all-reduces 8 elements where the others reduce 4
node      4 ranks as two hosts (nodeA: 0,1; nodeB: 2,3), DETAIL: both nodeB ranks stop answering
crash     (under torchrun) rank 1 raises an exception before the collective
"""
import datetime
import os
import socket
import sys
import time

SCENARIOS = {
    # name: (world, late ranks, env, file name pattern)
    "skip": (2, {1}, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, "rank{r}.log"),
    "skip_fr": (2, {1}, {"TORCH_FR_BUFFER_SIZE": "200"}, "rank{r}.log"),
    "mismatch": (3, set(), {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, "rank{r}.log"),
    "size_fr": (3, set(), {"TORCH_FR_BUFFER_SIZE": "200"}, "rank{r}.log"),
    "node": (4, {2, 3}, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, "{host}.rank{r}.log"),
}


def dump(rank):
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if prefix and os.environ.get("TORCH_FR_BUFFER_SIZE"):
        import torch._C._distributed_c10d as c10d

        with open(prefix + str(rank), "wb") as f:
            f.write(c10d._dump_fr_trace())


def _wait_for_rank0_failure(scen, limit=60.0):
    """Stay away until rank 0 has given up, however slow a loaded machine makes its timeout."""
    log = os.path.join(os.environ.get("LOG_DIR", ""), "rank0.log")
    deadline = time.time() + limit
    while os.environ.get("LOG_DIR") and time.time() < deadline:
        try:
            with open(log, errors="replace") as handle:
                if "rank 0 failed" in handle.read():
                    return
        except OSError:
            pass
        time.sleep(0.1)


def run_rank(scen, rank, world, late):
    import torch
    import torch.distributed as dist

    # The store gets a generous connect timeout (many ranks start at once on a loaded machine);
    # the process group's own, short timeout is what the scenarios exercise.
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, rank == 0,
                          timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "3"))))
    store.set(f"up{rank}", "1")  # every rank is up before the short-timeout collectives start
    store.wait([f"up{r}" for r in range(world)], datetime.timedelta(seconds=60))
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    # The tests re-run a scenario whose warm-up did not finish on every rank: on a loaded machine
    # a starved rank can time out there, and then the misbehaviour under test never happened.
    print(f"rank {rank} warm-up done", flush=True)
    try:
        if rank in late:
            # Busy elsewhere: never enters the collective. The launcher kills it once every
            # waiting rank has given up, so its exit can never race the others' timeouts.
            time.sleep(float(os.environ.get("SLEEP", "5")) if scen != "node" else 120)
            _wait_for_rank0_failure(scen)
            dump(rank)
            sys.stdout.flush()
            os._exit(0)
        elif scen in ("mismatch", "mismatch_op") and rank == world - 1:
            dist.broadcast(t, src=0)
        elif scen == "size_fr" and rank == world - 1:
            dist.all_reduce(torch.ones(8))
        elif scen == "crash" and rank == 1:
            raise ValueError("corrupt sample in shard 17")
        else:
            dist.all_reduce(t)
        dist.barrier()
    except Exception:
        dump(rank)
        raise
    dump(rank)
    print(f"rank {rank} done", flush=True)


def _port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(outdir, only=None):
    """Run the scenarios one after another (all at once would crowd two cores past the short
    timeouts the scenarios rely on)."""
    os.environ["TORCH_CPP_LOG_LEVEL"] = "INFO"
    import torch  # noqa: F401  - once, before forking
    import torch.distributed  # noqa: F401

    for scen, (world, late, env, pattern) in SCENARIOS.items():
        if only and scen not in only:
            continue
        d = os.path.join(outdir, scen)
        os.makedirs(d, exist_ok=True)
        port = _port()
        children, lingering = [], []
        for r in range(world):
            pid = os.fork()
            if pid:
                children.append(pid)
                if scen == "node" and r in late:
                    lingering.append(pid)
                continue
            _run_child(scen, r, world, late, env, pattern, d, port)
        _reap(children, lingering)


def _run_child(scen, r, world, late, env, pattern, d, port):
    try:
        os.environ.update(env, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        if scen in ("skip", "skip_fr"):
            os.environ["LOG_DIR"] = d
        if "TORCH_FR_BUFFER_SIZE" in env:
            os.environ["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(d, "fr_trace_")
        host = "nodeA" if r < world // 2 else "nodeB"
        fd = os.open(os.path.join(d, pattern.format(r=r, host=host)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        import torch._C._distributed_c10d as c10d

        c10d.set_debug_level_from_env()
        try:
            run_rank(scen, r, world, late)
        except BaseException:
            import traceback

            traceback.print_exc()
            sys.stderr.write(f"[rank{r}]: rank {r} failed\n")
            sys.stderr.flush()
            os._exit(1)
        sys.stdout.flush()
        os._exit(0)
    except BaseException:
        os._exit(3)


def _reap(children, lingering, limit=60.0):
    deadline = time.time() + limit
    for pid in [c for c in children if c not in lingering] + lingering:
        if pid in lingering and os.waitpid(pid, os.WNOHANG)[0] == 0:
            os.kill(pid, 9)  # every other rank is done: the node that never answered goes away
            os.waitpid(pid, 0)
            continue
        while time.time() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        launch(sys.argv[2], set(sys.argv[3:]))
    else:
        run_rank(os.environ["SCEN"], int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                 {int(x) for x in os.environ.get("LATE", "").split(",") if x})
