"""The spec pane flags acceptance against the range the running method's profile expects: an
n-gram or EAGLE-3 figure is not judged by DFlash's ~6.4."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import Vertical

from vllm_console.checks.profile import expected_acceptance
from vllm_console.console.parsers.engine import SpeculativeSettings
from vllm_console.console.parsers.spec_decode import SpecDecodeSample
from vllm_console.console.telemetry.spec_decode import (
    SpecDecodePoint,
    SpecDecodeState,
    SpecDecodeStatus,
    SpecSource,
)
from vllm_console.themes import THEMES, stylesheet_path
from vllm_console.widgets.spec_pane import SpecPane, SpecView


class Bare(App[None]):
    """The pane under the console's stylesheet: its colours are component classes there."""

    CSS_PATH = stylesheet_path()

    def __init__(self) -> None:
        super().__init__()
        for theme in THEMES.values():  # before the stylesheet, which uses their colours
            self.register_theme(theme)
        self.theme = next(iter(THEMES))

    def compose(self) -> ComposeResult:
        yield Vertical(id="box")


def _state(method: str, length: float) -> SpecDecodeState:
    sample = SpecDecodeSample(mean_acceptance_length=length)
    point = SpecDecodePoint(0.0, length, None, SpecSource.LOG)
    return SpecDecodeState(SpecDecodeStatus.ACTIVE, SpeculativeSettings(method, "/m/d", 3),
                           latest=sample, latest_source=SpecSource.LOG, history=(point,))


async def test_the_figure_is_coloured_by_the_methods_range() -> None:
    app = Bare()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = SpecPane()
        await app.query_one("#box").mount(pane)
        ok, fail = (app.theme_variables[f"status-{name}"].lower() for name in ("ok", "fail"))

        async def colour(method: str, length: float) -> str:
            pane.view = SpecView(_state(method, length), expected_acceptance(method))
            await pilot.pause()
            line = pane.render().renderables[1]  # type: ignore[union-attr]
            figure = next(span for span in line.spans if span.start > 0)
            return str(figure.style).lower()  # rich writes colours in lower case

        # 2.5 is a fine EAGLE-3 figure (its range 2-4), far below DFlash's (4-6.4).
        assert ok in await colour("eagle3", 2.5)
        assert fail in await colour("dflash", 2.5)
        assert fail in await colour("draft_model", 1.0)
        assert "(expected ~3.5)" in str(pane.render().renderables[1])  # type: ignore[union-attr]


async def test_the_checklist_title_names_the_profile_that_judged() -> None:
    from vllm_console.checks.models import LINK_IDS, ChainReport, LinkResult, Status
    from vllm_console.widgets.checklist import Checklist, ChecklistState

    app = Bare()
    async with app.run_test(size=(100, 30)) as pilot:
        checklist = Checklist()
        await app.query_one("#box").mount(checklist)
        links = tuple(LinkResult(id=i, title=i, status=Status.PASS, summary="ok")
                      for i in LINK_IDS)
        checklist.state = ChecklistState(report=ChainReport(
            host="h", profile="eagle3", links=links, broken_link=None, root_cause=None))
        await pilot.pause()
        assert "· eagle3 ·" in str(checklist.border_title)


async def test_the_totals_since_start_up_are_shown_until_the_first_interval() -> None:
    """A first `/metrics` read gives the counters since start-up: their acceptance is the
    figure at once (a URL-only screen showed nothing for a whole scrape interval), said to be
    since start-up, and coloured against the range like any other."""
    totals = SpecDecodeSample(mean_acceptance_length=1.17, draft_acceptance_rate_pct=1.1,
                              drafted_tokens=1500, accepted_tokens=17)
    state = SpecDecodeState(SpecDecodeStatus.ACTIVE, SpeculativeSettings(None, None, 15),
                            totals=totals)
    app = Bare()
    async with app.run_test(size=(120, 30)) as pilot:
        pane = SpecPane()
        await app.query_one("#box").mount(pane)
        pane.view = SpecView(state, expected_acceptance("dflash"))
        await pilot.pause()
        text = str(pane.render().renderables[1])  # type: ignore[union-attr]
        assert "acceptance length 1.17" in text
        assert "draft acceptance 1.1%" in text
        assert "[metrics · since start-up]" in text
        assert "no drafts seen yet" not in str(pane.render())
    assert state.summary == ("acceptance length 1.17 · draft acceptance 1.1% "
                             "(metrics · since start-up)")
