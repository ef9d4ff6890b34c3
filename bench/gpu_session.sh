#!/usr/bin/env bash
# One call on a lent GPU machine (see docs/benchmarks.md): versions, the model tests, the payload benchmark.
# Run from a directory holding payload/, bench/, tests/payload/ and data/{texts,gpt2}. Logs go to $OUT.
set -u
export PYTHONUNBUFFERED=1 OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
python3 -c "import torch, transformers, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'gpu', torch.cuda.get_device_name())"
[ -n "${SKIP_TESTS:-}" ] || timeout 90 python3 -m pytest -q -p no:cacheprovider tests/payload/test_payload_model.py 2>&1 | tail -3
for b in ${BATCHES:-32}; do
    timeout "${BENCH_TIMEOUT:-400}" python3 bench/bench_payload.py --gpu --cases="${CASES:-gpu-gpt2-1024}" --batch="$b" \
        --texts=data/texts --gpt2-bpe=data/gpt2 ${LOOPS:+--loops="$LOOPS"} ${VARIANTS:+--variants="$VARIANTS"} --json="$OUT/bench-b$b.json" 2>&1 | tee "$OUT/bench-b$b.log" | grep -v "^\[" | tail -40
done
if [ -n "${E2E:-}" ]; then  # the real command line end to end: train (defaults), then generate from the export
    timeout 200 python3 payload/train.py --data=data/texts --tokenizer=data/gpt2 --model=gpt2 --block_size=1024 \
        --batch_size=32 --max_steps=60 --warmup_steps=10 --eval_interval=0 --log_interval=20 --out_dir=/tmp/e2e 2>&1 |
        grep -v "^\[" | tee "$OUT/e2e.log" | tail -20
    timeout 60 python3 payload/train.py generate --out_dir=/tmp/e2e --prompt="ROMEO:" --max_new_tokens=30 2>&1 | tail -4
    python3 -c "import json; r=json.load(open('/tmp/e2e/result.json')); print({k: r[k] for k in ('status','tokens_per_s','mfu','final_val_loss','device','dtype')})"
fi
if [ -z "${SKIP_NCCL:-}" ] && [ -f roles/cluster_validate/files/probe.py ]; then
    # The ladder's all-reduce probe on a real NCCL (one rank: no network channels): its debug file is written,
    # read back, and rdma_stack's parser reads the version and the network from it.
    timeout 120 python3 roles/cluster_validate/files/probe.py allreduce --rank=0 --world=1 --master=127.0.0.1 \
        --port=29611 --ifname=lo --backend=nccl --sizes=1048576 --iters=3 > "$OUT/nccl-probe.json" 2>"$OUT/nccl-probe.err"
    python3 - "$OUT/nccl-probe.json" <<'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("n", "roles/rdma_stack/filter_plugins/rdma_stack_nccl.py")
n = importlib.util.module_from_spec(spec); spec.loader.exec_module(n)
out = json.load(open(sys.argv[1]))
parsed = n.parse_nccl_log(out.get("nccl_log"))
print("nccl probe:", {k: out.get(k) for k in ("ok", "backend", "error")}, len(out.get("nccl_log") or []), "log lines")
print("parsed:", {k: parsed[k] for k in ("version", "network", "devices", "channels", "warnings")})
PY
fi
