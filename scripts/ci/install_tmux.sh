#!/usr/bin/env bash
# Install tmux for the terminal tests (`clustertune chat` driven as a person types, read back
# with `tmux capture-pane`).
set -euo pipefail
if command -v tmux >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install_tmux: need root to apt-get install tmux" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends tmux >/dev/null
