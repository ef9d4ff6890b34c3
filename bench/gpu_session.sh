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
