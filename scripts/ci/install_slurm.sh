#!/usr/bin/env bash
# Install the Debian packages of a single-host SLURM test cluster (controller, node daemon,
# client commands, munge). Run as root on Debian/Ubuntu; a no-op when they are present.
# A temporary policy-rc.d keeps apt from starting the system's own daemons: the tests start
# their own munged/slurmctld/slurmd with private configuration in a temporary directory.
set -euo pipefail
if command -v sbatch >/dev/null && command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
   && command -v munged >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install_slurm: run as root (apt-get install slurmctld slurmd slurm-client munge)" >&2
  exit 1
fi
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  added_policy=1
fi
cleanup() { if [ "$added_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
