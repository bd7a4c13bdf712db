#!/usr/bin/env bash
# Download the wheels that benchmarks/gpu-wheels.lock names into .whl/, for a one-GPU machine
# with CPython 3.12 on manylinux x86-64 and no network, check every sha256 against the lock,
# build DeepSpeed's pure-Python wheel (ops off), and build clustertune's own wheel from this
# checkout. Then `.whl` is what travels beside the checkout (see benchmarks/GPU.md).
#
#   bash scripts/gpu_wheels.sh                          # everything in the lock
#   bash scripts/gpu_wheels.sh --without bitsandbytes   # leave a package out (QLoRA then SKIPs)
#   bash scripts/gpu_wheels.sh --with torchao --without bitsandbytes   # an optional wheel instead (FP8)
#
# Needs a Python with pip and torch (the project's .venv) and the package registry: DeepSpeed's
# setup.py imports torch even with its ops off.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
LOCK=benchmarks/gpu-wheels.lock
OUT=.whl
SDIST=build/gpu-sdist
BUDGET=$((60 * 1024 * 1024))
without=" "
with=" "
while [ $# -gt 0 ]; do
  case "$1" in
    --without) without+="$2 "; shift 2 ;;
    --with) with+="$2 "; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT" "$SDIST"
rm -f "$OUT"/*.whl
platforms=()
for p in manylinux2014_x86_64 manylinux_2_17_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 manylinux_2_28_x86_64; do
  platforms+=(--platform "$p")
done
fail=0
while read -r name version kind sha size why; do
  case "$name" in ''|'#'*) continue ;; esac
  if [[ "$without" == *" $name "* ]]; then echo "left out: $name"; continue; fi
  if [ "$kind" = optional-wheel ]; then
    if [[ "$with" != *" $name "* ]]; then echo "optional, not asked for (--with $name): $name"; continue; fi
    kind=wheel
  fi
  tmp=$(mktemp -d)
  if [ "$kind" = wheel ]; then
    "$PY" -m pip download -q --no-deps --only-binary :all: --python-version 3.12 --implementation cp \
      "${platforms[@]}" -d "$tmp" "$name==$version"
  else
    "$PY" -m pip download -q --no-deps --no-binary :all: -d "$tmp" "$name==$version"
  fi
  file=$(ls "$tmp"/*)
  got=$(sha256sum "$file" | cut -c1-64)
  if [ "$got" != "$sha" ]; then
    echo "sha256 mismatch for $name $version: lock $sha, downloaded $got ($(basename "$file"))" >&2
    fail=1; rm -rf "$tmp"; continue
  fi
  if [ "$kind" = wheel ]; then
    mv "$file" "$OUT"/
  else
    mv "$file" "$SDIST"/
    (export DS_BUILD_OPS=0; "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$OUT" "$SDIST/$(basename "$file")")
  fi
  rm -rf "$tmp"
done < "$LOCK"
[ "$fail" = 0 ] || exit 1
# clustertune itself: the image has no build backend, so the wheel is built here from this checkout.
"$PY" -m pip wheel -q --no-deps -w "$OUT" .
# The versions this checkout is tested with, for the GPU run to compare with the image's.
"$PY" - "$OUT/tested-versions.json" <<'PYEOF'
import json, sys
from importlib.metadata import version
names = ["torch", "transformers", "accelerate", "peft", "tokenizers", "pyarrow", "safetensors", "numpy"]
json.dump({n: version(n) for n in names}, open(sys.argv[1], "w"), indent=1)
PYEOF
total=$(du -cb "$OUT"/* | tail -1 | cut -f1)
ls -l "$OUT"
echo "total $total bytes ($((total / 1048576)) MiB; budget $((BUDGET / 1048576)) MiB)"
[ "$total" -le "$BUDGET" ] || { echo "over budget" >&2; exit 1; }
