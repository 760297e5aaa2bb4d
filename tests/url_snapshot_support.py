"""A URL-only console on a recording, for the SVG snapshot: twenty `/metrics` scrapes of a
busy server two seconds apart, written here in vLLM 0.32's format (its bucket bounds, labels and
names) from a seeded generator, so that the frame is byte-for-byte repeatable. Everything shown
went through the real parser, telemetry, session and widgets; the live path is the Pilot test on
the simulated server (tests/sources/test_url_mode.py)."""

from __future__ import annotations

import asyncio
import math
import random

from vllm_console.console.parsers.metrics import parse_metrics
from vllm_console.console.settings import HostEntry
from vllm_console.console.sources.url import UrlSession, url_session
from vllm_console.console.telemetry import events as ev
from vllm_console.console.telemetry.server import Health, Readiness
from vllm_console.console.transport.host import ConnectionState, LinkStatus
from vllm_console.console.tui.app import ConsoleApp

URL = "http://gpu1.example:8000"
HOST = "gpu1.example:8000"
MODEL = "/models/Qwen3.6-27B"
NOW = 1_700_000_000.0
STEPS = 20
STEP_S = 2.0
LABELS = f'engine="0",model_name="{MODEL}"'
TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
        10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
       20.0, 40.0, 80.0)
REQUEST = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
TOKENS = tuple(float(m * 10 ** e) for e in range(6) for m in (1, 2, 5) if m * 10 ** e <= 262144)
FAMILIES = {"time_to_first_token_seconds": TTFT, "inter_token_latency_seconds": ITL,
            "request_time_per_output_token_seconds": ITL, "e2e_request_latency_seconds": REQUEST,
            "request_queue_time_seconds": REQUEST, "request_prefill_time_seconds": REQUEST,
            "request_decode_time_seconds": REQUEST, "request_prompt_tokens": TOKENS,
            "request_generation_tokens": TOKENS}
PER_POSITION = (0.15, 0.02) + (0.0,) * 13  # the incident: acceptance ~1.17 of 15 tokens


class Recording:
    """Cumulative series of a server under a load that rises and falls."""

    def __init__(self) -> None:
        self.rng = random.Random(40)
        self.observed: dict[str, list[float]] = {name: [] for name in FAMILIES}
        self.counters = dict.fromkeys(("prompt", "generation", "queries", "hits", "drafts"), 0.0)
        self.finished = {"stop": 0.0, "length": 0.0, "abort": 0.0, "error": 0.0}
        self.gauges = (0.0, 0.0, 0.0)

    def step(self, i: int) -> str:
        rng = self.rng
        running = round(6 + 4 * math.sin(i / 3))
        waiting = max(0, running - 8)
        self.gauges = (running, waiting, 0.02 + 0.01 * running)
        for _ in range(running // 2 + 1):
            queued = rng.uniform(0.2, 1.2) if waiting else rng.uniform(0.001, 0.02)
            prefill = rng.lognormvariate(-1.8, 0.4)
            itl = rng.uniform(0.025, 0.04)
            generated = rng.randint(64, 512)
            prompt = rng.randint(200, 3000)
            for name, value in (("time_to_first_token_seconds", queued + prefill),
                                ("inter_token_latency_seconds", itl),
                                ("request_time_per_output_token_seconds", itl),
                                ("e2e_request_latency_seconds", queued + prefill + itl * generated),
                                ("request_queue_time_seconds", queued),
                                ("request_prefill_time_seconds", prefill),
                                ("request_decode_time_seconds", itl * generated),
                                ("request_prompt_tokens", prompt),
                                ("request_generation_tokens", generated)):
                self.observed[name].append(value)
            self.counters["prompt"] += prompt
            self.counters["queries"] += prompt
            self.counters["hits"] += prompt * 0.35
            self.finished["length" if generated > 490 else "stop"] += 1
        self.counters["generation"] += running * STEP_S / 0.03
        self.counters["drafts"] += running * STEP_S / 0.03 / 1.17
        return self.render()

    def render(self) -> str:
        running, waiting, kv = self.gauges
        c = self.counters
        drafts = round(c["drafts"])
        out = [f"vllm:num_requests_running{{{LABELS}}} {running}",
               f"vllm:num_requests_waiting{{{LABELS}}} {waiting}",
               f"vllm:kv_cache_usage_perc{{{LABELS}}} {kv}",
               f"vllm:prompt_tokens_total{{{LABELS}}} {c['prompt']}",
               f"vllm:generation_tokens_total{{{LABELS}}} {c['generation']}",
               f"vllm:prefix_cache_queries_total{{{LABELS}}} {c['queries']}",
               f"vllm:prefix_cache_hits_total{{{LABELS}}} {c['hits']}",
               f"vllm:num_preemptions_total{{{LABELS}}} 0.0",
               f"vllm:spec_decode_num_drafts_total{{{LABELS}}} {drafts}",
               f"vllm:spec_decode_num_draft_tokens_total{{{LABELS}}} {drafts * 15}",
               f"vllm:spec_decode_num_accepted_tokens_total{{{LABELS}}} "
               f"{sum(round(drafts * p) for p in PER_POSITION)}"]
        out += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{LABELS},position="{k}"}} '
                f"{round(drafts * p)}" for k, p in enumerate(PER_POSITION)]
        out += [f'vllm:request_success_total{{{LABELS},finished_reason="{reason}"}} {n}'
                for reason, n in self.finished.items()]
        for name, bounds in FAMILIES.items():
            values = self.observed[name]
            for bound in (*bounds, math.inf):
                le = "+Inf" if bound == math.inf else repr(bound)
                count = sum(v <= bound for v in values)
                out.append(f'vllm:{name}_bucket{{{LABELS},le="{le}"}} {float(count)}')
            out += [f"vllm:{name}_count{{{LABELS}}} {float(len(values))}",
                    f"vllm:{name}_sum{{{LABELS}}} {sum(values)}"]
        return "\n".join(out) + "\n"


class UrlReplaySession(UrlSession):
    """A URL-only session whose server is the recording: healthy, then `feed` scrapes."""

    async def run(self, on_event) -> None:  # type: ignore[no-untyped-def,override]
        telemetry = self.url_telemetry
        telemetry._on_event = on_event
        link = LinkStatus(ConnectionState.CONNECTED, "HTTP")
        telemetry.url_host.set_link(link)
        readiness = Readiness(Health.HEALTHY, URL, 200, "", (MODEL,), NOW)
        telemetry._engine_version("0.32.0")
        telemetry._update(link=link, readiness=readiness)
        on_event(ev.AgentChanged(self.name, telemetry.snapshot.agent))
        on_event(ev.LinkChanged(self.name, link))
        on_event(ev.ReadinessChanged(self.name, readiness))
        await asyncio.Event().wait()


def url_replay_app() -> tuple[ConsoleApp, UrlReplaySession]:
    made = url_session(HOST, URL, HostEntry(url=URL))
    session = UrlReplaySession(made.name, made.url_telemetry.source)
    return ConsoleApp([session], theme="vllm-dark", autostart_checks=False), session


async def feed(session: UrlReplaySession, pilot) -> None:  # type: ignore[no-untyped-def]
    """The recording's scrapes, each taken in by the screen before the next (events of one
    kind still queued replace each other)."""
    recording = Recording()
    for i in range(STEPS):
        session.url_telemetry._metrics(parse_metrics(recording.step(i)), NOW + STEP_S * i)
        await pilot.pause()
