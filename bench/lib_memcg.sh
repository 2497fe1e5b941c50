# lib_memcg.sh — what the storage benchmarks (storage.sh, storage_ranks.sh, packdata_large.sh) share:
# the checks before they can run in a cgroup v1 memory group, the making and removal of such a
# group, the disk a directory is on, and the photo lists that repeat a photo tree by hard links.
# Source it after setting `me` (the script's name, for messages) and `setup` (1: install missing
# packages); it sets `cgbase` (the v1 memory controller's mount) to /sys/fs/cgroup/memory unless
# already set.
cgbase=${cgbase:-/sys/fs/cgroup/memory}

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

# memcg_new GROUP [MIB]: makes the memory group GROUP, limited to MIB MiB when MIB is given.
memcg_new() {
    mkdir "$1"
    [[ -z ${2:-} ]] || echo $(($2 << 20)) >"$1/memory.limit_in_bytes"
}

# disk_of DIR: the block device DIR is on (its /sys/class/block name), empty when it has none to
# read (e.g. overlay).
disk_of() {
    local dev
    dev=$(basename "$(df --output=source "$1" | tail -1)")
    [[ -r /sys/class/block/$dev ]] && echo "$dev" || true
}

# hardlink_list SRC REP COPIES: REP made afresh with COPIES hard-linked copies of the photo tree SRC
# (REP/0 ...) and REP/all.list naming every .jpg in them with its class folder (packdata's list
# format): a data set of any size from few photos, which does not matter to the device (every
# record is its own bytes at its own offset).
hardlink_list() {
    local k
    rm -rf "$2"
    mkdir -p "$2"
    for ((k = 0; k < $3; k++)); do cp -al "$1" "$2/$k"; done
    (cd "$2" && find . -type f -name '*.jpg' | sort | awk -F/ '{print $0" "$3}') >"$2/all.list"
}
