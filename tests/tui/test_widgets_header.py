"""widgets/host_header.py: the header's one line, in the colours the stylesheet gives it."""

from __future__ import annotations

import pytest

from tests.app_support import WidgetApp, colour_of, theme_colour
from vllm_console.console.transport.host import ConnectionState, LinkStatus
from vllm_console.widgets.host_header import HostHeader, Sources, describe_age, describe_link


def show_ready(header: HostHeader, host: str, *, gpu: str) -> None:
    """A connected simulated host (scenario `incident`) whose server is ready, without metrics."""
    header.host_name = host
    header.scenario = "incident"
    header.link = LinkStatus(ConnectionState.CONNECTED)
    header.sources = Sources(gpu=gpu, log="live", metrics="none")
    header.activity = "serve: ready (started in 4s)"


@pytest.mark.parametrize(("link", "text"), [
    (LinkStatus(ConnectionState.CONNECTED), "connected"),
    (LinkStatus(ConnectionState.RECONNECTING, retry_in_s=4.4), "reconnecting in 4 s"),
    (LinkStatus(ConnectionState.RECONNECTING), "reconnecting"),
    (LinkStatus(ConnectionState.REFUSED, detail="host key changed"),
     "refused: host key changed"),
])
def test_describe_link(link: LinkStatus, text: str) -> None:
    assert describe_link(link) == text


def test_describe_age() -> None:
    assert describe_age(None) == "no sample yet"
    assert describe_age(12.4) == "last sample 12 s ago"


async def test_a_connected_header_shows_host_state_sources_and_activity() -> None:
    header = HostHeader()
    app = WidgetApp(header)
    async with app.run_test(size=(160, 3)) as pilot:
        show_ready(header, "gpu1", gpu="nvml")
        await pilot.pause()
        text = header.render()
        assert text.plain.startswith(" vllm-console  gpu1 (simulated: incident) ● connected")
        assert "serve: ready (started in 4s)" in text.plain
        assert colour_of(text, "● connected") == theme_colour("status-ok")
        assert colour_of(text, "gpu:nvml") == theme_colour("status-ok")
        assert colour_of(text, "metrics:none") == theme_colour("status-unknown"), \
            "a missing source is not shown as good"
        assert "READONLY" not in text.plain


async def test_a_link_outage_takes_the_green_off_and_says_how_old_the_data_is() -> None:
    header = HostHeader()
    app = WidgetApp(header)
    async with app.run_test(size=(160, 3)) as pilot:
        header.sources = Sources(gpu="nvml", log="live", metrics="healthy")
        header.link = LinkStatus(ConnectionState.RECONNECTING, retry_in_s=3)
        header.stale = True
        header.data_age_s = 12.2
        await pilot.pause()
        text = header.render()
        assert "● reconnecting in 3 s · stale, last sample 12 s ago" in text.plain
        assert colour_of(text, "● reconnecting") == theme_colour("status-warn")
        for chip in ("gpu:nvml", "log:live", "metrics:healthy"):
            assert colour_of(text, chip) == theme_colour("status-unknown"), chip


async def test_readonly_and_refused_stand_out() -> None:
    header = HostHeader()
    app = WidgetApp(header)
    async with app.run_test(size=(160, 3)) as pilot:
        header.readonly = True
        header.link = LinkStatus(ConnectionState.REFUSED, detail="unknown host key")
        await pilot.pause()
        text = header.render()
        assert "refused: unknown host key" in text.plain
        assert colour_of(text, "● refused") == theme_colour("status-fail")
        assert "READONLY" in text.plain
        assert colour_of(text, "READONLY") == theme_colour("status-warn")


async def test_compact_keeps_the_state_and_drops_the_details() -> None:
    header = HostHeader()
    app = WidgetApp(header)
    async with app.run_test(size=(80, 3)) as pilot:
        show_ready(header, "demo", gpu="nvidia-smi")
        header.compact = True
        await pilot.pause()
        text = header.render()
        assert text.plain == (" demo (sim) ● connected  gpu   log   metrics   serve: ready "
                              "(started in 4s)")
        assert len(text.plain) <= 80
        assert colour_of(text, " gpu ") == theme_colour("status-ok")
        assert colour_of(text, " metrics ") == theme_colour("status-unknown")
