"""A console whose host is a recording: fixed GPU sample, a fixed serve log (the incident, as
the simulated host wrote it, with pids and times pinned), a fixed chain report and draft diff.

Only for the SVG snapshots, which must be byte-for-byte repeatable: no clock, no pid, no temp
path. Everything it shows went through the real parsers, telemetry trackers and widgets; the
live path is covered by the Pilot and tmux tests on the real simulated host.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from vllm_console.checks.draft_diff import DraftDiff, compare, json_diff
from vllm_console.checks.links.config_correct import check_invariants
from vllm_console.checks.models import ChainReport, Evidence, LinkResult, Status
from vllm_console.checks.profile import load_profile
from vllm_console.console.hostclient.agent.samples import AgentSample
from vllm_console.console.hostclient.follower import LogBatch, LogEntry
from vllm_console.console.parsers.lines import split_lines
from vllm_console.console.parsers.prefix import strip_ansi
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.settings import HostConfig
from vllm_console.console.sim.configs import draft_config, target_config
from vllm_console.console.sim.scenarios import WRONG_DRAFT
from vllm_console.console.telemetry import events as ev
from vllm_console.console.telemetry.run_log import RunLog
from vllm_console.console.telemetry.server import (
    Health,
    Readiness,
    ServerLoad,
    load_from_throughput,
)
from vllm_console.console.telemetry.serving import EngineState, ServingStatus
from vllm_console.console.telemetry.snapshot import HostSnapshot
from vllm_console.console.transport.host import ConnectionState, LinkStatus
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.widgets.checklist import ChecklistState

DATA = Path(__file__).parent / "data"
HOST = "gpu1"
DRAFT_DIR = "/root/models/Qwen3.6-27B-DFlash"


def sample() -> AgentSample:
    gpus = [{"index": i, "name": "NVIDIA H200", "util_pct": u, "mem_used_mib": m,
             "mem_total_mib": 143771, "temp_c": t, "power_w": p}
            for i, u, m, t, p in ((0, 97, 128666, 68, 655), (1, 0, 512, 30, 74))]
    obj: dict[str, Any] = {
        "seq": 1, "ts": 1_700_000_000.0, "gpu_source": "nvidia-smi", "gpus": gpus,
        "gpu_procs": [{"pid": 4101, "gpu": 0, "used_mib": 128666}],
        "host": {"cpu_pct": 12.5, "ncpu": 64, "mem_used_mib": 80_000, "mem_total_mib": 1_000_000,
                 "load": [3.1, 2.9, 2.5]},
        "serve": {"match": ["vllm", "serve"], "root": 4100, "procs": [
            {"pid": 4100, "ppid": 1, "depth": 0, "comm": "python",
             "argv": ["/root/venv/bin/python", "-m", "vllm.entrypoints.cli.main", "serve"],
             "state": "S", "start_time": 1_699_999_000.0},
            {"pid": 4101, "ppid": 4100, "depth": 1, "comm": "VLLM::EngineCor",
             "argv": ["VLLM::EngineCore_DP0"], "state": "R", "start_time": 1_699_999_001.0}]},
    }
    return AgentSample.from_json(obj, 1_700_000_000.0)


def log_texts() -> list[str]:
    return [strip_ansi(t) for t in split_lines((DATA / "incident-serve.log").read_bytes())]


def report() -> ChainReport:
    def link(id_: str, title: str, status: Status, summary: str, hint: str = "",
             evidence: tuple[Evidence, ...] = (), details: dict[str, Any] | None = None
             ) -> LinkResult:
        return LinkResult(id=id_, title=title, status=status, summary=summary, hint=hint,
                          evidence=evidence, details=details or {})

    return ChainReport(host=HOST, profile="dflash-swa", seconds=0.9, links=(
        link("code-present", "Code present", Status.PASS,
             "vLLM 0.1.dev16016+g3cfc8f8b7 (commit 3cfc8f8b7d1e): PR #40898 branch symbols "
             "present; RECORD: 99 files verified"),
        link("fields-extracted", "Fields extracted", Status.PASS,
             "native config: HF reads it as-is (layer_types, use_sliding_window, "
             "sliding_window, max_window_layers)"),
        link("runtime-activation", "Runtime activation", Status.UNKNOWN,
             "no SWA evidence in the current run (vLLM logs nothing when it builds SWA "
             "layers); aux layers (2, 18, 34, 50, 64) = target_layer_ids + 1",
             "run `vllm-console restart gpu1 --trace`: the traced run logs how each drafter "
             "layer is built"),
        link("config-correct", "Config correct", Status.FAIL,
             "3 field(s) differ from z-lab/Qwen3.6-27B-DFlash: mask_token_id 248064 (want "
             "248070), target_layer_ids [1, 17, 33, 49, 63] (want [1, 16, 31, 46, 61]), "
             "layer_types",
             f"fix {DRAFT_DIR}/config.json from the reference; then restart vllm serve",
             (Evidence.make("read-config", f"cat {DRAFT_DIR}/config.json", 0,
                            '{"architectures": ["DFlashDraftModel"], "dflash_config": '
                            '{"mask_token_id": 248064, ...}'),
              Evidence.make("draft-config-checks", "", None,
                            "reference z-lab/Qwen3.6-27B-DFlash (shipped with profile "
                            "dflash-swa)\nFAIL  mask_token_id 248064 != reference 248070\n"
                            "FAIL  target_layer_ids [1,17,33,49,63] != reference "
                            "[1,16,31,46,61]\nOK    sliding_window matches")),
             {"findings": [{"level": "fail", "check": f"reference:{key}"} for key in
                           ("mask_token_id", "target_layer_ids", "layer_types")],
              "file": f"{DRAFT_DIR}/config.json"}),
    ), broken_link="runtime-activation", root_cause="config-correct")


def draft_diff() -> DraftDiff:
    profile = load_profile("dflash-swa")
    spec = profile.links.config_correct
    draft = draft_config(WRONG_DRAFT)
    ref_spec = profile.references[0]
    import json

    reference = json.loads(Path(profile.base_dir, ref_spec.file).read_text())
    return DraftDiff(path=f"{DRAFT_DIR}/config.json", reference=ref_spec.name,
                     reference_source="shipped with profile dflash-swa",
                     rows=compare(draft, reference, spec.compare),
                     findings=tuple(check_invariants(draft, target_config(), spec)),
                     full_diff=json_diff(draft, reference), draft=draft,
                     reference_config=reference)


NOW = 1_700_000_000.0
"""The recording's host clock (the agent sample's time)."""


def serving() -> ServingStatus:
    """The scrapes' verdict of the recording: serving, with a minute's latency window."""
    def p(p50: float, p90: float, p99: float) -> dict[str, float]:
        return {"p50": p50, "p90": p90, "p99": p99}

    return ServingStatus(EngineState.OK, "6 running, 0 waiting, tokens generated",
                         latency={"ttft_s": p(0.21, 0.52, 0.8), "itl_s": p(0.031, 0.045, 0.052),
                                  "e2e_s": p(2.1, 3.6, 4.0), "queue_s": p(0.0, 0.004, 0.01)},
                         window_s=58.0, requests={"preemptions_total": 0,
                                                  "finished": {"stop": 120, "length": 3,
                                                               "abort": 1, "error": 0},
                                                  "errors_total": 0}, at=NOW)


class ReplaySession(HostSession):
    """A HostSession whose telemetry is the recording above."""

    def __init__(self) -> None:
        config = HostConfig(name=HOST, hostname="10.1.230.172", username="root")
        super().__init__(config, LocalHost(HOST))
        run_log = RunLog()
        texts = log_texts()
        notable, _ = run_log.feed_texts(texts, None)
        self._texts = texts
        self._notable = notable
        self._run = run_log.info
        self._spec = run_log.spec.state()
        throughput = self._run.throughput
        self._load = load_from_throughput(throughput, NOW) if throughput else ServerLoad()
        self._snap = replace(HostSnapshot(HOST), link=LinkStatus(ConnectionState.CONNECTED),
                             sample=sample(), run=self._run, spec_decode=self._spec,
                             readiness=Readiness(Health.HEALTHY), load=self._load,
                             serving=serving())
        self.last_report = report()
        self.last_diff = draft_diff()

    @property
    def snapshot(self) -> HostSnapshot:  # type: ignore[override]
        return self._snap

    async def run(self, on_event) -> None:  # type: ignore[no-untyped-def,override]
        on_event(ev.LinkChanged(HOST, LinkStatus(ConnectionState.CONNECTED)))
        on_event(ev.GpuSampled(HOST, sample()))
        batch = LogBatch.of(LogEntry(i, t) for i, t in enumerate(self._texts))
        on_event(ev.LogLinesReceived(HOST, batch, ()))
        on_event(ev.RunUpdated(HOST, self._run, new_run=True))
        on_event(ev.SpecDecodeUpdated(HOST, self._spec))
        on_event(ev.LoadSampled(HOST, self._load))
        on_event(ev.ServingChanged(HOST, self._snap.serving))
        await asyncio.Event().wait()

    async def run_checks(self) -> ChainReport:
        return report()

    async def load_diff(self) -> DraftDiff:
        return draft_diff()


def replay_app() -> ConsoleApp:
    """The app on the recording, its checklist and diff filled as after a checks run."""
    session = ReplaySession()
    app = ConsoleApp([session], theme="vllm-dark", autostart_checks=False)
    screen = app.host_screen(HOST)
    screen.show_checks(ChecklistState(session.last_report))
    screen.show_diff(draft_diff())
    return app
