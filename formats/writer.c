/* writer.c — the writer API (fl_writer.h): builds a dataset under "<dst>.partial/", one shard
 * at a time (.tmp, fsync, rename), resumes from complete shards, and publishes the finished
 * dataset with an atomic rename. The LMDB backend's storage lives in lmdb_writer.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <zstd.h>

#include "fl_file.h"
#include "fl_json.h"
#include "fl_lmdb.h"
#include "fl_manifest.h"
#include "fl_page_cache.h"
#include "fl_shard.h"
#include "fl_writer.h"

#define WBUF_SIZE (1u << 20)
#define DEFAULT_SHARD_BYTES (256ull << 20)
#define STATE_FILE "state.json"
#define DICT_FILE "zstd.dict"
#define ID_FILE "dataset.id" /* the dataset id (32 hex digits), chosen once, kept across --resume */

typedef struct growbuf {
    uint8_t *p;
    size_t len, cap;
} growbuf;

static int gb_append(growbuf *g, const void *d, size_t n) {
    if (g->len + n > g->cap) {
        size_t cap = g->cap ? g->cap : 4096;
        while (cap < g->len + n) cap *= 2;
        uint8_t *q = realloc(g->p, cap);
        if (!q) return -ENOMEM;
        g->p = q;
        g->cap = cap;
    }
    memcpy(g->p + g->len, d, n);
    g->len += n;
    return 0;
}

struct fl_writer {
    char *dst;
    char *partial;
    fl_writer_options opt;
    char *options_json;
    char *tool_version;
    uint8_t *dict;
    size_t dict_len;
    fl_compressor *comp;
    uint8_t *cbuf; /* compression scratch */
    size_t cbuf_cap;
    uint64_t resume_count;
    uint8_t dataset_id[FL_DATASET_ID_BYTES]; /* in every shard header, the manifest, LMDB meta */
    uint64_t total; /* records added (including resumed) */
    int32_t max_label;
    int failed;     /* a write error happened: the open shard is lost */
    /* complete shards */
    fl_manifest_shard *done;
    uint32_t num_done, cap_done;
    /* open shard */
    int fd;
    char tmp_path[PATH_MAX];
    uint32_t shard_no;
    uint64_t shard_first;
    uint64_t shard_count;
    uint64_t pos;        /* file position of the next byte */
    uint64_t data_offset;
    growbuf index, names;
    uint8_t *wbuf;
    size_t wlen;
    fl_wb_window wb;     /* the open shard's writeback (fl_page_cache.h) */
    int drop_cache;      /* written shards leave the page cache (fl_cache_drop_enabled) */
    /* LMDB */
    fl_lmdb_writer *lmdb;
    fl_writer_lock *own_lock; /* the destination's lock when open took it (none was given) */
};

/* Write a small file atomically: tmp, fsync, rename, dir fsync. */
static int write_file_atomic(const char *dir, const char *name, const void *data, size_t n,
                             fl_error *err) {
    char path[PATH_MAX], tmp[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        return fl_error_set(err, -e, "%s: cannot create: %s", tmp, strerror(e));
    }
    int rc = fl_write_all(fd, data, n);
    if (rc == 0 && fsync(fd)) rc = -errno;
    close(fd);
    if (rc == 0 && rename(tmp, path)) rc = -errno;
    if (rc == 0) rc = fl_fsync_dir(dir);
    if (rc) {
        unlink(tmp);
        return fl_error_set(err, rc, "%s: cannot write: %s", path, strerror(-rc));
    }
    return 0;
}

/* A whole small file: 0, -errno of open, FL_E_FORMAT (cannot stat, over `max` bytes), -ENOMEM,
 * or -EIO (a read error, or it ended early). NUL-terminated. */
static int read_small_file(const char *path, size_t max, uint8_t **out, size_t *len) {
    *out = NULL;
    fl_read_step step;
    int rc = fl_read_file_at(AT_FDCWD, path, max, 0, out, NULL, len, &step);
    if (rc) {
        free(*out);
        *out = NULL;
        *len = 0;
        if (step == FL_READ_STAT || step == FL_READ_TOO_LARGE) return FL_E_FORMAT;
        if (step == FL_READ_READ || step == FL_READ_SHRANK) return -EIO;
    }
    return rc;
}

static void shard_name(char *out, size_t n, uint32_t k) { snprintf(out, n, "shard-%05u.fls", k); }

/* ---- state (schema of the partial run) --------------------------------------------------- */

static int state_text(const fl_writer *w, fl_tbuf *b) {
    const fl_schema *s = &w->opt.schema;
    fl_tbuf_printf(b,
                  "{\"backend\": \"%s\", \"encoding\": \"%s\", \"compression\": \"%s\", "
                  "\"channels\": %u, \"height\": %u, \"width\": %u, \"zstd_level\": %d}\n",
                  w->opt.backend == FL_BACKEND_LMDB ? "lmdb" : "shards",
                  fl_encoding_name(s->encoding), fl_compression_name(s->compression), s->channels,
                  s->height, s->width, s->compression == FL_COMP_ZSTD ? w->opt.zstd_level : 0);
    return b->failed ? -ENOMEM : 0;
}

/* ---- dataset id ----------------------------------------------------------------------------- */

/* The dataset's 16-byte random id: read back from ID_FILE when resuming (so shards of the earlier
 * run keep matching), else chosen now and saved there. A partial directory without a readable id
 * (started by a v1 writer) gets a new one, so none of its shards is kept. */
static int load_or_make_id(fl_writer *w, int fresh, fl_error *err) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", w->partial, ID_FILE);
    if (!fresh) {
        uint8_t *t = NULL;
        size_t n = 0;
        if (read_small_file(p, 256, &t, &n) == 0) {
            while (n && (t[n - 1] == '\n' || t[n - 1] == '\r')) t[--n] = 0;
            int ok = fl_dataset_id_parse((const char *)t, w->dataset_id) == 0;
            free(t);
            if (ok) return 0;
        }
    }
    /* FL_DATASET_ID (32 hex digits) fixes the id, for byte-identical packs across runs (tests,
     * reproducible builds); giving two different datasets the same id defeats the check that
     * keeps their files apart */
    const char *fixed = getenv("FL_DATASET_ID");
    size_t got = fixed && fl_dataset_id_parse(fixed, w->dataset_id) == 0 ? FL_DATASET_ID_BYTES : 0;
    while (got < FL_DATASET_ID_BYTES) {
        ssize_t r = getrandom(w->dataset_id + got, FL_DATASET_ID_BYTES - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            return fl_error_set(err, -e, "%s: cannot choose a dataset id: getrandom: %s", w->partial,
                                strerror(e));
        }
        got += (size_t)r;
    }
    char hex[2 * FL_DATASET_ID_BYTES + 2];
    fl_dataset_id_hex(w->dataset_id, hex);
    strcat(hex, "\n");
    return write_file_atomic(w->partial, ID_FILE, hex, strlen(hex), err);
}

/* ---- shard files ---------------------------------------------------------------------------- */

static int wflush(fl_writer *w) {
    if (!w->wlen) return 0;
    int rc = fl_write_all(w->fd, w->wbuf, w->wlen);
    w->wlen = 0;
    return rc;
}

/* Buffered write of n bytes at w->pos. Whenever the buffer goes to the file, the shard's written
 * chunks are pushed to the disk and out of the page cache (fl_wb_advance), so packing a data set
 * bigger than RAM keeps at most a few chunks of the open shard cached. */
