#!/usr/bin/python3
"""mem_sample.py — run commands (at once, each in a memory cgroup when one is given) and sample,
every --interval seconds until all have exited, what they do to memory and the disk; print one JSON
object. Used by bench/packdata_large.sh and bench/storage_ranks.sh.

Usage: mem_sample.py [--cgroup DIR] [--disk vda] [--interval 0.1] [--stdout-dir D] -- CMD... [--- CMD...]
  Several commands are separated by '---'; command k's stdout goes to D/k.out when --stdout-dir
  is given (else /dev/null). Each command starts in --cgroup (cgroup v1 memory group: its pid is
  written to DIR/cgroup.procs before exec).

Output keys: seconds (wall, start to the last exit), rc (list), peak_rss_mib (list: each
command's peak resident set, ru_maxrss from wait4), cpu_seconds (list: user + system
CPU seconds of each, from wait4), cached_growth_peak_mib / cached_growth_end_mib (Cached
in /proc/meminfo minus its value at the start, the highest sampled and at the end: whole machine),
dirty_peak_mib (Dirty + Writeback in /proc/meminfo, highest sampled), and with --cgroup: cg_cache_peak_mib
/ cg_cache_end_mib (the group's memory.stat cache), cg_dirty_peak_mib (its dirty + writeback,
highest sampled), cg_peak_mib (memory.max_usage_in_bytes: reset at
the start), cg_failcnt; with --disk: disk_read_mib / disk_write_mib (sectors from /proc/diskstats,
whole device: other processes' I/O counts too).
"""
import json
import os
import subprocess
import sys
import time


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0]) / 1024.0  # MiB
    return out


def cg_stat(cg):
    out = {}
    with open(os.path.join(cg, "memory.stat")) as f:
        for line in f:
            k, v = line.split()
            out[k] = int(v)
    return out


def disk(dev):
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if p[2] == dev:
                return int(p[5]) * 512 / 2**20, int(p[9]) * 512 / 2**20
    raise SystemExit(f"mem_sample.py: no disk {dev} in /proc/diskstats")


def main(argv):
    cg, dev, interval, outdir = None, None, 0.1, None
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--cgroup": cg = argv[i + 1]
        elif argv[i] == "--disk": dev = argv[i + 1]
        elif argv[i] == "--interval": interval = float(argv[i + 1])
        elif argv[i] == "--stdout-dir": outdir = argv[i + 1]
        else: raise SystemExit(f"mem_sample.py: unknown option {argv[i]}")
        i += 2
    cmds, cur = [], []
    for a in argv[i + 1:]:
        if a == "---":
            cmds.append(cur); cur = []
        else:
            cur.append(a)
    cmds.append(cur)
    if not all(cmds):
        raise SystemExit("mem_sample.py: an empty command")

    def enter():
        if cg:
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    m0 = meminfo()
    d0 = disk(dev) if dev else None
    if cg:
        with open(os.path.join(cg, "memory.max_usage_in_bytes"), "w") as f:
            f.write("0")
    res = {"cached_growth_peak_mib": 0.0, "dirty_peak_mib": 0.0}
    if cg:
        res["cg_cache_peak_mib"] = res["cg_dirty_peak_mib"] = 0.0
    t0 = time.monotonic()
    procs = []
    for k, c in enumerate(cmds):
        out = open(os.path.join(outdir, f"{k}.out"), "w") if outdir else subprocess.DEVNULL
        procs.append(subprocess.Popen(c, stdout=out, preexec_fn=enter))
    peak = [0.0] * len(procs)
    rcs = [None] * len(procs)
    cpu = [0.0] * len(procs)
    while True:
        for k, p in enumerate(procs):
            if rcs[k] is not None:
                continue
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:  # exited: the kernel's own peak resident set (ru_maxrss, KiB)
                rcs[k] = os.waitstatus_to_exitcode(status)
                peak[k] = ru.ru_maxrss / 1024.0
                cpu[k] = ru.ru_utime + ru.ru_stime
        m = meminfo()
        res["cached_growth_peak_mib"] = max(res["cached_growth_peak_mib"], m["Cached"] - m0["Cached"])
        res["dirty_peak_mib"] = max(res["dirty_peak_mib"], m["Dirty"] + m["Writeback"])
        if cg:
            st = cg_stat(cg)
            res["cg_cache_peak_mib"] = max(res["cg_cache_peak_mib"], st["cache"] / 2**20)
            res["cg_dirty_peak_mib"] = max(res["cg_dirty_peak_mib"],
                                           (st.get("dirty", 0) + st.get("writeback", 0)) / 2**20)
        if all(r is not None for r in rcs):
            break
        time.sleep(interval)
    res["seconds"] = time.monotonic() - t0
    res["rc"] = rcs
    res["peak_rss_mib"] = peak
    res["cpu_seconds"] = cpu
    res["cached_growth_end_mib"] = meminfo()["Cached"] - m0["Cached"]
    if cg:
        res["cg_cache_end_mib"] = cg_stat(cg)["cache"] / 2**20
        with open(os.path.join(cg, "memory.max_usage_in_bytes")) as f:
            res["cg_peak_mib"] = int(f.read()) / 2**20
        with open(os.path.join(cg, "memory.failcnt")) as f:
            res["cg_failcnt"] = int(f.read())
    if dev:
        r, w = disk(dev)
        res["disk_read_mib"], res["disk_write_mib"] = r - d0[0], w - d0[1]
    json.dump(res, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
