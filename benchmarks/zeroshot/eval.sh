#!/usr/bin/env bash
# Evaluate the three models of benchmarks/zeroshot/runs/ (trained by train.sh) on the four Austen-built sets;
# writes benchmarks/zeroshot/results.json and results.md. Needs `aot data fetch austen` first.
set -euo pipefail
PY=${PY:-python}
OMP_NUM_THREADS=1 flock /tmp/aot-cpu.lock $PY -m aot.cli eval lm \
  benchmarks/zeroshot/runs/gpt2-cpu benchmarks/zeroshot/runs/aot-mhsa-l-cpu benchmarks/zeroshot/runs/aot-mssa-l-cpu \
  --task austen --out benchmarks/zeroshot
