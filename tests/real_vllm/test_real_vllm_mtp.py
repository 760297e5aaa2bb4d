"""MTP on the real engine: a tiny MiMo target that carries one MTP layer, which vLLM 0.32's CPU
build drafts with (`method: mtp`, no draft model: the target's own layer), and the same method
asked of a target without MTP layers, which vLLM refuses at start-up
(`Unsupported speculative method: 'mtp'`). The chain picks the `mtp` profile for both (the
second from the log's `non-default args`: it never reached its engine line) and names the
target's missing MTP layers as the root cause.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.real_vllm.fixture import RealServer, RealVllm
from tests.real_vllm.support import cli_json, drafted, hosts_file, links_of, server
from tests.sshd import Sshd

pytestmark = [pytest.mark.ssh, pytest.mark.real_vllm, pytest.mark.timeout(600)]

MTP = json.dumps({"method": "mtp", "num_speculative_tokens": 1})


@dataclass
class Mtp:
    right: RealServer
    hosts: Path
    wrong_hosts: Path
    wrong_log: str


@pytest.fixture(scope="module")
def mtp(real_vllm: RealVllm, sshd: Sshd, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Mtp]:
    if sshd.proc is None:
        sshd.start()
    right = server(real_vllm, sshd, "mtp-right", MTP, target=real_vllm.models / "mimo-mtp")
    wrong = server(real_vllm, sshd, "mtp-wrong", MTP)  # the plain Qwen3 target
    folder = tmp_path_factory.mktemp("real-mtp")
    hosts = hosts_file(folder / "hosts.toml", sshd, {"mtp": right})
    wrong_hosts = hosts_file(folder / "wrong.toml", sshd, {"wrong": wrong},
                             target=str(real_vllm.target), log=str(wrong.log),
                             python=str(real_vllm.python))
    try:
        right.start()
        wrong.start()
        wrong.wait_exit(timeout=300)  # refused in the API server: it exits by itself
        right.wait_ready()
        drafted(right, "the quick brown fox")
        yield Mtp(right, hosts, wrong_hosts, wrong.log.read_text(errors="replace"))
    finally:
        right.stop()


def test_a_target_with_mtp_layers_passes_every_link(mtp: Mtp) -> None:
    code, report = cli_json("check", "mtp", "--config", str(mtp.hosts))
    links = links_of(report)
    assert report["profile"] == "mtp"
    assert code == 0, report
    assert "the target carries 1 MTP layer(s) (num_nextn_predict_layers)" in \
        links["config-correct"]["summary"]
    runtime = links["runtime-activation"]["summary"]
    assert "the engine runs mtp with 1 speculative tokens" in runtime
    assert "vLLM logged 'Detected MTP model'" in runtime  # vLLM wired the MTP layer


def test_mtp_asked_of_a_target_without_mtp_layers(mtp: Mtp) -> None:
    assert "Unsupported speculative method: 'mtp'" in mtp.wrong_log
    code, report = cli_json("check", "wrong", "--config", str(mtp.wrong_hosts))
    links = links_of(report)
    assert report["profile"] == "mtp"
    runtime = links["runtime-activation"]
    assert runtime["status"] == "fail"
    assert "Unsupported speculative method: 'mtp'" in runtime["summary"]
    assert "serve the checkpoint that carries them" in runtime["hint"]
    assert "carries no MTP layers" in links["config-correct"]["summary"]
    assert report["root_cause"] == "config-correct"
    assert code == 2
