"""URL-only mode against a real HTTP server (the simulated `vllm serve`, started with
`--api-key`): health, models, version and every /metrics figure, the host-only panes saying
they need SSH, and the key read from the environment or a file, never shown."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.request import urlopen

import pytest

from tests.fleet_support import start_sim, wait_http
from tests.prometheus import free_port
from vllm_console.checks.profile import Acceptance
from vllm_console.console.settings import ConfigError, HostEntry
from vllm_console.console.sim import materialise, stop
from vllm_console.console.sources.url import UrlSession, read_api_key, url_session
from vllm_console.console.telemetry.server import Health
from vllm_console.console.telemetry.spec_decode import SpecDecodeStatus

KEY = "sk-test-7f3a9c-do-not-show"


@pytest.fixture(scope="module")
def sim_server() -> Iterator[str]:
    """The incident scenario's server at 127.0.0.1:PORT, wanting KEY on /v1."""
    tree = materialise("incident", Path(tempfile.mkdtemp(prefix="vc-url-")) / "h",
                       port=free_port(), startup_s=0.5, metrics_interval_s=0.3)
    proc = start_sim(tree, "127.0.0.1", "--api-key", KEY)
    try:
        wait_http(f"{tree.url}/health")
        drafted(tree.url)
        yield tree.url
    finally:
        stop(proc, timeout=5)
        stop(tree, timeout=5)


def drafted(url: str, timeout: float = 30.0) -> None:
    """Wait until the server has drafted: its counters since start-up are then what a first
    read finds (a test that ran first found none, and the next read gave an interval)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = urlopen(f"{url}/metrics", timeout=5).read().decode()
        if any(line.startswith("vllm:spec_decode_num_drafts_total") and
               float(line.rsplit(" ", 1)[1]) > 0 for line in text.splitlines()):
            return
        time.sleep(0.1)
    raise AssertionError(f"{url} drafted nothing in {timeout} s")


def entry(tmp_path: Path, url: str, key: str | None = KEY) -> HostEntry:
    key_file = tmp_path / "key"
    key_file.write_text(f"{key}\n" if key else "")
    return HostEntry(url=url, api_key_file=str(key_file))


async def poll_until(session: UrlSession, done, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    telemetry = session.url_telemetry
    deadline = asyncio.get_running_loop().time() + timeout
    while not done(session.snapshot):
        assert asyncio.get_running_loop().time() < deadline, session.snapshot.readiness
        await telemetry.poll()
        await asyncio.sleep(0.35)


async def test_every_figure_from_the_url_alone(sim_server: str, tmp_path: Path) -> None:
    session = url_session("gpu-a", sim_server, entry(tmp_path, sim_server))
    await poll_until(session, lambda s: s.spec_decode.latest is not None
                     and s.load is not None and s.load.generation_tps is not None)
    snap = session.snapshot
    assert snap.readiness.health is Health.HEALTHY
    assert snap.readiness.models
    assert snap.readiness.models[0].endswith("Qwen3.6-27B")
    assert session.url_telemetry.version  # /version
    spec = snap.spec_decode
    assert spec.status is SpecDecodeStatus.ACTIVE
    assert spec.latest is not None
    assert 1.0 < spec.latest.mean_acceptance_length < 1.6
    assert spec.latest.per_position  # per-position acceptance from the counters' deltas
    assert spec.totals is not None  # since the server started
    load = snap.load
    assert load.running is not None
    assert load.kv_cache_usage_pct is not None
    assert load.generation_tps > 0
    assert load.prompt_tps is not None
    assert load.prefix_cache_hit_pct is not None
    assert load.source == "metrics"
    summary = session.url_telemetry.summary()
    assert f"URL only: {sim_server}" in summary
    assert "vLLM " in summary
    model = snap.readiness.models[0]
    assert model.rstrip("/").rsplit("/", 1)[-1] in summary  # a path: its last part
    # `status --json`-shaped picture: what needs the host is null, not invented.
    status = snap.status_json()
    assert status["gpus"] == []
    assert status["gpu_source"] == "none"
    assert "needs SSH" in status["gpu_source_reason"]
    # The engine's version is knowable from the URL (`/version`): the object says it.
    assert status["engine"]["version"] == session.url_telemetry.version
    answer = await asyncio.to_thread(lambda: urlopen(f"{sim_server}/version", timeout=5).read())
    assert status["engine"]["version"] == json.loads(answer)["version"]


async def test_the_first_read_gives_the_acceptance_since_start_up(sim_server: str,
                                                                  tmp_path: Path) -> None:
    """One poll (the first thing a URL-only screen does) is enough for the acceptance figure:
    the counters since start-up, said so; the first interval's figure replaces them."""
    session = url_session("gpu-a", sim_server, entry(tmp_path, sim_server))
    await poll_until(session, lambda s: s.spec_decode.totals is not None)
    spec = session.snapshot.spec_decode
    shown = spec.shown
    assert shown is not None
    sample, source = shown
    assert source == "metrics · since start-up"
    assert 1.0 < sample.mean_acceptance_length < 1.6
    assert spec.summary.startswith("acceptance length 1.")
    assert spec.summary.endswith("(metrics · since start-up)")
    await poll_until(session, lambda s: s.spec_decode.latest is not None)
    assert session.snapshot.spec_decode.shown[1] == "metrics"  # type: ignore[index]


