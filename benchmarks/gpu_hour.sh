#!/usr/bin/env bash
# The GPU machine's one command: benchmarks/gpu_hour.py with the image's python3 (or $PYTHON).
#   bash benchmarks/gpu_hour.sh --out results            # on the GPU machine; see benchmarks/GPU.md
#   bash benchmarks/gpu_hour.sh --out /tmp/r --cpu --tiny # the CPU rehearsal
exec "${PYTHON:-python3}" "$(dirname "$0")/gpu_hour.py" "$@"
