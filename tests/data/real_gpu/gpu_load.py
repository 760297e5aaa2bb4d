"""The load of the GPU captures: 20 GiB held and bf16 matrix products for ARGV[1] seconds."""

import sys
import time

import torch

held = torch.empty(20 * 2**30, dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
