#!/usr/bin/env bash
# The GPU checks, as one short prepared run (a few minutes on an H200; nothing is installed).
#
#   bash scripts/device_check.sh            # writes into $OUT (the device tool's folder) or runs/device_check
#
# 0. scripts/device_check.py: Trainer.fit on the GPU at the paper's Base shapes (compile, bf16, MFU, A/B runs, resume,
#    DDP / FSDP in a group of one), SDPA's backends at the real shape; one JSON (docs/gpu.md says what it holds);
# 1. the device tests (tests/test_on_device.py: SDPA's CUDA backends = the explicit reference, bf16 autocast,
#    cached decoding, CUDA peak memory, profiler device time, the data-sheet peak, rotary on the device,
#    precision auto = bf16, flex attention with a causal block mask = the reference, outputs and gradients) and
#    the bench and precision tests;
# 2. `aot bench` in bf16 at GPT-2-small width (benchmarks/bench/gpu.yaml): MFU against the GPU's table peak.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-runs/device_check}
mkdir -p "$out"
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA')" \
  | tee "$out/device.txt"
python3 scripts/device_check.py --out "$out" 2>&1 | tee "$out/device_check.log"  # the training path: device_check.json
check=${PIPESTATUS[0]}
python3 -m pytest -q -p no:cacheprovider tests/test_on_device.py tests/bench/test_bench.py tests/bench/test_precision.py 2>&1 | tee "$out/pytest.log"
tests=${PIPESTATUS[0]}
python3 -m aot.cli bench --device cuda --dtype bf16 --config benchmarks/bench/gpu.yaml --out "$out/bench" 2>&1 \
  | tee "$out/bench.log"
bench=${PIPESTATUS[0]}
echo "device_check exit $check, tests exit $tests, bench exit $bench"
exit $(( check || tests || bench ))
