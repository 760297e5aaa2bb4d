"""The fleet tables and the log pane take their status colours from the stylesheet's component
classes, as the host screen does: a theme switch recolours what is already on screen."""

from __future__ import annotations

import time

from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable, Static

from tests.app_support import WidgetApp, theme_colour
from vllm_console.console.sources.fleet_query import FleetReport, FleetServer
from vllm_console.console.telemetry.serving import EngineFigures, EngineState
from vllm_console.console.tui.screens.fleet import COLUMNS, FleetRow, FleetScreen
from vllm_console.console.tui.screens.prom_fleet import PromFleetScreen
from vllm_console.widgets.log_pane import LogPane

LIGHT = "vllm-light"


def colour(cell: Text) -> object:
    """The colour a table cell is written in (its whole text's style)."""
    style = cell.style if isinstance(cell.style, Style) else Style.parse(cell.style)
    return style.color


def fleet_cells(screen: FleetScreen, host: str) -> dict[str, Text]:
    table: DataTable[Text] = screen.query_one(DataTable)
    return dict(zip(COLUMNS, table.get_row(host), strict=True))


async def test_the_fleet_table_is_coloured_by_the_theme_and_follows_a_switch() -> None:
    app = WidgetApp(Static())
    async with app.run_test(size=(200, 40)) as pilot:
        screen = FleetScreen([
            FleetRow("gpu-a", "connected", None, None, None, checked=True, serve_state="ready",
                     engines=(EngineFigures("0", EngineState.OK),
                              EngineFigures("1", EngineState.STALLED))),
            FleetRow("gpu-b", "refused", None, None, "runtime-activation", checked=True,
                     serve_state="failed", root_cause="config-correct")])
        await app.push_screen(screen)
        await pilot.pause()
        a, b = fleet_cells(screen, "gpu-a"), fleet_cells(screen, "gpu-b")
        assert colour(a["link"]) == theme_colour("status-ok")
        assert colour(a["serve"]) == theme_colour("status-ok")
        assert colour(b["serve"]) == theme_colour("status-fail")
        assert colour(b["broken link"]) == theme_colour("status-fail")
        app.theme = LIGHT
        await pilot.pause()
        a, b = fleet_cells(screen, "gpu-a"), fleet_cells(screen, "gpu-b")
        assert colour(a["link"]) == theme_colour("status-ok", LIGHT)
        assert colour(b["root cause"]) == theme_colour("status-fail", LIGHT)
        screen.action_engines()  # the engines' rows recolour too
        await pilot.pause()
        assert colour(fleet_cells(screen, "gpu-a · e1")["engine"]) == theme_colour(
            "status-fail", LIGHT)
        app.theme = "vllm-dark"
        await pilot.pause()
        assert colour(fleet_cells(screen, "gpu-a · e1")["engine"]) == theme_colour("status-fail")


async def test_the_prometheus_fleet_is_coloured_by_the_theme_and_follows_a_switch() -> None:
    app = WidgetApp(Static())
    async with app.run_test(size=(200, 40)) as pilot:
        screen = PromFleetScreen("http://prom")
        await app.push_screen(screen)
        screen.show(FleetReport("http://prom", "", "instance", time.time(), servers=(
            FleetServer(key="10.0.0.5:8000", up=False),), query_errors={"gpu": "refused"}))
        await pilot.pause()
        table: DataTable[Text] = screen.query_one(DataTable)
        status = screen.query_one("#promfleet-status", Static)

        def down_colour() -> object:
            return colour(next(c for c in table.get_row_at(0) if c.plain == "DOWN"))

        assert down_colour() == theme_colour("status-fail")
        assert status.rich_style.color == theme_colour("status-warn")
        app.theme = LIGHT
        await pilot.pause()
        assert down_colour() == theme_colour("status-fail", LIGHT)
        assert status.rich_style.color == theme_colour("status-warn", LIGHT)
        screen.show(FleetReport("http://prom", "", "instance", time.time(), error="refused"))
        await pilot.pause()
        assert status.rich_style.color == theme_colour("status-fail", LIGHT)


async def test_the_log_panes_looks_follow_a_theme_switch() -> None:
    warning = "WARNING 05-14 10:00:01 [x.py:2] falling back to something slower"
    pane = LogPane()
    app = WidgetApp(pane)
    async with app.run_test(size=(100, 24)) as pilot:
        pane.add_lines([warning])
        await pilot.pause()

        def warn_colours() -> set[object]:
            return {s.style.color for s in pane.log_widget.render_line(0)
                    if isinstance(s.style, Style)}

        assert theme_colour("status-warn") in warn_colours()
        app.theme = LIGHT
        await pilot.pause()
        assert theme_colour("status-warn", LIGHT) in warn_colours()
        assert Style.parse(pane.log_widget.looks["spec"]).color == theme_colour("log-spec",
                                                                                 LIGHT)


async def test_the_fleet_says_what_the_host_screen_says_about_link_and_acceptance() -> None:
    """Two rules disagreed (issue 25): the fleet showed every link state but `connected` as a
    failure (`reconnecting` is a warning on the host's header, `connecting` unknown), and a
    DFlash acceptance of 3.5 was red on the spec pane and in `check` (below the profile's low,
    4.0) but plain in the fleet. Both now come from one rule each."""
    from vllm_console.checks.profile import expected_acceptance

    dflash = expected_acceptance("dflash")
    assert dflash is not None
    assert dflash.is_low(3.5) is True
    assert dflash.is_low(5.9) is False
    app = WidgetApp(Static())
    async with app.run_test(size=(200, 40)) as pilot:
        screen = FleetScreen([
            FleetRow("gpu-a", "reconnecting", None, 3.5, None, checked=True,
                     acceptance_low=dflash.is_low(3.5)),
            FleetRow("gpu-b", "connecting", None, 5.9, None, checked=True,
                     acceptance_low=dflash.is_low(5.9))])
        await app.push_screen(screen)
        await pilot.pause()
        a, b = fleet_cells(screen, "gpu-a"), fleet_cells(screen, "gpu-b")
        assert colour(a["link"]) == theme_colour("status-warn")
        assert colour(b["link"]) == theme_colour("status-unknown")
        assert colour(a["acceptance length"]) == theme_colour("status-fail")
        assert colour(b["acceptance length"]) != theme_colour("status-fail")


def test_the_prometheus_fleet_flags_the_acceptance_the_chain_flags() -> None:
    from vllm_console.checks.links.method_activation import acceptance_flag
    from vllm_console.checks.profile import expected_acceptance

    dflash = expected_acceptance("dflash")
    server = FleetServer(key="10.0.0.5:8000", up=True, mean_acceptance_length=3.5,
                         expected_acceptance=dflash)
    assert acceptance_flag(dflash, 3.5)
    assert server.low_acceptance is True
    assert server.to_json()["expected_acceptance"] == 6.4
