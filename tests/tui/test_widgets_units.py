"""Widget logic that needs no running app: change marks, orphan detection, level ranks,
compact values, display safety."""

from __future__ import annotations

from vllm_console.console.hostclient.agent.samples import AgentSample
from vllm_console.console.output.display import safe_text
from vllm_console.console.parsers.engine import parse_engine_start
from vllm_console.widgets.draft_diff import _show
from vllm_console.widgets.engine_tree import changed_fields
from vllm_console.widgets.gpu_pane import _is_orphan, bar, sparkline
from vllm_console.widgets.log_pane import compile_query, level_rank

LINE = ("Initializing a V1 LLM engine (v0.1.dev1+gabc) with config: model='/m/T', "
        "speculative_config=SpeculativeConfig(method='dflash', model='/m/D', "
        "num_spec_tokens={n}), dtype=torch.bfloat16, enforce_eager=False")


def test_engine_fields_changed_since_the_previous_run_are_named() -> None:
    before = parse_engine_start(LINE.format(n=15))
    after = parse_engine_start(LINE.format(n=8))
    assert before is not None
    assert after is not None
    assert changed_fields(after, None) == {}
    assert changed_fields(after, after) == {}
    changes = changed_fields(after, before)
    assert list(changes) == ["speculative_config"]


def _sample(procs: list[dict[str, object]]) -> AgentSample:
    return AgentSample.from_json({"serve": {"root": procs[0]["pid"], "procs": procs},
                                  "gpu_procs": [{"pid": p["pid"], "gpu": 0, "used_mib": 10}
                                                for p in procs]}, 0.0)


def test_an_engine_core_without_its_api_server_is_an_orphan() -> None:
    api = {"pid": 10, "ppid": 1, "comm": "python", "argv": ["python", "-m", "vllm"]}
    engine = {"pid": 11, "ppid": 10, "comm": "VLLM::EngineCor",
              "argv": ["VLLM::EngineCore_DP0"]}
    whole = _sample([api, engine])
    assert not any(_is_orphan(p, whole) for p in whole.serve.procs)
    alone = _sample([{**engine, "ppid": 1}])
    assert _is_orphan(alone.serve.procs[0], alone)


def test_level_rank_reads_the_prefix_not_the_message() -> None:
    assert level_rank("(APIServer pid=1) INFO 05-14 10:00:00 [x.py:1] saw an ERROR here") == 1
    assert level_rank("(EngineCore_DP0 pid=2) ERROR 05-14 10:00:00 [x.py:1] boom") == 3
    assert level_rank("WARNING 05-14 10:00:00 [x.py:1] careful") == 2
    assert level_rank("Traceback (most recent call last):") == 3
    assert level_rank("plain text") == -1


def test_an_invalid_regex_is_searched_literally() -> None:
    pattern = compile_query("acceptance (")
    assert pattern is not None
    assert pattern.search("mean acceptance (x)")
    assert compile_query("") is None


def test_unknown_values_are_shown_as_unknown_never_as_zero() -> None:
    assert bar(None, 8, "red").plain.strip() == "?"
    assert bar(0.5, 8, "red").plain == "████░░░░"
    assert sparkline([0, 50, 100], 10) == "▁▅█"


def test_layer_types_read_compactly() -> None:
    assert _show(["sliding_attention"] * 4 + ["full_attention"]) == \
        "sliding_attention×4, full_attention"
    assert _show([1, 16, 31]) == "[1,16,31]"


def test_host_text_is_inert_on_screen() -> None:
    hostile = "a\x1b]0;pwned\x07b\x1b[2Jc\u202edcba\x00"
    shown = safe_text(hostile)
    assert "\x1b" not in shown
    assert "\u202e" not in shown
    assert "\x00" not in shown
    assert "<U+202E>" in shown
    assert safe_text("x" * 5000).endswith("[+3000 chars]")


def test_one_host_line_never_shows_as_several_rows() -> None:
    """U+2028/U+2029, a bare CR and the other separators `splitlines` breaks at: a line could
    otherwise fake a row (an ERROR line of its own making)."""
    hostile = "INFO ok\u2028ERROR fake\u2029ERROR two\rERROR three\x85\x0bx\x1cy"
    shown = safe_text(hostile)
    assert shown.splitlines() == [shown]
    assert "<U+2028>" in shown
    assert "<U+2029>" in shown


def test_a_gpu_process_in_a_container_is_shown_with_its_container() -> None:
    """The GPU pane names the container a process holding GPU memory runs in: the server's
    by its name, another by its short id (as `docker ps` shows it)."""
    from vllm_console.widgets.gpu_pane import GpuPane, GpuView

    ours, other = "a" * 64, "b" * 64
    sample = AgentSample.from_json({
        "serve": {"root": 10, "procs": [{"pid": 10, "ppid": 1, "comm": "vllm",
                                         "argv": ["vllm", "serve"]}]},
        "gpu_procs": [{"pid": 10, "gpu": 0, "used_mib": 2048, "container": ours},
                      {"pid": 20, "gpu": 0, "used_mib": 1024, "container": other},
                      {"pid": 30, "gpu": 0, "used_mib": 512}]}, 0.0)
    pane = GpuPane()
    pane.set_reactive(GpuPane.view, GpuView(sample, containers={ours: "vllm-box"}))
    shown = pane._processes(sample)
    assert shown is not None
    assert "vllm pid 10 [vllm-box] 2.0 GiB" in shown.plain
    assert f"? pid 20 [{'b' * 12}] 1.0 GiB" in shown.plain
    assert "? pid 30 0.5 GiB" in shown.plain


def test_a_load_chart_stacks_its_levels_over_its_rows() -> None:
    from vllm_console.widgets.serving_pane import chart

    assert chart([0.0, 0.5, 1.0], 3, 1) == ["▁▄█"]
    # Two rows: half fills the bottom row, full both; a zero is a tick on the bottom row.
    assert chart([0.0, 0.5, 1.0], 3, 2) == ["  █", "▁██"]
    assert chart([1.0, 0.25, 0.0, 2.0], 2, 2) == [" █", "▁█"]  # the newest `width`, capped


def test_the_latency_table_says_which_requests_it_describes() -> None:
    from vllm_console.console.telemetry.serving_span import ServingSpan
    from vllm_console.widgets.latency_table import seconds, span_words

    assert span_words(None, 60) == "no /metrics scrape yet"
    assert span_words(ServingSpan({}, 12, 58.0), 60) == "last 58 s · 12 requests"
    assert span_words(ServingSpan({}, 1), 60) == \
        "since start-up · 1 request (none finished in the last 60 s)"
    assert [seconds(v) for v in (None, 0.0042, 0.21, 2.1, 35.0)] == \
        ["?", "4.2 ms", "210 ms", "2.10 s", "35.0 s"]
