#!/usr/bin/env bash
# Create ./.venv and install clustertune into it (editable).
#   bash scripts/setup.sh                      # the package
#   bash scripts/setup.sh test                 # the package and the test dependencies
#   bash scripts/setup.sh serve deepspeed      # the package and these extras
# The extras are pyproject.toml's optional-dependencies (`bash scripts/setup.sh --help` lists
# them); an unknown name is an error, not pip's warning.
# Where no torch is importable in the venv, torch is installed first, pinned
# ($CLUSTERTUNE_TORCH, default torch==2.13.0; set CLUSTERTUNE_TORCH_INDEX to an index URL
# such as PyTorch's CPU or CUDA wheel index to choose the build), so the unpinned torch
# requirement of transformers/accelerate never pulls a multi-GB build by accident.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

known_extras() {
  "$1" -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]))'
}

case "${1:-}" in
  -h|--help)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"  # the comment above
    echo "extras: $(known_extras "$PYTHON")"
    exit 0 ;;
esac

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@"; }

# The extras asked for, each once, sorted: one set of extras, one install stamp, in any order.
known=" $(known_extras .venv/bin/python) "
extras=()
for extra in "$@"; do
  if [[ "$known" != *" $extra "* ]]; then
    echo "setup: no extra '$extra' in pyproject.toml; the extras are:$known" >&2
    exit 2
  fi
done
if [ $# -gt 0 ]; then
  mapfile -t extras < <(printf "%s\n" "$@" | LC_ALL=C sort -u)
fi
list=$(IFS=,; echo "${extras[*]}")

if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  spec=${CLUSTERTUNE_TORCH:-torch==2.13.0}
  echo "setup: installing $spec" >&2
  if [ -n "${CLUSTERTUNE_TORCH_INDEX:-}" ]; then
    pip install "$spec" --index-url "$CLUSTERTUNE_TORCH_INDEX"
  else
    pip install "$spec"
  fi
fi

target=".${list:+[$list]}"
# Skip the resolver when this exact tree is already installed with these extras.
stamp=".venv/.clustertune-$list-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || ! .venv/bin/python -c "import clustertune" >/dev/null 2>&1; then
  echo "setup: installing clustertune${list:+ [$list]}" >&2
  # DeepSpeed (in the test and deepspeed extras) would otherwise try to compile all its ops at
  # install time; with DS_BUILD_OPS=0 the few that are used compile on first use and are cached.
  DS_BUILD_OPS=0 pip install -e "$target"
  if [[ " ${extras[*]} " == *" test "* ]]; then
    # The tinker-cookbook's loops are a client the tests run (pyproject.toml's test extra says why
    # without its dependencies; the rest of them are in that extra).
    pip install --no-deps "tinker-cookbook==0.6.1"
    # torchao (the fp8 extra) in a folder of its own, off the venv's path: where it is importable,
    # transformers imports it in every process that loads a model (0.5-0.8 s each here, and two
    # warnings where its kernels do not load), so the fp8 tests put this folder on their own path.
    pip install --no-deps --upgrade --target .venv/fp8-extra "torchao==0.18.0"
  fi
  .venv/bin/python -c "import clustertune, torch, transformers, accelerate" >/dev/null
  touch "$stamp"
fi