static int wput(fl_writer *w, const void *p, size_t n) {
    const uint8_t *b = p;
    w->pos += n;
    int rc = 0;
    if (n >= WBUF_SIZE) {
        rc = wflush(w);
        if (!rc) rc = fl_write_all(w->fd, b, n);
    } else {
        if (w->wlen + n > WBUF_SIZE) rc = wflush(w);
        if (rc) return rc;
        memcpy(w->wbuf + w->wlen, b, n);
        w->wlen += n;
        if (w->wlen > n) return 0; /* nothing went to the file */
    }
    return rc ? rc : fl_wb_advance(w->fd, &w->wb, w->pos - w->wlen);
}

static int wzeros(fl_writer *w, size_t n) {
    static const uint8_t z[4096];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        int rc = wput(w, z, k);
        if (rc) return rc;
        n -= k;
    }
    return 0;
}

static int io_fail(fl_writer *w, int rc, const char *what, fl_error *err) {
    w->failed = rc;
    return fl_error_set(err, rc, "%s: %s: %s", w->fd >= 0 ? w->tmp_path : w->partial, what,
                        strerror(-rc));
}

static int shard_start(fl_writer *w, fl_error *err) {
    char name[64];
    shard_name(name, sizeof name, w->shard_no);
    snprintf(w->tmp_path, sizeof w->tmp_path, "%s/%s.tmp", w->partial, name);
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        w->failed = -e;
        return fl_error_set(err, -e, "%s: cannot create: %s", w->tmp_path, strerror(e));
    }
    w->pos = 0;
    w->wlen = 0;
    memset(&w->wb, 0, sizeof w->wb);
    w->wb.on = w->drop_cache;
    w->shard_first = w->total;
    w->shard_count = 0;
    w->index.len = 0;
    w->names.len = 0;
    int rc = wzeros(w, FL_SHARD_HEADER_SIZE); /* the header is written last, at offset 0 */
    if (!rc && w->dict_len) rc = wput(w, w->dict, w->dict_len);
    w->data_offset = (w->pos + FL_SHARD_ALIGN - 1) / FL_SHARD_ALIGN * FL_SHARD_ALIGN;
    if (!rc) rc = wzeros(w, (size_t)(w->data_offset - w->pos));
    if (rc) return io_fail(w, rc, "write failed", err);
    return 0;
}

int fl_shard_compress_index = 1;

static int shard_finish(fl_writer *w, fl_error *err) {
    uint64_t data_end = w->pos;
    uint64_t idx_size = w->index.len, names_size = w->names.len;
    /* index block = entries then names; one zstd frame when that is smaller (it usually is:
     * offsets grow slowly, names share prefixes), read back whole at open */
    const uint8_t *block = NULL;
    uint64_t block_len = 0;
    uint32_t flags = 0;
    uint8_t *zblock = NULL;
    if (fl_shard_compress_index && idx_size + names_size > 64) {
        if (gb_append(&w->index, w->names.p, w->names.len))
            return io_fail(w, -ENOMEM, "out of memory", err);
        size_t cap = ZSTD_compressBound(w->index.len);
        zblock = malloc(cap);
        if (zblock) {
            size_t z = ZSTD_compress(zblock, cap, w->index.p, w->index.len, 9);
            if (!ZSTD_isError(z) && z < w->index.len) {
                block = zblock;
                block_len = z;
                flags = FL_FOOTER_INDEX_ZSTD;
            }
        }
        if (!block) {
            block = w->index.p;
            block_len = w->index.len;
        }
    }
    uint64_t idx_off = data_end;
    uint64_t idx_stored = block ? block_len : idx_size + names_size;
    uint64_t file_size = idx_off + idx_stored + FL_SHARD_FOOTER_SIZE;
    uint32_t icrc;
    if (block) {
        icrc = fl_crc32c(0, block, block_len);
    } else {
        icrc = fl_crc32c(0, w->index.p, w->index.len);
        icrc = fl_crc32c(icrc, w->names.p, w->names.len);
    }
    uint8_t foot[FL_SHARD_FOOTER_SIZE] = {0};
    memcpy(foot + FLF_MAGIC, FL_SHARD_FOOTER_MAGIC, 8);
    fl_wr64(foot + FLF_INDEX_OFFSET, idx_off);
    fl_wr64(foot + FLF_INDEX_STORED, idx_stored);
    fl_wr64(foot + FLF_INDEX_SIZE, idx_size);
    fl_wr64(foot + FLF_NAMES_SIZE, names_size);
    fl_wr64(foot + FLF_RECORD_COUNT, w->shard_count);
    fl_wr32(foot + FLF_INDEX_CRC, icrc);
    fl_wr32(foot + FLF_VERSION, FL_FORMAT_VERSION);
    fl_wr32(foot + FLF_FLAGS, flags);
    fl_wr32(foot + FLF_FOOTER_CRC, fl_crc32c(0, foot, FLF_FOOTER_CRC));
    uint8_t *hdr = calloc(1, FL_SHARD_HEADER_SIZE);
    if (!hdr) {
        free(zblock);
        return io_fail(w, -ENOMEM, "out of memory", err);
    }
    memcpy(hdr + FLH_MAGIC, FL_SHARD_MAGIC, 8);
    fl_wr32(hdr + FLH_VERSION, FL_FORMAT_VERSION);
    fl_wr32(hdr + FLH_HEADER_SIZE, FL_SHARD_HEADER_SIZE);
    fl_wr32(hdr + FLH_ENCODING, (uint32_t)w->opt.schema.encoding);
    fl_wr32(hdr + FLH_COMPRESSION, (uint32_t)w->opt.schema.compression);
    fl_wr32(hdr + FLH_CHANNELS, w->opt.schema.channels);
    fl_wr32(hdr + FLH_HEIGHT, w->opt.schema.height);
    fl_wr32(hdr + FLH_WIDTH, w->opt.schema.width);
    fl_wr32(hdr + FLH_SHARD, w->shard_no);
    fl_wr64(hdr + FLH_FIRST_RECORD, w->shard_first);
    fl_wr64(hdr + FLH_RECORD_COUNT, w->shard_count);
    fl_wr64(hdr + FLH_DICT_OFFSET, w->dict_len ? FL_SHARD_HEADER_SIZE : 0);
    fl_wr64(hdr + FLH_DICT_LEN, w->dict_len);
    fl_wr64(hdr + FLH_DATA_OFFSET, w->data_offset);
    fl_wr64(hdr + FLH_DATA_END, data_end);
    fl_wr64(hdr + FLH_FILE_SIZE, file_size);
    memcpy(hdr + FLH_DATASET_ID, w->dataset_id, FL_DATASET_ID_BYTES);
    fl_wr32(hdr + FLH_HEADER_CRC, fl_crc32c(0, hdr, FL_SHARD_HEADER_SIZE));
    int rc;
    if (block) {
        rc = wput(w, block, block_len);
    } else {
        rc = wput(w, w->index.p, w->index.len);
        if (!rc) rc = wput(w, w->names.p, w->names.len);
    }
    free(zblock);
    if (!rc) rc = wput(w, foot, sizeof foot);
    if (!rc) rc = wflush(w);
    if (!rc && pwrite(w->fd, hdr, FL_SHARD_HEADER_SIZE, 0) != (ssize_t)FL_SHARD_HEADER_SIZE)
        rc = errno ? -errno : -EIO;
    free(hdr);
    if (!rc && fsync(w->fd)) rc = -errno;
    if (rc) return io_fail(w, rc, "write failed", err);
    /* durable: none of its pages is dirty, drop them all (the reader reads it from the disk) */
    if (w->drop_cache) fl_cache_drop_file(w->fd);
    close(w->fd);
    w->fd = -1;
    char name[64], path[PATH_MAX];
    shard_name(name, sizeof name, w->shard_no);
    snprintf(path, sizeof path, "%s/%s", w->partial, name);
    if (rename(w->tmp_path, path)) return io_fail(w, -errno, "rename failed", err);
    rc = fl_fsync_dir(w->partial);
    if (rc) return io_fail(w, rc, "directory fsync failed", err);
    if (w->num_done == w->cap_done) {
        uint32_t cap = w->cap_done ? w->cap_done * 2 : 16;
        fl_manifest_shard *d = realloc(w->done, cap * sizeof *d);
        if (!d) return io_fail(w, -ENOMEM, "out of memory", err);
        w->done = d;
        w->cap_done = cap;
    }
    fl_manifest_shard *d = &w->done[w->num_done];
    d->file = strdup(name);
    if (!d->file) return io_fail(w, -ENOMEM, "out of memory", err);
    d->records = w->shard_count;
    d->bytes = file_size;
    w->num_done++;
    w->shard_no++;
    return 0;
}

