#!/bin/bash
# One prepared check (run on a lent GPU machine, from the repository root) of the console's GPU path on a real GPU: nvidia-smi's raw CSV, and the
# host agent's samples through NVML (pynvml), NVML through ctypes (pynvml hidden) and
# nvidia-smi, idle and under a load that holds 20 GiB and keeps the GPU busy.
set -u
R=/tmp/gpucheck; rm -rf $R; mkdir -p $R
GQ="--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw"
AQ="--query-compute-apps=pid,used_memory,gpu_uuid"
F="--format=csv,noheader,nounits"
{ date -u; uname -a; nvidia-smi; python3 -c "import sys, pynvml; print(sys.version, pynvml.__file__)"; } > $R/env.txt 2>&1
nvidia-smi $GQ $F > $R/smi-idle-gpu.csv 2>&1
nvidia-smi $AQ $F > $R/smi-idle-apps.csv 2>&1
timeout 30 python3 -m console.hostside agent --gpu-source nvml --count 3 --interval 1 --match gpu_load.py > $R/agent-idle-nvml.jsonl 2>&1
python3 tests/data/real_gpu/gpu_load.py 75 > $R/load.txt 2>&1 & LOAD=$!
echo "load pid $LOAD" >> $R/load.txt
sleep 12
nvidia-smi $GQ $F > $R/smi-busy-gpu.csv 2>&1
nvidia-smi $AQ $F > $R/smi-busy-apps.csv 2>&1
timeout 30 python3 -m console.hostside agent --gpu-source nvml --count 5 --interval 1 --match gpu_load.py > $R/agent-busy-nvml.jsonl 2>&1
timeout 30 python3 -m console.hostside agent --gpu-source nvidia-smi --count 5 --interval 1 --match gpu_load.py > $R/agent-busy-smi.jsonl 2>&1
timeout 30 python3 -m console.hostside agent --gpu-source nvidia-smi --once --match gpu_load.py > $R/agent-busy-smi-once.jsonl 2>&1
mkdir -p /tmp/nopynvml; echo 'raise ImportError("hidden: the ctypes path")' > /tmp/nopynvml/pynvml.py
PYTHONPATH=/tmp/nopynvml timeout 30 python3 -m console.hostside agent --gpu-source nvml --count 5 --interval 1 --match gpu_load.py > $R/agent-busy-ctypes.jsonl 2>&1
timeout 30 python3 -m console.hostside agent --gpu-source auto --once --match gpu_load.py --nvml-lib /nonexistent/libnvidia-ml.so.1 > $R/agent-busy-auto-once.jsonl 2>&1
{ python3 -c "from console.hostside.gpu import gpu_holders; print('pynvml', gpu_holders('nvidia-smi'))"
  PYTHONPATH=/tmp/nopynvml python3 -c "from console.hostside.gpu import gpu_holders; print('ctypes', gpu_holders('nvidia-smi'))"
  echo "load pid $LOAD"; } > $R/holders-busy.txt 2>&1
kill $LOAD; wait $LOAD; sleep 3
{ python3 -c "from console.hostside.gpu import gpu_holders; print('after', gpu_holders('nvidia-smi'))"; } > $R/holders-after.txt 2>&1
nvidia-smi $GQ $F > $R/smi-after-gpu.csv 2>&1
tar -C /tmp -czf "${OUT:-/tmp}/gpucheck.tgz" gpucheck
ls -la $R; head -c 600 $R/agent-busy-nvml.jsonl; echo; cat $R/holders-busy.txt $R/smi-busy-apps.csv
