"""EAGLE-3 on the real engine: the chain picks the `eagle3` profile from the running engine and
judges the head's auxiliary layers as vLLM 0.32 uses them.

Two servers, started together: a head whose config names aux layers valid for the 4-layer
target (the engine logs `Using auxiliary layers from speculative config: (1, 2, 3)`), and a head
that names none on a 2-layer target, where vLLM's default (2, n // 2, n - 3) = (2, 1, -1)
captures two hidden states for an `fc` that takes three: the engine starts, the first request
kills it (`EngineDeadError`), and the API server exits by itself. The chain then judges the
crashed launch from the hosts entry (log, interpreter, models), as a user would after it.
"""

from __future__ import annotations

import json
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.real_vllm.fixture import RealServer, RealVllm, model_spec
from tests.real_vllm.support import cli_json, drafted, hosts_file, links_of, server
from tests.sshd import Sshd

pytestmark = [pytest.mark.ssh, pytest.mark.real_vllm, pytest.mark.timeout(600)]

PROMPT = "the quick brown fox jumps over the lazy dog"


@dataclass
class Eagle3:
    right: RealServer
    crash: RealServer
    hosts: Path
    crash_hosts: Path
    crash_error: str


@pytest.fixture(scope="module")
def eagle3(real_vllm: RealVllm, sshd: Sshd, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Eagle3]:
    if sshd.proc is None:
        sshd.start()
    right = server(real_vllm, sshd, "eagle3-right",
                   model_spec("eagle3", real_vllm.drafter("eagle3-right")))
    target_2l = real_vllm.models / "target-2l"
    crash = server(real_vllm, sshd, "eagle3-crash",
                   model_spec("eagle3", real_vllm.drafter("eagle3-default")), target=target_2l)
    folder = tmp_path_factory.mktemp("real-eagle3")
    hosts = hosts_file(folder / "hosts.toml", sshd, {"eagle3": right})
    # Once the crashed server is gone, the hosts entry says where its launch lived.
    crash_hosts = hosts_file(folder / "crash.toml", sshd, {"crash": crash},
                             target=str(target_2l), draft=str(real_vllm.drafter("eagle3-default")),
                             log=str(crash.log), python=str(real_vllm.python))
    try:
        right.start()
        crash.start()
        right.wait_ready()
        crash.wait_ready()
        drafted(right, PROMPT)
        with pytest.raises(urllib.error.HTTPError) as failed:
            crash.complete(PROMPT)
        crash.wait_exit(timeout=120)
        yield Eagle3(right, crash, hosts, crash_hosts, failed.value.read().decode())
    finally:
        right.stop()


def test_a_head_with_valid_aux_layers_passes_every_link(eagle3: Eagle3) -> None:
    code, report = cli_json("check", "eagle3", "--config", str(eagle3.hosts))
    links = links_of(report)
    assert report["profile"] == "eagle3"  # picked from the engine's method
    assert code == 0, report
    assert all(link["status"] == "pass" for link in report["links"]), report
    runtime = links["runtime-activation"]["summary"]
    assert "the engine runs eagle3" in runtime
    assert "aux layers (1, 2, 3) as the config names them" in runtime  # the real line
    # A random head accepts nothing: flagged against EAGLE-3's expected range, not failed.
    assert "far below the expected 2-4" in runtime
    assert "arXiv 2503.01840" in links["runtime-activation"]["hint"]
    assert "profile eagle3: method eagle3 (from the serve command line" in \
        json.dumps(links["code-present"]["evidence"])


def test_default_aux_layers_on_a_two_layer_target_kill_the_engine(eagle3: Eagle3) -> None:
    log = eagle3.crash.log.read_text(errors="replace")
    assert "EngineDeadError" in log  # the real engine died on the first request ...
    assert "Application startup complete" in log  # ... after it had started
    assert "EngineCore encountered an issue" in eagle3.crash_error
    code, report = cli_json("check", "crash", "--config", str(eagle3.crash_hosts))
    links = links_of(report)
    assert report["profile"] == "eagle3"  # from the log's engine line: no process is left
    runtime = links["runtime-activation"]
    assert runtime["status"] == "fail"
    assert "the engine started, then died on a request" in runtime["summary"]
    correct = links["config-correct"]
    assert correct["status"] == "fail"
    assert "the model's default (2, 1, -1)" in correct["summary"]
    assert "2 hidden state(s) where the head's fc takes 3" in correct["summary"]
    assert report["root_cause"] == "config-correct"
    assert code == 2
