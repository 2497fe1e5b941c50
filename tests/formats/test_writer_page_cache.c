/* test_writer_page_cache.c — the writer keeps its output out of the page cache:
 * while a shard is written at most a few writeback chunks of it stay cached, a finished (fsync'ed)
 * shard has no page cached, the LMDB backend's data.mdb keeps only the pages LMDB mapped, and every
 * record reads back byte-exact from the disk. FL_WRITER_KEEP_CACHE=1 turns it off (the control:
 * then the shards stay cached). Residency is mincore(2) over a read-only mapping. Exit 77 when the
 * file system under $TMPDIR keeps written pages whatever we ask (tmpfs). */
#include <sys/mman.h>

#include "fmt_test.h"
#include "fl_page_cache.h"

#define SIDE 224u
#define REC  (SIDE * SIDE * 3u) /* 150,528 bytes: a raw 224x224x3 record */

/* Bytes of path in the page cache (pages resident x page size); also its size. */
static uint64_t cached_bytes(const char *path, uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    *size = (uint64_t)st.st_size;
    uint64_t n = 0;
    if (st.st_size > 0) {
        long pg = sysconf(_SC_PAGESIZE);
        size_t pages = ((size_t)st.st_size + (size_t)pg - 1) / (size_t)pg;
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        CHECK(m != MAP_FAILED);
        unsigned char *v = malloc(pages);
        CHECK(v && mincore(m, (size_t)st.st_size, v) == 0);
        for (size_t i = 0; i < pages; i++)
            n += v[i] & 1;
        free(v);
        munmap(m, (size_t)st.st_size);
        n *= (uint64_t)pg;
    }
    close(fd);
    return n;
}

/* Does POSIX_FADV_DONTNEED drop a durable file's pages on this file system? */
static int fs_drops_pages(void)
{
    const char *p = tt_path("probe");
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    static uint8_t b[1 << 20];
    memset(b, 7, sizeof b);
    CHECK(write(fd, b, sizeof b) == (ssize_t)sizeof b);
    CHECK(fsync(fd) == 0);
    fl_cache_drop_file(fd);
    close(fd);
    uint64_t size, c = cached_bytes(p, &size);
    unlink(p);
    return c < size / 2;
}

static void payload(uint64_t i, uint8_t *out)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL ^ (i * 0x100000001B3ULL + 1);
    for (size_t k = 0; k < REC; k += 8) {
        uint64_t x = tt_rng(&s);
        memcpy(out + k, &x, 8);
    }
}

static fl_writer_options options(fl_backend backend, uint64_t shard_bytes)
{
    fl_writer_options o;
    memset(&o, 0, sizeof o);
    o.backend = backend;
    o.schema.encoding = FL_ENC_RAW;
    o.schema.compression = FL_COMP_NONE;
    o.schema.channels = 3;
    o.schema.height = o.schema.width = SIDE;
    o.shard_bytes = shard_bytes;
    o.tool_version = "test";
    o.options_json = "{}";
    return o;
}

static void add(fl_writer *w, uint64_t from, uint64_t to, uint8_t *buf)
{
    fl_error err;
    for (uint64_t i = from; i < to; i++) {
        char name[32];
        snprintf(name, sizeof name, "r%llu", (unsigned long long)i);
        payload(i, buf);
        CHECK_OK(fl_writer_add(w, buf, REC, (int32_t)(i % 2), name, SIDE, SIDE, &err), &err);
    }
}

/* Every record of dst reads back byte-exact (and its checksums verify); returns the bytes its
 * shard files (shard-00000.fls, ...) keep cached, looked at before anything opens the dataset (the
 * reader's open maps each shard and faults its header and footer in, with read-around), and their
 * total size. */
