/* io_auto.c — how much page cache a run can expect, for FL_IO_AUTO's choice of O_DIRECT and the
 * buffered readers' drop-behind: the smaller of MemAvailable (/proc/meminfo) and the memory
 * limit of the process's cgroup (v1 memory.limit_in_bytes or v2 memory.max, the smallest along
 * the path to the root, less what the group already uses that is not page cache). A data set
 * larger than that cannot stay cached: buffered reads would only evict each other (and, in a
 * cgroup, reclaim the job's own memory), so O_DIRECT is the better choice. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

/* First number on the line of `file` that starts with `key` (then ':' or ' '); 0 when absent. */
static int read_key(const char *file, const char *key, uint64_t *out)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    char line[512];
    size_t kl = strlen(key);
    int rc = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) || (line[kl] != ':' && line[kl] != ' '))
            continue;
        char *end;
        unsigned long long v = strtoull(line + kl + 1, &end, 10);
        if (end != line + kl + 1) {
            *out = v;
            rc = 0;
        }
        break;
    }
    fclose(f);
    return rc;
}

/* A file holding one number (or "max": no limit). */
static int read_num(const char *file, uint64_t *out)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    char buf[64] = {0};
    int rc = -1;
    if (fgets(buf, sizeof buf, f)) {
        char *end;
        unsigned long long v = strtoull(buf, &end, 10);
        if (!strncmp(buf, "max", 3)) {
            *out = UINT64_MAX;
            rc = 0;
        } else if (end != buf) {
            *out = v;
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

/* The process's cgroup path for the v1 memory controller (v1 = 1) or the v2 hierarchy. */
static int cgroup_path(const char *root, int v1, char *out, size_t cap)
{
    char file[4096];
    snprintf(file, sizeof file, "%s/proc/self/cgroup", root);
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    char line[4096];
    int rc = -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctl = c1 + 1;
        int match =
            v1 ? strstr(ctl, "memory") != NULL : (line[0] == '0' && c1 == line + 1 && !*ctl);
        if (match) {
            snprintf(out, cap, "%s", c2 + 1);
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

/* Smallest limit minus non-cache usage along the group's path to the root; UINT64_MAX: none. */
static uint64_t cgroup_room(const char *root, int v1)
{
    char rel[2048];
    if (cgroup_path(root, v1, rel, sizeof rel) < 0)
        return UINT64_MAX;
    uint64_t best = UINT64_MAX;
    for (;;) {
        char dir[4096], file[4200];
        snprintf(dir, sizeof dir, "%s/sys/fs/cgroup%s%s", root, v1 ? "/memory" : "",
                 strcmp(rel, "/") ? rel : "");
        uint64_t lim, usage = 0, cache = 0;
        snprintf(file, sizeof file, "%s/%s", dir, v1 ? "memory.limit_in_bytes" : "memory.max");
        if (read_num(file, &lim) == 0 && lim < (1ull << 60)) {
            snprintf(file, sizeof file, "%s/%s", dir,
                     v1 ? "memory.usage_in_bytes" : "memory.current");
            read_num(file, &usage);
            snprintf(file, sizeof file, "%s/memory.stat", dir);
            if (read_key(file, v1 ? "total_cache" : "file", &cache) < 0 && v1)
                read_key(file, "cache", &cache);
            uint64_t used = usage > cache ? usage - cache : 0;
            uint64_t room = lim > used ? lim - used : 0;
            if (room < best)
                best = room;
        }
        char *slash = strrchr(rel, '/');
        if (!slash || slash == rel) {
            if (!strcmp(rel, "/") || !*rel)
                break;
            strcpy(rel, "/");
            continue;
        }
        *slash = '\0';
    }
    return best;
}

uint64_t fl_page_cache_expect(const char *root, const char **why)
{
    if (!root)
        root = "";
    char file[4096];
    snprintf(file, sizeof file, "%s/proc/meminfo", root);
    uint64_t avail_kib, best = UINT64_MAX;
    const char *w = "unknown";
    if (read_key(file, "MemAvailable", &avail_kib) == 0) {
        best = avail_kib * 1024;
        w = "MemAvailable";
    }
    uint64_t cg = cgroup_room(root, 1);
    uint64_t cg2 = cgroup_room(root, 0);
    if (cg2 < cg)
        cg = cg2;
    if (cg < best) {
        best = cg;
        w = "cgroup memory limit";
    }
    if (why)
        *why = w;
    return best;
}

uint32_t fl_local_ranks(void)
{
    /* torchrun / torch.distributed, Open MPI, MPICH/Hydra, Slurm */
    static const char *const vars[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                       "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        if (!v || !*v)
            continue;
        unsigned long n = strtoul(v, &end, 10);
        if (end != v && n >= 1 && n <= 4096) /* "4(x2)" (Slurm) reads as 4 */
            return (uint32_t)n;
    }
    return 1;
}

const char *fl_page_cache_root(void)
{
    const char *r = getenv("FL_PROC_ROOT");
    return r && *r ? r : "";
}
