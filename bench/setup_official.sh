#!/usr/bin/env bash
# Install the official Tinker SDK, pinned, into its own virtualenv outside the repository.
#
# The benchmarks that compare tinker_lite with the official SDK run bench/official_driver.py with
# this venv's python. Idempotent: a second run with the same pin does nothing.
#
#   bash bench/setup_official.sh                 # venv at ~/.cache/tinker-lite-bench/official-venv
#   TINKER_OFFICIAL_VENV=/tmp/v bash bench/setup_official.sh
#   TINKER_OFFICIAL_WITH_TORCH=1 bash ...        # also install torch (not needed by the benchmarks)
set -euo pipefail

TINKER_VERSION="0.38.0"
TORCH_VERSION="2.13.0" # a CPU wheel of this version lies on the benchmark machines for Python 3.11
PYTHON="${PYTHON:-python3}"
VENV="${TINKER_OFFICIAL_VENV:-$HOME/.cache/tinker-lite-bench/official-venv}"
STAMP="$VENV/.tinker-${TINKER_VERSION}-installed"

if [ -f "$STAMP" ] && "$VENV/bin/python" -c "import tinker" 2>/dev/null; then
    echo "official SDK tinker==${TINKER_VERSION} already installed in $VENV"
    exit 0
fi

mkdir -p "$(dirname "$VENV")"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "tinker==${TINKER_VERSION}"
if [ "${TINKER_OFFICIAL_WITH_TORCH:-0}" = "1" ]; then
    # Only this pin takes the machine's local wheel; a bare `torch` would pull a multi-GB CUDA build.
    "$VENV/bin/python" -m pip install -q "torch==${TORCH_VERSION}"
fi
"$VENV/bin/python" -c "import tinker, sys; print('tinker', tinker.__version__, 'on', sys.version.split()[0])"
touch "$STAMP"
echo "official SDK installed in $VENV"
