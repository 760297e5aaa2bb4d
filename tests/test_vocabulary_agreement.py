"""The host side and the laptop side read real vLLM logs and command lines alike.

One corpus, the real formats of vLLM 0.30-0.34 (tests/data/real_formats, each version's serve
log plain and coloured, its failure and its stats log) and the incident's log, each alone and
run after run in one file (a restart's marker, a start-up that died before its engine line,
another version's banner), goes to both sides:

- the host: the follower's backward scan (`console.hostside.follow`, what `status` and the
  live log read from) and the log probe (`console.hostside.probes.log_probe`, what `check`
  reads);
- the laptop: the telemetry's run log (`console.telemetry.run_log.RunLog`, line by line, as
  the live view is fed) and the chain's reading of the probe's lines
  (`checks.links.current_run.read_run`).

Each line is a run mark, or not, alike on both sides; both say the current run begins at the
same line. And `vllm serve` command lines give the same port to the host's discovery, the
laptop's discovery and the restart's plan.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_console.checks.links.current_run import read_run
from vllm_console.checks.links.runtime_activation import payload
from vllm_console.checks.profile import load_profile
from vllm_console.console.hostclient.discovery import parse_serve_argv
from vllm_console.console.hostside import follow
from vllm_console.console.hostside.probes import log_probe
from vllm_console.console.hostside.vocabulary import (
    DEFAULT_PORT,
    RESTART_MARKER,
    RunMark,
    argv_port,
    run_mark,
)
from vllm_console.console.restart.plan import server_address
from vllm_console.console.telemetry.logclock import LogClock
from vllm_console.console.telemetry.run_log import Changed, RunLog

DATA = Path(__file__).parent / "data"
FORMATS = sorted(p for p in (DATA / "real_formats").iterdir() if p.is_dir())
LOGS = [*(log for version in FORMATS for log in sorted(version.glob("*.log"))),
        DATA / "incident-serve.log"]
RESTART = f"{RESTART_MARKER} 2026-12-07T10:00:00+00:00 by ops; trace=off\n".encode()


def _died_before_engine(log: Path) -> bytes:
    """A start-up of `log`'s version that died after its arguments: its lines up to them."""
    lines = log.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b"non-default args:" in line)
    return b"".join(lines[:at + 1]) + b"ValueError: not a valid model\n"


def _corpus() -> dict[str, bytes]:
    """Name: the bytes of one log file (one run, or several)."""
    corpus = {f"{log.parent.name}/{log.name}": log.read_bytes() for log in LOGS}
    serve = [version / "serve.log" for version in FORMATS]
    corpus["every version, one after the other"] = b"".join(p.read_bytes() for p in serve)
    corpus["restarted, the relaunch died at once"] = serve[0].read_bytes() + RESTART + RESTART
    corpus["restarted, then relaunched"] = serve[1].read_bytes() + RESTART + \
        (FORMATS[1] / "serve.color.log").read_bytes()
    corpus["died before its engine, then started"] = _died_before_engine(serve[2]) + \
        serve[3].read_bytes()
    corpus["started, then died before its engine"] = serve[4].read_bytes() + \
        _died_before_engine(serve[4])
    long_engine = next(line for line in serve[4].read_bytes().splitlines(keepends=True)
                       if b"LLM engine (" in line)
    corpus["a 40 KB engine line that names a banner at its end"] = serve[3].read_bytes() + \
        long_engine.rstrip(b"\n") + b" x" * 20_000 + b" vLLM server version 9\n"
    corpus["a failed start-up, then the incident"] = (FORMATS[0] / "failure.log").read_bytes() \
        + (DATA / "incident-serve.log").read_bytes()
    return corpus


CORPUS = _corpus()


def _lines(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, line without its ending) of each line."""
    out, at = [], 0
    for line in data.splitlines(keepends=True):
        out.append((at, line.rstrip(b"\n")))
        at += len(line)
    return out


def _host_marks(path: Path) -> dict[int, RunMark]:
    """{line offset: mark} as the follower's backward scan sees the file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return dict(follow._marks_backwards(fd, os.fstat(fd).st_size, 0))
    finally:
        os.close(fd)


