#!/usr/bin/env bash
# Set up (first time only) and run the tests on two workers (pytest-xdist; tests/workers.py says
# which tests share a worker). Extra arguments go to pytest.
#   bash scripts/test.sh          the whole suite: what CI runs
#   bash scripts/test.sh --fast   every unit test plus one end-to-end check per backend and server
# A test over 30 s that tests/slow_tests.txt does not list fails the run (tests/timing.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# CLUSTERTUNE_TEST_WORKERS=0 runs everything in one process (a debugger, a print that must show).
select=()
workers=${CLUSTERTUNE_TEST_WORKERS:-2}
if [[ "${1:-}" == "--fast" ]]; then
    shift
    select=(-m "unit or smoke")
fi
bash scripts/setup.sh test
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Bytecode written once and read by every later process: with PYTHONDONTWRITEBYTECODE set (as some
# images set it), each of the suite's ~800 Python processes compiled clustertune's modules from
# source again (about 0.2 s each), and each worker rewrote every test module's asserts anew.
unset PYTHONDONTWRITEBYTECODE
exec .venv/bin/python -m pytest -n "$workers" --dist loadgroup --durations=20 --slow-limit 30 \
    "${select[@]}" "$@"
