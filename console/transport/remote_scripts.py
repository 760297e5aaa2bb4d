"""The host-side package, shipped to a host as one bundle and run there.

`console.hostside` travels as one zipapp, built in memory with fixed timestamps (the same sources
give the same bytes, so the same content hash) and installed once per content hash into a
private per-user directory on the host (`${XDG_CACHE_HOME:-~/.cache}/vllm-console`, mode 700):
nothing the console puts there is readable by other users, and nothing is re-uploaded per call.

Every entry point runs as `PYTHON BUNDLE ENTRY`: `run_json` for one-shot answers (discovery,
the probes, restart's queries), `python_line` for the long-lived streams (agent, follower).
Inside a container (`Inside`), `run_json` runs the entry with the container's interpreter
through `docker exec -i`, the bundle streamed in ahead of the parameters (`BOOT_INSIDE`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import shlex
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from vllm_console.console.hostside import MIN_PYTHON
from vllm_console.console.hostside.wire import ARGS_ENV, MARKER, TOO_OLD_EXIT, interpreter_flags
from vllm_console.console.hostside.zipapp_main import PACKAGE
from vllm_console.console.transport.host import Host, HostError, quote_argv

REMOTE_DIR = '"${XDG_CACHE_HOME:-$HOME/.cache}/vllm-console"'
SHOWN_PAYLOAD_MAX = 1500

BOOT_INSIDE = (
    "import io,sys,zipfile,importlib.abc,importlib.util\n"
    "n=int(sys.stdin.buffer.readline());z=zipfile.ZipFile(io.BytesIO(sys.stdin.buffer.read(n)))\n"
    "def f(b):\n"
    " for n,p in ((b+'/__init__.py',True),(b+'.py',False)):\n"
    "  if n in z.NameToInfo:return n,p\n"
    "class B(importlib.abc.MetaPathFinder,importlib.abc.Loader):\n"
    " def find_spec(s,name,path=None,target=None):\n"
    "  h=f(name.replace('.','/'))\n"
    "  return importlib.util.spec_from_loader(name,s,is_package=h[1]) if h else None\n"
    " def create_module(s,spec):return None\n"
    " def exec_module(s,m):\n"
    "  n=f(m.__name__.replace('.','/'))[0]\n"
    "  exec(compile(z.read(n),'<bundle>/'+n,'exec'),m.__dict__)\n"
    "sys.meta_path.insert(0,B())\n"
    f"from {PACKAGE}.__main__ import main\n"
    "sys.exit(main())\n")
"""Runs the bundle inside a container, from stdin: its size on one line, the zipapp, then the
entry's parameters. Streamed rather than copied in (`docker cp`): nothing is written inside
the container (a read-only root file system, or no writable /tmp, still works), nothing is
left behind there, and the host's installed bundle is the one that runs; imported from memory
because zipimport reads only files."""

# The container's own interpreter: the one its server's entry point names (its `#!` line, or
# `env NAME` on PATH), else python3; found by the container's `sh`.
_PYTHON_INSIDE = (
    'e=$1; case "${e##*/}" in python*) command -v "$e"; exit;; esac; '
    's=$(command -v "$e") && IFS= read -r l < "$s" && case "$l" in "#!"*python*) '
    'set -- ${l#??}; if [ "${1##*/}" = env ]; then shift; command -v "$1"; else echo "$1"; fi; '
    'exit;; esac; command -v python3')


@dataclass(frozen=True)
class Inside:
    """A container the entry runs inside (`docker exec`), by its runtime's CLI on the host."""

    runtime: str
    ref: str

    @property
    def words(self) -> str:
        return f"the {self.runtime} container {self.ref}"


def _entry(name: str, data: bytes) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info, data


def _sources(folder: Any, prefix: str) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for item in sorted(folder.iterdir(), key=lambda i: i.name):
        if item.is_dir() and item.joinpath("__init__.py").is_file():
            out += _sources(item, f"{prefix}{item.name}/")
        elif item.name.endswith(".py"):
            out.append((f"{prefix}{item.name}", item.read_bytes()))
    return out


@functools.cache
def bundle_bytes() -> bytes:
    """The zipapp of `console.hostside`: `python3 BUNDLE ENTRY ...` runs its `__main__`."""
    package = resources.files("vllm_console.console.hostside")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        # The root `__main__`: the package's, from a compiled copy made beside the bundle.
        zf.writestr(*_entry("__main__.py", package.joinpath("zipapp_main.py").read_bytes()))
        for name, data in _sources(package, f"{PACKAGE}/"):
            zf.writestr(*_entry(name, data))
    return buf.getvalue()


