# lib_memcg.sh — what the storage benchmarks (storage.sh, storage_ranks.sh, packdata_large.sh) share:
# the checks before they can run in a cgroup v1 memory group, and the removal of such a group.
# Source it after setting `me` (the script's name, for messages), `setup` (1: install missing
# packages) and `cgbase` (the v1 memory controller's mount, /sys/fs/cgroup/memory).

# memcg_preflight: exits 77 (skip) naming what is missing: root, the v1 memory controller, fio.
# With setup=1 first installs fio and the photo generator's packages (bench/make_photos.py).
memcg_preflight() {
    if [[ $(id -u) -ne 0 ]]; then
        echo "$me: SKIP: needs root (drop_caches and a memory cgroup)"; exit 77
    fi
    if [[ ! -w $cgbase/cgroup.procs ]]; then
        echo "$me: SKIP: no cgroup v1 memory controller at $cgbase"; exit 77
    fi
    if ((setup)); then
        local missing=() p
        for p in fio python3-skimage python3-pil; do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
        done
        if ((${#missing[@]})); then
            echo "$me: installing ${missing[*]}"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
        fi
    fi
    command -v fio >/dev/null || { echo "$me: SKIP: fio not installed (apt-get install fio)"; exit 77; }
}

# memcg_remove GROUP...: moves any process left in each group to the parent, then removes the group.
memcg_remove() {
    local g pid
    for g in "$@"; do
        [[ -d $g ]] || continue
        while read -r pid; do echo "$pid" >"$cgbase/cgroup.procs" 2>/dev/null || true; done <"$g/cgroup.procs"
        rmdir "$g" 2>/dev/null || echo "$me: could not remove $g" >&2
    done
}
