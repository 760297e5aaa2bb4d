"""What the GPU path read on a real H200 (tests/data/real_gpu): nvidia-smi's rows and the
agent's NVML samples say the same, as the console reads them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from vllm_console.console.hostclient.agent.samples import AgentSample
from vllm_console.console.hostside.gpu import smi

H200 = Path(__file__).parents[1] / "data" / "real_gpu" / "h200"


def agent_sample(name: str) -> tuple[dict, AgentSample]:  # type: ignore[type-arg]
    hello, sample = (json.loads(line) for line in (H200 / name).read_text().splitlines())
    return hello, AgentSample.from_json(sample, time.time())


def smi_gpu(name: str) -> dict:  # type: ignore[type-arg]
    [row] = [smi.parse_gpu_row(line) for line in (H200 / name).read_text().splitlines()]
    assert row is not None
    return row


def test_nvidia_smi_rows_of_a_real_h200() -> None:
    idle, busy = smi_gpu("smi-idle-gpu.csv"), smi_gpu("smi-busy-gpu.csv")
    assert idle["name"] == busy["name"] == "NVIDIA H200"
    assert (idle["mem_used_mib"], idle["util_pct"]) == (0.0, 0.0)
    assert (busy["mem_used_mib"], busy["mem_total_mib"], busy["util_pct"]) == \
        (21363.0, 143771.0, 100.0)
    assert 600 < busy["power_w"] <= 700
    [app] = [smi.parse_app_row(line) for line in
             (H200 / "smi-busy-apps.csv").read_text().splitlines()]
    assert app == {"pid": 470, "used_mib": 21354.0, "gpu_uuid": busy["uuid"]}
    assert (H200 / "smi-idle-apps.csv").read_text() == ""  # no process: no row


@pytest.mark.parametrize(("capture", "detail"), [("agent-busy-nvml.jsonl", "pynvml"),
                                                 ("agent-busy-ctypes.jsonl",
                                                  "libnvidia-ml via ctypes")])
def test_both_nvml_paths_read_what_nvidia_smi_shows(capture: str, detail: str) -> None:
    hello, sample = agent_sample(capture)
    assert (hello["gpu_source"], hello["gpu_detail"]) == ("nvml", detail)
    [gpu] = sample.gpus
    row = smi_gpu("smi-busy-gpu.csv")
    assert gpu.name == row["name"]
    assert gpu.mem_total_mib == row["mem_total_mib"]
    assert abs(gpu.mem_used_mib - row["mem_used_mib"]) < 1  # the same 20 GiB load
    assert (gpu.util_pct or 0) >= 99
    assert 600 < (gpu.power_w or 0) <= 700
    assert [round(p.used_mib or 0) for p in sample.gpu_procs] == [21354]


def test_nvml_first_memory_call_counted_the_drivers_reservation() -> None:
    """Why NVML's memory reading is the v2 call: the first one said 615 MiB more."""
    _, sample = agent_sample("agent-busy-nvml-v1.jsonl")
    extra = sample.gpus[0].mem_used_mib - smi_gpu("smi-busy-gpu.csv")["mem_used_mib"]
    assert 600 < extra < 630
