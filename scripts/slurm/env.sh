# Sourced by up.sh and down.sh: where the local cluster keeps its state, logs, pid files and the
# configs it runs with (outside the repo; ATTENTION_LAB_SLURM_DIR moves it), and its daemons.
SLURM_STATE_DIR="${ATTENTION_LAB_SLURM_DIR:-/tmp/attention-lab-slurm}"
export SLURM_CONF="$SLURM_STATE_DIR/slurm.conf"  # slurmdbd reads slurmdbd.conf from the same dir
MUNGE_DIR="$SLURM_STATE_DIR/munge"
DB_DIR="$SLURM_STATE_DIR/db"
# slurmdbd reaches MariaDB through this socket (the client library reads MYSQL_UNIX_PORT).
export MYSQL_UNIX_PORT="$DB_DIR/mysqld.sock"
# Debian's default path of the config, read by sbatch, squeue, sacct, ... when SLURM_CONF is not set.
SYSTEM_SLURM_CONF=/etc/slurm/slurm.conf

# "name pid file", in start order; down.sh stops them in reverse.
DAEMONS=(
  "munged $MUNGE_DIR/munged.pid"
  "mariadbd $DB_DIR/mariadbd.pid"
  "slurmdbd $SLURM_STATE_DIR/slurmdbd.pid"
  "slurmctld $SLURM_STATE_DIR/slurmctld.pid"
  "slurmd $SLURM_STATE_DIR/slurmd.pid"
)

# alive NAME PIDFILE: the process in PIDFILE runs and is NAME (a reused pid is not ours, a zombie is over).
alive() {
  local pid state
  pid=$(cat "$2" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
  [ -n "$state" ] && [ "$state" != Z ]
}
