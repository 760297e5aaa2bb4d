"""toolong (a peer Textual log viewer) following the same flood, on this machine.

    .venv/bin/python -m benchmarks.bench_toolong --rate 100000 --seconds 5 [--keys] [--memory]

toolong pins Textual 0.58 and the console pins 8.2.8: installing it into the project's venv
would downgrade Textual under the console. So it gets a venv of its own, made once at
`TOOLONG_VENV` (default /tmp/vc-bench-toolong-venv, `pip install toolong`, from whatever index
pip is configured with) and reused. toolong reads local files only: it follows the log
directly, without SSH (the console's local-transport row is the like-for-like comparison). The
measuring is done by `toolong_driver.py` inside that venv.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import ACCESS_LINE, WRITER, peer_python, report

VENV = Path(os.environ.get("TOOLONG_VENV", "/tmp/vc-bench-toolong-venv"))
DRIVER = Path(__file__).with_name("toolong_driver.py")


def toolong_python() -> Path:
    """toolong's interpreter, its venv made (and toolong installed) when absent."""
    return peer_python(VENV, "toolong", "toolong")


def version() -> str:
    out = subprocess.run([str(toolong_python()), "-c", "import importlib.metadata as m; "
                          "print(m.version('toolong'), m.version('textual'))"],
                         capture_output=True, text=True)
    parts = out.stdout.split()
    return f"toolong {parts[0]} (Textual {parts[1]})" if len(parts) == 2 else "toolong ?"


def follow(rate: float, seconds: float, *, keys: bool = False,
           marks: tuple[int, ...] = (100_000,)) -> dict[str, Any]:
    python = toolong_python()
    d = Path(tempfile.mkdtemp(prefix="vc-bench-toolong-"))
    try:
        writer = d / "writer.py"
        writer.write_text(WRITER)
        log = d / "serve.log"
        log.write_bytes(b"")
        argv = [str(python), str(DRIVER), str(writer), str(log), str(rate), str(seconds),
                ACCESS_LINE]
        if keys:
            argv.append("--keys")
        if marks:
            argv += ["--marks", ",".join(str(m) for m in marks)]
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=max(120.0, 6 * seconds), cwd=d)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            tail = " | ".join(proc.stderr.strip().splitlines()[-5:])
            return {"error": f"toolong driver exited {proc.returncode}: {tail}"}
        result: dict[str, Any] = json.loads(lines[-1])
        return result
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=float, default=100_000)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--keys", action="store_true")
    p.add_argument("--memory", action="store_true",
                   help="1M lines at 100k/s; peak RSS at 100k and 1M lines")
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    if opts.memory:
        result = follow(100_000, 10.0, marks=(100_000, 1_000_000))
    else:
        result = follow(opts.rate, opts.seconds, keys=opts.keys)
    result["version"] = version()
    report(result, opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
