#!/usr/bin/env bash
# `make slurm-down`: stop the cluster that up.sh started, and only it: each daemon is found through its
# pid file and checked by name. Jobs still queued or running are cancelled first (SIGTERM: they save a
# checkpoint and record "interrupted"). State and logs stay in the state dir for the next start.
#   SLURM_DOWN_TIMEOUT=90  seconds to wait for jobs, then for each daemon, before SIGKILL
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=env.sh
. "$here/env.sh"
timeout_s="${SLURM_DOWN_TIMEOUT:-90}"

# wait_for SECONDS COMMAND...: until COMMAND fails, at most SECONDS; 1 if it still succeeds then.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  while "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

jobs_left() { [ -n "$(squeue --noheader --format=%i 2>/dev/null)" ]; }

if alive slurmctld "$SLURM_STATE_DIR/slurmctld.pid" && jobs_left; then
  echo "slurm: cancelling the jobs still queued or running"
  squeue --noheader --format=%i | xargs -r scancel
  wait_for "$timeout_s" jobs_left || echo "slurm: jobs still running after ${timeout_s}s; stopping anyway"
fi

stopped=0
for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
  read -r name pidfile <<<"${DAEMONS[$i]}"
  alive "$name" "$pidfile" || continue
  pid=$(cat "$pidfile")
  kill -TERM "$pid"
  if ! wait_for "$timeout_s" alive "$name" "$pidfile"; then
    echo "slurm: $name (pid $pid) did not stop after ${timeout_s}s: SIGKILL"
    kill -KILL "$pid"
  fi
  echo "slurm: stopped $name (pid $pid)"
  stopped=$((stopped + 1))
done
[ "$stopped" -gt 0 ] || echo "slurm: not running (nothing started from $SLURM_STATE_DIR)"

if [ -L "$SYSTEM_SLURM_CONF" ] && [ "$(readlink "$SYSTEM_SLURM_CONF")" = "$SLURM_CONF" ]; then
  rm -f "$SYSTEM_SLURM_CONF"
fi