/* ---- resume --------------------------------------------------------------------------------- */

static int add_done(fl_writer *w, const char *name, uint64_t records, uint64_t bytes) {
    if (w->num_done == w->cap_done) {
        uint32_t cap = w->cap_done ? w->cap_done * 2 : 16;
        fl_manifest_shard *d = realloc(w->done, cap * sizeof *d);
        if (!d) return -ENOMEM;
        w->done = d;
        w->cap_done = cap;
    }
    w->done[w->num_done].file = strdup(name);
    if (!w->done[w->num_done].file) return -ENOMEM;
    w->done[w->num_done].records = records;
    w->done[w->num_done].bytes = bytes;
    w->num_done++;
    return 0;
}

/* Keep the complete shards 0..k-1 of an earlier run; delete the first bad one, everything after it,
 * and leftover .tmp files. */
static int resume_shards(fl_writer *w, fl_error *err) {
    char name[64], path[PATH_MAX];
    int stop = 0;
    for (uint32_t k = 0;; k++) {
        shard_name(name, sizeof name, k);
        snprintf(path, sizeof path, "%s/%s", w->partial, name);
        if (access(path, F_OK) != 0) break;
        if (!stop) {
            fl_shard_view v;
            fl_error e;
            int rc = fl_shard_open(path, &v, &e);
            if (rc == 0) {
                /* a shard of another run (another id, or written by a v1 writer) is redone */
                int ok = v.number == k && v.first_record == w->total &&
                         v.version == FL_FORMAT_VERSION &&
                         memcmp(v.dataset_id, w->dataset_id, FL_DATASET_ID_BYTES) == 0 &&
                         v.schema.encoding == w->opt.schema.encoding &&
                         v.schema.compression == w->opt.schema.compression &&
                         v.schema.channels == w->opt.schema.channels &&
                         v.schema.height == w->opt.schema.height &&
                         v.schema.width == w->opt.schema.width &&
                         v.dict_len == w->dict_len &&
                         (!w->dict_len || memcmp(v.dict, w->dict, w->dict_len) == 0);
                if (ok) {
                    for (uint64_t i = 0; i < v.count; i++) {
                        fl_record_info r;
                        fl_shard_entry(&v, i, &r, NULL, NULL);
                        if (r.label > w->max_label) w->max_label = r.label;
                    }
                    w->total += v.count;
                    if (add_done(w, name, v.count, v.size)) {
                        fl_shard_close(&v);
                        return fl_error_set(err, -ENOMEM, "%s: out of memory", w->partial);
                    }
                    fl_shard_close(&v);
                    continue;
                }
                fl_shard_close(&v);
            }
            stop = 1;
        }
        unlink(path); /* not usable: redo from here */
    }
    w->shard_no = w->num_done;
    /* leftover temporaries */
    DIR *d = opendir(w->partial);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n > 4 && !strcmp(e->d_name + n - 4, ".tmp")) {
                snprintf(path, sizeof path, "%s/%s", w->partial, e->d_name);
                unlink(path);
            }
        }
        closedir(d);
    }
    w->resume_count = w->total;
    return 0;
}

/* ---- the destination: lock, what is ours, publication ------------------------------------- */

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#define PLAN_FILE "plan.txt"
#define LOCK_SUFFIX ".lock"

struct fl_writer_lock {
    char *dst;  /* normalised destination */
    char *path; /* "<dst>.lock" */
    int fd;
};

/* renameat2(2) through syscall(2): glibc declares it only under _GNU_SOURCE, and old ones not at
 * all. Fails with EINVAL/ENOSYS where the file system or kernel lacks the flag. */
