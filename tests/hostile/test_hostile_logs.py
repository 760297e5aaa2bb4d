"""Broken log input: invalid UTF-8, NUL bytes, lone CRs, escape floods, a 10 MB line, a line
that arrives in pieces. Through a real sshd (the follower on the host, framed by byte offset) and
in the app (Pilot): every line arrives once, none is split or merged, the 10 MB line is kept whole
and shown cut, and the app keeps answering keys while it arrives."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from tests.app_support import SimApp, wait_until
from tests.fault_support import NumberedWriter, Recorder, assert_exactly_once, record_figure
from tests.sshd import Sshd
from vllm_console.console.output.display import DISPLAY_MAX
from vllm_console.console.telemetry import HostTelemetry, LogLinesReceived, TelemetryOptions
from vllm_console.console.transport.host import ConnectionState
from vllm_console.console.transport.ssh_host import SSHHost
from vllm_console.console.tui.screens.help import HelpScreen

pytestmark = pytest.mark.programs  # each test starts a simulated server

BIG = 10 * 1024 * 1024

# (bytes written, what the line must read as once decoded and stripped)
BAD_LINES: list[tuple[bytes, str]] = [
    (b"BAD-1 invalid utf8 \xff\xfe\xfd end", "BAD-1 invalid utf8 \ufffd\ufffd\ufffd end"),
    (b"BAD-2 truncated utf8 \xe2\x9c end", "BAD-2 truncated utf8 \ufffd end"),
    (b"BAD-3 overlong \xc0\xaf surrogate \xed\xa0\x80 end", ""),
    (b"BAD-4 nul \x00\x00 in the middle \x00 end", "BAD-4 nul  in the middle  end"),
    (b"BAD-5 escapes \x1b[31m red \x1b[0m \x1b]0;t\x07 \x1b[2J end", ""),
    (b"BAD-6 " + b"\x1b[1m" * 20000 + b" end", "BAD-6  end"),
    (b"BAD-7 tabs\tand\x0bvt\x0cff end", ""),
    (b"BAD-8 " + "\u202e\u2066 bidi \u0000".encode() + b" end", ""),
    (b"BAD-9 only high bytes " + bytes(range(0x80, 0x100)) + b" end", ""),
]


def write_bad_lines(path: Path, writer: NumberedWriter) -> None:
    """Numbered lines around each bad one, a 10 MB line, and a line written in pieces."""
    for raw, _ in BAD_LINES:
        writer.write(2)
        with open(path, "ab") as fh:
            fh.write(raw + b"\n")
    writer.write(2)
    with open(path, "ab") as fh:
        fh.write(b"BAD-10 big " + b"x" * (BIG - 16) + b" end\n")
        fh.write(b"BAD-11 lone\rCR\rline end\r\n")
    writer.write(2)


def check_bad_texts(texts: list[str]) -> None:
    bad = [t for t in texts if t.startswith("BAD-")]
    names = [t.split(" ", 1)[0] for t in bad]
    # BAD-11's lone CRs end lines of their own (`\r`, as vLLM's multi-line messages use).
    assert names == [f"BAD-{i}" for i in range(1, 12)], names
    for (_, expected), text in zip(BAD_LINES, bad, strict=False):
        if expected:
            assert text == expected, (text[:200], expected)
        assert text.endswith(" end"), text[:200]
        assert "\x00" not in text
        assert "\x1b" not in text
    big = next(t for t in texts if t.startswith("BAD-10"))
    assert len(big) == BIG - 16 + len("BAD-10 big ") + len(" end")


@pytest.mark.ssh
async def test_broken_log_lines_over_ssh_arrive_once_and_whole(sshd: Sshd) -> None:
    if sshd.proc is None:
        sshd.start()
    log = sshd.user_dir("bad-lines") / "serve.log"
    log.write_bytes(b"")
    config = sshd.host_config(serve={"match": f"vllm serve /nonexistent-{uuid.uuid4().hex}/",
                                     "log": str(log)})
    host = SSHHost(config, keepalive_interval=1.0, keepalive_count_max=3)
    telemetry = HostTelemetry(host, config, TelemetryOptions(interval_s=0.5, gpu_source="none",
                                                             log_start="begin"))
    rec = Recorder()
    writer = NumberedWriter(log)
    task = asyncio.create_task(telemetry.run(rec))
    try:
        writer.write(5)
        await rec.until(lambda e: len(rec.numbered()) >= 5)
        started = time.monotonic()
        write_bad_lines(log, writer)
        await rec.until(lambda e: len(rec.numbered()) >= writer.written, 30,
                        what="every numbered line")
        record_figure("10 MB log line: on the console after", time.monotonic() - started)
        assert host.link.state is ConnectionState.CONNECTED
    finally:
        telemetry.stop()
        await task
        await host.close()
    assert_exactly_once(rec.numbered(), writer.written)
    texts = rec.texts()
    check_bad_texts(texts)
    shown = [line for _, e in rec.events if isinstance(e, LogLinesReceived)
             for line in e.batch.display_lines()]
    big = next(line for line in shown if line.startswith("BAD-10"))
    assert len(big) < DISPLAY_MAX + 50
    assert big.endswith(" chars]")


async def test_broken_log_lines_in_the_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    sim = SimApp(tmp_path / "host", export_dir=tmp_path / "exports")
    writer = NumberedWriter(sim.tree.log)
    try:
        async with sim.app.run_test(size=(160, 50)) as pilot:
            screen = sim.app.screen_for("demo")
            assert screen is not None
            await wait_until(pilot, lambda: screen.log_pane.entry_count > 20, what="the log")
            write_bad_lines(sim.tree.log, writer)
            # Keys while the 10 MB line is on its way.
            started = time.monotonic()
            sim.app.simulate_key("question_mark")
            while not isinstance(sim.app.screen, HelpScreen):
                assert time.monotonic() - started < 3, "help did not open"
                await asyncio.sleep(0.01)
            record_figure("app: key answered while a 10 MB line arrived",
                          time.monotonic() - started)
            await pilot.press("escape")
            await wait_until(pilot, lambda: any(line.startswith("BAD-11") or "BAD-11" in line
                                                for line in screen.log_pane.visible_lines()),
                             30, "the last bad line")
            lines = screen.log_pane.visible_lines()
            bad = [line for line in lines if "BAD-" in line]
            assert len({line.split("BAD-")[1].split(" ")[0] for line in bad}) == 11
            big = next(line for line in lines if "BAD-10" in line)
            assert len(big) < DISPLAY_MAX + 200
            assert "chars]" in big
            assert all("\x1b" not in line and "\x00" not in line for line in lines)
            # A garbage draft config: the diff pane says so, the app goes on.
            sim.tree.draft.joinpath("config.json").write_bytes(b'{"layer_types": [' + b"[" * 10**5)
            await pilot.press("c")
            await wait_until(pilot, lambda: screen.diff.diff is not None
                             and bool(screen.diff.diff.error), 30, "the diff's error")
            assert "not valid JSON" in screen.diff.diff.error  # type: ignore[union-attr]
            # (A run started before the draft was spoiled may finish first: wait for ours.)
            await wait_until(pilot, lambda: screen.checklist.state.report is not None
                             and screen.checklist.state.report.links[3].status.value
                             == "error", 30, "config-correct in error")
    finally:
        sim.close()
