"""A separate draft model on the real engine: the chain picks the `draft-model` profile and
tells a draft with the target's tokenizer from one with its own.

Two servers, started together, each with a one-layer Qwen3 draft of the same vocabulary size:
one with the target's tokenizer, one with a tokenizer of its own (other special tokens, other
merges). vLLM runs both without a word; the wrong one accepts nothing (measured: 0 of 189
drafted tokens). The chain must name config-correct (the tokenizer) as the root cause and flag
the acceptance against the draft-model range.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.real_vllm.fixture import RealServer, RealVllm, model_spec
from tests.real_vllm.support import cli_json, drafted, hosts_file, links_of, server
from tests.sshd import Sshd

pytestmark = [pytest.mark.ssh, pytest.mark.real_vllm, pytest.mark.timeout(600)]

PROMPT = "the the the the the the the the"


@dataclass
class Drafts:
    right: RealServer
    wrong: RealServer
    hosts: Path


@pytest.fixture(scope="module")
def drafts(real_vllm: RealVllm, sshd: Sshd, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Drafts]:
    if sshd.proc is None:
        sshd.start()
    right = server(real_vllm, sshd, "draft-right",
                   model_spec("draft_model", real_vllm.drafter("draft-right")))
    wrong = server(real_vllm, sshd, "draft-wrong",
                   model_spec("draft_model", real_vllm.drafter("draft-wrong-tokenizer")))
    hosts = hosts_file(tmp_path_factory.mktemp("real-draft") / "hosts.toml", sshd,
                       {"right": right, "wrong": wrong})
    try:
        right.start()
        wrong.start()
        right.wait_ready()
        wrong.wait_ready()
        drafted(right, PROMPT)
        drafted(wrong, PROMPT)
        yield Drafts(right, wrong, hosts)
    finally:
        right.stop()
        wrong.stop()


def test_a_draft_with_the_targets_tokenizer_passes(drafts: Drafts) -> None:
    code, report = cli_json("check", "right", "--config", str(drafts.hosts))
    links = links_of(report)
    assert report["profile"] == "draft-model"
    assert code == 0, report
    assert "special token ids match the target's" in \
        str(links["config-correct"]["evidence"])
    runtime = links["runtime-activation"]["summary"]
    assert "the engine runs draft_model" in runtime
    assert "vLLM logged 'Loading drafter model" in runtime  # the draft actually loaded


def test_a_draft_with_its_own_tokenizer_is_the_root_cause(drafts: Drafts) -> None:
    code, report = cli_json("check", "wrong", "--config", str(drafts.hosts))
    links = links_of(report)
    assert report["profile"] == "draft-model"
    correct = links["config-correct"]
    assert correct["status"] == "fail"
    assert "the draft's tokenizer is not the target's" in correct["summary"]
    assert "bos_token_id 4 (target 0)" in correct["summary"]
    assert report["root_cause"] == "config-correct"
    # It runs (vLLM said nothing), and accepts nothing: flagged, with the range's source.
    runtime = links["runtime-activation"]
    assert runtime["status"] == "pass"
    assert "acceptance 1.00, far below the expected 1.5-3.5" in runtime["summary"]
    assert code == 2
