#!/usr/bin/env bash
# The scaling study's GPU sizes (issue 27): every family at ≈ 8 M and ≈ 24 M non-embedding parameters, the same
# recipe as the CPU grid (fp32, batch 16 x 256 bytes, WSD, 1 / 2 / 4 M tokens; benchmarks/scaling/run.py), an lr
# sweep at the larger size first. Several drivers share one GPU (these models are far too small to fill it); each
# run is recorded in benchmarks/scaling/results.json as it lands, with the GPU's name in its "device" field.
#
#   MINUTES=8 DRIVERS=4 bash benchmarks/scaling/gpu.sh      # from the repository root, on a machine with CUDA
#
# MINUTES: no driver starts a job after this many minutes (a job started before runs to its end: allow a few
# minutes more); DRIVERS: drivers at once. Needs the package's requirements and the Shakespeare corpus in
# $AOT_DATA (`aot data fetch shakespeare` once; on a machine with no network, copy ~/.cache/aot there).
# Afterwards, where the CPU grid lives: `python benchmarks/scaling/run.py --render` refits with the new sizes.
set -u
cd "$(dirname "$0")/../.."
MINUTES=${MINUTES:-8}
DRIVERS=${DRIVERS:-4}
PYTHON=${PYTHON:-python3}
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu.sh: no CUDA device here; the GPU sizes are a GPU job (run.py alone trains the CPU grid)" >&2
    exit 2
fi
mkdir -p runs/scaling
end=$(($(date +%s) + 60 * MINUTES))
drive() {  # one driver, restarted while time is left: a driver stops when every job left waits for the lr sweep
    while [ "$(date +%s)" -lt "$end" ]; do
        left=$(((end - $(date +%s)) / 60))
        "$PYTHON" benchmarks/scaling/run.py --only large --max-minutes "$left" >>"runs/scaling/gpu-driver-$1.log" 2>&1
        code=$?
        if [ "$code" -ne 0 ]; then
            echo "gpu.sh: driver $1 stopped with exit $code (runs/scaling/gpu-driver-$1.log)" >&2
            return "$code"
        fi
        if tail -n 1 "runs/scaling/gpu-driver-$1.log" | grep -q "^nothing left to run$"; then
            return 0
        fi
        sleep 10
    done
}
for i in $(seq 1 "$DRIVERS"); do
    drive "$i" &
    sleep 5  # the drivers take different jobs (a busy run folder is skipped)
done
wait
"$PYTHON" benchmarks/scaling/run.py --only large --plan | grep -c "^done" | xargs echo "gpu.sh: done jobs:"