static int rename2(const char *from, const char *to, unsigned flags) {
#ifdef SYS_renameat2
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
#else
    (void)from, (void)to, (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

/* A malloc'ed copy of dst without trailing slashes ("out/" names the same dataset as "out").
 * Refuses names that cannot be a dataset folder of their own: "", "/", ".", "..", or a last
 * component "." or "..": their ".partial" and ".lock" would land beside the wrong folder. */
static int dst_normalise(const char *dst, char **out, fl_error *err) {
    *out = NULL;
    if (!dst || !*dst) return fl_error_set(err, FL_E_INVALID, "writer: no destination");
    if (strlen(dst) > PATH_MAX - 64) return fl_error_set(err, FL_E_INVALID, "%s: path too long", dst);
    char *d = strdup(dst);
    if (!d) return fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
    size_t l = strlen(d);
    while (l > 1 && d[l - 1] == '/') d[--l] = '\0';
    const char *base = strrchr(d, '/');
    base = base ? base + 1 : d;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
        free(d);
        return fl_error_set(err, FL_E_INVALID,
                            "%s: not a destination: name the dataset's own folder (e.g. %s%sdataset), "
                            "not the current, parent or root folder; nothing was changed", dst, dst,
                            dst[strlen(dst) - 1] == '/' ? "" : "/");
    }
    *out = d;
    return 0;
}

static void parent_of(const char *path, char *out, size_t n) {
    snprintf(out, n, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash) snprintf(out, n, ".");
    else if (slash == out) out[1] = '\0';
    else *slash = '\0';
}

/* The error for a destination whose parent folder is missing (ENOENT/ENOTDIR on create). */
static int parent_error(const char *dst, int e, const char *what, fl_error *err) {
    char parent[PATH_MAX];
    parent_of(dst, parent, sizeof parent);
    struct stat st;
    if (stat(parent, &st) != 0)
        return fl_error_set(err, -ENOENT, "cannot create %s: parent folder %s does not exist", dst,
                            parent);
    if (!S_ISDIR(st.st_mode))
        return fl_error_set(err, -ENOTDIR, "cannot create %s: %s is not a folder", dst, parent);
    return fl_error_set(err, -e, "%s: cannot create: %s", what, strerror(e));
}

static long lock_read_pid(int fd) {
    char b[32];
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    if (n <= 0) return 0;
    b[n] = '\0';
    char *end;
    long pid = strtol(b, &end, 10);
    return pid > 0 && (*end == '\n' || *end == '\0') ? pid : 0;
}

int fl_writer_lock_acquire(const char *dst, fl_writer_lock **out, fl_error *err) {
    *out = NULL;
    fl_writer_lock *l = calloc(1, sizeof *l);
    if (!l) return fl_error_set(err, -ENOMEM, "%s: out of memory", dst ? dst : "");
    l->fd = -1;
    int rc = dst_normalise(dst, &l->dst, err);
    if (rc) {
        free(l);
        return rc;
    }
    l->path = malloc(strlen(l->dst) + sizeof LOCK_SUFFIX);
    if (!l->path) {
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
        goto fail;
    }
    sprintf(l->path, "%s%s", l->dst, LOCK_SUFFIX);
    for (int attempt = 0; attempt < 1000; attempt++) {
        int fd = open(l->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
            int e = errno;
            if (e == ENOENT || e == ENOTDIR) rc = parent_error(l->dst, e, l->path, err);
            else if (e == ELOOP)
                rc = fl_error_set(err, FL_E_INVALID, "%s: a symbolic link where the lock file of %s "
                                  "goes: remove it", l->path, l->dst);
            else rc = fl_error_set(err, -e, "%s: cannot create the lock file: %s", l->path, strerror(e));
            goto fail;
        }
        struct stat fst, pst;
        if (fstat(fd, &fst) || !S_ISREG(fst.st_mode)) {
            close(fd);
            rc = fl_error_set(err, FL_E_INVALID, "%s: not a lock file (not a regular file): move "
                              "it away; nothing was changed", l->path);
            goto fail;
        }
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            int e = errno;
            if (e != EWOULDBLOCK) {
                close(fd);
                rc = fl_error_set(err, -e, "%s: cannot lock: %s", l->path, strerror(e));
                goto fail;
            }
            /* the holder writes its pid right after locking: give it a moment */
            long pid = 0;
            for (int i = 0; i < 50 && !(pid = lock_read_pid(fd)); i++) usleep(2000);
            close(fd);
            if (pid)
                rc = fl_error_set(err, -EBUSY, "%s is being written by process %ld (lock: %s)",
                                  l->dst, pid, l->path);
            else
                rc = fl_error_set(err, -EBUSY, "%s is being written by another process (lock: %s)",
                                  l->dst, l->path);
            goto fail;
        }
        /* the holder we waited for may have removed the file just before we locked it: only a
         * lock on the inode the path names now counts (this makes unlink-then-unlock safe) */
        if (stat(l->path, &pst) || pst.st_ino != fst.st_ino || pst.st_dev != fst.st_dev) {
            close(fd);
            continue;
        }
        /* a lock file holds a pid line (or nothing, when its writer died before writing it):
         * anything else is somebody's file that happens to have this name */
        if (fst.st_size > 24 || (fst.st_size > 0 && !lock_read_pid(fd))) {
            close(fd);
            rc = fl_error_set(err, FL_E_INVALID, "%s exists and is not a lock file of this tool: "
                              "move it away; nothing was changed", l->path);
            goto fail;
        }
        /* the pid is for the message of a run that finds the lock taken; on a full disk the
         * lock works without it (and the real error comes from the data files) */
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) != n && ftruncate(fd, 0)) {
            /* nothing more to do: an empty lock file reads as "another process" */
        }
        l->fd = fd;
        *out = l;
        return 0;
    }
    rc = fl_error_set(err, -EBUSY, "%s is being written by other processes (lock: %s)", l->dst, l->path);
fail:
    free(l->dst);
    free(l->path);
    free(l);
    return rc;
}

void fl_writer_lock_release(fl_writer_lock *l) {
    if (!l) return;
    if (l->fd >= 0) {
        unlink(l->path); /* while still holding it: see the inode check in fl_writer_lock_acquire */
        close(l->fd);
    }
    free(l->dst);
    free(l->path);
    free(l);
}

/* A name this writer creates inside "<dst>.partial" (and ".tmp" versions of them). */
static int partial_name_ours(const char *n) {
    static const char *const fixed[] = {STATE_FILE, DICT_FILE, "dataset.id", PLAN_FILE,
                                        FL_MANIFEST_NAME, FL_LMDB_DATA_FILE, FL_LMDB_LOCK_FILE};
    size_t l = strlen(n);
    if (l > 4 && !strcmp(n + l - 4, ".tmp")) l -= 4;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (l == strlen(fixed[i]) && !strncmp(n, fixed[i], l)) return 1;
    /* shard-NNNNN.fls: at least five digits */
    if (l < 15 || strncmp(n, "shard-", 6) || strncmp(n + l - 4, ".fls", 4)) return 0;
    for (size_t i = 6; i < l - 4; i++)
        if (n[i] < '0' || n[i] > '9') return 0;
    return 1;
}

/* Parse "<dir>/manifest.json" as a fastload manifest. 0, -ENOENT, or FL_E_FORMAT-ish codes with
 * the reason in err. */
static int read_manifest(const char *dir, fl_manifest *m, fl_error *err) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, FL_MANIFEST_NAME);
    uint8_t *text = NULL;
    size_t len = 0;
    int rc = read_small_file(p, (size_t)256 << 20, &text, &len);
    if (rc) return fl_error_set(err, rc, "%s: %s", p, rc == FL_E_FORMAT ? "too large" : strerror(-rc));
    rc = fl_manifest_parse((const char *)text, len, p, m, err);
    free(text);
    return rc;
}

