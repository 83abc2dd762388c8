#!/usr/bin/env bash
# `make slurm-up`: a one-node SLURM cluster on this machine (Debian's slurm-wlm, slurmdbd, munge and
# mariadb-server), its daemons started as plain root processes, no systemd. Idempotent: a daemon that
# already runs is left as it is. Returns once `sinfo` shows the node ready for jobs.
#   SLURM_UP_TIMEOUT=60  seconds to wait for each daemon and for the node
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=env.sh
. "$here/env.sh"
timeout_s="${SLURM_UP_TIMEOUT:-60}"

fail() { echo "error: $*" >&2; exit 1; }

# wait_until WHAT COMMAND...: until COMMAND succeeds, at most SLURM_UP_TIMEOUT seconds.
wait_until() {
  local what="$1" deadline=$((SECONDS + timeout_s)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what not ready after SLURM_UP_TIMEOUT=${timeout_s}s; see the logs in $SLURM_STATE_DIR"
    sleep 0.5
  done
}

for tool in munged mungekey mariadbd mariadb-install-db mariadb-admin slurmdbd slurmctld slurmd sinfo sbatch sacct; do
  command -v "$tool" >/dev/null || fail "$tool not found: install Debian's packages: apt-get install slurm-wlm slurmdbd munge mariadb-server"
done
[ "$(id -u)" = 0 ] || fail "the cluster's daemons run as root (slurmd starts jobs as their users); run make slurm-up as root"

running=0
for daemon in "${DAEMONS[@]}"; do
  read -r name pidfile <<<"$daemon"
  alive "$name" "$pidfile" && running=$((running + 1))
done

if [ "$running" -eq "${#DAEMONS[@]}" ]; then
  echo "slurm: already running (state and logs in $SLURM_STATE_DIR)"
else
  mkdir -p "$SLURM_STATE_DIR/ctld" "$SLURM_STATE_DIR/d" "$MUNGE_DIR" "$DB_DIR"
  chmod 755 "$MUNGE_DIR"  # munged wants its socket dir searchable by all and writable only by root
  [ -s "$MUNGE_DIR/munge.key" ] || mungekey --create --keyfile="$MUNGE_DIR/munge.key"
  chmod 600 "$MUNGE_DIR/munge.key"

  # The node as slurmd detects it (CPUs, sockets, cores, memory), named localhost.
  node="$(slurmd -C | head -n 1 | sed 's/^NodeName=[^ ]*/NodeName=localhost/')"
  for conf in slurm.conf slurmdbd.conf; do
    sed -e "s|@STATE@|$SLURM_STATE_DIR|g" -e "s|@NODE@|$node|" "$here/$conf" > "$SLURM_STATE_DIR/$conf.tmp"
    chmod 600 "$SLURM_STATE_DIR/$conf.tmp"  # slurmdbd refuses a config that others can read
    mv "$SLURM_STATE_DIR/$conf.tmp" "$SLURM_STATE_DIR/$conf"
  done
  chmod 644 "$SLURM_CONF"  # read by every command and job

  alive munged "$MUNGE_DIR/munged.pid" || munged --socket="$MUNGE_DIR/munge.socket" \
    --key-file="$MUNGE_DIR/munge.key" --pid-file="$MUNGE_DIR/munged.pid" \
    --log-file="$MUNGE_DIR/munged.log" --seed-file="$MUNGE_DIR/munged.seed"

  if ! alive mariadbd "$DB_DIR/mariadbd.pid"; then
    [ -d "$DB_DIR/data/mysql" ] || mariadb-install-db --user=root --datadir="$DB_DIR/data" --skip-test-db \
      --auth-root-authentication-method=socket >"$DB_DIR/install.log" 2>&1 \
      || fail "mariadb-install-db failed; see $DB_DIR/install.log"
    # In the foreground of its own session (it does not daemonize); no TCP port, only the socket.
    setsid mariadbd --no-defaults --user=root --datadir="$DB_DIR/data" --socket="$MYSQL_UNIX_PORT" \
      --skip-networking --pid-file="$DB_DIR/mariadbd.pid" --log-error="$DB_DIR/mariadbd.log" \
      </dev/null >/dev/null 2>&1 &
  fi
  wait_until "MariaDB (for slurmdbd)" mariadb-admin --no-defaults --socket="$MYSQL_UNIX_PORT" ping

  # These three daemonize and write their pid files, which is how down.sh finds them.
  alive slurmdbd "$SLURM_STATE_DIR/slurmdbd.pid" || slurmdbd
  wait_until "slurmdbd" sacctmgr --noheader list cluster
  alive slurmctld "$SLURM_STATE_DIR/slurmctld.pid" || slurmctld -f "$SLURM_CONF"
  alive slurmd "$SLURM_STATE_DIR/slurmd.pid" || slurmd -f "$SLURM_CONF" -N localhost
  echo "slurm: started (state and logs in $SLURM_STATE_DIR)"
fi

# sbatch, squeue, sacct, ... find the config through /etc/slurm/slurm.conf when it is free (or already
# ours); on a machine with a config of its own, SLURM_CONF must point at ours.
if [ ! -e "$SYSTEM_SLURM_CONF" ] && [ ! -L "$SYSTEM_SLURM_CONF" ]; then
  mkdir -p "$(dirname "$SYSTEM_SLURM_CONF")"
  ln -s "$SLURM_CONF" "$SYSTEM_SLURM_CONF"
elif [ "$(readlink "$SYSTEM_SLURM_CONF")" != "$SLURM_CONF" ]; then
  echo "slurm: $SYSTEM_SLURM_CONF belongs to another cluster; for this one: export SLURM_CONF=$SLURM_CONF"
fi

node_ready() {
  state="$(sinfo --noheader --nodes=localhost --format=%t 2>/dev/null)" && [[ "$state" =~ ^(idle|mix|alloc)$ ]]
}
state=""
deadline=$((SECONDS + timeout_s))
until node_ready; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the SLURM node is not ready after SLURM_UP_TIMEOUT=${timeout_s}s (sinfo state: '${state:-no answer}'); see $SLURM_STATE_DIR/slurmctld.log and slurmd.log"
  sleep 0.5
done
echo "slurm: node localhost is $state; sweep on it with: python scripts/train.py -m hydra/launcher=slurm_local ..."
