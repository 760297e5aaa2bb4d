"""Pure parsers for what `vllm serve` prints and exports.

Functions over `str`/`bytes` only: no I/O, no Textual. None of them raises on any input; a
line or body they do not recognise gives None (or an "unknown"/`OTHER` result). Results are
frozen dataclasses.
"""

from vllm_console.console.parsers.aux import parse_aux_layers
from vllm_console.console.parsers.classifier import LineEvent, LineKind, classify, classify_text
from vllm_console.console.parsers.engine import (
    EngineConfig,
    NonDefaultArgs,
    SpeculativeSettings,
    VersionBanner,
    parse_engine_start,
    parse_non_default_args,
    parse_version_banner,
)
from vllm_console.console.parsers.errors import (
    ErrorEvent,
    ErrorKind,
    Frame,
    Traceback,
    group_tracebacks,
    parse_error,
)
from vllm_console.console.parsers.lines import LineAssembler, split_lines
from vllm_console.console.parsers.metrics import (
    MetricsSnapshot,
    SpecDecodeCounters,
    diff_counters,
    parse_metrics,
)
from vllm_console.console.parsers.prefix import LogLine, parse_line, strip_ansi
from vllm_console.console.parsers.pyrepr import parse_kwargs, parse_repr, to_jsonable
from vllm_console.console.parsers.redact import REDACTED, is_secret_key, redact
from vllm_console.console.parsers.spec_decode import (
    SpecDecodeSample,
    format_spec_decode,
    parse_spec_decode,
)
from vllm_console.console.parsers.startup import StartupEvent, StartupPhase, parse_startup
from vllm_console.console.parsers.throughput import (
    ThroughputSample,
    format_throughput,
    parse_throughput,
)

__all__ = [
    "REDACTED",
    "EngineConfig",
    "ErrorEvent",
    "ErrorKind",
    "Frame",
    "LineAssembler",
    "LineEvent",
    "LineKind",
    "LogLine",
    "MetricsSnapshot",
    "NonDefaultArgs",
    "SpecDecodeCounters",
    "SpecDecodeSample",
    "SpeculativeSettings",
    "StartupEvent",
    "StartupPhase",
    "ThroughputSample",
    "Traceback",
    "VersionBanner",
    "classify",
    "classify_text",
    "diff_counters",
    "format_spec_decode",
    "format_throughput",
    "group_tracebacks",
    "is_secret_key",
    "parse_aux_layers",
    "parse_engine_start",
    "parse_error",
    "parse_kwargs",
    "parse_line",
    "parse_metrics",
    "parse_non_default_args",
    "parse_repr",
    "parse_spec_decode",
    "parse_startup",
    "parse_throughput",
    "parse_version_banner",
    "redact",
    "split_lines",
    "strip_ansi",
    "to_jsonable",
]
