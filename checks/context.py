"""What every link knows about the host: the profile, the effective serve settings, and the
evidence of where each setting came from (configured, or discovered from the process)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vllm_console.checks.models import Evidence
from vllm_console.checks.profile import Profile
from vllm_console.checks.references import Reference
from vllm_console.checks.restart_hint import HowToRestart
from vllm_console.console.hostclient.container_log import describe as describe_container_log
from vllm_console.console.hostclient.discovery import EffectiveServe, Resolved
from vllm_console.console.hostside.vocabulary import DEFAULT_MATCH
from vllm_console.console.transport.host import Host
from vllm_console.console.transport.remote_scripts import Inside


@dataclass(frozen=True)
class ChainContext:
    """Inputs shared by the probes and links of one chain run."""

    host: Host
    host_label: str
    """How the user named the host."""
    profile: Profile
    serve: EffectiveServe
    reference: Reference | None = None
    """An explicit reference (`--reference`); else the profile's, chosen by the draft's name."""
    discovery_error: str | None = None
    match: str = DEFAULT_MATCH
    """The words that found (or did not find) the serve process."""
    discovery_command: str = ""
    """The discovery probe as run on the host (empty when it could not run)."""
    choice: str = ""
    """Why this profile judges the host (picked from the engine's method), for the evidence."""
    asked: Mapping[str, Any] = field(default_factory=dict)
    """The speculative config the launch asked for (command line, else `non-default args`)."""
    max_model_len: int | None = None
    inside: Inside | None = None
    """The server's container: every probe but the log's runs inside it (`docker exec`)."""
    no_python: str = ""
    """Why the container has no interpreter to probe with ("" when it has one)."""
    restart: HowToRestart | None = None
    """How the reader of the hints restarts the host (None: `vllm-console restart
    HOST_LABEL`)."""


def log_label(ctx: ChainContext) -> str:
    """The serve log as the links name it: the file, or the container's output."""
    proc = ctx.serve.process
    if ctx.serve.log.value or proc is None or proc.container is None:
        return ctx.serve.log.value
    return describe_container_log(proc.container)


def _line(name: str, setting: Resolved) -> str:
    if not setting.value:
        return f"{name}: unknown (not configured, not discovered)"
    return f"{name}: {setting.value} ({setting.source})"


def settings_evidence(ctx: ChainContext, *names: str) -> Evidence:
    """Where the settings a link relies on came from, with the discovery notes."""
    serve = ctx.serve
    lines = [_line(n, getattr(serve, n)) if n != "log" or serve.log.value
             or not log_label(ctx) else f"log: {log_label(ctx)}" for n in names]
    proc = serve.process
    if proc is not None:
        engines = [f"{c.pid} {c.comm}" for c in proc.children][:6]
        lines.insert(0, f"serve process: pid {proc.pid} (user {proc.user}), python from "
                        f"{proc.python_from}" + (f"; children: {', '.join(engines)}"
                                                 if engines else ""))
    if ctx.discovery_error:
        lines.insert(0, f"discovery failed: {ctx.discovery_error}")
    lines.extend(serve.notes)
    lines.insert(0, f"/proc scan for the login user's processes matching {ctx.match!r}")
    if ctx.choice:
        lines.insert(0, ctx.choice)
    return Evidence.make("discovery", ctx.discovery_command, None, "\n".join(lines))
