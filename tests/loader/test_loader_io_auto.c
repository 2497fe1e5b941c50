/* test_loader_io_auto.c — FL_IO_AUTO's choice of O_DIRECT for data sets larger than the page
 * cache the run can expect (loader/io_auto.c), against fake /proc and /sys/fs/cgroup trees
 * (FL_PROC_ROOT): the expectation is the smaller of MemAvailable and the cgroup's room (v1 and
 * v2, ancestors included, page cache not counted as used); a data set over it gets O_DIRECT
 * and says why, one under it stays buffered; buffered reads of a data set over it drop behind. */
#include <string.h>
#include <sys/stat.h>

#include "fixture.h"
#include "loader_internal.h"

static void put(const char *root, const char *rel, const char *text)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (char *s = p + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* A fake root: MemAvailable 8 GB; v1 memory group /job/step limited to `v1_limit` under /job
 * limited to `parent_limit`, using `usage` bytes of which `cache` page cache. */
static char *fake_root(const char *dir, const char *name, const char *v1_limit,
                       const char *parent_limit, const char *usage, const char *cache)
{
    char *root = malloc(4096);
    snprintf(root, 4096, "%s/%s", dir, name);
    put(root, "proc/meminfo", "MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n");
    put(root, "proc/self/cgroup", "5:cpu,cpuacct:/job/step\n4:memory:/job/step\n0::/\n");
    put(root, "sys/fs/cgroup/memory/job/step/memory.limit_in_bytes", v1_limit);
    put(root, "sys/fs/cgroup/memory/job/step/memory.usage_in_bytes", usage);
    char stat[128];
    snprintf(stat, sizeof stat, "rss 1\ncache %s\nshmem 0\n", cache);
    put(root, "sys/fs/cgroup/memory/job/step/memory.stat", stat);
    put(root, "sys/fs/cgroup/memory/job/memory.limit_in_bytes", parent_limit);
    put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    return root;
}

static void expectations(const char *dir)
{
    const char *why = NULL;
    /* 1 MiB limit, 512 KiB used of which 256 KiB cache: room 1 MiB - 256 KiB */
    char *r = fake_root(dir, "v1", "1048576\n", "9223372036854771712\n", "524288\n", "262144");
    CHECK(fl_page_cache_expect(r, &why) == 1048576 - 262144);
    CHECK(!strcmp(why, "cgroup memory limit"));
    free(r);
    /* the parent's limit is the smaller one */
    r = fake_root(dir, "v1p", "1073741824\n", "2097152\n", "0\n", "0");
    CHECK(fl_page_cache_expect(r, &why) == 2097152);
    free(r);
    /* no limit: MemAvailable */
    r = fake_root(dir, "none", "9223372036854771712\n", "9223372036854771712\n", "0\n", "0");
    CHECK(fl_page_cache_expect(r, &why) == 8000000ull * 1024);
    CHECK(!strcmp(why, "MemAvailable"));
    free(r);
    /* cgroup v2: memory.max of the unified group, "file" is the page cache */
    char root[4096];
    snprintf(root, sizeof root, "%s/v2", dir);
    put(root, "proc/meminfo", "MemAvailable:    8000000 kB\n");
    put(root, "proc/self/cgroup", "0::/user/job\n");
    put(root, "sys/fs/cgroup/user/job/memory.max", "3145728\n");
    put(root, "sys/fs/cgroup/user/job/memory.current", "1048576\n");
    put(root, "sys/fs/cgroup/user/job/memory.stat", "anon 1\nfile 1048576\n");
    put(root, "sys/fs/cgroup/user/memory.max", "max\n");
    CHECK(fl_page_cache_expect(root, &why) == 3145728);
    CHECK(!strcmp(why, "cgroup memory limit"));
}

/* The loader under a fake root: its O_DIRECT choice and what it says. */
static void loader_choice(const char *dir, const char *path, const char *limit, fl_io_mode io,
                          int want_direct_choice, int want_drop)
{
    char *r = fake_root(dir, limit[0] == '1' && strlen(limit) < 12 ? "small" : "large", limit,
                        "9223372036854771712\n", "0\n", "0");
    setenv("FL_PROC_ROOT", r, 1);
    fl_loader_options o;
    fx_options(&o);
    o.io = io;
    o.memory_max = -1; /* never read into memory */
    o.workers = 1;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    const char *d = fl_loader_io_describe(L);
    printf("limit %.*s -> %s\n", (int)strcspn(limit, "\n"), limit, d);
    CHECK((strstr(d, "O_DIRECT (io auto: the data set") != NULL) == want_direct_choice);
    /* where the filesystem refuses O_DIRECT (tmpfs) the choice falls back to buffered reads,
     * which then drop behind */
    if (fl_loader_direct(L) || !want_direct_choice)
        CHECK((strstr(d, "drop-behind") != NULL) == want_drop);
    if (want_direct_choice)
        CHECK(strstr(d, "cgroup memory limit") != NULL);
    fl_batch *b;
    CHECK_OK(fl_loader_next(L, &b, &err), &err); /* and it reads */
    fl_loader_release(L, b);
    fl_loader_close(L);
    unsetenv("FL_PROC_ROOT");
    free(r);
}

int main(void)
{
    char *dir = fx_tmpdir("ioauto");
    expectations(dir);
    fx_spec s = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_RAW,
                 .compression = FL_COMP_NONE,
                 .n = 400,
                 .height = 32,
                 .width = 32,
                 .channels = 3,
                 .classes = 4,
                 .shard_bytes = 200000};
    char *path = fx_make(dir, "raw", &s);                       /* 1.2 MB */
    loader_choice(dir, path, "524288\n", FL_IO_AUTO, 1, 0);     /* 512 KiB: O_DIRECT */
    loader_choice(dir, path, "1073741824\n", FL_IO_AUTO, 0, 0); /* 1 GiB: buffered */
    loader_choice(dir, path, "524288\n", FL_IO_PREAD, 0, 1);    /* forced buffered: drop */
    fx_rmrf(dir);
    free(dir);
    free(path);
    printf("test_loader_io_auto: OK\n");
    return 0;
}
