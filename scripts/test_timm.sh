#!/usr/bin/env bash
# Build a second environment where timm imports (torch 2.14.1 + torchvision 0.29.1, both on this machine's local
# package index, ~47 s and 5.5 GB) and run the timm registration tests there. The project's own environment pins
# torch 2.13.0, beside which no torchvision imports, so tests/models/test_timm.py skips in it.
#   scripts/test_timm.sh [PYTEST_ARGS]     (venv in $AOT_TIMM_VENV, default /tmp/aot-timm-venv; reused when it exists)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${AOT_TIMM_VENV:-/tmp/aot-timm-venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q torch==2.14.1 torchvision==0.29.1
    "$VENV/bin/pip" install -q timm pytest numpy pyyaml safetensors matplotlib tqdm
fi
"$VENV/bin/python" -c "import torch, torchvision, timm; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'timm', timm.__version__)"
cd "$ROOT"
PYTHONPATH=src "$VENV/bin/python" -m pytest tests/models/test_timm.py -q -p no:cacheprovider "$@"
