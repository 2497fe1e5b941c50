/* soak.c — open/close soak of libfastload: creates and closes a loader CYCLES times over one
 * dataset, rotating through io backends (io_uring, pread, mmap, auto), worker counts, augmentation,
 * O_DIRECT, and closing with batches still held or mid-epoch; then checks that file descriptors
 * (io_uring rings are fds), threads, memory mappings and resident memory came back to where they
 * were after a warm-up. Also opens/closes the dataset reader alone CYCLES times.
 * usage: rel_soak DATASET CYCLES [RSS_BOUND_KIB]     exit 0 pass, 1 fail, 2 usage
 * RSS_BOUND_KIB defaults to 4096; 0 judges only fds and threads (for sanitizer builds, whose
 * allocators map memory and keep freed blocks in quarantine on their own). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fastload.h"
#include "fl_dataset.h"

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (!f || fscanf(f, "%ld %ld", &size, &res) != 2)
        res = -1;
    if (f)
        fclose(f);
    return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* fds open, and how many of them are io_uring instances */
static int count_fds(int *rings)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    *rings = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[300], target[256];
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(p, target, sizeof target - 1);
        target[k > 0 ? k : 0] = 0;
        if (strstr(target, "io_uring"))
            (*rings)++;
        n++;
    }
    if (d)
        closedir(d);
    return n - 1; /* the DIR's own fd */
}

static int count_lines(const char *path, const char *prefix)
{
    FILE *f = fopen(path, "r");
    char line[512];
    int n = 0, v = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (!prefix)
            n++;
        else if (!strncmp(line, prefix, strlen(prefix)))
            v = atoi(line + strlen(prefix));
    }
    if (f)
        fclose(f);
    return prefix ? v : n;
}

/* Threads of this process, less the kernel's io_uring workers ("iou-wrk-*", "iou-sqp-*"): a
 * request io_uring cannot complete inline (an O_DIRECT read on some file systems) is handed to a
 * worker that belongs to the task, not the ring, and stays idle for a few seconds after the ring
 * is closed before it exits, so counting it made the figure flicker (CI once saw 2 -> 1). */
static int count_threads(char *extra, size_t extra_len)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    if (extra_len)
        extra[0] = 0;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[300], comm[64] = "";
        snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(p, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f))
                comm[0] = 0;
            fclose(f);
        }
        comm[strcspn(comm, "\n")] = 0;
        if (!strncmp(comm, "iou-", 4))
            continue;
        n++;
        size_t used = strlen(extra);
        if (extra_len > used + 1)
            snprintf(extra + used, extra_len - used, "%s%s", used ? "," : "", comm);
    }
    if (d)
        closedir(d);
    return n;
}

typedef struct snapshot {
    int fds, rings, threads, maps;
    long rss;
    char thread_names[256];
} snapshot;

static snapshot take(void)
{
    snapshot s;
    s.fds = count_fds(&s.rings);
    s.threads = count_threads(s.thread_names, sizeof s.thread_names);
    s.maps = count_lines("/proc/self/maps", NULL);
    s.rss = rss_kib();
    return s;
}

static int rings_seen; /* most io_uring fds seen while an FL_IO_URING loader was open */

static const char *io_name(fl_io_mode m)
{
    return m == FL_IO_URING    ? "uring"
           : m == FL_IO_PREAD  ? "pread"
           : m == FL_IO_MMAP   ? "mmap"
           : m == FL_IO_MEMORY ? "memory"
                               : "auto";
}

/* One cycle: create a loader with variant v, take a few batches, close. Returns 0, 1 on a
 * failure, or 77 when this variant is not available here (io_uring refused, O_DIRECT...). */
