"""The hot path's shortcuts give exactly what the general path gives, on any input.

Each fast path (the line splitter's, block escape stripping, the prefix cache) is compared here
with a copy of the general code it stands in for, on arbitrary text and on text built from
pieces of real lines, so that the shortcuts' conditions are met and missed in every way.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.examples import examples
from vllm_console.console.output.display import safe_text
from vllm_console.console.parsers import prefix
from vllm_console.console.parsers.classifier import (
    MESSAGE_ANCHORS,
    LineEvent,
    LineKind,
    _by_parsers,
    _classify,
    classify,
)
from vllm_console.console.parsers.lines import LineAssembler, split_lines
from vllm_console.console.parsers.prefix import (
    _LEVEL_NAMES,
    _PREFIX,
    _UVICORN,
    LogLine,
    parse_line,
    strip_ansi,
    strip_ansi_block,
)
from vllm_console.console.parsers.sieve import Sieve, batch_keys
from vllm_console.console.telemetry.logclock import LogClock
from vllm_console.console.telemetry.run_log import Changed, RunLog, _per_request, _throughput

SETTINGS = settings(max_examples=examples(400), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# Pieces of real lines and of what breaks them: prefixes whole and cut, colour codes known and
# odd, other escapes, controls, line ends, non-ASCII, digits.
PIECES = [
    "(EngineCore_DP0 pid=7) ", "(APIServer pid=1) ", "(VllmWorker rank=1 pid=3) ",
    "(RayWorker pid=9, ip=10.0.0.1) ", "(x pid=1 pid=2) ", "(a] b pid=4) ", "(", ")", " pid=",
    "DEBUG ", "INFO ", "WARNING ", "WARN ", "ERROR ", "CRITICAL ", "FATAL ", "INFO:     ",
    "05-14 10:02:03 ", "2025-05-14 10:02:03.123 ", "05-14 10:02:0", "[core.py:123] ",
    "[core.py:123]", "[...v1/engine/core.py:9] ", "[a:b] ", "[x.py:12345678] ", "] ", "[", "]",
    ":", " ", "\x1b[1;36m", "\x1b[0;0m", "\x1b[0m", "\x1b[32m", "\x1b[", "m", "\x1b]8;;x\x07",
    "\x1b[2K", "\x1b", "\x9b", "\x85", "\x00", "\t", "\x7f", "\r\n", "\r", "\n", "é", "█",
    "\u2028", "\ud800", "0", "7", "99", "#", "EngineCore step: scheduled 3 requests",
]
pieces = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=40)
vllmish = pieces.map("".join)
anything = st.text(alphabet=st.characters(exclude_categories=()), max_size=200)
texts = st.one_of(vllmish, anything)
# Whole prefixes, well formed or nearly: what the prefix cache keeps and is asked about.
prefixes = st.tuples(
    st.sampled_from(["", "(EngineCore_DP0 pid=7) ", "(APIServer pid=1)", "(a pid=1, ip=x) ",
                     "(x pid=1 pid=2) ", "(a] b pid=4) ", "\x1b[1;36m(A pid=1)\x1b[0;0m "]),
    st.sampled_from(["DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "INFO:", "TRACE"]),
    st.sampled_from([" 05-14 10:02:03", " 2025-05-14 10:02:03,5", " 05-14 10:02:3", " 05-14"]),
    st.sampled_from([" [core.py:123] ", " [core.py:123]", " [a] b.py:1] ", " [x.py:] ",
                     " [b.py:12345678] ", " [ok.py:1]  ", " [é.py:1] "]),
).map("".join)


# -- the general code the fast paths stand in for (as it was before them) --------------------

_LINE_END = re.compile(r"\r\n|\r|\n")


class GeneralAssembler:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    def feed(self, chunk: bytes | str) -> list[str]:
        text = chunk if isinstance(chunk, str) else self._decoder.decode(bytes(chunk))
        text = self._pending + text
        if not text:
            return []
        cut = len(text) - 1 if text.endswith("\r") else len(text)
        lines = _LINE_END.split(text[:cut])
        self._pending = lines.pop() + text[cut:]
        return lines

    def flush(self) -> list[str]:
        tail = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        return general_split_lines(tail)


def general_split_lines(text: str) -> list[str]:
    if not text:
        return []
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def general_strip(text: str) -> str:
    if "\x1b" in text:
        text = prefix._SGR.sub("", text)
    if prefix._ANY_CONTROL.search(text) is None:
        return text
    return prefix._CONTROLS.sub("", text)


def general_parse(raw: str) -> LogLine:
    text = general_strip(raw)
    m = _PREFIX.match(text)
    assert m is not None
    proc, pid_text, level, ts, src = m.groups()
    pid = int(pid_text) if pid_text is not None else None
    end = m.end()
    if level is None:
        u = _UVICORN.match(text, end)
        if u is not None:
            level, end = u[1], u.end()
    if level is not None and level in _LEVEL_NAMES:
        level = _LEVEL_NAMES[level]
    return LogLine(raw, text, proc, pid, level, ts, src, text[end:] if end else text)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


# -- splitting ---------------------------------------------------------------------------------

@given(text=texts, cuts=st.lists(st.integers(0, 10_000), max_size=8), as_str=st.booleans())
@SETTINGS
def test_assembler_splits_as_the_general_code(text: str, cuts: list[int], as_str: bool) -> None:
    data = text.encode("utf-8", errors="surrogatepass")
    fast, general, stripped = LineAssembler(), GeneralAssembler(), LineAssembler()
    got: list[str] = []
    want: list[str] = []
    got_stripped: list[str] = []
    for piece in _cut(data, cuts):
        chunk: bytes | str = piece.decode("utf-8", errors="replace") if as_str else piece
        got += fast.feed(chunk)
        want += general.feed(chunk)
        got_stripped += stripped.feed_stripped(chunk)
    got += fast.flush()
    want += general.flush()
    got_stripped += stripped.flush_stripped()
    assert got == want
    assert got_stripped == [general_strip(line) for line in want]


@given(data=st.binary(max_size=400), cuts=st.lists(st.integers(0, 400), max_size=8))
@SETTINGS
def test_assembler_on_any_bytes(data: bytes, cuts: list[int]) -> None:
    fast, general, stripped = LineAssembler(), GeneralAssembler(), LineAssembler()
    got, want, got_stripped = [], [], []
    for piece in _cut(data, cuts):
        got += fast.feed(piece)
        want += general.feed(piece)
        got_stripped += stripped.feed_stripped(piece)
    want += general.flush()
    assert got + fast.flush() == want
    assert got_stripped + stripped.flush_stripped() == [general_strip(line) for line in want]


@given(text=texts)
@SETTINGS
def test_split_lines_is_the_regex_split(text: str) -> None:
    assert split_lines(text) == general_split_lines(text)
    assert split_lines(text.encode("utf-8", "surrogatepass")) == general_split_lines(
        text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))


# -- escapes -----------------------------------------------------------------------------------

@given(text=texts)
@SETTINGS
def test_strip_ansi_is_the_general_strip(text: str) -> None:
    assert strip_ansi(text) == general_strip(text)


@given(lines=st.lists(texts, max_size=12))
@SETTINGS
def test_block_stripping_is_strip_ansi_per_line(lines: list[str]) -> None:
    block = "\n".join(lines)
    stripped = strip_ansi_block(block)
    if stripped is not None:
        assert stripped == "\n".join(general_strip(line) for line in block.split("\n"))


def test_block_stripping_takes_vllm_colour() -> None:
    lines = ["\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 05-14 10:02:03 [a.py:1] ok é"] * 3
    assert strip_ansi_block("\n".join(lines)) == "\n".join(map(strip_ansi, lines))
    assert strip_ansi_block("a\x1b[2Kb\nc") is None  # another escape: line by line
    assert strip_ansi_block("a\x00b") is None
    assert strip_ansi_block("a\x85b") is None  # a C1 control
    assert strip_ansi_block("a\tb\n") == "a\tb\n"  # tab is kept


# -- the prefix cache --------------------------------------------------------------------------

@given(lines=st.lists(texts, max_size=20),
       heads=st.lists(st.one_of(prefixes, vllmish), min_size=1, max_size=4),
       picks=st.lists(st.integers(0, 3), max_size=20))
@SETTINGS
def test_parse_line_with_its_cache_is_the_general_parse(
    lines: list[str], heads: list[str], picks: list[int]
) -> None:
    # Lines that share their beginnings, so that the cache is filled and hit.
    shared = [heads[p % len(heads)] + line for p, line in zip(picks, lines, strict=False)]
    for raw in [*lines, *shared, *shared]:
        assert parse_line(raw) == general_parse(raw)


def test_prefix_cache_hits_and_stays_exact() -> None:
    prefix._PREFIXES.clear()
    head = "(EngineCore_DP0 pid=7) WARN 05-14 10:02:03 [core.py:123] "
    first = parse_line(head + "one")
    assert head in prefix._PREFIXES
    for tail in ("two", "", "] more", "(x pid=2) INFO 05-14 10:02:03 [b.py:2] y", "\x1b[0m z"):
        assert parse_line(head + tail) == general_parse(head + tail)
    assert (first.level, first.message) == ("WARNING", "one")
    # Not cached: the `] ` that ends the prefix is not the line's first, or no level part.
    for raw in ("(a] b pid=4) INFO 05-14 10:02:03 [a.py:1] m", "(a pid=1) INFO:     m",
                "Loading safetensors checkpoint shards: 5% [00:01<00:07]  x"):
        assert parse_line(raw) == general_parse(raw)
        assert parse_line(raw) == general_parse(raw)


# -- classification: the sieve's shortcut -------------------------------------------------------

INCIDENT = (Path(__file__).parents[1] / "data" / "incident-serve.log").read_text().splitlines()
HEAD = "(APIServer pid=1) INFO 05-14 10:02:13 [loggers.py:127] "
# Whole lines of every kind, and near misses: keywords without what their parser needs.
NOTABLE = [
    "Initializing a V1 LLM engine (v0.11.0) with config: model='/m', speculative_config=None",
    "non-default args: {'model': '/m'}", "non-default args", "vLLM server version 0.11.0, "
    "serving model /m", "vLLM API server version 0.1.dev1", "█▀ version 0.11.0",
    "▄█ model   /m/Qwen3", "version", "model x", "Using auxiliary layers from "
    "speculative config: (2, 17)", "auxiliary layers", "SpecDecoding metrics: Accepted: 5 "
    "tokens", "Speculative metrics: Draft acceptance rate: 0.5", "metrics:", "Engine 000: Avg "
    "prompt throughput: 1.0 tokens/s", "throughput:", "Starting to load model /m...",
    "Loading weights took 1.5 seconds", "Loading safetensors checkpoint shards: 5% Completed",
    "Loading drafter model...", "Model loading took 5.1 GiB memory and 2.0 seconds",
    "Available KV cache memory: 40.1 GiB", "GPU KV cache size: 1,000 tokens",
    "Graph capturing finished in 5 secs, took 0.5 GiB", "init engine (profile, create kv cache,"
    " warmup model) took 30.5 seconds", "init engine", "Starting vLLM API server 0 on "
    "http://0.0.0.0:8000", "Application startup complete.", "EngineCore failed to start.",
    "RuntimeError: Engine core initialization failed. See root cause above.",
    "vllm.v1.engine.exceptions.EngineDeadError: x", "Traceback (most recent call last):",
    '  File "/a.py", line 3, in f', "The above exception was the direct cause of the following "
    "exception:", "During handling of the above exception, another exception occurred:",
    "KeyboardInterrupt", "SystemExit: 1", "ValueError: Invalid DFlash layer_type(s): ['x']",
    "DFlash drafters require the V2 model runner", "  ValueError  ", "x: NotAnError",
    "it/s]", "s/it]", "Loading safetensors checkpoint shards: 50% | 1/2 [00:01<00:01, 1.0it/s]",
    'INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 200 OK', "] Received request cmpl-1: ",
    "] Finished request cmpl-1", "] Generated response cmpl-1", "WARNING ", "ERROR ", "FATAL ",
]
NOTABLE_PIECES = [*PIECES, *NOTABLE, *MESSAGE_ANCHORS, HEAD, "Error", ":", "  "]
notable_text = st.lists(
    st.one_of(st.sampled_from(NOTABLE_PIECES), prefixes, st.text(max_size=3)), max_size=12
).map("".join)
any_line = st.one_of(notable_text, texts, st.sampled_from(INCIDENT))
levels = st.sampled_from([None, "DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL",
                          "FATAL", "x"])


def general_classify(line: LogLine) -> LineEvent:
    try:
        return _by_parsers(line)
    except Exception:
        return LineEvent(LineKind.OTHER, line)


@given(raw=any_line)
@SETTINGS
def test_classify_agrees_with_the_parsers_on_any_line(raw: str) -> None:
    line = parse_line(raw)
    assert _classify(line) == _by_parsers(line)


@given(message=any_line, level=levels)
@SETTINGS
def test_classify_agrees_with_the_parsers_on_any_message_and_level(
    message: str, level: str | None
) -> None:
    line = LogLine(message, message, level=level, message=message)
    assert _classify(line) == _by_parsers(line)


@pytest.mark.parametrize("raw", [*INCIDENT, *NOTABLE, *(HEAD + n for n in NOTABLE)])
def test_classify_agrees_with_the_parsers_on_real_lines(raw: str) -> None:
    line = parse_line(raw)
    assert classify(line) == general_classify(line)


def test_sieve_anchors() -> None:
    for bad in ("", "a1", "#x", "\x1b[", "é"):
        with pytest.raises(ValueError, match="not an anchor"):
            Sieve([bad])


@given(batch=st.lists(any_line, max_size=30))
@SETTINGS
def test_sieve_says_no_only_for_lines_without_anchors_or_controls(batch: list[str]) -> None:
    sieve = Sieve(["Avg ", "HTTP/", "Error", "x y"])
    picked = sieve.select(batch)
    assert picked == [i for i, text in enumerate(batch) if sieve.maybe(text)]
    for i, text in enumerate(batch):
        if i not in picked:
            assert strip_ansi(text) == text
            assert not any(a in text for a in ("Avg ", "HTTP/", "Error", "x y"))


# -- RunLog.feed_texts: the lines it skips unparsed ---------------------------------------------

def feed_texts_line_by_line(log: RunLog, texts: Iterable[str], arrival: float | None
                            ) -> tuple[list[tuple[int, LineEvent]], Changed]:
    """`RunLog.feed_texts` as it was: every line parsed and classified the general way."""
    notable: list[tuple[int, LineEvent]] = []
    changed = Changed.NOTHING
    texts = list(texts)
    last = max((i for i, text in enumerate(texts) if _throughput(text)), default=-1)
    for i, text in enumerate(texts):
        if _per_request(text) or (i < last and _throughput(text)):
            continue
        event = general_classify(general_parse(text))
        if event.kind is not LineKind.OTHER:
            notable.append((i, event))
        changed |= log.feed(event, arrival)
    return notable, changed


class FixedClock(LogClock):
    def now(self) -> float:
        return 1.8e9


def _state(log: RunLog) -> tuple[object, ...]:
    return (log.info, log.throughput_at, log._last_at, log.startup.status(2e9, True),
            log.startup._last_progress, log.spec.state())


STARTS = [
    [],  # nothing started
    [HEAD + NOTABLE[0], HEAD + "Starting to load model /m..."],  # starting: progress counts
    [HEAD + NOTABLE[0], "(APIServer pid=1) INFO:     Application startup complete."],  # ready
]


# One line for each way a line can matter, with each level a line can spell.
LEVEL_LINES = [f"(EngineCore_DP0 pid=7) {level} 05-14 10:02:03 [core.py:1] step"
               for level in ("DEBUG", "INFO", "WARN", "WARNING", "ERROR", "CRITICAL", "FATAL")]
EVERY_WAY = [*NOTABLE, *(HEAD + n for n in NOTABLE), *LEVEL_LINES, "FATAL:    x",
             "WARNING:  x", "shards: 50% | 1/2 [00:01<00:01, 1.52s/it]",
             "shards: 50% | 1/2 [00:01<00:01, 3.2it/s]", *INCIDENT,
             "[vllm-console] restart at 2026-05-14T10:05:00+00:00 by me@h; trace=on"]


@pytest.mark.parametrize("colour", ["", "\x1b[1;36m", "\x1b[m"])
@pytest.mark.parametrize("start", STARTS, ids=["idle", "starting", "ready"])
def test_feed_texts_gives_what_every_line_parsed_gives_for_every_way(
    start: list[str], colour: str
) -> None:
    for plain in EVERY_WAY:
        line = f"{colour}{plain[:5]}{colour}{plain[5:]}"
        fast, general = RunLog(FixedClock(0.0)), RunLog(FixedClock(0.0))
        for batch, arrival in ((start, None),
                               (["(a pid=1) DEBUG 05-14 10:02:03 [a.py:1] step 1", line], 1.9e9)):
            assert fast.feed_texts(batch, arrival) == feed_texts_line_by_line(
                general, batch, arrival)
            assert _state(fast) == _state(general), line


COLOURS = ["", "\x1b[1;36m", "\x1b[0;0m", "\x1b[m", "\x1b[32m", "\x1b[0m"]
coloured = st.tuples(st.sampled_from(COLOURS), any_line, st.sampled_from(COLOURS)).map("".join)


@given(start=st.sampled_from(STARTS),
       batches=st.lists(st.lists(st.one_of(any_line, coloured, st.sampled_from(INCIDENT)),
                                 max_size=25), max_size=4),
       arrival=st.sampled_from([None, 1.7e9]), with_keys=st.booleans())
@SETTINGS
def test_feed_texts_gives_what_every_line_parsed_gives(
    start: list[str], batches: list[list[str]], arrival: float | None, with_keys: bool
) -> None:
    # `with_keys`: the batch's keys made by the caller, as the app does (`LogBatch.keys`).
    fast, general = RunLog(FixedClock(0.0)), RunLog(FixedClock(0.0))
    for batch in [start, *batches]:
        keys = batch_keys(batch) if with_keys else None
        assert fast.feed_texts(batch, arrival, keys) == feed_texts_line_by_line(
            general, batch, arrival)
        assert _state(fast) == _state(general)


def test_caches_stay_small_on_hostile_lines() -> None:
    sieve = Sieve(["Avg "], max_keys=4, max_key_bytes=64)
    assert not sieve.maybe("x" * 65)
    assert sieve.maybe("Avg " + "x" * 100)
    assert sieve._verdicts == {}  # too long to keep
    for i in range(10):
        assert not sieve.maybe(f"line {'x' * i}")
    assert len(sieve._verdicts) <= 4
    prefix._PREFIXES.clear()
    parse_line("(x pid=1) INFO 05-14 10:02:03 [" + "a" * 300 + ":1] " + "m" * 100_000)
    assert all(len(key) < 500 for key in prefix._PREFIXES)


# -- the screen's batch check -------------------------------------------------------------
SECRETISH = ["'api_key': 'sk-live-1'", "--api-key sk-2", "HF_TOKEN=hf_x", "token: abc",
             "Authorization: Bearer z", "tokens/s", "keyboard", "a\tb", "\x1b[2J", "\u202e",
             "é", "\x7f", "x" * 40]
screen_line = st.lists(st.one_of(st.sampled_from(SECRETISH), st.sampled_from(PIECES),
                                 st.text(max_size=4)), max_size=12).map(" ".join)


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(screen_line, max_size=8), st.sampled_from([30, 80, 2000]))
def test_a_batch_shown_at_once_is_what_each_line_shown_gives(texts: list[str],
                                                             width: int) -> None:
    from vllm_console.console.hostclient.follower import LogBatch, LogEntry
    from vllm_console.widgets.log_pane import display_safe

    batch = LogBatch.of(LogEntry(i, t) for i, t in enumerate(texts))
    each = [e.display(width) for e in batch.entries]
    assert batch.display_lines(width) == each
    for skip in range(len(texts) + 1):  # a pane keeping the last lines only
        assert batch.display_lines(width, skip) == each[skip:]
    assert display_safe(each) == [safe_text(t) for t in each]


def _shown(text: str, width: int) -> str:
    from vllm_console.console.hostclient.follower import LogEntry

    return LogEntry(0, text).display(width)


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(screen_line, min_size=1, max_size=8), st.permutations("0123456789"),
       st.sampled_from([30, 80, 2000]))
def test_plain_lines_leave_out_only_lines_shown_as_they_are(
        texts: list[str], digits: list[str], width: int) -> None:
    """`PlainLines` answers by the line with its digits made `#`: a batch, then the same
    batch renumbered (a flood's next lines, answered from the cache), then both mixed."""
    from vllm_console.console.output.display import PlainLines

    plain = PlainLines()
    renumbered = [t.translate(str.maketrans("0123456789", "".join(digits))) for t in texts]
    for batch in (texts, renumbered, [*renumbered, *texts]):
        changed = set(plain.changed(batch, width))
        assert all(_shown(text, width) == text
                   for i, text in enumerate(batch) if i not in changed)
        assert plain.changed(batch, width) == sorted(changed)  # the same answer, cached


def test_plain_lines_tell_a_secret_from_a_line_that_differs_only_in_its_digits() -> None:
    from vllm_console.console.output.display import PlainLines

    plain = PlainLines()
    assert plain.changed([" ke1y: v", "GET /v1/x 200", "a7 token9 b"]) == []
    assert plain.changed(["1 key: v"]) == [0]  # not " key: v" (digits dropped): a secret
    assert _shown("1 key: v", 80) == "1 key: <redacted>"
    assert plain.changed(["x1key= v", "x#key= v", "a7 token: b", "GET /v2/x 404"]) == [0, 1, 2]
    assert plain.changed(["é 1", "tab\t2", "\x1b[2J", "y" * 81, "ok 3"], 80) == [0, 1, 2, 3]


def test_plain_lines_cache_stays_small() -> None:
    from vllm_console.console.output.display import PlainLines

    plain = PlainLines(max_keys=4, max_key_bytes=64)
    assert plain.changed(["x" * 65, "key: x" + "y" * 80]) == [1]
    assert plain._changes == {}  # too long to keep
    for i in range(10):
        assert plain.changed([f"line {'x' * i}", f"other {'y' * i}"]) == []
    assert len(plain._changes) <= 4
    assert plain.changed([f"{'z' * i} key: v" for i in range(10)]) == list(range(10))
    assert len(plain._changes) <= 4