class RemoteScripts:
    """The bundle on one host: installed on first use, its path remembered; and the
    interpreter each bare name (`python3`) turned out to be there. One per host: `Host.scripts`
    makes it (never build another: each would install and learn all over again)."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._path = ""
        self._resolved: dict[str, str] = {}

    def interpreter(self, name: str) -> str:
        """What runs for `name`: the interpreter a bare name ran last time, else the name. A
        version manager's `python3` (pyenv, asdf) is a shell script that starts some 30
        processes to pick one; each entry paid that before."""
        return self._resolved.get(name, name)

    def learn(self, name: str, executable: str) -> None:
        if "/" not in name and executable.startswith("/"):
            self._resolved[name] = executable

    async def bundle(self) -> str:
        """The remote path of the bundle (uploaded once per content hash)."""
        if self._path:
            return self._path
        source = bundle_bytes()
        quoted = shlex.quote(f"hostside-{hashlib.sha256(source).hexdigest()[:16]}.pyz")
        # One round trip: make the private dir, write the file only when it is not there yet,
        # print the absolute path. Each writer has its own temporary file ($$: consoles making
        # first contact at once), and the rename makes the whole bundle appear at once.
        line = (f"umask 077; d={REMOTE_DIR}; mkdir -p \"$d\" && chmod 700 \"$d\" && "
                f"{{ test -s \"$d\"/{quoted} || {{ cat > \"$d\"/{quoted}.$$.tmp && "
                f"mv -f \"$d\"/{quoted}.$$.tmp \"$d\"/{quoted} || "
                f"{{ rm -f \"$d\"/{quoted}.$$.tmp; false; }}; }}; }} && "
                f"printf '%s\\n' \"$d\"/{quoted}")
        result = await self._host.run(line, input=source, timeout=30)
        if not result.ok or not result.text.strip():
            raise HostError(f"{self._host.name}: cannot install the console's host-side helper: "
                            f"{result.error_text.strip() or 'exit ' + str(result.exit_status)}")
        self._path = result.text.strip().splitlines()[-1]
        return self._path


def python_line(bundle: str, entry: str, args: Sequence[str], *, python: str = "",
                merge_stderr: bool = False, python3: str = "python3") -> str:
    """A shell line that runs `entry` of the bundle with the host's python3 (else the serving
    interpreter): the first of them that is new enough, or one `{"t": "error"}` JSON line
    saying there is none. `python3`: the interpreter the host's python3 turned out to be,
    when known (`RemoteScripts.interpreter`), tried first.

    The arguments travel in the environment (`VLLM_CONSOLE_ARGS`, a JSON list), not on the
    command line: a helper whose argv held the match words or a `vllm-serve.log` path would
    itself look like `vllm serve` to anything that finds the server by its command line."""
    candidates = list(dict.fromkeys([python3, "python3", "/usr/bin/python3"]
                                    + ([python] if python else [])))
    tried = " ".join(candidates)
    run = '"$p" ' + quote_argv([*interpreter_flags(entry), bundle, entry])
    if merge_stderr:
        run += " 2>&1"
    need = ".".join(map(str, MIN_PYTHON))
    new_enough = f"import sys; sys.exit(sys.version_info[:2] < {MIN_PYTHON!r})"
    error = json.dumps({"t": "error",
                        "msg": f"no Python {need}+ on the host (tried {tried})"})
    return (f"{ARGS_ENV}={quote_argv([json.dumps(list(args))])}; export {ARGS_ENV}\n"
            f"for p in {quote_argv(candidates)}; do\n"
            f"  if command -v \"$p\" >/dev/null 2>&1 && "
            f"\"$p\" -S -c {quote_argv([new_enough])} 2>/dev/null; then exec {run}; fi\n"
            f"done\nprintf '%s\\n' {quote_argv([error])}; exit 127")


@dataclass(frozen=True)
class ScriptRun:
    """One run of an entry point: what ran, its exit status, its answer or why there is none."""

    command: str
    exit: int | None
    data: Mapping[str, Any] | None = field(default=None, repr=False)
    error: str | None = None
    stderr: str = field(default="", repr=False)
    link_failed: bool = False
    """The host could not be reached or the link dropped (not a problem of the entry)."""


def _reason(exc: HostError) -> str:
    """A HostError's reason without the (long) command line it quotes."""
    text = str(exc)
    return text.rsplit(": ", 1)[-1] if len(text) > 200 else text


def parse_answer(stdout: str) -> dict[str, Any] | None:
    """The JSON object after the last marker line (or on the last line, for an answer that
    came without one: the too-old message)."""
    text = _after_marker(stdout)[1].strip() if MARKER in stdout else \
        (stdout.strip().splitlines() or [""])[-1]
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _after_marker(stdout: str) -> tuple[str, str]:
    """The rest of the last marker line (the interpreter, a JSON string) and the answer after
    it."""
    line, _, answer = stdout.rsplit(MARKER, 1)[-1].partition("\n")
    return line, answer


def answering_interpreter(stdout: str) -> str:
    """The interpreter the marker line names, a JSON string ("" when there is none)."""
    if MARKER not in stdout:
        return ""
    try:
        named = json.loads(_after_marker(stdout)[0])
    except ValueError:
        return ""
    return named if isinstance(named, str) else ""


