#!/usr/bin/env bash
# Debian packages the test suite needs (report rendering in Chromium, the live progress
# display in a real terminal through tmux, the SimGrid backend, a real Slurm, sshd for the
# emulated hosts). Installs only what is missing; needs root or
# sudo when something is.
set -euo pipefail
pkgs=(gcc g++ chromium tmux libsimgrid-dev slurmctld slurmd slurm-client munge libpmix-dev
      openssh-server openssh-client iproute2)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=()
[ "$(id -u)" -ne 0 ] && sudo=(sudo)
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
