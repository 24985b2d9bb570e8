#!/usr/bin/env bash
# Reproduce benchmarks/inside/: train the small LMs (unless RUNS points to trained ones), analyse each with
# `aot analyze`, calibrate on Definition 1 data, and summarise into table.md / summary.json.
#   bash benchmarks/inside/run.sh                      # train into runs/inside-lm/, ~5 min per model on 2 cores
#   RUNS=benchmarks/zeroshot/runs bash benchmarks/inside/run.sh   # analyse already trained runs instead
# Every step runs under the shared CPU lock when LOCK is set (LOCK=/tmp/aot-cpu.lock).
set -euo pipefail
PY=${PY:-python}
LOCK=${LOCK:-}
run() { if [ -n "$LOCK" ]; then OMP_NUM_THREADS=1 flock "$LOCK" "$@"; else "$@"; fi; }
OUT=benchmarks/inside
COMMON="--set model.n_embd=128 --set model.position=rope --set model.block_size=64 --steps 400 --batch-size 16
  --lr 3e-3 --precision fp32 --set eval.final_windows=64 --set train.eval_every=200"
if [ -z "${RUNS:-}" ]; then
  RUNS=runs/inside-lm
  declare -A MODELS=(
    [aot-mssa]="aot-mssa-l-cpu --set model.n_layer=8"
    [aot-mssa-tied]="aot-mssa-tied-l-cpu --set model.n_layer=8"
    [aot-mhsa]="aot-mhsa-l-cpu --set model.n_layer=6"
    [gpt2]="gpt2-cpu --set model.n_layer=3"
  )
  for name in "${!MODELS[@]}"; do
    [ -f "$RUNS/$name/results.json" ] && continue
    # shellcheck disable=SC2086
    run $PY -m aot.cli train lm --model ${MODELS[$name]} $COMMON --out "$RUNS/$name"
  done
fi
for dir in "$RUNS"/*/; do
  name=$(basename "$dir")
  [ -f "$dir/checkpoint/model.safetensors" ] || continue
  run $PY -m aot.cli analyze "$dir" --out "$OUT/$name"
done
run $PY -m aot.cli analyze --calibrate --out "$OUT/calibration"
$PY benchmarks/inside/summarize.py
