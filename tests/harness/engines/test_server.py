"""The server pool and lifecycle without a model server: load balancing, per-row seeds, errors that
name the server, launch/stop of a process group, config validation, the sync checkpoint's form.
(The real-server behaviour is in test_vllm.py and tests/harness/test_trainer_vllm.py.)"""
import os
import sys
import threading
import time

import pytest
import torch

from harness.engines import GenerationOutput, SamplingParams
from harness.engines.http import ServerUnavailableError
from harness.engines.server import EngineConfig, Server, ServerPool, launch, wait_healthy, write_sync_checkpoint


class StubEngine:
    """Answers one row at a time after a short wait; records its peak rows in flight and the seeds."""

    max_inflight = 4

    def __init__(self, name, fail=False):
        self.name, self.fail = name, fail
        self.now = self.most = 0
        self.seeds = []
        self.lock = threading.Lock()

    def generate(self, prompts, params, overrides):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.seeds.append(params.seed)
        try:
            time.sleep(0.05)
            if self.fail:
                raise ServerUnavailableError(f"cannot reach {self.name}")
            return [GenerationOutput([len(prompts[0])], [0.0], "length", text=self.name)]
        finally:
            with self.lock:
                self.now -= 1

    def close(self):
        pass


def test_rows_spread_over_servers_by_load_with_seeds_that_ignore_placement():
    a, b = StubEngine("a"), StubEngine("b")
    pool = ServerPool([a, b], [Server("http://a"), Server("http://b")])
    try:
        outs = pool.generate([[1] * n for n in range(1, 9)], SamplingParams(seed=5))
    finally:
        pool.close()
    assert [o.token_ids for o in outs] == [[n] for n in range(1, 9)]  # answers in row order
    assert len(a.seeds) == len(b.seeds) == 4 and a.most > 1 and b.most > 1  # both busy, rows in flight
    from harness.engines.base import row_seed
    assert sorted(a.seeds + b.seeds) == sorted(row_seed(5, i) for i in range(8))


def test_a_dead_server_is_named_with_its_log(tmp_path):
    log = tmp_path / "vllm-0.log"
    log.write_text("INFO starting\nERROR out of memory\n")
    pool = ServerPool([StubEngine("a", fail=True)], [Server("http://10.0.0.7:8000", log=log)])
    try:
        with pytest.raises(ServerUnavailableError, match=r"(?s)http://10.0.0.7:8000.*vllm-0.log.*out of memory"):
            pool.generate([[1, 2]], SamplingParams())
    finally:
        pool.close()


class _Http500Engine(StubEngine):
    def __init__(self, detail):
        super().__init__("a")
        self.detail = detail

    def generate(self, prompts, params, overrides):
        from harness.engines.http import HTTPStatusError

        raise HTTPStatusError(f"vLLM POST /v1/completions failed with HTTP 500: {self.detail}", 500, self.detail)


@pytest.mark.parametrize("detail, dead", [
    ('{"error":{"message":"EngineCore encountered an issue. See stack trace (above) for the root cause."}}', True),
    ('{"error":{"message":"prompt too long"}}', False),
])
def test_vllm_s_engine_death_500_is_the_server_unavailable_and_other_500s_are_not(detail, dead):
    # vLLM answers this 500 in the moment between its engine process dying and its API server exiting
    from harness.engines.http import HTTPStatusError

    pool = ServerPool([_Http500Engine(detail)], [Server("http://10.0.0.7:8000")])
    try:
        with pytest.raises(ServerUnavailableError if dead else HTTPStatusError, match="HTTP 500"):
            pool.generate([[1, 2]], SamplingParams())
    finally:
        pool.close()


def test_launch_logs_and_stops_the_whole_process_group(tmp_path):
    """A 'server' that never answers /health: its exit is reported with its log; stop() ends its
    process group, children included."""
    script = tmp_path / "fake_server.py"
    script.write_text("import subprocess, sys, time\nprint('fake server up', flush=True)\n"
                      "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\ntime.sleep(600)\n")
    cfg = EngineConfig(kind="sglang", launch=1, python=sys.executable, extra_args=[])
    cmd = [sys.executable, str(script)]
    (server,) = launch_cmd(cfg, cmd, tmp_path)
    try:
        time.sleep(1.0)
        assert server.process.poll() is None and "fake server up" in server.log.read_text()
    finally:
        server.stop(grace=2)
    assert server.process.poll() is not None
    for _ in range(50):  # the child it started is gone too (the kernel may take a moment to reap it)
        if not group_members(server.process.pid):
            break
        time.sleep(0.1)
    assert group_members(server.process.pid) == []
    assert "exited with status" in server.describe()


def group_members(pgid):
    """Live (not zombie) processes of a process group, from /proc."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(d))
    return out


def launch_cmd(cfg, cmd, tmp_path):
    """launch() with the server command replaced by ``cmd`` (the lifecycle, not vLLM)."""
    import harness.engines.server as srv

    real = srv.server_command
    srv.server_command = lambda *a, **k: (cmd, {})
    try:
        return launch(cfg, "unused", tmp_path / "servers", dtype="float32", served_name="s", gpu=False)
    finally:
        srv.server_command = real


def test_a_server_that_exits_before_health_is_reported(tmp_path):
    cfg = EngineConfig(kind="sglang", launch=1, python=sys.executable)
    (server,) = launch_cmd(cfg, [sys.executable, "-c", "print('bad flag'); raise SystemExit(3)"], tmp_path)

    class NoHealth:
        class http:
            @staticmethod
            def request(*a, **k):
                raise ServerUnavailableError("no")

    with pytest.raises(Exception, match=r"(?s)exited with status 3.*bad flag"):
        wait_healthy([server], [NoHealth()], timeout=30)


@pytest.mark.parametrize("bad", [dict(kind="hf", urls=["http://x"]), dict(kind="vllm", launch=-1),
                                 dict(kind="vllm", urls=["ftp://x"])])
def test_config_errors_are_clear(bad):
    with pytest.raises(ValueError):
        EngineConfig(**bad)


def test_sync_checkpoint_is_untied_and_loads_back(tmp_path):
    from harness.models import build_tiny_model, load_model

    model, tok = build_tiny_model("1m", seed=0)
    assert model.config.tie_word_embeddings
    path = write_sync_checkpoint(model, model.state_dict(), tok, tmp_path / "step-1")
    again, _ = load_model(str(path), dtype=torch.float32)
    assert not again.config.tie_word_embeddings and model.config.tie_word_embeddings  # the original untouched
    assert torch.equal(again.lm_head.weight, model.get_input_embeddings().weight)
    ids = torch.tensor([[1, 5, 9, 3]])
    assert torch.equal(again(ids).logits, model(ids).logits)