int fl_writer_inspect(const char *dst, fl_writer_dst_info *info, fl_error *err) {
    memset(info, 0, sizeof *info);
    char *d = NULL;
    int rc = dst_normalise(dst, &d, err);
    if (rc) return rc;
    char partial[PATH_MAX];
    snprintf(partial, sizeof partial, "%s.partial", d);
    struct stat st;
    /* <dst>: a dataset of ours is a folder with our manifest and nothing else but its files */
    if (lstat(d, &st) == 0) {
        info->dst = FL_DST_OTHER;
        fl_manifest m;
        fl_error e;
        if (S_ISLNK(st.st_mode)) {
            snprintf(info->why, sizeof info->why, "%.400s is a symbolic link, not a dataset folder", d);
        } else if (!S_ISDIR(st.st_mode)) {
            snprintf(info->why, sizeof info->why, "%.400s is not a folder", d);
        } else if ((rc = read_manifest(d, &m, &e)) == -ENOENT) {
            snprintf(info->why, sizeof info->why, "%.400s is not a fastload dataset (no %s)", d,
                     FL_MANIFEST_NAME);
        } else if (rc) {
            snprintf(info->why, sizeof info->why, "%.400s is not a fastload dataset (%.500s)", d, e.msg);
        } else {
            rc = 0;
            info->dst = FL_DST_DATASET;
            info->records = m.records;
            DIR *dir = opendir(d);
            struct dirent *de;
            while (dir && (de = readdir(dir))) {
                const char *n = de->d_name;
                if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, FL_MANIFEST_NAME)) continue;
                int listed = !strcmp(n, FL_LMDB_LOCK_FILE) && m.backend == FL_BACKEND_LMDB;
                for (uint32_t i = 0; i < m.num_shards && !listed; i++)
                    listed = !strcmp(n, m.shards[i].file);
                char p[PATH_MAX + 512];
                snprintf(p, sizeof p, "%s/%s", d, n);
                struct stat fs;
                if (!listed || lstat(p, &fs) || !S_ISREG(fs.st_mode)) {
                    info->dst = FL_DST_OTHER;
                    snprintf(info->why, sizeof info->why,
                             "%.400s holds %.400s, which is not part of the dataset%s", d, p,
                             listed ? " (not a regular file)" : "");
                    break;
                }
            }
            if (dir) closedir(dir);
            else if (info->dst == FL_DST_DATASET) {
                info->dst = FL_DST_OTHER;
                snprintf(info->why, sizeof info->why, "%.400s: cannot list: %s", d, strerror(errno));
            }
            fl_manifest_free(&m);
        }
        rc = 0;
    } else if (errno != ENOENT) {
        int e = errno;
        rc = fl_error_set(err, -e, "%s: %s", d, strerror(e));
        goto out;
    }
    /* <dst>.partial: only names this writer creates */
    if (lstat(partial, &st) == 0) {
        info->partial = FL_PARTIAL_STALE;
        if (!S_ISDIR(st.st_mode)) {
            info->partial = FL_PARTIAL_OTHER;
            snprintf(info->partial_why, sizeof info->partial_why, "%.400s is not a folder", partial);
        } else {
            DIR *dir = opendir(partial);
            struct dirent *de;
            while (dir && (de = readdir(dir))) {
                const char *n = de->d_name;
                if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
                char p[PATH_MAX + 512];
                snprintf(p, sizeof p, "%s/%s", partial, n);
                struct stat fs;
                if (!partial_name_ours(n) || lstat(p, &fs) || !S_ISREG(fs.st_mode)) {
                    info->partial = FL_PARTIAL_OTHER;
                    snprintf(info->partial_why, sizeof info->partial_why,
                             "%.400s holds %.400s, which this tool did not write", partial, p);
                    break;
                }
            }
            if (dir) closedir(dir);
            else {
                info->partial = FL_PARTIAL_OTHER;
                snprintf(info->partial_why, sizeof info->partial_why, "%.400s: cannot list: %s", partial,
                         strerror(errno));
            }
        }
        if (info->partial == FL_PARTIAL_STALE) {
            char p[PATH_MAX + 512];
            uint8_t *t = NULL;
            size_t n = 0;
            snprintf(p, sizeof p, "%s/%s", partial, STATE_FILE);
            int src = read_small_file(p, 1 << 16, &t, &n);
            if (src == 0) {
                fl_jdoc *doc = NULL;
                fl_error e;
                if (fl_jparse((const char *)t, n, p, &doc, &e) == 0 &&
                    fl_jget(fl_jroot(doc), "backend")) {
                    info->partial = FL_PARTIAL_RESUMABLE;
                } else {
                    info->partial = FL_PARTIAL_OTHER;
                    snprintf(info->partial_why, sizeof info->partial_why,
                             "%.400s is not a state file of this tool", p);
                }
                fl_jfree(doc);
                free(t);
            }
            if (info->partial == FL_PARTIAL_RESUMABLE) {
                snprintf(p, sizeof p, "%s/%s", partial, PLAN_FILE);
                src = read_small_file(p, (size_t)1 << 30, &t, &n);
                if (src == 0) {
                    info->plan = (char *)t;
                    info->plan_len = n;
                } else if (src != -ENOENT) {
                    rc = fl_error_set(err, src, "%s: cannot read: %s", p, fl_strerror(src));
                    goto out;
                }
            }
        }
    } else if (errno != ENOENT) {
        int e = errno;
        rc = fl_error_set(err, -e, "%s: %s", partial, strerror(e));
    }
out:
    free(d);
    if (rc) fl_writer_dst_info_free(info);
    return rc;
}

void fl_writer_dst_info_free(fl_writer_dst_info *info) {
    if (!info) return;
    free(info->plan);
    info->plan = NULL;
    info->plan_len = 0;
}

/* Delete the files of a partial directory (all of them ours: checked by the caller) and the
 * directory. state.json goes first, so an interrupted clear is not taken for a resumable run. */
static int clear_partial(const char *partial) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", partial, STATE_FILE);
    unlink(p);
    DIR *d = opendir(partial);
    if (!d) return errno == ENOENT ? 0 : -errno;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!partial_name_ours(e->d_name)) continue;
        snprintf(p, sizeof p, "%s/%s", partial, e->d_name);
        unlink(p);
    }
    closedir(d);
    return rmdir(partial) ? -errno : 0;
}

int fl_writer_remove_partial(const char *dst, fl_error *err) {
    fl_writer_dst_info info;
    int rc = fl_writer_inspect(dst, &info, err);
    if (rc) return rc;
    fl_writer_dst_info_free(&info);
    if (info.partial == FL_PARTIAL_NONE) return 0;
    if (info.partial == FL_PARTIAL_OTHER)
        return fl_error_set(err, FL_E_INVALID, "%s; nothing was removed", info.partial_why);
    char partial[PATH_MAX];
    char *d = NULL;
    rc = dst_normalise(dst, &d, err);
    if (rc) return rc;
    snprintf(partial, sizeof partial, "%s.partial", d);
    free(d);
    rc = clear_partial(partial);
    if (rc) return fl_error_set(err, rc, "%s: cannot remove: %s", partial, strerror(-rc));
    return 0;
}

/* After an exchange, delete the replaced dataset (now at `dir`): only the files it lists, its
 * manifest and LMDB's lock file, then the folder. A file somebody added meanwhile is left, and
 * with it the folder. */
static void remove_old_dataset(const char *dir) {
    fl_manifest m;
    fl_error e;
    char p[PATH_MAX];
    int have = read_manifest(dir, &m, &e) == 0;
    /* the manifest first: a folder left half-deleted must not look complete */
    snprintf(p, sizeof p, "%s/%s", dir, FL_MANIFEST_NAME);
    unlink(p);
    for (uint32_t i = 0; have && i < m.num_shards; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, m.shards[i].file);
        unlink(p);
    }
    if (have) fl_manifest_free(&m);
    snprintf(p, sizeof p, "%s/%s", dir, FL_LMDB_LOCK_FILE);
    unlink(p);
    rmdir(dir);
}

/* ---- API ------------------------------------------------------------------------------------ */

static void writer_free(fl_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    free(w->dst);
    free(w->partial);
    free(w->options_json);
    free(w->tool_version);
    free(w->dict);
    fl_compressor_free(w->comp);
    free(w->cbuf);
    for (uint32_t i = 0; i < w->num_done; i++) free(w->done[i].file);
    free(w->done);
    free(w->index.p);
    free(w->names.p);
    free(w->wbuf);
    fl_writer_lock_release(w->own_lock);
    free(w);
}

