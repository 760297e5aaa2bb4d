"""nvidia-smi for the simulated host (installed as ROOT/bin/nvidia-smi).

The GPUs are described by ROOT/.sim/sim.json. Memory in use is the sum of the live claims in
ROOT/.sim/gpu/ (`sim_gpu`, the simulated driver beside this script). Output follows the real
tool for the forms the console uses: --query-gpu / --query-compute-apps with
--format=csv[,noheader][,nounits], -l / -lms loops, -L, and the default table.

Stdlib only: it runs with the host's Python, beside no console code but `sim_gpu`.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from sim_gpu import live_holders

ROOT = Path(__file__).resolve().parent.parent
DRIVER = "570.133.20"
CUDA = "12.8"
BUS_IDS = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
           "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]
USAGE_ERROR = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."


class UsageError(Exception):
    pass


def _settings() -> dict[str, Any]:
    try:
        return dict(json.loads((ROOT / ".sim" / "sim.json").read_text()))
    except (OSError, ValueError):
        return {}


def _process_name(pid: int, fallback: str) -> str:
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except (OSError, UnicodeDecodeError):
        argv0 = ""
    return argv0 or fallback


def snapshot() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(GPUs, compute processes) as the driver would report them now."""
    settings = _settings()
    count = int(settings.get("gpus", 1))
    total = int(settings.get("gpu_memory_total_mib", 143771))
    name = str(settings.get("gpu_name", "NVIDIA H200"))
    procs = [r for r in live_holders(ROOT / ".sim" / "gpu") if 0 <= int(r.get("gpu", 0)) < count]
    gpus = []
    rng = random.Random()
    for i in range(count):
        mine = [p for p in procs if int(p.get("gpu", 0)) == i]
        used = min(total, sum(int(p.get("used_mib", 0)) for p in mine))
        util = min(100, sum(int(p.get("util_pct", 0)) for p in mine))
        gpus.append({
            "index": i, "name": name, "total": total, "used": used, "util": util,
            "uuid": f"GPU-5f1c2a3e-8b7d-4c21-9e0a-{i:04x}d3b6f1c2",
            "bus_id": BUS_IDS[i % len(BUS_IDS)],
            "temp": int(29 + util * 0.38 + used / total * 3 + rng.randint(0, 1)),
            "power": 74.0 + util * 5.8 + used / total * 18 + rng.uniform(-2.5, 2.5),
        })
    return gpus, procs


def _unit(value: str, unit: str, nounits: bool) -> str:
    return value if nounits or not unit else f"{value} {unit}"


GPU_FIELDS: dict[str, tuple[str, Any]] = {
    "index": ("", lambda g: str(g["index"])),
    "name": ("", lambda g: g["name"]),
    "gpu_name": ("", lambda g: g["name"]),
    "uuid": ("", lambda g: g["uuid"]),
    "gpu_uuid": ("", lambda g: g["uuid"]),
    "pci.bus_id": ("", lambda g: g["bus_id"]),
    "gpu_bus_id": ("", lambda g: g["bus_id"]),
    "count": ("", lambda g: str(g["count"])),
    "driver_version": ("", lambda g: DRIVER),
    "pstate": ("", lambda g: "P0"),
    "persistence_mode": ("", lambda g: "Enabled"),
    "compute_mode": ("", lambda g: "Default"),
    "fan.speed": ("%", lambda g: "[N/A]"),
    "timestamp": ("", lambda g: time.strftime("%Y/%m/%d %H:%M:%S.000")),
    "utilization.gpu": ("%", lambda g: str(g["util"])),
    "utilization.memory": ("%", lambda g: str(int(g["util"] * 0.6))),
    "memory.total": ("MiB", lambda g: str(g["total"])),
    "memory.used": ("MiB", lambda g: str(g["used"])),
    "memory.free": ("MiB", lambda g: str(g["total"] - g["used"])),
    "memory.reserved": ("MiB", lambda g: "0"),
    "temperature.gpu": ("", lambda g: str(g["temp"])),
    "power.draw": ("W", lambda g: f"{g['power']:.2f}"),
    "power.limit": ("W", lambda g: "700.00"),
    "clocks.sm": ("MHz", lambda g: "1980" if g["util"] else "345"),
    "clocks.mem": ("MHz", lambda g: "3201"),
    "clocks.max.sm": ("MHz", lambda g: "1980"),
}

