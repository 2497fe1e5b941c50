#!/usr/bin/env bash
# cluster.sh — a real one-node Slurm cluster (Debian's slurm-wlm 22.05 + munge) for the tests, private
# to one directory: its own munge key and socket, slurm.conf (SLURM_CONF), state/spool/log dirs and
# ports, so it neither needs nor touches /etc/slurm or a system munged, and several can run side by
# side (each node gets its own name).
#
#   tests/slurm/cluster.sh start DIR   write DIR/etc/slurm.conf, start munged, slurmctld, slurmd; wait
#                                      until the node is idle; DIR/env.sh then sets SLURM_CONF for
#                                      sbatch/srun/squeue/scancel/scontrol
#   tests/slurm/cluster.sh stop DIR    stop the three daemons started for DIR (by their pid files)
#   tests/slurm/cluster.sh check       exit 0 when this machine can run it, else print why and exit 77
#
# Needs root (slurmd starts jobs as their user) and the packages `slurm-wlm munge`
# (scripts/setup.sh --cluster installs them). The node has CPUs=2 whatever the machine has; jobs are
# tracked by their process tree (proctrack/linuxproc, task/none): no cgroups, which containers
# often lack. Environment: FL_SLURM_CPUS (2), FL_SLURM_PORT (first of 2 ports; default derived from
# the pid, in 17000-26999).
set -uo pipefail

die() { echo "cluster.sh: $*" >&2; exit 1; }

check() {
    [[ $(id -u) -eq 0 ]] || { echo "cluster.sh: needs root (slurmd runs jobs as their user)"; return 77; }
    local p
    for p in munged mungekey slurmctld slurmd sbatch srun squeue scontrol scancel sinfo; do
        command -v "$p" >/dev/null 2>&1 || [[ -x /usr/sbin/$p ]] ||
            { echo "cluster.sh: $p not found (scripts/setup.sh --cluster installs slurm-wlm and munge)"; return 77; }
    done
    return 0
}

sbin() { command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"; }

start() {
    local D="$1"
    check || exit $?
    mkdir -p "$D"/{etc,state,spool,log,munge,run} || die "cannot create $D"
    D="$(cd "$D" && pwd)"
    chmod 700 "$D/munge"
    local port=${FL_SLURM_PORT:-$((17000 + ($$ % 5000) * 2))}
    local cpus=${FL_SLURM_CPUS:-2}
    local host node="fl$port"
    host=$(hostname -s)
    local sock="$D/munge/munge.socket"

    # munge first: a slurmd that starts before munge answers stays unknown until it re-registers
    "$(sbin mungekey)" --create --keyfile="$D/munge/munge.key" --force 2>"$D/log/mungekey.log" ||
        dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none || die "no munge key"
    chmod 400 "$D/munge/munge.key"
    "$(sbin munged)" --force --socket="$sock" --key-file="$D/munge/munge.key" \
        --pid-file="$D/run/munged.pid" --log-file="$D/log/munged.log" --seed-file="$D/munge/seed" \
        2>"$D/log/munged.err" || die "munged did not start: $(cat "$D/log/munged.err" "$D/log/munged.log" 2>/dev/null | tail -3)"

    cat >"$D/etc/slurm.conf" <<EOF
# written by tests/slurm/cluster.sh for a private one-node test cluster
ClusterName=fltest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job waits this long before it may start again (default 120 s)
AuthInfo=socket=$sock,cred_expire=10
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=3
MinJobAge=600
InactiveLimit=0
SlurmdTimeout=60
SlurmctldTimeout=30
MessageTimeout=20
NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    printf 'export SLURM_CONF=%q\nexport FL_SLURM_NODE=%q\n' "$D/etc/slurm.conf" "$node" >"$D/env.sh"
    export SLURM_CONF="$D/etc/slurm.conf"
    # -i: forget any saved state of an earlier cluster in this directory
    "$(sbin slurmctld)" -i 2>"$D/log/slurmctld.err" || die "slurmctld did not start: $(tail -3 "$D/log/slurmctld.err" "$D/log/slurmctld.log" 2>/dev/null)"
    "$(sbin slurmd)" -N "$node" 2>"$D/log/slurmd.err" || "$(sbin slurmd)" 2>>"$D/log/slurmd.err" ||
        die "slurmd did not start: $(tail -3 "$D/log/slurmd.err" "$D/log/slurmd.log" 2>/dev/null)"
    local i state=""
    for ((i = 0; i < 300; i++)); do
        state=$(sinfo -h -n "$node" -o %T 2>/dev/null | head -1)
        [[ $state == idle ]] && { echo "cluster.sh: node $node idle (SLURM_CONF=$SLURM_CONF, ports $port-$((port + 1)))"; return 0; }
        sleep 0.1
    done
    echo "cluster.sh: node $node not idle after 30 s (state '$state'); slurmctld.log / slurmd.log:" >&2
    tail -5 "$D/log/slurmctld.log" "$D/log/slurmd.log" >&2
    stop "$D"
    exit 1
}

stop_pid() {
    local f="$1" pid i
    [[ -f $f ]] || return 0
    pid=$(cat "$f" 2>/dev/null)
    [[ $pid =~ ^[0-9]+$ ]] || return 0
    kill -TERM "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    rm -f "$f"
}

stop() {
    local D="$1"
    [[ -d $D/run ]] || return 0
    # slurmd first: it ends the job steps it started; then the controller, then munge
    stop_pid "$D/run/slurmd.pid"
    stop_pid "$D/run/slurmctld.pid"
    stop_pid "$D/run/munged.pid"
}

case "${1:-}" in
    start) [[ $# -eq 2 ]] || die "usage: cluster.sh start DIR"; start "$2" ;;
    stop) [[ $# -eq 2 ]] || die "usage: cluster.sh stop DIR"; stop "$2" ;;
    check) check; exit $? ;;
    *) echo "usage: cluster.sh start DIR | stop DIR | check" >&2; exit 2 ;;
esac
