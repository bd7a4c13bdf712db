#!/usr/bin/env bash
# Set up (first time only) and run the embedded default: a small GPT-2-style model trained from
# scratch on Python's reference docs, with a tokenizer trained on the spot. Offline, CPU.
# Extra arguments go to `clustertune run quickstart`, e.g. train.max_steps=50.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
exec .venv/bin/clustertune run quickstart "$@"