int fl_writer_open(const char *dst, const fl_writer_options *opt, fl_writer **out, fl_error *err) {
    *out = NULL;
    if (!dst || !*dst || !opt) return fl_error_set(err, FL_E_INVALID, "writer: no destination");
    if (opt->backend != FL_BACKEND_SHARDS && opt->backend != FL_BACKEND_LMDB)
        return fl_error_set(err, FL_E_INVALID, "%s: unknown backend %d", dst, (int)opt->backend);
    if (!fl_schema_valid(&opt->schema))
        return fl_error_set(err, FL_E_INVALID, "%s: invalid schema", dst);
    if (opt->zstd_dict_len > FL_MAX_DICT_BYTES)
        return fl_error_set(err, FL_E_INVALID, "%s: zstd dictionary over %u bytes", dst, FL_MAX_DICT_BYTES);
    if (opt->part_count ? opt->part_index >= opt->part_count : opt->part_index != 0)
        return fl_error_set(err, FL_E_INVALID, "%s: bad part %u/%u", dst, opt->part_index, opt->part_count);
    if (opt->options_json && opt->options_json[0]) {
        fl_jdoc *doc;
        int rc = fl_jparse(opt->options_json, strlen(opt->options_json), "options", &doc, err);
        if (rc) return rc;
        int is_obj = fl_jroot(doc)->type == FL_J_OBJECT;
        fl_jfree(doc);
        if (!is_obj) return fl_error_set(err, FL_E_INVALID, "%s: options must be a JSON object", dst);
    }
    struct stat st;
    char *ndst = NULL; /* "out/" names the same dataset as "out"; the partial dir is "out.partial" */
    int nrc = dst_normalise(dst, &ndst, err);
    if (nrc) return nrc;

    fl_writer *w = calloc(1, sizeof *w);
    if (!w) {
        free(ndst);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
    }
    w->fd = -1;
    w->opt = *opt;
    w->max_label = -1;
    w->drop_cache = fl_cache_drop_enabled();
    if (!w->opt.shard_bytes) w->opt.shard_bytes = DEFAULT_SHARD_BYTES;
    w->dst = ndst;
    w->partial = malloc(strlen(ndst) + 16);
    w->options_json = strdup(opt->options_json ? opt->options_json : "");
    w->tool_version = strdup(opt->tool_version ? opt->tool_version : "");
    w->wbuf = malloc(WBUF_SIZE);
    if (!w->dst || !w->partial || !w->options_json || !w->tool_version || !w->wbuf) {
        writer_free(w);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
    }
    w->opt.options_json = w->options_json;
    w->opt.tool_version = w->tool_version;
    w->opt.zstd_dict = NULL;
    sprintf(w->partial, "%s.partial", w->dst);

    int rc = 0;
    fl_tbuf state = {0};
    /* the lock first: nothing at <dst> or <dst>.partial is looked at without it */
    if (opt->lock) {
        if (strcmp(opt->lock->dst, w->dst)) {
            rc = fl_error_set(err, FL_E_INVALID, "%s: the lock given is for %s", w->dst,
                              opt->lock->dst);
            goto fail;
        }
    } else {
        rc = fl_writer_lock_acquire(w->dst, &w->own_lock, err);
        if (rc) goto fail;
    }
    {
        fl_writer_dst_info info;
        rc = fl_writer_inspect(w->dst, &info, err);
        if (rc) goto fail;
        fl_writer_dst_info_free(&info);
        if (info.dst != FL_DST_NONE && !opt->overwrite) {
            rc = fl_error_set(err, -EEXIST, "%s: already exists (overwrite not requested)", w->dst);
            goto fail;
        }
        if (info.dst == FL_DST_OTHER) {
            rc = fl_error_set(err, FL_E_INVALID, "cannot replace %s: %s; only a dataset this tool "
                              "wrote is replaced, nothing was changed", w->dst, info.why);
            goto fail;
        }
        if (info.partial == FL_PARTIAL_OTHER) {
            rc = fl_error_set(err, FL_E_INVALID, "%s: it is not a partial dataset of this tool; "
                              "nothing was changed", info.partial_why);
            goto fail;
        }
    }
    if (state_text(w, &state)) {
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
        goto fail;
    }
    int fresh = 1;
    if (opt->resume && stat(w->partial, &st) == 0 && S_ISDIR(st.st_mode)) {
        char p[PATH_MAX];
        uint8_t *old = NULL;
        size_t old_len = 0;
        snprintf(p, sizeof p, "%s/%s", w->partial, STATE_FILE);
        if (read_small_file(p, 1 << 16, &old, &old_len) == 0) {
            int same = old_len == state.len && memcmp(old, state.data, old_len) == 0;
            free(old);
            if (!same) {
                rc = fl_error_set(err, FL_E_INVALID,
                                  "%s: cannot resume: the partial dataset was started with other "
                                  "settings (backend, schema or zstd level); remove it or do not resume",
                                  w->partial);
                goto fail;
            }
            if (opt->plan) {
                uint8_t *saved = NULL;
                size_t saved_len = 0;
                snprintf(p, sizeof p, "%s/%s", w->partial, PLAN_FILE);
                int prc = read_small_file(p, (size_t)1 << 30, &saved, &saved_len);
                int same_plan = prc == 0 && saved_len == opt->plan_len &&
                                memcmp(saved, opt->plan, saved_len) == 0;
                free(saved);
                if (!same_plan) {
                    rc = fl_error_set(err, FL_E_INVALID, "%s: cannot resume: %s; remove it or start over",
                                      w->partial, prc == -ENOENT
                                          ? "it records no plan (started by an older version), so "
                                            "its inputs cannot be checked"
                                          : "it was started for other inputs or options");
                    goto fail;
                }
            }
            fresh = 0;
            snprintf(p, sizeof p, "%s/%s", w->partial, DICT_FILE);
            int drc = read_small_file(p, FL_MAX_DICT_BYTES, &w->dict, &w->dict_len);
            if (drc && drc != -ENOENT) {
                rc = fl_error_set(err, FL_E_FORMAT, "%s: unreadable saved dictionary", p);
                goto fail;
            }
            if (drc == 0 && w->dict_len == 0) {
                free(w->dict);
                w->dict = NULL;
            }
        }
    }
    if (fresh) {
        /* start over: an unusable or unwanted partial directory is ours to clear */
        rc = clear_partial(w->partial); /* every file in it is ours: checked above */
        if (rc && rc != -ENOENT) {
            rc = fl_error_set(err, rc, "%s: cannot clear: %s", w->partial, strerror(-rc));
            goto fail;
        }
        if (mkdir(w->partial, 0755)) {
            int e = errno;
            if (e == ENOENT || e == ENOTDIR) rc = parent_error(w->dst, e, w->partial, err);
            else rc = fl_error_set(err, -e, "%s: cannot create: %s", w->partial, strerror(e));
            goto fail;
        }
        if (opt->schema.compression == FL_COMP_ZSTD && opt->zstd_dict && opt->zstd_dict_len) {
            w->dict = malloc(opt->zstd_dict_len);
            if (!w->dict) {
                rc = fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
                goto fail;
            }
            memcpy(w->dict, opt->zstd_dict, opt->zstd_dict_len);
            w->dict_len = opt->zstd_dict_len;
        }
        /* the dictionary first, then the state that says the directory is resumable */
        rc = write_file_atomic(w->partial, DICT_FILE, w->dict ? (const void *)w->dict : "",
                               w->dict_len, err);
        if (!rc && opt->plan)
            rc = write_file_atomic(w->partial, PLAN_FILE, opt->plan, opt->plan_len, err);
        if (!rc) rc = write_file_atomic(w->partial, STATE_FILE, state.data, state.len, err);
        if (rc) goto fail;
    }
    rc = load_or_make_id(w, fresh, err);
    if (rc) goto fail;
    if (opt->schema.compression == FL_COMP_ZSTD) {
        rc = fl_compressor_create(opt->zstd_level, w->dict, w->dict_len, &w->comp, err);
        if (rc) goto fail;
    }
    if (opt->backend == FL_BACKEND_LMDB) {
        uint64_t existing = 0;
        rc = fl_lmdb_writer_open(w->partial, !fresh, w->dataset_id, w->dict, w->dict_len, &w->lmdb,
                                 &existing, err);
        if (rc) goto fail;
        w->total = w->resume_count = existing;
        /* labels of resumed records are checked by the reader; track the max from here on */
    } else if (!fresh) {
        rc = resume_shards(w, err);
        if (rc) goto fail;
    }
    fl_tbuf_free(&state);
    *out = w;
    return 0;
fail:
    fl_tbuf_free(&state);
    writer_free(w);
    return rc;
}