APP_FIELDS: dict[str, tuple[str, str, Any]] = {
    # name -> (header name, unit, value)
    "pid": ("pid", "", lambda p, g: str(p["pid"])),
    "process_name": ("process_name", "",
                     lambda p, g: _process_name(int(p["pid"]), p.get("process_name", ""))),
    "name": ("process_name", "",
             lambda p, g: _process_name(int(p["pid"]), p.get("process_name", ""))),
    "used_memory": ("used_gpu_memory", "MiB", lambda p, g: str(p.get("used_mib", 0))),
    "used_gpu_memory": ("used_gpu_memory", "MiB", lambda p, g: str(p.get("used_mib", 0))),
    "gpu_uuid": ("gpu_uuid", "", lambda p, g: g["uuid"]),
    "gpu_bus_id": ("gpu_bus_id", "", lambda p, g: g["bus_id"]),
    "gpu_name": ("gpu_name", "", lambda p, g: g["name"]),
    "timestamp": ("timestamp", "", lambda p, g: time.strftime("%Y/%m/%d %H:%M:%S.000")),
}


def _check_fields(fields: list[str], known: dict[str, Any]) -> None:
    for f in fields:
        if f not in known:
            raise UsageError(f'Field "{f}" is not a valid field to query.\n')


def query_gpu(fields: list[str], header: bool, nounits: bool, ids: list[int] | None) -> str:
    gpus, _ = snapshot()
    lines = []
    if header:
        lines.append(", ".join(f"{f} [{GPU_FIELDS[f][0]}]" if GPU_FIELDS[f][0] else f
                               for f in fields))
    for g in gpus:
        if ids is not None and g["index"] not in ids:
            continue
        g["count"] = len(gpus)
        lines.append(", ".join(_unit(GPU_FIELDS[f][1](g), GPU_FIELDS[f][0], nounits)
                               for f in fields))
    return "".join(line + "\n" for line in lines)


def query_apps(fields: list[str], header: bool, nounits: bool) -> str:
    gpus, procs = snapshot()
    lines = []
    if header:
        lines.append(", ".join(f"{APP_FIELDS[f][0]} [{APP_FIELDS[f][1]}]" if APP_FIELDS[f][1]
                               else APP_FIELDS[f][0] for f in fields))
    for p in procs:
        g = gpus[int(p.get("gpu", 0))]
        lines.append(", ".join(_unit(APP_FIELDS[f][2](p, g), APP_FIELDS[f][1], nounits)
                               for f in fields))
    return "".join(line + "\n" for line in lines)


