"""The SSH fleet table (FleetScreen) at 200 columns: every column in full, however the values
grow after the first paint (Pilot on the screen alone, rows as the app hands them)."""

from __future__ import annotations

from textual.app import App

from vllm_console.console.tui.screens.fleet import FleetRow, FleetScreen


def row(name: str, **changes: object) -> FleetRow:
    base = dict(name=name, state="connecting", gpu_util=None, acceptance=None,
                broken_link=None, checked=False)
    return FleetRow(**{**base, **changes})  # type: ignore[arg-type]


async def test_link_names_are_never_cut_when_they_arrive_later() -> None:
    app: App[None] = App()
    async with app.run_test(size=(200, 40)) as pilot:
        screen = FleetScreen([row("gpu-a"), row("gpu-b")])
        await app.push_screen(screen)
        screen.update_row(row("gpu-a", state="connected", broken_link="runtime-activation",
                              checked=True, acceptance=1.17))
        await pilot.pause(0.8)  # rows are applied twice a second
        table = screen.query_one("DataTable")
        cells = [str(c) for c in table.get_row("gpu-a")]
        assert "runtime-activation" in cells
        for column, text in zip(table.columns.values(), cells, strict=True):
            assert column.get_render_width(table) - 2 * table.cell_padding >= len(text), text


async def test_serve_state_root_cause_and_a_ticking_age() -> None:
    import time

    from vllm_console.console.tui.screens.fleet import COLUMNS

    app: App[None] = App()
    async with app.run_test(size=(200, 40)) as pilot:
        screen = FleetScreen([row("gpu-a")])
        await app.push_screen(screen)
        table = screen.query_one("DataTable")
        cell = dict(zip(COLUMNS, [str(c) for c in table.get_row("gpu-a")], strict=True))
        assert (cell["serve"], cell["root cause"], cell["last check"]) == ("unknown", "—",
                                                                           "never")
        screen.update_row(row("gpu-a", state="connected", serve_state="ready", checked=True,
                              broken_link="runtime-activation", root_cause="config-correct",
                              checked_at=time.time() - 3))
        await pilot.pause(0.8)
        cell = dict(zip(COLUMNS, [str(c) for c in table.get_row("gpu-a")], strict=True))
        assert cell["serve"] == "ready"
        assert cell["root cause"] == "config-correct"
        assert cell["last check"] in ("3s ago", "4s ago")
        await pilot.pause(1.6)  # no new event: the age moves on by itself
        assert str(table.get_row("gpu-a")[COLUMNS.index("last check")]) in ("4s ago", "5s ago")
        widths = sum(c.get_render_width(table) for c in table.columns.values())
        assert widths <= 200, "every column in full fits 200 columns"


async def test_the_serving_columns_say_a_stall_loudly() -> None:
    from vllm_console.console.tui.screens.fleet import COLUMNS

    app: App[None] = App()
    async with app.run_test(size=(200, 40)) as pilot:
        screen = FleetScreen([row("gpu-a"), row("gpu-b")])
        await app.push_screen(screen)
        table = screen.query_one("DataTable")

        def cell(name: str) -> dict[str, str]:
            return dict(zip(COLUMNS, [str(c) for c in table.get_row(name)], strict=True))

        assert (cell("gpu-a")["engine"], cell("gpu-a")["TTFT p99"],
                cell("gpu-a")["run/wait"]) == ("unknown", "—", "—")
        screen.update_row(row("gpu-a", state="connected", engine="stalled", ttft_p99=0.8,
                              running=4, waiting=1))
        screen.update_row(row("gpu-b", state="connected", engine="ok", ttft_p99=2.345,
                              running=0, waiting=None))
        await pilot.pause(0.8)
        assert (cell("gpu-a")["engine"], cell("gpu-a")["TTFT p99"],
                cell("gpu-a")["run/wait"]) == ("stalled", "800 ms", "4/1")
        assert (cell("gpu-b")["engine"], cell("gpu-b")["TTFT p99"],
                cell("gpu-b")["run/wait"]) == ("ok", "2.35 s", "0/?")
        fail = screen.get_component_rich_style("status--fail", partial=True)
        stalled = table.get_row("gpu-a")[COLUMNS.index("engine")]
        assert stalled.style == fail