static int cycle(const char *path, unsigned v, int variable_size, unsigned *batches_out)
{
    static const fl_io_mode modes[] = {FL_IO_URING, FL_IO_PREAD, FL_IO_MMAP, FL_IO_AUTO,
                                       FL_IO_MEMORY};
    fl_loader_options o;
    fl_loader_options_init(&o);
    o.io = modes[v % 5];
    o.workers = 1 + (v / 4) % 2;
    o.batch_size = 16;
    o.prefetch = 3;
    o.seed = v;
    o.order = (v / 8) % 2 ? FL_ORDER_RANDOM : FL_ORDER_SEQUENTIAL;
    o.augment = (v / 2) % 2 || variable_size ? FL_AUG_RRC : FL_AUG_NONE;
    o.flip = o.augment == FL_AUG_RRC;
    if (variable_size || o.augment == FL_AUG_RRC)
        o.out_height = o.out_width = 24;
    o.direct =
        v % 16 == 5 && o.io != FL_IO_MMAP && o.io != FL_IO_MEMORY; /* O_DIRECT now and then */
    fl_loader *L = NULL;
    fl_error err;
    int rc = fl_loader_create(path, &o, &L, &err);
    if (rc == FL_E_UNSUPPORTED)
        return 77;
    if (rc) {
        fprintf(stderr, "cycle variant %u (io %s): create failed: %s\n", v, io_name(o.io), err.msg);
        return 1;
    }
    if (o.io == FL_IO_URING) {
        int rings;
        count_fds(&rings);
        if (rings > rings_seen)
            rings_seen = rings;
    }
    /* take 1..3 batches; hold the last one through close every third variant */
    unsigned take_n = 1 + v % 3;
    fl_batch *held = NULL;
    for (unsigned i = 0; i < take_n; i++) {
        fl_batch *b;
        if (fl_loader_next(L, &b, &err)) {
            fprintf(stderr, "cycle variant %u (io %s): next failed: %s\n", v, io_name(o.io),
                    err.msg);
            fl_loader_close(L);
            return 1;
        }
        (*batches_out)++;
        if (held)
            fl_loader_release(L, held);
        held = b;
    }
    if (v % 3 != 2 && held)
        fl_loader_release(L, held);
    fl_loader_close(L);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: rel_soak DATASET CYCLES [RSS_BOUND_KIB]\n");
        return 2;
    }
    const char *path = argv[1];
    long cycles = atol(argv[2]);
    long rss_bound = argc > 3 ? atol(argv[3]) : 4096;
    fl_dataset *ds;
    fl_error err;
    if (fl_dataset_open(path, &ds, &err)) {
        fprintf(stderr, "open %s: %s\n", path, err.msg);
        return 1;
    }
    const fl_schema *sc = fl_dataset_schema(ds);
    int variable = sc->height == 0 || sc->width == 0;
    fl_dataset_close(ds);

    /* warm-up: every variant once (lazy one-time allocations, thread-local arenas) */
    unsigned batches = 0, skipped_variants = 0;
    for (unsigned v = 0; v < 32; v++) {
        int rc = cycle(path, v, variable, &batches);
        if (rc == 1)
            return 1;
        skipped_variants += rc == 77;
    }
    snapshot a = take();
    for (long i = 0; i < cycles; i++) {
        int rc = cycle(path, (unsigned)i % 32, variable, &batches);
        if (rc == 1)
            return 1;
        if (i == cycles / 2) {
            snapshot m = take();
            if (m.fds != a.fds || m.threads != a.threads) {
                fprintf(stderr, "after %ld cycles: fds %d -> %d, threads %d (%s) -> %d (%s)\n",
                        i + 1, a.fds, m.fds, a.threads, a.thread_names, m.threads, m.thread_names);
                return 1;
            }
        }
    }
    for (long i = 0; i < cycles; i++) {
        if (fl_dataset_open(path, &ds, &err)) {
            fprintf(stderr, "dataset open %ld: %s\n", i, err.msg);
            return 1;
        }
        fl_dataset_close(ds);
    }
    snapshot b = take();
    printf("%s: %ld loader cycles (%u batches, %u of 32 variants unavailable here) + %ld dataset "
           "open/close: fds %d -> %d (io_uring %d -> %d; %d while open), threads %d -> %d, maps %d "
           "-> %d, "
           "RSS %ld -> %ld KiB\n",
           path, cycles, batches, skipped_variants, cycles, a.fds, b.fds, a.rings, b.rings,
           rings_seen, a.threads, b.threads, a.maps, b.maps, a.rss, b.rss);
    int bad = 0;
    if (b.fds != a.fds || b.rings != a.rings) {
        fprintf(stderr, "FAIL: file descriptors leaked (%d -> %d, io_uring %d -> %d)\n", a.fds,
                b.fds, a.rings, b.rings);
        bad = 1;
    }
    if (b.threads != a.threads) {
        fprintf(stderr, "FAIL: threads leaked (%d (%s) -> %d (%s))\n", a.threads, a.thread_names,
                b.threads, b.thread_names);
        bad = 1;
    }
    /* A few mappings may appear late without a leak: glibc makes malloc arenas lazily (up to 8
     * per core, two mappings each) when worker threads happen to contend, and caches thread
     * stacks. A leak of one mapping per cycle would show hundreds. */
    if (rss_bound > 0 && b.maps > a.maps + 24) {
        fprintf(stderr, "FAIL: memory mappings leaked (%d -> %d)\n", a.maps, b.maps);
        bad = 1;
    }
    if (rss_bound > 0 && b.rss > a.rss + rss_bound) {
        fprintf(stderr, "FAIL: resident memory grew %ld KiB (bound %ld KiB)\n", b.rss - a.rss,
                rss_bound);
        bad = 1;
    }
    return bad;
}