def shown_command(interpreter: str, bundle: str, entry: str, args: Sequence[str] = (),
                  payload: Mapping[str, Any] | None = None) -> str:
    """The command as a person would re-run it (payload shown inline, cut when huge)."""
    return _shown_with(payload, quote_argv([interpreter, *interpreter_flags(entry), bundle, entry,
                                            *args]))


def _shown_with(payload: Mapping[str, Any] | None, line: str) -> str:
    if payload is None:
        return line
    body = json.dumps(payload, separators=(",", ":"))
    if len(body) > SHOWN_PAYLOAD_MAX:
        body = body[:SHOWN_PAYLOAD_MAX] + "…"
    return f"printf '%s' {shlex.quote(body)} | {line}"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


def inside_line(inside: Inside, bundle: str, interpreter: str, entry: str,
                args: Sequence[str] = ()) -> str:
    """The shell line that runs `entry` inside the container: the host's bundle, then this
    line's own stdin (the parameters), into `docker exec -i`."""
    exec_argv = [inside.runtime, "exec", "-i", inside.ref, interpreter, "-c", BOOT_INSIDE,
                 entry, *args]
    return (f"{{ wc -c < {shlex.quote(bundle)} && cat {shlex.quote(bundle)} && cat; }} | "
            f"{quote_argv(exec_argv)}")


async def python_inside(host: Host, inside: Inside, entry_point: str,
                        timeout: float = 30.0) -> tuple[str, str]:
    """The container's own interpreter for a server started by `entry_point` (its path in
    the container), and "" or why there is none (one line)."""
    argv = [inside.runtime, "exec", inside.ref, "sh", "-c", _PYTHON_INSIDE, "sh", entry_point]
    try:
        result = await host.run(argv, timeout=timeout)
    except HostError as exc:
        return "", f"cannot look inside {inside.words} on {host.name}: {_reason(exc)}"
    found = _last_line(result.text)
    if result.ok and found.startswith("/"):
        return found, ""
    why = _last_line(result.error_text) or "no python3 there"
    return "", f"no interpreter found inside {inside.words} for {entry_point}: {why}"


async def run_json(host: Host, entry: str, interpreter: str,
                   payload: Mapping[str, Any] | None = None, *, args: Sequence[str] = (),
                   timeout: float = 60.0, env: Mapping[str, str] | None = None,
                   inside: Inside | None = None) -> ScriptRun:
    """Run `entry` of the bundle with `interpreter` (installing the bundle first if need be) and
    read its JSON answer; with `inside`, the interpreter is the container's and the entry
    runs there (`env` is then the container's own). Whatever goes wrong (the interpreter
    missing or too old, the link dropping, a timeout, a crash, output that is no JSON) comes
    back as `ScriptRun.error` in one line, never as an exception."""
    scripts = host.scripts
    try:
        bundle = await scripts.bundle()
    except HostError as exc:
        return ScriptRun(f"{interpreter} {entry}", None, link_failed=True,
                         error=f"{entry} did not run on {host.name}: {_reason(exc)}")
    line: Sequence[str] | str = [scripts.interpreter(interpreter), *interpreter_flags(entry),
                                 bundle, entry, *args]
    command = shown_command(interpreter, bundle, entry, args, payload)
    where = f"on {host.name}"
    if inside is not None:
        line = inside_line(inside, bundle, interpreter, entry, args)
        command = _shown_with(payload, line)
        where, env = f"inside {inside.words} on {host.name}", None
    try:
        result = await host.run(line, input=json.dumps(payload or {}).encode(),
                                timeout=timeout, env=env)
    except HostError as exc:
        return ScriptRun(command, None, link_failed=True,
                         error=f"{entry} did not run {where}: {_reason(exc)}")
    stderr = result.error_text
    if result.exit_status == 127:
        return ScriptRun(command, 127, error=f"{interpreter}: not found {where}",
                         stderr=stderr)
    if result.exit_status == 126:
        return ScriptRun(command, 126, error=f"{interpreter}: not executable {where}",
                         stderr=stderr)
    data = parse_answer(result.text)
    if result.exit_status == TOO_OLD_EXIT and data is not None and data.get("too_old"):
        return ScriptRun(command, TOO_OLD_EXIT, error=f"{host.name}: {data.get('msg')}",
                         stderr=stderr)
    if data is None:
        why = _last_line(stderr) or _last_line(result.text) or "no output"
        lost = result.exit_status in (255, 137) and not stderr.strip()
        if lost:
            why = "the command ended without an answer (the link to the host may have dropped)"
        elif result.exit_status == 0:
            why = f"its output is not JSON: {why}"
        return ScriptRun(command, result.exit_status,
                         error=f"{entry} failed (exit {result.exit_status}): {why}",
                         stderr=stderr, link_failed=lost)
    if inside is None:
        scripts.learn(interpreter, answering_interpreter(result.text))
    return ScriptRun(command, result.exit_status, data=data, stderr=stderr)
