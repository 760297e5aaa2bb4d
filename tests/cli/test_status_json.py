"""`status --json` from snapshots the simulated host does not make: a server that is gone, one
that never started, a process whose log and port say nothing, a log line holding a secret.
(The scenarios themselves are in test_status_ssh, over the real sshd.)"""

from __future__ import annotations

from vllm_console.console.parsers.errors import ErrorEvent, ErrorKind
from vllm_console.console.telemetry.run_log import RunInfo
from vllm_console.console.telemetry.server import Health, Readiness, ServerLoad
from vllm_console.console.telemetry.snapshot import HostSnapshot, ServeInfo, iso_utc
from vllm_console.console.telemetry.startup import StartupState, StartupStatus

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
                                             source="metrics", at=STARTED))
    assert snap.status_json()["throughput"] == {
        "prompt_tps": None, "generation_tps": None, "running": 3, "waiting": 1,
        "kv_cache_usage_pct": 12.5, "prefix_cache_hit_rate_pct": None, "source": "metrics",
        "rates_source": None, "at": iso_utc(STARTED)}  # every figure says whence and how old


def test_errors_each_kind_once_with_its_first_line_and_no_secret() -> None:
    errors = (ErrorEvent(ErrorKind.LOGGED_ERROR, "auth failed for --api-key sk-live-123"),
              ErrorEvent(ErrorKind.ENGINE_FAILED, "EngineCore failed to start."),
              ErrorEvent(ErrorKind.LOGGED_ERROR, "a later one"))
    data = HostSnapshot("h", run=RunInfo(errors=errors)).status_json()
    assert [e["kind"] for e in data["errors"]] == ["logged-error", "engine-failed"]
    assert "sk-live-123" not in data["errors"][0]["line"]
    assert data["errors"][0]["line"].startswith("auth failed for --api-key <redacted>")
    assert data["errors"][1]["line"] == "EngineCore failed to start."


def test_a_ready_server_that_stopped_answering_is_not_ready() -> None:
    """Issue 24 break 6: the API server SIGSTOPped after start-up; /health times out."""
    snap = HostSnapshot("h", serve=ServeInfo(True, pid=7),
                        startup=StartupStatus(StartupState.READY, run_started=STARTED,
                                              now=STARTED + 600),
                        readiness=Readiness(Health.NOT_ANSWERING,
                                            detail="no answer within 5 s (the log says it "
                                                   "started)"))
    serve = snap.status_json()["serve"]
    assert serve["health"] == "not-answering"
    assert serve["state"] == "not-answering"
    assert serve["uptime_s"] == 600  # still up: the process lives


def test_the_serving_keys_are_there_and_null_without_metrics() -> None:
    data = HostSnapshot("h").status_json()
    assert data["latency"] == {"ttft_s": None, "itl_s": None, "e2e_s": None, "queue_s": None,
                               "window_s": None, "since_start": False, "source": None,
                               "at": None}
    assert data["requests"] == {"preemptions_total": None, "finished": None,
                                "errors_total": None}
    assert data["serve"]["engine"] == "unknown"
    assert data["serve"]["engine_reason"]


def test_an_engine_dead_error_in_the_current_run_is_a_dead_engine() -> None:
    line = ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.")
    snap = HostSnapshot("h", serve=ServeInfo(True, pid=7),
                        run=RunInfo(errors=(ErrorEvent(ErrorKind.ENGINE_DEAD, line),)),
                        startup=StartupStatus(StartupState.READY, run_started=STARTED,
                                              now=STARTED + 60),
                        readiness=Readiness(Health.HEALTHY))
    serve = snap.status_json()["serve"]
    assert serve["engine"] == "dead"
    assert "EngineDeadError" in serve["engine_reason"]


def test_the_text_says_whether_latency_is_a_windows_or_since_start() -> None:
    """One figure, one meaning: `--json` says `since_start`, and so does the text (issue 40)."""
    from vllm_console.console.cli.commands.status import render
    from vllm_console.console.telemetry.serving import ServingStatus

    p = {"p50": 0.2, "p90": 0.3, "p99": 0.4}
    since = ServingStatus(latency={"ttft_s": p, "itl_s": None, "e2e_s": p, "queue_s": None},
                          window_s=None, since_start=True, at=STARTED)
    data = HostSnapshot("h", serving=since).status_json()["latency"]
    assert (data["window_s"], data["since_start"], data["e2e_s"]) == (None, True, p)
    text = render(HostSnapshot("h", serving=since))
    assert "latency TTFT p50 0.2 s, p99 0.4 s; e2e p50 0.2 s, p99 0.4 s (since the server's " \
        "start: no request finished while status looked, /metrics)" in text
    window = ServingStatus(latency={"ttft_s": p, "itl_s": None, "e2e_s": p, "queue_s": None},
                           window_s=2.5, at=STARTED)
    assert "(over the last 2.5 s, /metrics)" in render(HostSnapshot("h", serving=window))
