"""Running one host-side JSON script and reading its answer.

Every probe is one process on the host: `INTERPRETER SCRIPT` with its parameters as JSON on
stdin, its facts as JSON on stdout after a marker line (so whatever an import prints before it
cannot corrupt the answer). Whatever goes wrong — the interpreter missing, the host dropping,
a timeout, a crash — comes back as `ScriptRun.error` in words, never as an exception.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from console.host import Host, HostError
from console.remote_scripts import RemoteScripts, script_source

MARKER = "@@vllm-console-json@@"
SHOWN_PAYLOAD_MAX = 1500


@dataclass(frozen=True)
class ScriptRun:
    """One script run: what ran, its exit status, its answer or why there is none."""

    command: str
    exit: int | None
    data: Mapping[str, Any] | None = field(default=None, repr=False)
    error: str | None = None
    stderr: str = field(default="", repr=False)
    link_failed: bool = False
    """The host could not be reached or the link dropped (not a problem of the probe)."""


LINK_HINT = "the link to {host} failed during the check: check the connection, then run it again"


def _reason(exc: HostError) -> str:
    """A HostError's reason without the (long) command line it quotes."""
    text = str(exc)
    return text.rsplit(": ", 1)[-1] if len(text) > 200 else text


def parse_answer(stdout: str) -> dict[str, Any] | None:
    """The JSON object after the last marker line (or the last line, for scripts without one)."""
    text = stdout.rsplit(MARKER, 1)[-1].strip() if MARKER in stdout else \
        (stdout.strip().splitlines() or [""])[-1]
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def shown_command(interpreter: str, path: str, payload: Mapping[str, Any]) -> str:
    """The command as a person would re-run it (payload shown inline, cut when huge)."""
    body = json.dumps(payload, separators=(",", ":"))
    if len(body) > SHOWN_PAYLOAD_MAX:
        body = body[:SHOWN_PAYLOAD_MAX] + "…"
    return f"printf '%s' {shlex.quote(body)} | {shlex.quote(interpreter)} {shlex.quote(path)}"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


async def run_json_script(host: Host, scripts: RemoteScripts, package: str, name: str,
                          interpreter: str, payload: Mapping[str, Any], *,
                          timeout: float = 60.0, env: Mapping[str, str] | None = None
                          ) -> ScriptRun:
    """Install (once) and run the script `name` of `package` with `interpreter`."""
    try:
        path = await scripts.path(name, script_source(package, name))
    except HostError as exc:
        return ScriptRun(f"{interpreter} {name}", None, link_failed=True,
                         error=f"{name} did not run on {host.name}: {_reason(exc)}")
    command = shown_command(interpreter, path, payload)
    try:
        result = await host.run([interpreter, path], input=json.dumps(payload).encode(),
                                timeout=timeout, env=env)
    except HostError as exc:
        return ScriptRun(command, None, link_failed=True,
                         error=f"{name} did not run on {host.name}: {_reason(exc)}")
    stderr = result.error_text
    if result.exit_status == 127:
        return ScriptRun(command, 127, error=f"{interpreter}: not found on {host.name}",
                         stderr=stderr)
    if result.exit_status == 126:
        return ScriptRun(command, 126, error=f"{interpreter}: not executable on {host.name}",
                         stderr=stderr)
    data = parse_answer(result.text)
    if data is None:
        why = _last_line(stderr) or _last_line(result.text) or "no output"
        lost = result.exit_status in (255, 137) and not stderr.strip()
        if lost:
            why = "the command ended without an answer (the link to the host may have dropped)"
        return ScriptRun(command, result.exit_status,
                         error=f"{name} failed (exit {result.exit_status}): {why}",
                         stderr=stderr, link_failed=lost)
    return ScriptRun(command, result.exit_status, data=data, stderr=stderr)
