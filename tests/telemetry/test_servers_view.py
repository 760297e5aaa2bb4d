"""What the TUI says of a host with several servers, from a snapshot: the header's "server i
of n", the line when the server the view keeps to exited, the GPUs each server's tree holds
(the GPU pane's marks and the switcher's column)."""

from __future__ import annotations

from dataclasses import replace

from vllm_console.console.hostclient.agent.samples import AgentSample
from vllm_console.console.hostclient.discovery import ServerRow
from vllm_console.console.telemetry.servers_view import (
    gpu_owners,
    header_words,
    switcher_rows,
)
from vllm_console.console.telemetry.snapshot import HostSnapshot, ServeInfo


def row(pid: int, port: int, *, chosen: bool = False, tree: tuple[int, ...] = (),
        container: str | None = None, start: float = 0.0) -> ServerRow:
    return ServerRow(pid=pid, port=port, url=f"http://127.0.0.1:{port}", model=f"/m/M{pid}",
                     container=container, unit=None, state="ready", chosen=chosen,
                     start_time=start, tree=tree or (pid,))


SAMPLE = AgentSample.from_json({"t": "sample", "seq": 1, "ts": 1.0, "gpus": [],
                                "gpu_procs": [{"pid": 11, "gpu": 0, "used_mib": 10},
                                              {"pid": 21, "gpu": 1, "used_mib": 10},
                                              {"pid": 22, "gpu": 2, "used_mib": 10},
                                              {"pid": 31, "gpu": 2, "used_mib": 10}]}, 1.0)
# Listed as discovery lists them: the chosen first, then by port.
THREE = (row(20, 8001, chosen=True, tree=(20, 21, 22)), row(10, 8000, tree=(10, 11)),
         row(30, 8002, tree=(30, 31), container="box"))


def snap(servers: tuple[ServerRow, ...], watched: int | None = None,
         running: bool | None = True) -> HostSnapshot:
    return HostSnapshot("gpu1", sample=SAMPLE, servers=servers, watched_port=watched,
                        serve=ServeInfo(running))


def test_the_header_counts_by_port_and_says_when_the_kept_server_exited() -> None:
    assert header_words(snap(THREE, watched=8001)) == "server 2 of 3 · :8001"
    assert header_words(snap(THREE)) == "server 2 of 3 · :8001"
    assert header_words(snap(THREE[:1])) == ""  # one server: nothing to tell apart
    gone = tuple(replace(r, chosen=False) for r in THREE if r.port != 8001)
    assert header_words(snap(gone, watched=8001, running=False)) == \
        "server :8001 exited · 2 others running (p: choose)"
    assert header_words(snap(gone[:1], watched=8001, running=False)) == \
        "server :8001 exited · 1 other running (p: choose)"


def test_each_gpu_is_marked_with_the_servers_that_hold_it() -> None:
    assert gpu_owners(snap(THREE)) == {0: ":8000", 1: ":8001", 2: ":8001,:8002"}
    assert gpu_owners(snap(THREE[:1])) == {}


def test_the_switcher_lists_port_model_state_place_and_gpus() -> None:
    rows = switcher_rows(snap(THREE))
    assert [r.port for r in rows] == [8000, 8001, 8002]
    assert [r.chosen for r in rows] == [False, True, False]
    texts = [" ".join(r.text.split()) for r in rows]
    assert texts[0].startswith(":8000 M10 ready bare process GPU 0")
    assert texts[1].startswith("● :8001 M20 ready bare process GPU 1,2")
    assert texts[2].startswith(":8002 M30 ready container box GPU 2")
