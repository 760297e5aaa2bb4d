"""Starting the host agent over a `Host` and reading its JSON lines.

The agent is one `python3` process per host, started with `Host.stream` (closing the stream ends
it and its nvidia-smi children). `AgentClient.stream()` yields the hello and then one
`AgentSample` per interval for the life of one agent process; `HostTelemetry` restarts it after
a lost link. `AgentClient.once()` runs it for a single sample (the `status` command).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from vllm_console.console.hostclient.agent.samples import AgentHello, AgentSample, split_json_lines
from vllm_console.console.hostside.vocabulary import DEFAULT_MATCH
from vllm_console.console.transport.aio import within
from vllm_console.console.transport.host import Host, HostError
from vllm_console.console.transport.remote_scripts import python_line

HELLO_TIMEOUT_S = 30.0


class AgentError(HostError):
    """The agent could not start or stopped; the message says why (its last words included)."""


def agent_command(bundle: str, *, interval_s: float = 1.0, match: str = DEFAULT_MATCH,
                  port: int | None = None, nvidia_smi: str = "nvidia-smi",
                  gpu_source: str = "auto", python: str = "", once: bool = False,
                  python3: str = "python3") -> str:
    """The shell line that runs the agent of the installed `bundle`."""
    args = ["--interval", f"{interval_s:g}", "--match", match, "--nvidia-smi",
            nvidia_smi or "nvidia-smi", "--gpu-source", gpu_source]
    if port:
        args += ["--port", str(port)]
    if once:
        args.append("--once")
    return python_line(bundle, "agent", args, python=python, merge_stderr=True, python3=python3)


class AgentClient:
    """The agent on one host: install, start, read. Never spawns anything per sample."""

    def __init__(self, host: Host, *, interval_s: float = 1.0, match: str = DEFAULT_MATCH,
                 port: int | None = None, nvidia_smi: str = "nvidia-smi", python: str = "",
                 gpu_source: str = "auto",
                 clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self.interval_s = interval_s
        self.match = match or DEFAULT_MATCH
        self.port = port
        self.nvidia_smi = nvidia_smi or "nvidia-smi"
        self.python = python
        self.gpu_source = gpu_source
        self.scripts = host.scripts
        self._clock = clock
        self.hello: AgentHello | None = None

    async def _command(self, *, once: bool) -> str:
        return agent_command(await self.scripts.bundle(), interval_s=self.interval_s,
                             match=self.match, port=self.port, nvidia_smi=self.nvidia_smi,
                             gpu_source=self.gpu_source, python=self.python, once=once,
                             python3=self.scripts.interpreter("python3"))

    async def once(self, timeout: float = 60.0) -> tuple[AgentHello, AgentSample]:
        """Run the agent for one sample (a one-shot status)."""
        result = await self.host.run(await self._command(once=True), timeout=timeout)
        hello: AgentHello | None = None
        sample: AgentSample | None = None
        noise: list[str] = []
        lines, rest = split_json_lines(b"", result.stdout)
        for raw in [*lines, rest]:
            obj = _json(raw)
            if obj is None:
                if raw.strip():
                    noise.append(raw.decode("utf-8", "replace").strip())
            elif obj.get("t") == "hello":
                hello = AgentHello.from_json(obj)
            elif obj.get("t") == "sample":
                sample = AgentSample.from_json(obj, self._clock())
            elif obj.get("t") == "error":
                raise AgentError(f"{self.host.name}: agent: {obj.get('msg')}")
        if hello is None or sample is None:
            raise AgentError(f"{self.host.name}: agent gave no sample "
                             f"(exit {result.exit_status}){_last_words(noise)}")
        self.hello = hello
        return hello, sample

    async def stream(self) -> AsyncGenerator[AgentHello | AgentSample, None]:
        """The hello, then samples, for the life of one agent process. Raises AgentError (or
        HostError) when it cannot start or ends; closing the iterator stops the agent."""
        handle = await self.host.stream(await self._command(once=False))
        noise: list[str] = []
        pending = b""
        chunks = handle.__aiter__()
        try:
            got_hello = False
            while True:
                try:
                    if got_hello:
                        chunk = await chunks.__anext__()
                    else:
                        chunk = await within(chunks.__anext__(), HELLO_TIMEOUT_S)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise AgentError(f"{self.host.name}: agent said nothing for "
                                     f"{HELLO_TIMEOUT_S:g} s{_last_words(noise)}") from None
                lines, pending = split_json_lines(pending, chunk)
                for raw in lines:
                    obj = _json(raw)
                    if obj is None:
                        if raw.strip():
                            noise = [*noise[-4:], raw.decode("utf-8", "replace").strip()[:300]]
                        continue
                    kind = obj.get("t")
                    if kind == "hello":
                        got_hello = True
                        self.hello = AgentHello.from_json(obj)
                        yield self.hello
                    elif kind == "sample":
                        yield AgentSample.from_json(obj, self._clock())
                    elif kind == "error":
                        raise AgentError(f"{self.host.name}: agent: {obj.get('msg')}")
        finally:
            with contextlib.suppress(Exception):
                await handle.close()
        raise AgentError(f"{self.host.name}: agent stopped{_last_words(noise)}")


def _json(raw: bytes) -> dict[str, Any] | None:
    raw = raw.strip()
    if not raw.startswith(b"{"):
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _last_words(noise: list[str]) -> str:
    return f": {noise[-1]}" if noise else ""
