"""The host screen as a person reads it, driven with Pilot on the recorded incident
(tests/snapshot_support.py): honest states, the layouts by terminal size, and the keys, help and
palette. The live restart story is in test_app_pilot.py; the real-terminal layouts in
test_tmux_e2e.py."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator

import pytest
from rich.text import Text
from textual.pilot import Pilot

from tests.app_support import colour_of, screen_text, theme_colour
from tests.snapshot_support import DRAFT_DIR, HOST, replay_app
from vllm_console.console.telemetry import events as ev
from vllm_console.console.transport.host import ConnectionState, LinkStatus
from vllm_console.console.tui.app import ConsoleApp, TelemetryArrived
from vllm_console.console.tui.screens.evidence import EvidenceScreen
from vllm_console.console.tui.screens.help import HelpScreen
from vllm_console.console.tui.screens.host import HostScreen
from vllm_console.themes import THEMES
from vllm_console.widgets.checklist import Checklist

pytestmark = pytest.mark.usefixtures("state_home")


NOT_PROVEN = "not proven: press R for a traced restart"
DIMMED = ("GPU0", "acceptance length", "code present", "mask_token_id", "(APIServer pid=")
"""Text of each pane (GPUs, spec decode, checklist, diff, log) that a link outage dims."""


@contextlib.asynccontextmanager
async def replayed(
        size: tuple[int, int] = (160, 50)) -> AsyncIterator[tuple[ConsoleApp, Pilot[int]]]:
    """The app on the recorded incident, settled."""
    app = replay_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        yield app, pilot


def shown_colour(app: ConsoleApp, needle: str) -> object:
    """The foreground colour on screen of the first cell run that holds `needle`."""
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            if needle in segment.text and segment.style is not None:
                return segment.style.color
    raise AssertionError(f"{needle!r} is not on screen")


def host(app: ConsoleApp) -> HostScreen:
    screen = app.screen_for(HOST)
    assert screen is not None
    return screen


def option_text(app: ConsoleApp, link_id: str) -> Text:
    prompt = host(app).checklist.get_option(link_id).prompt
    assert isinstance(prompt, Text)
    return prompt


# -- states the screen must not misstate -------------------------------------------------------
async def test_an_unproven_link_is_amber_and_says_how_to_prove_it() -> None:
    async with replayed() as (app, pilot):
        unknown = option_text(app, "runtime-activation")
        assert NOT_PROVEN in unknown.plain
        assert "broken link" not in unknown.plain
        assert colour_of(unknown, "unknown") == theme_colour("status-warn")
        assert colour_of(unknown, NOT_PROVEN) == theme_colour("status-warn")
        failed = option_text(app, "config-correct")
        assert colour_of(failed, "fail") == theme_colour("status-fail")
        assert "ROOT CAUSE" in failed.plain
        assert NOT_PROVEN in screen_text(app)


async def test_a_link_outage_shows_every_pane_stale_then_normal_after_reconnecting() -> None:
    async with replayed() as (app, pilot):
        screen = host(app)
        assert not screen.has_class("-stale")
        green = theme_colour("status-ok")
        assert colour_of(screen.header.render(), "gpu:nvidia-smi") == green
        live = {text: shown_colour(app, text) for text in DIMMED}
        app.post_message(TelemetryArrived(HOST, ev.LinkChanged(
            HOST, LinkStatus(ConnectionState.RECONNECTING, retry_in_s=4))))
        await pilot.pause(1.3)
        assert screen.has_class("-stale")
        header = screen.header.render()
        assert re.search(r"stale, last sample \d+ s ago", header.plain), header.plain
        assert colour_of(header, "gpu:nvidia-smi") != green, "a badge must not stay green"
        for pane in screen.query(".pane"):
            assert "last sample" in str(pane.border_subtitle), pane.id
        assert "last sample" in screen_text(app)
        for text, colour in live.items():
            assert shown_colour(app, text) != colour, f"{text!r} is not dimmed"
        app.post_message(TelemetryArrived(HOST, ev.LinkChanged(
            HOST, LinkStatus(ConnectionState.CONNECTED))))
        await pilot.pause(0.3)
        assert not screen.has_class("-stale")
        assert "last sample" not in screen_text(app)
        assert {text: shown_colour(app, text) for text in DIMMED} == live
        assert colour_of(screen.header.render(), "gpu:nvidia-smi") == green


# -- layout -------------------------------------------------------------------------------------
async def test_80x24_keeps_the_acceptance_the_verdicts_and_the_root_cause_on_screen() -> None:
    async with replayed((80, 24)) as (app, pilot):
        shown = screen_text(app)
        assert "acceptance length 1.17" in shown
        for verdict in ("code present       pass", "fields extracted   pass",
                        "runtime activation unknown", "config correct     fail"):
            assert verdict in shown, verdict
        assert "ROOT CAUSE" in shown
        assert "GPU0" not in shown, "the GPUs are one key away, not squeezed in"
        await pilot.press("1")
        await pilot.pause(0.2)
        assert "GPU0" in screen_text(app), "1 shows the GPU pane"
        await pilot.press("z")
        await pilot.pause(0.2)
        assert "GPU0" not in screen_text(app)
        assert "ROOT CAUSE" in screen_text(app)
        await pilot.press("v")
        await pilot.pause(0.2)
        assert "Engine config" in screen_text(app), "v shows the tabs it switches"
        assert "speculative_config" in screen_text(app)


async def test_z_maximises_the_focused_pane_and_back() -> None:
    async with replayed() as (app, pilot):
        screen = host(app)
        assert "Checklist" in screen_text(app)
        await pilot.press("z")  # the log has the focus
        await pilot.pause(0.2)
        assert screen.maximized is screen.log_pane
        assert "Checklist" not in screen_text(app)
        await pilot.press("z")
        await pilot.pause(0.2)
        assert screen.maximized is None
        assert "Checklist" in screen_text(app)
        await pilot.press("z", "escape")
        await pilot.pause(0.2)
        assert screen.maximized is None, "esc restores the layout too"


async def test_250x70_shows_long_summaries_whole() -> None:
    async with replayed((250, 70)) as (app, pilot):
        shown = " ".join(line.strip("│ ").split("││")[0].strip()
                         for line in screen_text(app).splitlines())
        assert ("3 field(s) differ from z-lab/Qwen3.6-27B-DFlash: mask_token_id 248064 (want "
                "248070), target_layer_ids [1, 17, 33, 49, 63] (want [1, 16, 31, 46, 61]), "
                "layer_types") in " ".join(shown.split())


# -- keys, help, palette ------------------------------------------------------------------------
async def test_tab_to_the_checklist_selects_the_root_cause_and_enter_opens_it() -> None:
    async with replayed() as (app, pilot):
        for _ in range(6):
            if isinstance(app.focused, Checklist):
                break
            await pilot.press("tab")
        assert isinstance(app.focused, Checklist)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, EvidenceScreen)
        assert app.screen.link.id == "config-correct"


async def test_evidence_y_copies_the_probe_command() -> None:
    async with replayed() as (app, pilot):
        host(app).checklist.focus()
        await pilot.press("enter", "y")
        await pilot.pause(0.2)
        assert app.clipboard == f"cat {DRAFT_DIR}/config.json"


async def test_palette_lists_every_action_with_its_key_and_no_duplicates() -> None:
    async with replayed() as (app, pilot):
        commands = list(app.get_system_commands(app.screen))
        titles = [c.title for c in commands]
        keys = {c.title: c.help for c in commands}
        wanted = {"Log pane: Search": "/", "Log pane: Filter": "f", "Log pane: Follow": "F",
                  "Log pane: Level": "l", "Log pane: Engine start": "e",
                  "Draft diff: Full diff": "d", "Console: Hosts": "h",
                  "Host screen: Maximise": "z", "Host screen: Diff/Engine": "v",
                  "Host screen: Checks": "c", "Console: Quit": "q"}
        for title, key in wanted.items():
            assert title in keys, title
            assert keys[title].startswith(f"key {key}"), (title, keys[title])
        assert len(titles) == len(set(titles)), "an action listed twice"
        for textual_duplicate in ("Quit", "Keys", "Maximize", "Minimize"):
            assert textual_duplicate not in titles
        search = next(c for c in commands if c.title == "Log pane: Search")
        search.callback()
        await pilot.pause(0.2)
        assert app.focused is not None
        assert app.focused.id == "log-prompt"


async def test_help_lists_every_key_including_the_tab_switch() -> None:
    async with replayed() as (app, pilot):
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        assert isinstance(app.screen, HelpScreen)
        body = str(app.screen.query_one("#help-body").render())
        for key, what in (("z", "Maximise"), ("v", "Diff/Engine"), ("y", "Copy command"),
                          ("1", "maximise GPUs"), ("^c", "Quit"), ("h", "Hosts")):
            assert f"\n  {key:<14} {what}" in body, key


async def test_v_switches_draft_diff_and_engine_config_without_the_mouse() -> None:
    async with replayed() as (app, pilot):
        tabs = host(app).query_one("#config-tabs")
        assert tabs.active == "tab-diff"  # type: ignore[attr-defined]
        await pilot.press("v")
        assert tabs.active == "tab-engine"  # type: ignore[attr-defined]
        await pilot.press("v")
        assert tabs.active == "tab-diff"  # type: ignore[attr-defined]


async def test_h_on_one_host_says_why_nothing_happens() -> None:
    async with replayed() as (app, pilot):
        await pilot.press("h")
        await pilot.pause(0.2)
        assert any("one host" in n.message for n in app._notifications)
        assert isinstance(app.screen, HostScreen)


async def test_ctrl_c_quits_like_q() -> None:
    async with replayed() as (app, pilot):
        await pilot.press("ctrl+c")
        await pilot.pause(0.3)
        assert not any("ctrl+q" in n.message for n in app._notifications)
    assert app.return_code == 0


async def test_the_theme_palette_offers_the_consoles_themes_only() -> None:
    async with replayed() as (app, pilot):
        assert set(app.available_themes) == set(THEMES)
        for theme in app.available_themes.values():
            assert {"status-ok", "status-warn", "status-fail"} <= set(theme.variables)
