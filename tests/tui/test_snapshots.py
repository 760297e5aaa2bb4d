"""SVG snapshots of the console on a recorded incident (see tests/snapshot_support.py).

Plain `def` tests: `snap_compare` runs the app itself. After a deliberate visual change, run
`pytest tests/tui/test_snapshots.py --snapshot-update` and review the SVGs in the report.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.snapshot_support import replay_app

SIZE = (160, 50)


@pytest.fixture(autouse=True)
def _ages_hold_still(monkeypatch: pytest.MonkeyPatch) -> None:
    """The serving strip's ages move on with the local clock: on a loaded machine the app took
    over 5 s from the snapshot's data to its frame, and `<5 s ago` became `5 s ago` (a CI
    run). Held still here, the snapshot is what the figures say, however long it took."""
    import vllm_console.console.tui.serving_figures as figures

    monkeypatch.setattr(figures, "time", SimpleNamespace(monotonic=lambda: 1000.0))


def test_main_screen(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """You should see: the header (gpu1, connected), the serving strip (engine ok in green, 6
    running, KV 5.4%, prompt and generation tokens/s from the log; TTFT 210/800 ms, ITL, e2e,
    queue p50/p99 over the last 58 s from metrics; preemptions 0 and finished by reason; a
    trend line, one point each), two GPUs (GPU0 busy, 125.7 GiB held by
    VLLM::EngineCore_DP0), acceptance length 1.17 in the fail colour against ~6.4 expected with
    per-position rates, the checklist with runtime activation `unknown` in amber ("not proven:
    press R for a traced restart") and config correct `fail` in red (ROOT CAUSE, naming the
    field and the file: "mask_token_id +2 in …/config.json"), the draft
    diff with mask_token_id, target_layer_ids and layer_types marked ✘, and the serve log
    ending in SpecDecoding lines."""

    async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.3)

    assert snap_compare(replay_app(), terminal_size=SIZE, run_before=settle)


def test_evidence_view(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """You should see: the evidence of config-correct over the console: FAIL, its summary and
    hint, the probe `read-config` with its command and exit 0, and `draft-config-checks`
    with the failing fields; the footer offers `y` to copy the command."""

    async def open_evidence(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.3)
        screen = pilot.app.screen_for("gpu1")
        screen.checklist.focus()
        screen.checklist.highlighted = 3
        await pilot.press("enter")
        await pilot.pause(0.2)

    assert snap_compare(replay_app(), terminal_size=SIZE, run_before=open_evidence)


def test_full_draft_diff(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """You should see: the draft diff pane focused, the per-field table and invariants, then
    the full JSON diff (reference -> draft) with the wrong values in the fail colour."""

    async def full_diff(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.3)
        screen = pilot.app.screen_for("gpu1")
        screen.diff.focus()
        await pilot.press("d")
        await pilot.pause(0.2)

    assert snap_compare(replay_app(), terminal_size=SIZE, run_before=full_diff)


def test_help(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """You should see: the help dialog listing every key by section (console, host screen with
    z, v and 1-5, log pane, checklist, draft diff, evidence, anywhere)."""

    async def help_(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.3)
        await pilot.press("question_mark")
        await pilot.pause(0.2)

    assert snap_compare(replay_app(), terminal_size=SIZE, run_before=help_)


def test_url_screen(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """You should see, at 120x36 on a URL alone (issue 40): the header (URL only, the model,
    vLLM 0.32.0); the Serving pane (engine ok, then running, waiting, prompt and generation
    tok/s, KV cache and prefix hit, each with a three-row chart of its last twenty scrapes;
    finished by reason and preemptions since start-up); the Latency pane (TTFT, ITL, TPOT,
    e2e, queue, prefill, decode, then prompt and output lengths, at p50/p90/p99, `last 38 s`
    with its request count); the spec pane (15 speculative tokens, acceptance 1.17 in the
    fail colour against ~6.4, its history and the per-position rows); one line on what needs
    SSH; the footer."""
    from tests.url_snapshot_support import feed, url_replay_app

    app, session = url_replay_app()

    async def scrapes(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.3)
        await feed(session, pilot)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(120, 36), run_before=scrapes)