async def test_without_the_key_the_server_says_401_and_we_say_why(sim_server: str) -> None:
    session = url_session("gpu-a", sim_server, HostEntry(url=sim_server))
    await session.url_telemetry.poll()
    readiness = session.snapshot.readiness
    assert readiness.health is Health.HEALTHY  # /health needs no key
    assert readiness.models == ()
    assert "401" in readiness.detail
    assert "api_key_env or api_key_file" in readiness.detail


async def test_the_key_is_never_shown(sim_server: str, tmp_path: Path) -> None:
    session = url_session("gpu-a", sim_server, entry(tmp_path, sim_server))
    await poll_until(session, lambda s: bool(s.readiness.models))
    bundle = json.dumps(session.evidence_bundle([]), default=repr)
    for text in (bundle, repr(session.url_telemetry.source), repr(session.snapshot),
                 session.url_telemetry.summary()):
        assert KEY not in text


def test_key_from_env_or_file_and_clear_errors(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_VLLM_KEY", KEY)
    assert read_api_key(HostEntry(url="http://h:8000", api_key_env="MY_VLLM_KEY")) == KEY
    assert read_api_key(entry(tmp_path, "http://h:8000")) == KEY
    monkeypatch.delenv("MY_VLLM_KEY")
    with pytest.raises(ConfigError, match="api_key_env MY_VLLM_KEY: the variable is not set"):
        read_api_key(HostEntry(url="http://h:8000", api_key_env="MY_VLLM_KEY"))
    with pytest.raises(ConfigError, match="api_key_file .*: empty"):
        read_api_key(entry(tmp_path, "http://h:8000", key=None))
    with pytest.raises(ConfigError, match="cannot read"):
        read_api_key(HostEntry(url="http://h:8000", api_key_file=str(tmp_path / "none")))
    # A bare --url reads vLLM's own variable.
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    assert read_api_key(None, default_env="VLLM_API_KEY") == KEY


async def test_host_actions_say_they_need_ssh(sim_server: str, tmp_path: Path) -> None:
    from vllm_console.console.session.host_session import ActionError

    session = url_session("gpu-a", sim_server, entry(tmp_path, sim_server))
    assert session.readonly
    for action in (session.run_checks(), session.load_diff(), session.plan_restart()):
        with pytest.raises(ActionError, match=r"needs SSH to the host: add `ssh = \"user@host\"` "
                                              r"beside `url` in its \[hosts.gpu-a\] entry"):
            await action
    with pytest.raises(Exception, match="needs SSH"):
        await session.host.read_file("/etc/passwd")


@pytest.mark.parametrize("made", ["before", "after the first frame"])
async def test_the_console_on_a_url(sim_server: str, tmp_path: Path, made: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Pilot: the header and the speculative pane live; GPU, chain, draft diff and log say
    they need SSH. The command line makes the session after the first frame (its imports are
    ~0.08 s of the start-up): that frame is already the URL-only layout."""
    from tests.app_support import screen_text, wait_until
    from vllm_console.console.cli.commands.tui import url_pending
    from vllm_console.console.tui.app import ConsoleApp

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    if made == "before":
        app = ConsoleApp([url_session("gpu-a", sim_server, entry(tmp_path, sim_server))])
    else:
        app = ConsoleApp([url_pending("gpu-a", sim_server, entry(tmp_path, sim_server))])
        first = app.host_screen("gpu-a")
        assert first.session is None  # not made yet
        assert first.server_only  # laid out for the URL from the first frame
    async with app.run_test(size=(200, 50)) as pilot:
        screen = app.screen_for("gpu-a")
        await wait_until(pilot, lambda: app.screen_for("gpu-a") is not None, what="the screen")
        screen = app.screen_for("gpu-a")
        assert screen is not None
        await wait_until(pilot, lambda: "vLLM " in screen.header.activity, what="the header")
        assert screen.header.activity.startswith(f"URL only: {sim_server}")
        await wait_until(pilot, lambda: screen.spec.view.state is not None
                         and screen.spec.view.state.latest is not None, 30, "acceptance")
        assert screen.spec.view.state.latest.mean_acceptance_length < 1.6
        expected = screen.spec.view.expected
        assert isinstance(expected, Acceptance)
        assert expected.high == 6.4  # the profile's range
        assert "GPU telemetry needs SSH" in screen.gpus.view.error
        assert "the verification chain needs SSH" in screen.checklist.state.error
        assert "the draft config diff needs SSH" in screen.diff.diff.error
        assert "the engine config (from the log) needs SSH" in screen.engine.view.note
        assert any("the serve log needs SSH" in line for line in screen.log_pane.visible_lines())
        assert not app.screen.check_action("restart", ())  # read-only: no restart offered
        # What the URL gives gets the room: the serving strip's figures, from /metrics.
        await wait_until(pilot, lambda: screen.serving.view.latency is not None
                         and screen.serving.view.generation_tps is not None, 30,
                         "the serving figures")
        view = screen.serving.view
        assert view.engine == "ok", view.engine_reason
        assert view.running is not None
        assert view.kv_cache_usage_pct is not None
        assert view.load_source == "metrics"
        text = screen_text(app)
        assert "engine ok" in text
        assert "[metrics · " in text
        # The counters give the number of speculative tokens, not the method or the drafter.
        assert "15 speculative tokens · method and drafter: not in /metrics" in text
        assert "? · " not in text
        # What needs SSH is one line, not three panes.
        for title in ("─ GPUs", "─ Checklist", "Draft config diff", "─ Serve log"):
            assert title not in text
        ssh_lines = [line for line in text.splitlines() if "needs SSH" in line]
        assert len(ssh_lines) == 1, ssh_lines
        assert ssh_lines[0].strip().startswith("needs SSH: GPUs, serve log, engine config, "
                                               "checks, draft diff, restart · add ssh = ")
        assert "Search" not in text.splitlines()[-1]  # the hidden log's keys are not offered
        assert not screen.check_action("maximize_pane", ("gpus",))
        await pilot.press("c")  # the chain by hand: the same message, no traceback
        await wait_until(pilot, lambda: not screen.checklist.state.running, what="checks")
        assert "needs SSH" in screen.checklist.state.error


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vllm_console", *args], capture_output=True,
                          text=True, timeout=30, env=env)


@pytest.mark.programs
@pytest.mark.parametrize(("args", "message"), [
    (("--url", "ftp://h:1"), "--url 'ftp://h:1': not an http:// or https:// URL"),
    (("--url", "http://"), "no host"),
])
def test_bad_url_is_one_line(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    proc = run_cli(*args, env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)})
    assert proc.returncode == 2
    assert message in proc.stderr
    assert proc.stderr.count("\n") == 1


@pytest.mark.programs
@pytest.mark.parametrize("command", ["check", "restart"])
def test_url_only_entry_refuses_ssh_commands_in_one_line(tmp_path: Path, command: str) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text('[hosts.gpu-a]\nurl = "http://127.0.0.1:9"\napi_key_env = "X"\n')
    extra = ["--yes"] if command == "restart" else []
    proc = run_cli(command, "gpu-a", "--config", str(config), *extra)
    assert proc.returncode == {"check": 3, "restart": 2}[command]
    assert "has only a `url`: this needs SSH" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_status_of_a_url_only_entry_prints_what_the_url_tells(sim_server: str,
                                                               tmp_path: Path) -> None:
    """`status` refused a URL-only entry ("needs SSH") though the URL tells health, the model,
    the speculative figures, the load, latency and the engine's progress (issue 27): it prints
    those, the SSH-only parts null (JSON) or named (text), and never the key."""
    config = tmp_path / "hosts.toml"
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    config.write_text(f'[hosts.web]\nurl = "{sim_server}"\napi_key_file = "{key}"\n')
    proc = run_cli("status", "web", "--config", str(config), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["serve"]["health"] == "healthy"
    assert data["serve"]["engine"] in ("ok", "idle")
    assert data["serve"]["pid"] is None
    assert data["spec_decode"]["mean_acceptance_length"] is not None
    assert data["throughput"]["source"] == "metrics"
    assert data["gpus"] == []
    text = run_cli("status", "web", "--config", str(config))
    assert text.returncode == 0, text.stderr
    assert "needs SSH" in text.stdout
    assert "acceptance" in text.stdout
    assert KEY not in proc.stdout + text.stdout + proc.stderr + text.stderr


@pytest.mark.programs
async def test_an_outage_dims_the_url_screen_and_says_how_old(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """The SSH screen dims its panes when the link drops; the URL screen does the same when
    the server stops answering: the figures stay, marked stale with their age, and the
    metrics badge loses its green."""
    from tests.app_support import screen_text, wait_until
    from vllm_console.console.telemetry.host_telemetry import TelemetryOptions
    from vllm_console.console.tui.app import ConsoleApp

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    tree = materialise("healthy", tmp_path / "h", port=free_port(), startup_s=0.5,
                       metrics_interval_s=0.3)
    proc = start_sim(tree, "127.0.0.1")
    try:
        wait_http(f"{tree.url}/health")
        session = url_session("gpu-a", tree.url, HostEntry(url=tree.url))
        session.telemetry.options = TelemetryOptions(metrics_interval_s=0.5,
                                                     health_interval_s=0.5)
        app = ConsoleApp([session])
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_until(pilot, lambda: app.screen_for("gpu-a") is not None
                             and app.screen_for("gpu-a").serving.view.engine == "ok", 30,
                             "the serving figures")
            screen = app.screen_for("gpu-a")
            assert screen is not None
            assert not screen.header.stale
            # At 160 columns the header names the model (a path: its last part).
            model = session.snapshot.readiness.models[0].rsplit("/", 1)[-1]
            await wait_until(pilot, lambda: model in screen_text(app).splitlines()[0], 10,
                             "the model in the header")
            stop(proc, timeout=5)
            await wait_until(pilot, lambda: screen.header.stale, 15, "the outage")
            assert screen.serving.view.running is not None  # the figures stay, marked old
            assert screen.serving.border_subtitle.startswith("stale · last sample ")
            assert screen.spec.border_subtitle.startswith("stale · last sample ")
    finally:
        stop(proc, timeout=5)
        stop(tree, timeout=5)


async def test_a_url_where_nothing_listens_says_connection_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: against a closed port the header said `reconnecting in 2 s` for ever with no
    reason, the spec pane `waiting for the serve log…` (a URL has no log) and the gpu and log
    badges showed. The reason, with the URL; what the pane waits for; the metrics badge only."""
    from tests.app_support import screen_text, wait_until
    from vllm_console.console.tui.app import ConsoleApp

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    url = f"http://127.0.0.1:{free_port()}"
    app = ConsoleApp([url_session("gpu-a", url, HostEntry(url=url))])
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_until(pilot, lambda: app.screen_for("gpu-a") is not None, what="the screen")
        screen = app.screen_for("gpu-a")
        assert screen is not None
        await wait_until(pilot, lambda: "connection refused" in screen_text(app)
                         .splitlines()[0], 15, "the reason in the header")
        header = screen_text(app).splitlines()[0]
        assert f"connection refused at {url}" in header, header
        assert " gpu:" not in header, header
        assert " log:" not in header, header
        assert " metrics:" in header, header
        text = screen_text(app)
        assert "waiting for the serve log" not in text
        assert "waiting for the server's /metrics…" in text


@pytest.mark.programs
def test_status_of_a_url_where_nothing_listens_says_why(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "hosts.toml"
    config.write_text(f'[hosts.gpu-a]\nurl = "{url}"\n')
    done = run_cli("status", "gpu-a", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert f"serve   not-answering (connection refused) at {url} " in done.stdout, done.stdout


def approx_figures(figures: object) -> object:
    if not isinstance(figures, dict):
        return figures
    return {k: None if v is None else pytest.approx(v, rel=1e-9) for k, v in figures.items()}


async def test_the_url_screen_at_120x36_is_full(sim_server: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: at 120x36 the URL screen showed one line of serving figures (`p99 TTFT ?`)
    and an empty spec pane. Now: a latency table (TTFT, ITL, TPOT, e2e, queue, prefill, decode)
    and the request shapes at p50/p90/p99 since start-up until the window has requests, then
    over the window, each figure equal to Prometheus's histogram_quantile on the histograms
    the session scraped; running, waiting, KV and finish reasons of the last scrape, with
    their history; acceptance and its history; and the one line on what SSH adds."""
    from textual.widgets import Static

    from tests.app_support import screen_text, wait_until
    from tests.sources.url_screen_support import (
        RecordingSource,
        expected_percentiles,
        value,
    )
    from vllm_console.console.telemetry.host_telemetry import TelemetryOptions
    from vllm_console.console.tui.app import ConsoleApp
    from vllm_console.widgets.latency_table import LATENCY_ROWS, seconds

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    session = url_session("gpu-a", sim_server, entry(tmp_path, sim_server))
    session.telemetry.options = TelemetryOptions(metrics_interval_s=0.5, health_interval_s=0.5)
    recorder = RecordingSource(session.url_telemetry.source)
    session.url_telemetry.source = recorder  # type: ignore[assignment]
    app = ConsoleApp([session])
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.screen_for("gpu-a") is not None, what="the screen")
        screen = app.screen_for("gpu-a")
        assert screen is not None

        async def hold_after(scrapes: int) -> None:
            await wait_until(pilot, lambda: len(recorder.bodies) >= scrapes, 30, "scrapes")
            recorder.hold()
            await wait_until(pilot, lambda: recorder.held, 10, "the next poll to wait")
            await pilot.pause(0.2)  # the last scrape's events reach the screen

        # The first scrape: no window yet, so since start-up, and said so.
        await hold_after(1)
        first = recorder.bodies[0]
        span = screen.latency.view.span
        assert span is not None
        assert span.since_start
        assert span.requests == value(first, "vllm:e2e_request_latency_seconds_count") > 0
        expected = expected_percentiles(first)
        assert {k: approx_figures(v) for k, v in span.figures.items()} == expected
        assert "since start-up" in screen_text(app)

        # Then the window, once requests finish in it.
        recorder.release()
        await wait_until(pilot, lambda: len(recorder.bodies) >= 4 and screen.latency.view.span
                         is not None and not screen.latency.view.span.since_start, 30,
                         "the window")
        await hold_after(len(recorder.bodies))
        last, before = recorder.bodies[-1], recorder.bodies[-2]
        span = screen.latency.view.span
        assert span is not None
        assert not span.since_start
        expected = expected_percentiles(last, first)  # the window: since the first scrape
        assert {k: approx_figures(v) for k, v in span.figures.items()} == expected
        window_requests = value(last, "vllm:e2e_request_latency_seconds_count") - \
            value(first, "vllm:e2e_request_latency_seconds_count")
        assert span.requests == window_requests > 0
        text = screen_text(app)
        assert f"last {span.window_s:.0f} s · {window_requests:.0f} requests" in text
        for key, name in LATENCY_ROWS:  # every row, as the table prints it
            figures = expected[key]
            assert figures is not None, key
            row = [seconds(figures[q]) for q in ("p50", "p90", "p99")]
            assert any(f"│ {name} {' '.join(row)} │" in " ".join(line.split())
                       for line in text.splitlines()), (name, row)
        prompt = expected["prompt_tokens"]
        assert prompt is not None
        assert f"{prompt['p50']:.0f} tok" in text

        # The load and the outcomes: the last scrape's.
        figures = screen.serving_pane.view.figures
        assert figures.running == value(last, "vllm:num_requests_running")
        assert figures.waiting == value(last, "vllm:num_requests_waiting")
        assert figures.kv_cache_usage_pct == pytest.approx(
            100 * value(last, "vllm:kv_cache_usage_perc"))
        finished = figures.requests["finished"]  # type: ignore[index]
        for reason in ("stop", "length", "abort", "error"):
            assert finished[reason] == value(last, "vllm:request_success_total",
                                             finished_reason=reason)
        assert f"stop {finished['stop']}" in text
        assert f"running {figures.running}" in " ".join(text.split())
        history = screen.serving_pane.view.history
        assert len(history["running"]) >= 2  # a history, not one figure
        assert len(history["generation_tps"]) >= 2

        # Acceptance: the last interval's, and its history.
        drafts = value(last, "vllm:spec_decode_num_drafts_total") - \
            value(before, "vllm:spec_decode_num_drafts_total")
        accepted = value(last, "vllm:spec_decode_num_accepted_tokens_total") - \
            value(before, "vllm:spec_decode_num_accepted_tokens_total")
        state = screen.spec.view.state
        assert state is not None
        assert state.latest is not None
        assert state.latest.mean_acceptance_length == pytest.approx(1 + accepted / drafts)
        assert f"acceptance length {1 + accepted / drafts:.2f}" in text
        assert len(screen.spec.view.history) >= 2
        assert "position" in text  # the per-position rows fit at 120x36

        # What SSH adds: one line, still.
        needs = str(screen.query_one("#needs-ssh", Static).render())
        assert needs.startswith("needs SSH: GPUs, serve log")
        assert sum("needs SSH" in line for line in text.splitlines()) == 1
        recorder.release()
