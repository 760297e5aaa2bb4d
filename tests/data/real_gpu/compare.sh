#!/bin/bash
# After the fix: NVML's memory used (pynvml and ctypes) against nvidia-smi's, idle and busy.
set -u
R=/tmp/gpucheck2; rm -rf $R; mkdir -p $R /tmp/nopynvml
echo 'raise ImportError("hidden: the ctypes path")' > /tmp/nopynvml/pynvml.py
Q="--query-gpu=memory.used,memory.total --format=csv,noheader,nounits"
look() {
  echo "[$1] nvidia-smi: $(nvidia-smi $Q)"
  for how in pynvml ctypes; do
    if [ $how = ctypes ]; then P=/tmp/nopynvml; else P=; fi
    PYTHONPATH=$P timeout 30 python3 -m console.hostside agent --gpu-source nvml --once > $R/$1-$how.jsonl 2>&1
    python3 -c "import json,sys; h,s=[json.loads(l) for l in open(sys.argv[1])][:2]; g=s['gpus'][0]; print('[%s] %-7s %s: used %s total %s procs %s' % (sys.argv[2], sys.argv[3], h['gpu_detail'], g['mem_used_mib'], g['mem_total_mib'], s['gpu_procs']))" $R/$1-$how.jsonl $1 $how
  done
}
look idle
python3 tests/data/real_gpu/gpu_load.py 25 & LOAD=$!
sleep 12
look busy
kill $LOAD; wait $LOAD 2>/dev/null
tar -C /tmp -czf "${OUT:-/tmp}/gpucheck2.tgz" gpucheck2