uint64_t fl_writer_resume_count(const fl_writer *w) { return w->resume_count; }

const void *fl_writer_dictionary(const fl_writer *w, size_t *len) {
    if (len) *len = w->dict_len;
    return w->dict_len ? w->dict : NULL;
}

static int check_record(fl_writer *w, fl_encoding format, size_t raw_len, int32_t label,
                        const char *name, uint32_t height, uint32_t width, size_t *name_len,
                        fl_error *err) {
    if (w->failed)
        return fl_error_set(err, w->failed, "%s: writer stopped after an earlier error", w->partial);
    const fl_schema *s = &w->opt.schema;
    if (!name) name = "";
    if (!fl_format_allowed(s->encoding, (uint32_t)format))
        return fl_error_set(err, FL_E_INVALID,
                            s->encoding == FL_ENC_MIXED
                                ? "record %llu (%s): a %s record in a mixed dataset (JPEG, PNG or WebP; "
                                  "give each record's format with fl_writer_add_as)"
                                : "record %llu (%s): a %s record in a %s dataset",
                            (unsigned long long)w->total, name, fl_encoding_name(format),
                            fl_encoding_name(s->encoding));
    *name_len = strnlen(name, FL_MAX_NAME_BYTES + 1);
    if (*name_len > FL_MAX_NAME_BYTES)
        return fl_error_set(err, FL_E_INVALID, "record %llu: name longer than %u bytes",
                            (unsigned long long)w->total, FL_MAX_NAME_BYTES);
    if (label < 0)
        return fl_error_set(err, FL_E_LABEL, "record %llu (%s): negative label %d",
                            (unsigned long long)w->total, name, label);
    if (raw_len > FL_MAX_RECORD_BYTES)
        return fl_error_set(err, FL_E_INVALID, "record %llu (%s): %zu bytes, over the 1 GiB limit",
                            (unsigned long long)w->total, name, raw_len);
    if (s->height && (height != s->height || width != s->width))
        return fl_error_set(err, FL_E_INVALID, "record %llu (%s): %ux%u image in a %ux%u dataset",
                            (unsigned long long)w->total, name, width, height, s->width, s->height);
    if (s->encoding == FL_ENC_RAW && (uint64_t)height * width * s->channels != raw_len)
        return fl_error_set(err, FL_E_INVALID,
                            "record %llu (%s): %zu raw bytes, %ux%ux%u pixels need %llu",
                            (unsigned long long)w->total, name, raw_len, width, height, s->channels,
                            (unsigned long long)height * width * s->channels);
    return 0;
}

static int add_stored(fl_writer *w, fl_encoding format, const void *stored, size_t stored_len,
                      size_t raw_len, int32_t label, const char *name, size_t name_len,
                      uint32_t height, uint32_t width, fl_error *err) {
    if (stored_len > FL_MAX_RECORD_BYTES)
        return fl_error_set(err, FL_E_INVALID, "record %llu (%s): stored size over 1 GiB",
                            (unsigned long long)w->total, name);
    uint32_t crc = fl_crc32c(0, stored, stored_len);
    int rc;
    if (w->lmdb) {
        rc = fl_lmdb_writer_add(w->lmdb, w->total, format, stored, stored_len, (uint32_t)raw_len,
                                label, crc, name, name_len, height, width, err);
        if (rc) {
            w->failed = rc;
            return rc;
        }
    } else {
        if (w->fd >= 0 && w->shard_count > 0 &&
            (w->pos + stored_len > w->opt.shard_bytes || w->names.len + name_len > (1u << 30))) {
            rc = shard_finish(w, err);
            if (rc) return rc;
        }
        if (w->fd < 0) {
            rc = shard_start(w, err);
            if (rc) return rc;
        }
        uint8_t e[FL_SHARD_INDEX_ENTRY];
        fl_wr64(e + FLI_OFFSET, w->pos);
        fl_wr32(e + FLI_STORED_LEN, (uint32_t)stored_len);
        fl_wr32(e + FLI_RAW_LEN, (uint32_t)raw_len);
        fl_wr32(e + FLI_LABEL, (uint32_t)label);
        fl_wr32(e + FLI_CRC, crc);
        fl_wr32(e + FLI_HEIGHT, height);
        fl_wr32(e + FLI_WIDTH, width);
        fl_wr32(e + FLI_NAME_OFFSET, (uint32_t)w->names.len);
        fl_wr32(e + FLI_NAME_LEN, (uint32_t)name_len);
        fl_wr32(e + FLI_FORMAT, (uint32_t)format);
        fl_wr32(e + FLI_RESERVED, 0);
        if (gb_append(&w->index, e, sizeof e) || gb_append(&w->names, name, name_len))
            return io_fail(w, -ENOMEM, "out of memory", err);
        rc = wput(w, stored, stored_len);
        if (rc) return io_fail(w, rc, "write failed", err);
        w->shard_count++;
    }
    if (label > w->max_label) w->max_label = label;
    w->total++;
    return 0;
}

int fl_writer_add(fl_writer *w, const void *payload, size_t len, int32_t label, const char *name,
                  uint32_t height, uint32_t width, fl_error *err) {
    return fl_writer_add_as(w, w->opt.schema.encoding, payload, len, label, name, height, width, err);
}

int fl_writer_add_as(fl_writer *w, fl_encoding format, const void *payload, size_t len,
                     int32_t label, const char *name, uint32_t height, uint32_t width,
                     fl_error *err) {
    size_t name_len = 0;
    int rc = check_record(w, format, len, label, name, height, width, &name_len, err);
    if (rc) return rc;
    if (!name) name = "";
    if (!w->comp)
        return add_stored(w, format, payload, len, len, label, name, name_len, height, width, err);
    size_t bound = fl_compress_bound(len);
    if (bound > w->cbuf_cap) {
        uint8_t *b = realloc(w->cbuf, bound);
        if (!b) return fl_error_set(err, -ENOMEM, "record %llu: out of memory", (unsigned long long)w->total);
        w->cbuf = b;
        w->cbuf_cap = bound;
    }
    size_t clen;
    rc = fl_compressor_compress(w->comp, payload, len, w->cbuf, w->cbuf_cap, &clen, err);
    if (rc) return fl_error_prefix(err, "record %llu (%s)", (unsigned long long)w->total, name);
    return add_stored(w, format, w->cbuf, clen, len, label, name, name_len, height, width, err);
}

int fl_writer_add_stored(fl_writer *w, const void *stored, size_t stored_len, size_t raw_len,
                         int32_t label, const char *name, uint32_t height, uint32_t width,
                         fl_error *err) {
    return fl_writer_add_stored_as(w, w->opt.schema.encoding, stored, stored_len, raw_len, label,
                                   name, height, width, err);
}

