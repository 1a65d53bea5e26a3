#!/usr/bin/env bash
# Stop the cluster scripts/slurm-up.sh started under SLURM_ROOT: cancel its jobs, then end
# exactly its daemons (pids recorded at start and pid files, each checked against the
# program it should be), TERM first, KILL after a grace period.
set -uo pipefail

ROOT="${SLURM_ROOT:-/tmp/collbench-slurm}"
case "$ROOT" in /*) ;; *) ROOT="$PWD/$ROOT" ;; esac
say() { echo "slurm-down: $*" >&2; }

# alive PID NAME: running (not a zombie: PID 1 here reaps slowly) and the expected program.
alive() {
    local stat
    [[ -n "$1" && -r "/proc/$1/stat" ]] || return 1
    [[ "$(cat "/proc/$1/comm" 2>/dev/null)" == "$2" ]] || return 1
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    [[ "${stat%% *}" != Z ]]
}

# Read pids up front: a slurmd stuck retrying registration empties its pid file.
declare -A daemons=()
if [[ -f "$ROOT/run/daemons" ]]; then
    while read -r name pid; do daemons["$name"]="$pid"; done <"$ROOT/run/daemons"
fi
for f in "$ROOT"/run/slurmctld.pid "$ROOT"/run/slurmd-*.pid "$ROOT"/run/munged.pid; do
    [[ -s "$f" ]] || continue
    name="$(basename "$f" .pid)"
    [[ -n "${daemons[$name]:-}" ]] || daemons["$name"]="$(cat "$f")"
done
if [[ ${#daemons[@]} == 0 ]]; then
    say "nothing to stop under $ROOT"
    exit 0
fi

# Cancel this cluster's jobs first, so their steps end with them rather than outlive slurmd.
export SLURM_CONF="$ROOT/slurm.conf"
if alive "${daemons[slurmctld]:-}" slurmctld; then
    jobs="$(timeout 10 squeue -h -o %A 2>/dev/null | tr '\n' ' ')"
    if [[ -n "${jobs// /}" ]]; then
        # shellcheck disable=SC2086  # job ids are digits
        timeout 10 scancel $jobs 2>/dev/null
        for _ in $(seq 100); do
            [[ -z "$(timeout 10 squeue -h -o %A 2>/dev/null)" ]] && break
            sleep 0.1
        done
    fi
fi

stop() {  # stop NAME... (names as in the daemons file; program = name before '-')
    local name pid sig tries
    for sig in TERM KILL; do
        for name in "$@"; do
            pid="${daemons[$name]:-}"
            alive "$pid" "${name%%-*}" && kill -s "$sig" "$pid" 2>/dev/null
        done
        for tries in $(seq 50); do
            local left=0
            for name in "$@"; do alive "${daemons[$name]:-}" "${name%%-*}" && left=1; done
            ((left)) || return 0
            sleep 0.1
        done
    done
    for name in "$@"; do
        alive "${daemons[$name]:-}" "${name%%-*}" && say "could not stop $name (pid ${daemons[$name]})"
    done
    return 0
}

slurmds=()
for name in "${!daemons[@]}"; do [[ "$name" == slurmd-* ]] && slurmds+=("$name"); done
((${#slurmds[@]})) && stop "${slurmds[@]}"
stop slurmctld
stop munged
rm -f "$ROOT/run/daemons" "$ROOT"/run/*.pid
say "stopped ${!daemons[*]}"
