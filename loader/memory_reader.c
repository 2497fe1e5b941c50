/* memory_reader.c — FL_IO_MEMORY: every shard file read once, at create, into anonymous memory
 * owned by the loader; records are then served from there like a mapping, but without the
 * mapping's SIGBUS when a file shrinks (the copy is private) and with huge pages on large
 * copies. The CRC32C of each record is still checked on every use. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_file.h"
#include "loader_internal.h"

int fl_memory_auto(const fl_loader_options *opt, const fl_schema *schema, uint64_t dataset_bytes)
{
    /* Only raw pixels gain: a JPEG or PNG costs hundreds of microseconds to decode, a read from
     * the page cache about one. */
    if (opt->io != FL_IO_AUTO || opt->direct || opt->memory_max < 0 ||
        schema->encoding != FL_ENC_RAW)
        return 0;
    /* nor more than the page cache the run can expect (its cgroup's limit): a copy that does
     * not fit would be swapped or killed */
    if (dataset_bytes > fl_page_cache_expect(fl_page_cache_root(), NULL))
        return 0;
    if (opt->memory_max > 0)
        return dataset_bytes <= (uint64_t)opt->memory_max;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t cap = FL_MEMORY_AUTO_MAX;
    if (pages > 0 && psz > 0 && (uint64_t)pages * (uint64_t)psz / 16 < cap)
        cap = (uint64_t)pages * (uint64_t)psz / 16;
    return dataset_bytes <= cap;
}

/* Read shard i's whole file into fresh anonymous memory. A file that is shorter than its
 * index says keeps what it has: the records past its end fail when used ("file ends early"). */
static int load_one(fl_loader *L, uint32_t i, fl_error *err)
{
    const char *path = fl_dataset_shard_path(L->ds, i);
    /* the file fl_dataset_open validated, never the path again (it may name a newer dataset) */
    int fd = fl_dataset_file_fd(L->ds, i); /* owned by the dataset: not closed here */
    if (fd < 0)
        return fl_error_set(err, -EBADF, "%s: no open file for this shard", path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        return fl_error_set(err, e, "%s: cannot stat shard: %s", path, strerror(-e));
    }
    size_t size = st.st_size > 0 ? (size_t)st.st_size : 0, cap = size ? size : 1;
    uint8_t *m = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        return fl_error_set(err, -ENOMEM, "%s: out of memory for a %zu-byte in-memory copy", path,
                            size);
    }
    madvise(m, cap, MADV_HUGEPAGE); /* a hint: fewer TLB misses on random record access */
    size_t got;
    int e = fl_pread_full(fd, m, size, 0, &got); /* got < size: shrank since the stat */
    if (e) {
        munmap(m, cap);
        return fl_error_set(err, e, "%s: read failed at byte %zu: %s", path, got, strerror(-e));
    }
    L->mem[i] = (fl_shard_copy){.p = m, .len = got, .cap = cap};
    return 0;
}

int fl_memory_load(fl_loader *L, fl_error *err)
{
    uint32_t n = fl_dataset_num_shards(L->ds);
    L->mem = calloc(n ? n : 1, sizeof *L->mem);
    if (!L->mem)
        return fl_error_set(err, -ENOMEM, "out of memory for %u shard copies", n);
    L->nmem = n;
    for (uint32_t i = 0; i < n; i++) {
        int rc = load_one(L, i, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int fl_memory_record(const fl_work_ctx *X, uint64_t idx, const fl_record_info *info,
                     const uint8_t **data, fl_error *err)
{
    uint32_t s = info->shard;
    const fl_shard_copy *c = s < X->nmem ? &X->mem[s] : NULL;
    if (!c || !c->p || info->offset > c->len || info->stored_len > c->len - info->offset)
        return fl_error_set(err, FL_E_TRUNCATED, "%s: record %llu: read failed: file ends early",
                            fl_dataset_shard_path(X->ds, s < X->nmem ? s : 0),
                            (unsigned long long)idx);
    *data = c->p + info->offset;
    return 0;
}

void fl_memory_free(fl_loader *L)
{
    for (uint32_t i = 0; i < L->nmem; i++)
        if (L->mem[i].p)
            munmap(L->mem[i].p, L->mem[i].cap);
    free(L->mem);
    L->mem = NULL;
    L->nmem = 0;
}
