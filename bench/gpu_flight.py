"""PyTorch's flight recorder on a real NCCL (one GPU, one rank): what each recorder holds, what the payload's dump
(payload/flight.py) writes, and what hang.flight_summary reads from it. bench/gpu_session.sh's `flight` phase.

Collectives: three NCCL all-reduces and a gloo one on a second group (the payload's setup group), then a fourth
NCCL all-reduce queued behind a ~5-s sleep kernel on the stream, so the dump is taken while it is still pending.
Writes $OUT/_dump_nccl_trace_json.json and $OUT/_dump_fr_trace_json.json (each recorder as torch dumps it) and
$OUT/fr-rank0.json (the payload's dump); prints one JSON line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29593")

import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from payload import flight  # noqa: E402

spec = importlib.util.spec_from_file_location("hang", ROOT / "plugins" / "module_utils" / "launch" / "hang.py")
hang = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hang)

out = Path(os.environ.get("OUT", "/tmp/out"))
out.mkdir(parents=True, exist_ok=True)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
setup = dist.new_group(backend="gloo")
t = torch.ones(1 << 20, device="cuda")
for _ in range(3):
    dist.all_reduce(t)
dist.all_reduce(torch.ones(4), group=setup)
torch.cuda.synchronize()
torch.cuda._sleep(int(5e9))  # the stream is busy: the next all-reduce waits behind it
work = dist.all_reduce(t, async_op=True)
c10d = torch._C._distributed_c10d
raw = {}
for name in flight.RECORDERS:
    fn = getattr(c10d, name, None)
    if fn is not None:
        data = fn(True, False)
        (out / f"{name}.json").write_bytes(data if isinstance(data, bytes) else data.encode())
        raw[name] = len(json.loads(data).get("entries") or [])
path = flight.dump(out / "fr-rank0.json", "gpu-flight")
work.wait()
torch.cuda.synchronize()
dumped = json.loads(path.read_text())
print(
    json.dumps(
        {
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "raw_entries": raw,
            "recorders": dumped["recorders"],
            "summary": hang.flight_summary(dumped["trace"]),
        }
    )
)
dist.destroy_process_group()
