"""The Prometheus fleet table's own behaviour on 1,000 rows (no Prometheus needed: the reports
are built as a refresh would build them): a live sort reorders in place and keeps the server
under the cursor, and a filter adds and removes rows without rebuilding the table."""

from __future__ import annotations

import time

from textual.app import App

from checks.profile import expected_acceptance
from console.sources.fleet_query import FleetReport, FleetServer
from console.tui.screens.prom_fleet import COLUMNS, PromFleetScreen


def report(n: int, shift: int) -> FleetReport:
    return FleetReport("http://prom", "", "instance", time.time(), servers=tuple(
        FleetServer(key=f"10.0.{i // 256}.{i % 256}:8000", job="vllm", up=True, model="m",
                    mean_acceptance_length=1.0 + (i + shift) % 997 / 100,
                    expected_acceptance=expected_acceptance("dflash")) for i in range(n)))


async def test_a_live_sort_keeps_the_server_under_the_cursor() -> None:
    app: App[None] = App()
    async with app.run_test(size=(200, 50)) as pilot:
        screen = PromFleetScreen("http://prom")
        await app.push_screen(screen)
        screen.sort_index = [c.key for c in COLUMNS].index("accept")
        screen.show(report(1000, 0))
        await pilot.pause()
        table = screen.query_one("DataTable")
        table.move_cursor(row=10)
        await pilot.pause()
        chosen = screen.rows[10].key
        screen.show(report(1000, 500))  # every acceptance moves: a new order
        await pilot.pause()
        values = [s.mean_acceptance_length for s in screen.rows]
        assert values == sorted(values)  # type: ignore[type-var]
        shown = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert shown == [s.key for s in screen.rows]
        assert shown[table.cursor_row] == chosen

        screen.filter = "10.0.3."
        screen._render_rows()
        await pilot.pause()
        assert table.row_count == 1000 - 768
        assert all(str(table.get_row_at(i)[0]).startswith("10.0.3.")
                   for i in range(table.row_count))


async def test_label_values_are_data_never_markup_or_escapes() -> None:
    from console.tui.screens.prom_fleet import PromServerScreen

    evil = "m\x1b]0;pwned\x07[bold red]x[/]"
    server = FleetServer(key="[::1]:8000", model=evil, up=True)
    app: App[None] = App()
    async with app.run_test(size=(200, 50)) as pilot:
        screen = PromFleetScreen("http://[::1]:9090")
        await app.push_screen(screen)
        screen.show(FleetReport("http://[::1]:9090", "", "instance", time.time(),
                                servers=(server,)))
        await pilot.pause()
        cell = str(screen.query_one("DataTable").get_row_at(0)[3])
        assert "\x1b" not in cell
        assert "\\x1b" in cell
        assert "[bold red]" in cell  # shown as typed, not applied
        assert "[::1]:9090" in str(screen.query_one("#promfleet-title").render())
        await app.push_screen(PromServerScreen(server))
        await pilot.pause()
        view = str(app.screen.query_one("#promserver").render())
        assert "\x1b" not in view
        assert "[bold red]x[/]" in view


async def test_help_lists_the_fleet_keys() -> None:
    from console.settings import FleetSettings, HostsFile
    from console.sources.prometheus import Prometheus
    from console.tui.fleet_app import FleetApp
    from tests.prometheus import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing there: the table says so, keys work
    app = FleetApp(Prometheus(url), FleetSettings(prometheus=url), "", HostsFile())
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        text = str(app.screen.query_one("#help-body").render())
        for words in ("Sort", "Reverse", "Filter", "Refresh", "Open", "Quit"):
            assert words in text, words