async def test_e_shows_each_data_parallel_engine_under_its_host() -> None:
    """Summed, a DP server with one hung or slow replica looks fine; `e` adds one row per
    engine under its host (state, TTFT p99, requests), the slow one said, the host's engine
    cell saying the imbalance; Enter on an engine's row opens its host."""
    from vllm_console.console.telemetry.serving import EngineFigures, EngineState
    from vllm_console.console.tui.screens.fleet import COLUMNS

    engines = (EngineFigures("0", EngineState.OK, 3, 0, 100.0, 0.4),
               EngineFigures("1", EngineState.OK, 3, 1, 20.0, 2.5, slow=True))
    chosen: list[str] = []

    class Opens(App[None]):
        def on_fleet_screen_host_chosen(self, event: FleetScreen.HostChosen) -> None:
            chosen.append(event.host)

    app = Opens()
    async with app.run_test(size=(200, 40)) as pilot:
        screen = FleetScreen([row("gpu-a"), row("gpu-b")])
        await app.push_screen(screen)
        table = screen.query_one("DataTable")

        def rows() -> list[dict[str, str]]:
            return [dict(zip(COLUMNS, [str(c) for c in table.get_row_at(i)], strict=True))
                    for i in range(table.row_count)]

        screen.update_row(row("gpu-a", state="connected", engine="ok", running=6, waiting=1,
                              engines=engines))
        await pilot.pause(0.8)
        assert [r["host"] for r in rows()] == ["gpu-a", "gpu-b"]
        assert rows()[0]["engine"] == "ok · DP imbalance"
        await pilot.press("e")
        await pilot.pause(0.8)
        shown = rows()
        assert [r["host"] for r in shown] == ["gpu-a", "gpu-a · e0", "gpu-a · e1", "gpu-b"]
        assert (shown[1]["engine"], shown[1]["TTFT p99"], shown[1]["run/wait"]) == (
            "ok", "400 ms", "3/0")
        assert (shown[2]["engine"], shown[2]["TTFT p99"], shown[2]["run/wait"]) == (
            "slow", "2.50 s", "3/1")
        table.move_cursor(row=2)
        await pilot.press("enter")
        await pilot.pause()
        assert chosen == ["gpu-a"]
        # The replica hangs: its row says so; then the engines go (a restart with DP 1).
        screen.update_row(row("gpu-a", state="connected", engine="stalled", engines=(
            engines[0], EngineFigures("1", EngineState.STALLED, 3, 1, 0.0, None))))
        await pilot.pause(0.8)
        assert rows()[2]["engine"] == "stalled"
        screen.update_row(row("gpu-a", state="connected", engine="ok"))
        await pilot.pause(0.8)
        assert [r["host"] for r in rows()] == ["gpu-a", "gpu-b"]
        await pilot.press("e")
        await pilot.pause(0.8)
        assert table.row_count == 2


async def test_p_shows_each_server_of_a_host_under_it() -> None:
    """A host that runs several servers: `p` adds one row per server (`gpu-a · :8001`) under
    it, its state, which one the host's row shows and its container; a server that exits
    leaves its row; Enter on a server's row opens its host."""
    from vllm_console.console.hostclient.discovery import ServerRow
    from vllm_console.console.tui.screens.fleet import COLUMNS

    def server(pid: int, port: int, state: str = "ready", chosen: bool = False,
               container: str | None = None) -> ServerRow:
        return ServerRow(pid=pid, port=port, url=f"http://127.0.0.1:{port}", model="/m/T",
                         container=container, unit=None, state=state, chosen=chosen)

    three = (server(10, 8000, chosen=True), server(20, 8001, "starting"),
             server(30, 8002, container="box"))
    chosen: list[str] = []

    class Opens(App[None]):
        def on_fleet_screen_host_chosen(self, event: FleetScreen.HostChosen) -> None:
            chosen.append(event.host)

    app = Opens()
    async with app.run_test(size=(200, 40)) as pilot:
        screen = FleetScreen([row("gpu-a"), row("gpu-b")])
        await app.push_screen(screen)
        table = screen.query_one("DataTable")

        def rows() -> list[dict[str, str]]:
            return [dict(zip(COLUMNS, [str(c) for c in table.get_row_at(i)], strict=True))
                    for i in range(table.row_count)]

        screen.update_row(row("gpu-a", state="connected", serve_state="ready", servers=three))
        await pilot.pause(0.8)
        assert [r["host"] for r in rows()] == ["gpu-a", "gpu-b"]  # on demand only
        await pilot.press("p")
        await pilot.pause(0.8)
        shown = rows()
        assert [r["host"] for r in shown] == ["gpu-a", "gpu-a · :8000", "gpu-a · :8001",
                                              "gpu-a · :8002", "gpu-b"]
        assert [r["serve"] for r in shown[1:4]] == ["ready · shown", "starting",
                                                    "ready · box"]
        table.move_cursor(row=3)
        await pilot.press("enter")
        await pilot.pause()
        assert chosen == ["gpu-a"]
        screen.update_row(row("gpu-a", state="connected", serve_state="ready",
                              servers=three[:2]))
        await pilot.pause(0.8)
        assert [r["host"] for r in rows()] == ["gpu-a", "gpu-a · :8000", "gpu-a · :8001",
                                               "gpu-b"]
        await pilot.press("p")
        await pilot.pause(0.8)
        assert table.row_count == 2