def _host_run_start(path: Path) -> int | None:
    fd = os.open(path, os.O_RDONLY)
    try:
        return follow.find_run_start(fd, os.fstat(fd).st_size, 1 << 30)
    finally:
        os.close(fd)


def _telemetry(data: bytes) -> tuple[dict[int, RunMark], int | None]:
    """The run log fed line by line, as the live view is: {line offset: mark} of the lines
    it took for a run mark, and the offset of the line that began the last run."""
    run_log = RunLog(LogClock(0.0))
    marks: dict[int, RunMark] = {}
    start = None
    for offset, raw in _lines(data):
        mark_before = run_log._mark
        _notable, changed = run_log.feed_texts([raw.decode("utf-8", "replace")])
        if Changed.NEW_RUN in changed:
            start = offset
        if run_log._mark is not mark_before or Changed.NEW_RUN in changed:
            marks[offset] = run_log._mark
    return marks, start


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_both_sides_mark_the_same_lines_and_begin_the_run_at_the_same_line(
        name: str, tmp_path: Path) -> None:
    data = CORPUS[name]
    path = tmp_path / "vllm-serve.log"
    path.write_bytes(data)
    host_marks = _host_marks(path)
    laptop_marks, laptop_start = _telemetry(data)
    # The run log records a mark when it changes the run's latest one: every host mark that
    # does (the rest repeat the one before, as a data-parallel engine's lines do).
    changed = {}
    last = None
    for offset in sorted(host_marks):
        if host_marks[offset] is not last or host_marks[offset] is RunMark.RESTART:
            changed[offset] = host_marks[offset]
        last = host_marks[offset]
    assert laptop_marks == changed
    host_start = _host_run_start(path)
    assert host_start == laptop_start

    spec = load_profile().links.runtime_activation
    probed = log_probe.probe(payload(spec, str(path), None))
    assert read_run(probed["lines"], spec).start_offset == host_start


def test_the_corpus_holds_every_kind_of_mark_and_every_form_of_banner() -> None:
    """What the agreement above covers: a restart marker, the three banner forms (the logo's
    version row, `vLLM server version`, a coloured logo), arguments and engine lines."""
    seen: dict[RunMark, int] = {}
    for data in CORPUS.values():
        for _offset, line in _lines(data):
            mark = run_mark(line.decode("utf-8", "replace"))
            if mark is not None:
                seen[mark] = seen.get(mark, 0) + 1
    assert set(seen) == set(RunMark)
    logo_rows = [line for data in CORPUS.values() for _o, line in _lines(data)
                 if b"  version " in line and run_mark(line.decode()) is RunMark.BANNER]
    assert any(b"\x1b[" in row for row in logo_rows)
    assert any(b"\x1b[" not in r for r in logo_rows)


COMMAND_LINES = [
    (["vllm", "serve", "/m"], DEFAULT_PORT),
    (["vllm", "serve", "/m", "--port", "9000"], 9000),
    (["vllm", "serve", "/m", "--port=9001"], 9001),
    (["vllm", "serve", "/m", "--port", "9000", "--port", "9002"], 9002),
    (["vllm", "serve", "/m", "--port=9000", "--port", "9003"], 9003),
    # argparse keeps the last, and refuses `abc`: no server runs with this line.
    (["vllm", "serve", "/m", "--port", "9000", "--port", "abc"], DEFAULT_PORT),
    (["vllm", "serve", "/m", "--port=0"], 0),  # the kernel picks one
    (["vllm", "serve", "/m", "--port", "²"], DEFAULT_PORT),
    (["vllm", "serve", "/m", "--port", "70000"], DEFAULT_PORT),
    (["vllm", "serve", "/m", "--port"], DEFAULT_PORT),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--host",
      "0.0.0.0", "--port", "8100"], 8100),
]


@pytest.mark.parametrize(("argv", "port"), COMMAND_LINES)
def test_both_sides_read_the_same_port_from_a_command_line(argv: list[str], port: int) -> None:
    assert argv_port(argv) == port  # the host's discovery and the restart's checks
    assert parse_serve_argv(argv).port == port  # the laptop's discovery (the server's URL)
    assert server_address("", argv)[1] == port  # the restart's plan
