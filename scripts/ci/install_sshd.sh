#!/usr/bin/env bash
# Install OpenSSH's server and rsync for the SSH tests (tests/services/sshd.py starts its own
# sshd on loopback with its own config; the system sshd must never start, on :22 or elsewhere).
set -euo pipefail
if command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]; then
  if command -v rsync >/dev/null 2>&1 && command -v ssh >/dev/null 2>&1; then
    exit 0
  fi
fi
if [ "$(id -u)" != 0 ]; then
  echo "install_sshd: need root to apt-get install openssh-server rsync" >&2
  exit 1
fi
# policy-rc.d answering 101 tells dpkg not to start services while installing.
added_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  added_policy=1
fi
trap '[ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends openssh-server openssh-client rsync >/dev/null
