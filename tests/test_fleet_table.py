"""The SSH fleet table (FleetScreen) at 200 columns: every column in full, however the values
grow after the first paint (Pilot on the screen alone, rows as the app hands them)."""

from __future__ import annotations

from textual.app import App

from console.screens.fleet import FleetRow, FleetScreen


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