int fl_writer_add_stored_as(fl_writer *w, fl_encoding format, const void *stored, size_t stored_len,
                            size_t raw_len, int32_t label, const char *name, uint32_t height,
                            uint32_t width, fl_error *err) {
    size_t name_len = 0;
    int rc = check_record(w, format, raw_len, label, name, height, width, &name_len, err);
    if (rc) return rc;
    if (!name) name = "";
    if (w->opt.schema.compression == FL_COMP_NONE && stored_len != raw_len)
        return fl_error_set(err, FL_E_INVALID, "record %llu (%s): stored %zu bytes != raw %zu in an "
                            "uncompressed dataset", (unsigned long long)w->total, name, stored_len, raw_len);
    return add_stored(w, format, stored, stored_len, raw_len, label, name, name_len, height, width,
                      err);
}

int fl_writer_finish(fl_writer *w, const char *const *class_names, uint32_t num_classes,
                     fl_error *err) {
    int rc = 0;
    fl_tbuf text = {0};
    if (w->failed) {
        rc = fl_error_set(err, w->failed, "%s: cannot finish after an earlier write error", w->partial);
        goto out;
    }
    if (num_classes && w->max_label >= 0 && (uint32_t)w->max_label >= num_classes) {
        rc = fl_error_set(err, FL_E_LABEL, "%s: label %d used but only %u class names given",
                          w->dst, w->max_label, num_classes);
        goto out;
    }
    for (uint32_t i = 0; i < num_classes; i++)
        if (!class_names || !class_names[i]) {
            rc = fl_error_set(err, FL_E_INVALID, "%s: class name %u is NULL", w->dst, i);
            goto out;
        }
    if (w->fd >= 0 && w->shard_count > 0) {
        rc = shard_finish(w, err);
        if (rc) goto out;
    }
    /* <dst> must still be absent or a dataset of ours (it may have changed since open); refused
     * here (every record durable), the run stays resumable */
    fl_writer_dst_info info;
    rc = fl_writer_inspect(w->dst, &info, err);
    if (rc) goto out;
    fl_writer_dst_info_free(&info);
    if (info.dst != FL_DST_NONE && !w->opt.overwrite) {
        rc = fl_error_set(err, -EEXIST, "%s: already exists (overwrite not requested)", w->dst);
        goto out;
    }
    if (info.dst == FL_DST_OTHER) {
        rc = fl_error_set(err, FL_E_INVALID, "cannot replace %s: %s; nothing was changed (the new "
                          "dataset stays in %s: resume to publish it)", w->dst, info.why, w->partial);
        goto out;
    }
    int have_old = info.dst == FL_DST_DATASET;
    fl_manifest m;
    memset(&m, 0, sizeof m);
    m.backend = w->opt.backend;
    m.schema = w->opt.schema;
    m.records = w->total;
    m.classes = (char **)class_names;
    m.num_classes = num_classes;
    m.zstd_level = w->opt.zstd_level;
    m.dict_bytes = w->dict_len;
    m.tool_version = w->tool_version;
    m.options_json = w->options_json;
    m.part_index = w->opt.part_index;
    m.part_count = w->opt.part_count;
    m.has_id = 1;
    memcpy(m.dataset_id, w->dataset_id, FL_DATASET_ID_BYTES);
    fl_manifest_shard lm = {.file = FL_LMDB_DATA_FILE, .records = w->total, .bytes = 0};
    if (w->lmdb) {
        /* "bytes" of data.mdb is only known after the last commit: store the manifest in the
         * environment first, then write manifest.json with the final size. */
        m.shards = &lm;
        m.num_shards = 1;
        if (fl_manifest_write(&text, &m)) {
            rc = fl_error_set(err, -ENOMEM, "%s: out of memory", w->dst);
            goto out;
        }
        rc = fl_lmdb_writer_finish(w->lmdb, text.data, text.len, err);
        w->lmdb = NULL;
        if (rc) goto out;
        char p[PATH_MAX];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", w->partial, FL_LMDB_DATA_FILE);
        lm.bytes = stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
        fl_tbuf_free(&text);
    } else {
        m.shards = w->done;
        m.num_shards = w->num_done;
    }
    if (fl_manifest_write(&text, &m)) {
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory", w->dst);
        goto out;
    }
    rc = write_file_atomic(w->partial, FL_MANIFEST_NAME, text.data, text.len, err);
    if (rc) goto out;
    /* the run's bookkeeping is not part of the dataset */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", w->partial, STATE_FILE);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", w->partial, DICT_FILE);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", w->partial, PLAN_FILE);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", w->partial, ID_FILE);
    unlink(p);
    fl_fsync_dir(w->partial);
    /* publish: exchange with the old dataset (atomic: a reader opening <dst> finds the old or the
     * new one, never neither), or rename where there is none; then delete the old one's files */
    char parent[PATH_MAX];
    parent_of(w->dst, parent, sizeof parent);
    if (have_old) {
        if (rename2(w->partial, w->dst, RENAME_EXCHANGE) == 0) {
            fl_fsync_dir(parent);
            remove_old_dataset(w->partial);
        } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP || errno == EOPNOTSUPP) {
            /* no RENAME_EXCHANGE on this file system: move the old one aside under a name nobody
             * uses (never a user's "<dst>.old"), rename, then delete it */
            char old[PATH_MAX];
            struct stat ost;
            for (unsigned k = 0;; k++) {
                snprintf(old, sizeof old, "%s.old-%ld-%u", w->dst, (long)getpid(), k);
                if (lstat(old, &ost) != 0) break;
            }
            if (rename(w->dst, old)) {
                int e = errno;
                rc = fl_error_set(err, -e, "%s: cannot move the old dataset aside: %s", w->dst,
                                  strerror(e));
                goto out;
            }
            if (rename(w->partial, w->dst)) {
                int e = errno;
                rename(old, w->dst);
                rc = fl_error_set(err, -e, "%s: cannot rename %s into place: %s", w->dst, w->partial,
                                  strerror(e));
                goto out;
            }
            fl_fsync_dir(parent);
            remove_old_dataset(old);
        } else {
            int e = errno;
            rc = fl_error_set(err, -e, "%s: cannot exchange %s with it: %s", w->dst, w->partial,
                              strerror(e));
            goto out;
        }
    } else {
        int r = rename2(w->partial, w->dst, RENAME_NOREPLACE);
        if (r && (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP || errno == EOPNOTSUPP))
            r = rename(w->partial, w->dst);
        if (r) {
            int e = errno;
            rc = e == EEXIST || e == ENOTEMPTY
                     ? fl_error_set(err, -EEXIST, "%s appeared while the dataset was written; it was "
                                    "left alone (the new dataset is in %s)", w->dst, w->partial)
                     : fl_error_set(err, -e, "%s: cannot rename %s into place: %s", w->dst,
                                    w->partial, strerror(e));
            goto out;
        }
        fl_fsync_dir(parent);
    }
out:
    fl_tbuf_free(&text);
    if (w->lmdb) fl_lmdb_writer_abort(w->lmdb);
    w->lmdb = NULL;
    writer_free(w);
    return rc;
}

void fl_writer_abort(fl_writer *w) {
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
        unlink(w->tmp_path);
    }
    if (w->lmdb) fl_lmdb_writer_abort(w->lmdb);
    w->lmdb = NULL;
    writer_free(w);
}