def list_gpus() -> str:
    gpus, _ = snapshot()
    return "".join(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n" for g in gpus)


def _row(*cells: tuple[str, int]) -> str:
    return "|" + "|".join(text[:width].ljust(width) for text, width in cells) + "|"


def _lr(left: str, right: str, width: int) -> str:
    return left + " " * max(1, width - len(left) - len(right)) + right


def table() -> str:
    """The default report, laid out like the real one (91 columns)."""
    gpus, procs = snapshot()
    w1, w2, w3 = 41, 24, 22
    full = "+" + "-" * 89 + "+"
    split = "+" + "-" * w1 + "+" + "-" * w2 + "+" + "-" * w3 + "+"
    out = [time.strftime("%a %b %d %H:%M:%S %Y") + "       ", full,
           _row((_lr(f" NVIDIA-SMI {DRIVER}", f"Driver Version: {DRIVER}     CUDA Version: "
                     f"{CUDA}     ", 89), 89)),
           "|" + "-" * w1 + "+" + "-" * w2 + "+" + "-" * w3 + "+",
           _row((" GPU  Name                 Persistence-M", w1),
                (" Bus-Id          Disp.A", w2), (" Volatile Uncorr. ECC", w3)),
           _row((" Fan  Temp   Perf          Pwr:Usage/Cap", w1),
                ("           Memory-Usage", w2), (" GPU-Util  Compute M.", w3)),
           _row(("", w1), ("", w2), (_lr("", "MIG M. ", w3), w3)),
           "|" + "=" * w1 + "+" + "=" * w2 + "+" + "=" * w3 + "|"]
    for g in gpus:
        power = f"{g['power']:.0f}W /  700W "
        mem = f"{g['used']}MiB / {g['total']}MiB "
        out += [_row((_lr(f" {g['index']:>3}  {g['name']}", "On  ", w1), w1),
                     (_lr("", f"{g['bus_id']} Off ", w2), w2), (_lr("", "0 ", w3), w3)),
                _row((_lr(f" N/A   {g['temp']:>2}C    P0", power, w1), w1),
                     (_lr("", mem, w2), w2), (f"{g['util']:>7}%      Default ", w3)),
                _row(("", w1), ("", w2), (_lr("", "Disabled ", w3), w3)),
                split]
    out += [" " * 91, full, _row((" Processes:", 89)),
            _row(("  GPU   GI   CI              PID   Type   Process name"
                  "                        GPU Memory ", 89)),
            _row(("        ID   ID                                                   "
                  "            Usage      ", 89)),
            "|" + "=" * 89 + "|"]
    if not procs:
        out.append(_row(("  No running processes found", 89)))
    for p in procs:
        name = _process_name(int(p["pid"]), p.get("process_name", ""))[:36]
        left = f" {int(p.get('gpu', 0)):>4}   N/A  N/A  {p['pid']:>15}      C   {name}"
        out.append(_row((_lr(left, f"{p.get('used_mib', 0)}MiB ", 89), 89)))
    out.append(full)
    return "\n".join(out) + "\n"


def _value(args: list[str], i: int, word: str) -> tuple[str, int]:
    if "=" in word:
        return word.split("=", 1)[1], i
    if i + 1 >= len(args):
        raise UsageError(USAGE_ERROR)
    return args[i + 1], i + 1


def parse(args: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {"mode": "table", "fields": [], "format": None, "loop_s": None,
                            "ids": None}
    i = 0
    while i < len(args):
        word = args[i]
        key = word.split("=", 1)[0]
        if key in ("--query-gpu", "--query-compute-apps"):
            value, i = _value(args, i, word)
            opts["mode"] = "gpu" if key == "--query-gpu" else "apps"
            opts["fields"] = [f.strip() for f in value.split(",") if f.strip()]
        elif key in ("--format", "-f"):
            value, i = _value(args, i, word)
            opts["format"] = {v.strip() for v in value.split(",")}
        elif key in ("-l", "--loop"):
            value, i = _value(args, i, word)
            opts["loop_s"] = float(value)
        elif key in ("-lms", "--loop-ms"):
            value, i = _value(args, i, word)
            opts["loop_s"] = float(value) / 1000.0
        elif key in ("-i", "--id"):
            value, i = _value(args, i, word)
            opts["ids"] = [int(v) for v in value.split(",")]
        elif key in ("-L", "--list-gpus"):
            opts["mode"] = "list"
        elif key in ("-h", "--help"):
            opts["mode"] = "help"
        else:
            raise UsageError(USAGE_ERROR)
        i += 1
    if opts["mode"] in ("gpu", "apps") and (not opts["format"] or "csv" not in opts["format"]):
        raise UsageError(USAGE_ERROR)
    return opts


def render(opts: dict[str, Any]) -> str:
    fmt = opts["format"] or set()
    header, nounits = "noheader" not in fmt, "nounits" in fmt
    if opts["mode"] == "gpu":
        _check_fields(opts["fields"], GPU_FIELDS)
        return query_gpu(opts["fields"], header, nounits, opts["ids"])
    if opts["mode"] == "apps":
        _check_fields(opts["fields"], APP_FIELDS)
        return query_apps(opts["fields"], header, nounits)
    if opts["mode"] == "list":
        return list_gpus()
    if opts["mode"] == "help":
        return (f"NVIDIA System Management Interface -- v{DRIVER}\n\n"
                "Supported here: --query-gpu=... / --query-compute-apps=... "
                "--format=csv[,noheader][,nounits], -l SEC, -lms MS, -i ID, -L\n")
    return table()


def main(argv: list[str]) -> int:
    try:
        opts = parse(argv)
        text = render(opts)
    except (UsageError, ValueError) as e:
        print(str(e) if isinstance(e, UsageError) else USAGE_ERROR)
        return 2
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
        period = opts["loop_s"]
        if not period:
            return 0
        start = time.monotonic()
        n = 1
        while True:
            time.sleep(max(0.0, start + n * period - time.monotonic()))
            sys.stdout.write(render(opts))
            sys.stdout.flush()
            n += 1
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # Nobody is reading any more; make the interpreter's final flush a no-op.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
