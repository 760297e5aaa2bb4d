"""What the TUI says of a host with several servers, from a snapshot (headless): the
header's "server i of n · :PORT", the line when the watched server exited, and the
switcher's rows (port, model, state, container, the GPUs each server's tree holds)."""

from __future__ import annotations

from dataclasses import dataclass

from vllm_console.console.hostclient.discovery import ServerRow
from vllm_console.console.telemetry.snapshot import HostSnapshot


def by_port(rows: tuple[ServerRow, ...]) -> list[ServerRow]:
    """The servers in the order a person counts them: by port, then by start."""
    return sorted(rows, key=lambda r: (r.port or 1 << 17, r.start_time or 0.0, r.pid))


def header_words(snap: HostSnapshot) -> str:
    """"server 2 of 3 · :8001" (n > 1); "server :8001 exited · 2 others run (p: choose)"
    when the server this view keeps to is gone; "" otherwise."""
    rows = by_port(snap.servers)
    chosen = next((r for r in rows if r.chosen), None)
    watched = snap.watched_port
    if chosen is not None and (watched is None or chosen.port == watched):
        if len(rows) < 2:
            return ""
        return f"server {rows.index(chosen) + 1} of {len(rows)} · {chosen.label}"
    if watched is not None and snap.servers and not any(r.port == watched for r in rows):
        others = len(rows)
        return (f"server :{watched} exited · {others} other{'s' if others > 1 else ''} "
                "running (p: choose)")
    if watched is not None and snap.serve.running is False and snap.servers:
        return f"server :{watched} is not running (p: choose another)"
    return ""


@dataclass(frozen=True)
class SwitcherRow:
    """One line of the switcher."""

    port: int | None
    pid: int
    chosen: bool
    text: str


def gpus_held(snap: HostSnapshot, row: ServerRow) -> tuple[int, ...]:
    """The GPUs whose memory a process of the server's tree holds (the agent's sample)."""
    if snap.sample is None:
        return ()
    tree = set(row.tree) or {row.pid}
    return tuple(sorted({p.gpu for p in snap.sample.gpu_procs
                         if p.pid in tree and p.gpu is not None}))


def gpu_owners(snap: HostSnapshot) -> dict[int, str]:
    """On a host with several servers, the servers (`:8001`) whose tree holds each GPU; {}
    with one (nothing to tell apart)."""
    if len(snap.servers) < 2:
        return {}
    out: dict[int, str] = {}
    for row in by_port(snap.servers):
        for gpu in gpus_held(snap, row):
            out[gpu] = f"{out[gpu]},{row.label}" if gpu in out else row.label
    return out


def switcher_rows(snap: HostSnapshot) -> list[SwitcherRow]:
    """The switcher's rows, by port: port, model, state, where it runs, GPUs held."""
    out = []
    for row in by_port(snap.servers):
        where = f"container {row.container}" if row.container else \
            f"unit {row.unit}" if row.unit else "bare process"
        gpus = gpus_held(snap, row)
        held = "GPU " + ",".join(str(g) for g in gpus) if gpus else "no GPU"
        model = (row.model or "?").rstrip("/").rsplit("/", 1)[-1]
        mark = "●" if row.chosen else " "
        out.append(SwitcherRow(row.port, row.pid, row.chosen,
                               f"{mark} {row.label:<7} {model[:40]:<40} {row.state:<13} "
                               f"{where[:40]:<40} {held}  (pid {row.pid})"))
    return out
