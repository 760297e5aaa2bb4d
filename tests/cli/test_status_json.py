"""`status --json` from snapshots the simulated host does not make: a server that is gone, one
that never started, a process whose log and port say nothing, a log line holding a secret.
(The scenarios themselves are in test_status_ssh, over the real sshd.)"""

from __future__ import annotations

from console.parsers.errors import ErrorEvent, ErrorKind
from console.telemetry.run_log import RunInfo
from console.telemetry.server import Health, Readiness, ServerLoad
from console.telemetry.snapshot import HostSnapshot, ServeInfo, iso_utc
from console.telemetry.startup import StartupState, StartupStatus

STARTED = 1_796_276_255.0  # 2026-12-03T05:37:35Z


def test_a_server_gone_after_a_run_without_a_fatal_line_is_exited() -> None:
    snap = HostSnapshot("h", serve=ServeInfo(False, log="/l"),
                        run=RunInfo(started_at=STARTED),
                        startup=StartupStatus(StartupState.EXITED, run_started=STARTED,
                                              now=STARTED + 60),
                        readiness=Readiness(Health.DOWN))
    serve = snap.status_json()["serve"]
    assert serve["state"] == "exited"
    assert serve["started_at"] == "2026-12-03T05:37:35Z" == iso_utc(STARTED)
    assert serve["uptime_s"] is None  # nothing is up
    assert serve["phase"] is None


def test_no_process_and_no_run_in_the_log_is_down() -> None:
    snap = HostSnapshot("h", serve=ServeInfo(False),
                        startup=StartupStatus(StartupState.NOT_RUNNING),
                        readiness=Readiness(Health.DOWN))
    data = snap.status_json()
    assert data["serve"]["state"] == "down"
    assert data["serve"]["started_at"] is None
    assert data["throughput"] == dict.fromkeys(data["throughput"])  # every figure null
    assert data["errors"] == []


def test_a_process_whose_log_and_port_say_nothing_is_unknown_not_starting() -> None:
    quiet = HostSnapshot("h", serve=ServeInfo(True, pid=7),
                         startup=StartupStatus(StartupState.STARTING, now=STARTED),
                         readiness=Readiness(Health.UNKNOWN))
    assert quiet.status_json()["serve"]["state"] == "unknown"
    refused = HostSnapshot("h", serve=ServeInfo(True, pid=7),
                           startup=StartupStatus(StartupState.STARTING, now=STARTED),
                           readiness=Readiness(Health.STARTING))
    assert refused.status_json()["serve"]["state"] == "starting"  # the port refuses: coming up


def test_a_fatal_line_is_failed_while_the_process_lingers() -> None:
    snap = HostSnapshot("h", serve=ServeInfo(True, pid=7),
                        startup=StartupStatus(StartupState.FAILED, run_started=STARTED,
                                              failure="EngineCore failed to start.",
                                              now=STARTED + 5),
                        readiness=Readiness(Health.STARTING))
    assert snap.status_json()["serve"]["state"] == "failed"


def test_load_from_metrics_alone_says_so_and_leaves_rates_null() -> None:
    snap = HostSnapshot("h", load=ServerLoad(running=3, waiting=1, kv_cache_usage_pct=12.5,
                                             source="metrics"))
    assert snap.status_json()["throughput"] == {
        "prompt_tps": None, "generation_tps": None, "running": 3, "waiting": 1,
        "kv_cache_usage_pct": 12.5, "prefix_cache_hit_rate_pct": None, "source": "metrics"}


def test_errors_each_kind_once_with_its_first_line_and_no_secret() -> None:
    errors = (ErrorEvent(ErrorKind.LOGGED_ERROR, "auth failed for --api-key sk-live-123"),
              ErrorEvent(ErrorKind.ENGINE_FAILED, "EngineCore failed to start."),
              ErrorEvent(ErrorKind.LOGGED_ERROR, "a later one"))
    data = HostSnapshot("h", run=RunInfo(errors=errors)).status_json()
    assert [e["kind"] for e in data["errors"]] == ["logged-error", "engine-failed"]
    assert "sk-live-123" not in data["errors"][0]["line"]
    assert data["errors"][0]["line"].startswith("auth failed for --api-key <redacted>")
    assert data["errors"][1]["line"] == "EngineCore failed to start."
