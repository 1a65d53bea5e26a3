#!/usr/bin/env bash
# Tear down the emulated hosts scripts/hosts-up.sh made for STATE_DIR: end every process
# inside their network namespaces (each sshd and whatever its sessions left), TERM first,
# KILL after a grace period, then delete the namespaces, their interfaces and the bridge.
# Keys and configs stay in STATE_DIR, so a later hosts-up.sh reuses them. Needs root.
#
#   sudo scripts/hosts-down.sh STATE_DIR
set -uo pipefail

say() { echo "hosts-down: $*" >&2; }
[[ $# == 1 ]] || { say "usage: $0 STATE_DIR"; exit 1; }
STATE="$1"
case "$STATE" in /*) ;; *) STATE="$PWD/$STATE" ;; esac
[[ -d "$STATE" ]] || { say "nothing to stop: no $STATE"; exit 0; }
STATE="$(cd "$STATE" && pwd -P)"
TAG="cb$(printf '%s' "$STATE" | md5sum | cut -c1-6)"

# Only this state directory's namespaces: their names start with its tag.
mapfile -t spaces < <(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$TAG-n[0-9]*$")

pids_inside() {
    local ns
    for ns in "${spaces[@]}"; do ip netns pids "$ns" 2>/dev/null; done
}

stopped=0
for sig in TERM KILL; do
    mapfile -t pids < <(pids_inside)
    ((${#pids[@]})) || break
    kill -s "$sig" "${pids[@]}" 2>/dev/null
    stopped=${#pids[@]}
    for _ in $(seq 30); do
        [[ -z "$(pids_inside)" ]] && break
        sleep 0.1
    done
done
left="$(pids_inside | tr '\n' ' ')"
[[ -n "${left// /}" ]] && say "could not stop processes $left"

for ns in "${spaces[@]}"; do
    host="${ns#"$TAG"-}"
    ip link del "${TAG}${host}h" 2>/dev/null
    ip netns del "$ns" 2>/dev/null || say "could not delete namespace $ns"
done
ip link del "${TAG}br" 2>/dev/null
rm -f "$STATE"/n*/sshd.pid "$STATE/tag"
say "stopped ${#spaces[@]} host(s) of $STATE ($stopped process(es) ended)"
