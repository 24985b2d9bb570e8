#!/usr/bin/env bash
# Train the three zero-shot benchmark models one after another (each under the shared CPU lock), into
# benchmarks/zeroshot/runs/. Rotary positions for all three (with learned absolute positions the attention-only
# models stay at the bigram level on this budget). STEPS defaults to 200: the budget that fits ~30 min of a
# shared 2-core CPU. One thread per run: on a loaded 2-core machine two OpenMP threads per process thrash.
set -euo pipefail
STEPS=${STEPS:-200}
PY=${PY:-python}
for model in gpt2-cpu aot-mhsa-l-cpu aot-mssa-l-cpu; do
  out=benchmarks/zeroshot/runs/$model
  if [ -f "$out/results.json" ]; then echo "skip $model (done)"; continue; fi
  OMP_NUM_THREADS=1 flock /tmp/aot-cpu.lock $PY -m aot.cli train lm --model "$model" --steps "$STEPS" \
    --batch-size 16 --lr 3e-3 --precision fp32 --set model.block_size=128 --set model.position=rope \
    --set train.warmup_steps=20 --set eval.final_windows=256 --out "$out"
done