static uint64_t check_dataset(const char *dst, uint64_t n, uint8_t *buf, uint64_t *total)
{
    fl_error err;
    uint64_t cached = 0;
    *total = 0;
    for (uint32_t s = 0;; s++) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/shard-%05u.fls", dst, s);
        if (access(p, F_OK) != 0)
            break;
        uint64_t size, c = cached_bytes(p, &size);
        printf("  %s: %llu of %llu bytes cached\n", p, (unsigned long long)c,
               (unsigned long long)size);
        cached += c;
        *total += size;
    }
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    CHECK(fl_dataset_count(ds) == n);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *p;
        size_t len;
        payload(i, buf);
        CHECK_OK(fl_dataset_get(ds, i, &p, &len, 1, &err), &err);
        CHECK(len == REC && memcmp(p, buf, REC) == 0);
    }
    uint64_t bad = 99;
    CHECK_OK(fl_dataset_verify(ds, NULL, NULL, &bad, &err), &err);
    CHECK(bad == 0);
    fl_dataset_close(ds);
    return cached;
}

int main(void)
{
    tt_tmpdir();
    if (!fs_drops_pages()) {
        printf("SKIP: the file system under %s keeps a file's pages after POSIX_FADV_DONTNEED "
               "(tmpfs?)\n",
               tt_dir);
        return 77;
    }
    fl_error err;
    uint8_t *buf = malloc(REC);
    CHECK(buf);
    const char *classes[2] = {"a", "b"};

    /* shards: 40 MiB shards; 260 records (37 MiB) into the first, then a second one */
    fl_writer_options o = options(FL_BACKEND_SHARDS, 40u << 20);
    fl_writer *w;
    CHECK_OK(fl_writer_open(tt_path("shards"), &o, &w, &err), &err);
    add(w, 0, 260, buf);
    uint64_t size, c = cached_bytes(tt_path("shards.partial/shard-00000.fls.tmp"), &size);
    printf("open shard: %llu of %llu bytes cached (limit %u)\n", (unsigned long long)c,
           (unsigned long long)size, 3 * FL_WB_CHUNK);
    CHECK(size >= 4 * (uint64_t)FL_WB_CHUNK); /* big enough that the window must have moved */
    CHECK(c <= 3 * (uint64_t)FL_WB_CHUNK);
    const uint64_t n = 400;
    add(w, 260, n, buf);
    CHECK_OK(fl_writer_finish(w, classes, 2, &err), &err);
    uint64_t total, cached = check_dataset(tt_path("shards"), n, buf, &total);
    printf("shards: %llu of %llu bytes cached after the pack\n", (unsigned long long)cached,
           (unsigned long long)total);
    CHECK(total >= n * REC);
    CHECK(cached == 0); /* fsync'ed, nobody maps them: POSIX_FADV_DONTNEED drops every page */

    /* the control: FL_WRITER_KEEP_CACHE=1 leaves them cached (so the check above measures the
     * writer, not the kernel's own reclaim); tolerance: half, in case of memory pressure */
    CHECK(setenv("FL_WRITER_KEEP_CACHE", "1", 1) == 0);
    o = options(FL_BACKEND_SHARDS, 40u << 20);
    CHECK_OK(fl_writer_open(tt_path("kept"), &o, &w, &err), &err);
    add(w, 0, n, buf);
    CHECK_OK(fl_writer_finish(w, classes, 2, &err), &err);
    cached = check_dataset(tt_path("kept"), n, buf, &total);
    printf("FL_WRITER_KEEP_CACHE=1: %llu of %llu bytes cached\n", (unsigned long long)cached,
           (unsigned long long)total);
    CHECK(cached >= total / 2);
    CHECK(unsetenv("FL_WRITER_KEEP_CACHE") == 0);

    /* LMDB: 400 records in 32 MiB batches; what stays is what LMDB mapped (root, branch pages,
     * the leaf it appended to): tolerance 1% of the file */
    o = options(FL_BACKEND_LMDB, 0);
    CHECK_OK(fl_writer_open(tt_path("lmdb"), &o, &w, &err), &err);
    add(w, 0, n, buf);
    CHECK_OK(fl_writer_finish(w, classes, 2, &err), &err);
    c = cached_bytes(tt_path("lmdb/data.mdb"), &size);
    printf("lmdb: %llu of %llu bytes cached after the pack\n", (unsigned long long)c,
           (unsigned long long)size);
    CHECK(size >= n * REC);
    CHECK(c <= size / 100);
    cached = check_dataset(tt_path("lmdb"), n, buf, &total);
    free(buf);
    printf("ok\n");
    return 0;
}
