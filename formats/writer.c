/* writer.c — the writer API (fl_writer.h): builds a dataset under "<dst>.partial/", one shard
 * at a time (.tmp, fsync, rename), resumes from complete shards, hands the finished dataset to
 * writer_publish.c. The LMDB backend's storage lives in lmdb_writer.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "fl_file.h"
#include "writer_impl.h"

/* Write a small file of `dir` durably (fl_file_replace: <name>.tmp, fsync, rename, dir fsync). */
int fl_wr_write_file_atomic(const char *dir, const char *name, const void *data, size_t n,
                            fl_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fl_write_step step;
    int rc = fl_file_replace(path, data, n, 0644, &step);
    if (rc == 0)
        return 0;
    if (step == FL_WRITE_OPEN)
        return fl_error_set(err, rc, "%s.tmp: cannot create: %s", path, strerror(-rc));
    return fl_error_set(err, rc, "%s: cannot %s: %s", path,
                        step == FL_WRITE_NOT_FILE ? "write (not a regular file)"
                                                  : fl_write_step_name(step),
                        strerror(-rc));
}

/* A whole small file: 0, -errno of open, FL_E_FORMAT (cannot stat, over `max` bytes), -ENOMEM,
 * or -EIO (a read error, or it ended early). NUL-terminated. */
int fl_wr_read_small_file(const char *path, size_t max, uint8_t **out, size_t *len)
{
    *out = NULL;
    fl_read_step step;
    int rc = fl_read_file_at(AT_FDCWD, path, max, 0, out, NULL, len, &step);
    if (rc) {
        free(*out);
        *out = NULL;
        *len = 0;
        if (step == FL_READ_STAT || step == FL_READ_TOO_LARGE)
            return FL_E_FORMAT;
        if (step == FL_READ_READ || step == FL_READ_SHRANK)
            return -EIO;
    }
    return rc;
}

static void shard_name(char *out, size_t n, uint32_t k) { snprintf(out, n, "shard-%05u.fls", k); }

/* ---- state (schema of the partial run) --------------------------------------------------- */

static int state_text(const fl_writer *w, fl_tbuf *b)
{
    const fl_schema *s = &w->opt.schema;
    fl_tbuf_printf(b,
                   "{\"backend\": \"%s\", \"encoding\": \"%s\", \"compression\": \"%s\", "
                   "\"channels\": %u, \"height\": %u, \"width\": %u, \"zstd_level\": %d}\n",
                   w->opt.backend == FL_BACKEND_LMDB ? "lmdb" : "shards",
                   fl_encoding_name(s->encoding), fl_compression_name(s->compression), s->channels,
                   s->height, s->width, s->compression == FL_COMP_ZSTD ? w->opt.zstd_level : 0);
    if (w->version >= 3) { /* the classic state stays as it was: older partial runs resume */
        b->len -= 2;       /* "}\n" */
        fl_tbuf_puts(b, ", \"fields\": ");
        fl_fields_write_json(b, w->fields, w->num_fields, 0, ", ");
        fl_tbuf_puts(b, "}\n");
    }
    return b->failed ? -ENOMEM : 0;
}

/* What differs between the state.json a partial run saved and this run's: the first setting or
 * field, for the refusal's message. */
static void state_difference(const uint8_t *old, size_t old_len, const fl_tbuf *now, char *out,
                             size_t n)
{
    fl_jdoc *a = NULL, *b = NULL;
    fl_error e;
    snprintf(out, n, "backend, schema, zstd level or fields");
    if (fl_jparse((const char *)old, old_len, "state", &a, &e) ||
        fl_jparse(now->data, now->len, "state", &b, &e)) {
        fl_jfree(a);
        return;
    }
    static const char *const keys[] = {"backend", "encoding", "compression", "channels",
                                       "height",  "width",    "zstd_level"};
    const fl_jnode *ra = fl_jroot(a), *rb = fl_jroot(b);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const fl_jnode *x = fl_jget(ra, keys[k]), *y = fl_jget(rb, keys[k]);
        if (!x || !y || x->src_end - x->src_begin != y->src_end - y->src_begin ||
            memcmp((const char *)old + x->src_begin, now->data + y->src_begin,
                   x->src_end - x->src_begin)) {
            snprintf(out, n, "%s differs: %.*s in the interrupted run, %.*s now", keys[k],
                     x ? (int)(x->src_end - x->src_begin) : 4,
                     x ? (const char *)old + x->src_begin : "none",
                     y ? (int)(y->src_end - y->src_begin) : 4,
                     y ? now->data + y->src_begin : "none");
            goto out;
        }
    }
    fl_field fa[FL_MAX_FIELDS], fb[FL_MAX_FIELDS];
    uint32_t na = 2, nb = 2;
    const fl_jnode *ja = fl_jget(ra, "fields"), *jb = fl_jget(rb, "fields");
    if (!ja)
        fl_fields_classic(fa);
    if (!jb)
        fl_fields_classic(fb);
    if ((ja && fl_fields_parse_json(ja, "state", fa, &na, &e)) ||
        (jb && fl_fields_parse_json(jb, "state", fb, &nb, &e)))
        goto out;
    for (uint32_t i = 0; i < na || i < nb; i++) {
        if (i >= na || i >= nb) {
            const fl_field *f = i >= na ? &fb[i] : &fa[i];
            snprintf(out, n, "field \"%s\" (%s) %s", f->name, fl_field_type_name(f->type),
                     i >= na ? "is new in this run" : "of the interrupted run is gone");
            goto out;
        }
        if (strcmp(fa[i].name, fb[i].name) || fa[i].type != fb[i].type) {
            snprintf(out, n, "field %u is \"%s\" (%s) in the interrupted run, \"%s\" (%s) now", i,
                     fa[i].name, fl_field_type_name(fa[i].type), fb[i].name,
                     fl_field_type_name(fb[i].type));
            goto out;
        }
        if (memcmp(&fa[i], &fb[i], sizeof fa[i])) {
            snprintf(out, n, "field \"%s\" (%s) has another dtype, shape, codec or `of`",
                     fa[i].name, fl_field_type_name(fa[i].type));
            goto out;
        }
    }
out:
    fl_jfree(a);
    fl_jfree(b);
}

/* ---- dataset id ----------------------------------------------------------------------------- */

/* The dataset's 16-byte random id: read back from ID_FILE when resuming (so shards of the earlier
 * run keep matching), else chosen now and saved there. A partial directory without a readable id
 * (started by a v1 writer) gets a new one, so none of its shards is kept. */
static int load_or_make_id(fl_writer *w, int fresh, fl_error *err)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", w->partial, ID_FILE);
    if (!fresh) {
        uint8_t *t = NULL;
        size_t n = 0;
        if (fl_wr_read_small_file(p, 256, &t, &n) == 0) {
            while (n && (t[n - 1] == '\n' || t[n - 1] == '\r'))
                t[--n] = 0;
            int ok = fl_dataset_id_parse((const char *)t, w->dataset_id) == 0;
            free(t);
            if (ok)
                return 0;
        }
    }
    /* FL_DATASET_ID (32 hex digits) fixes the id, for byte-identical packs across runs (tests,
     * reproducible builds); giving two different datasets the same id defeats the check that
     * keeps their files apart */
    const char *fixed = getenv("FL_DATASET_ID");
    size_t got = fixed && fl_dataset_id_parse(fixed, w->dataset_id) == 0 ? FL_DATASET_ID_BYTES : 0;
    while (got < FL_DATASET_ID_BYTES) {
        ssize_t r = getrandom(w->dataset_id + got, FL_DATASET_ID_BYTES - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            return fl_error_set(err, -e, "%s: cannot choose a dataset id: getrandom: %s",
                                w->partial, strerror(e));
        }
        got += (size_t)r;
    }
    char hex[2 * FL_DATASET_ID_BYTES + 2];
    fl_dataset_id_hex(w->dataset_id, hex);
    strcat(hex, "\n");
    return fl_wr_write_file_atomic(w->partial, ID_FILE, hex, strlen(hex), err);
}

/* ---- shard files ---------------------------------------------------------------------------- */

static int wflush(fl_writer *w)
{
    if (!w->wlen)
        return 0;
    int rc = fl_write_all(w->shard.fd, w->wbuf, w->wlen);
    w->wlen = 0;
    return rc;
}

/* Buffered write of n bytes at w->pos. Whenever the buffer goes to the file, the shard's written
 * chunks are pushed to the disk and out of the page cache (fl_wb_advance), so packing a data set
 * bigger than RAM keeps at most a few chunks of the open shard cached. */
static int wput(fl_writer *w, const void *p, size_t n)
{
    const uint8_t *b = p;
    w->pos += n;
    int rc = 0;
    if (n >= WBUF_SIZE) {
        rc = wflush(w);
        if (!rc)
            rc = fl_write_all(w->shard.fd, b, n);
    } else {
        if (w->wlen + n > WBUF_SIZE)
            rc = wflush(w);
        if (rc)
            return rc;
        memcpy(w->wbuf + w->wlen, b, n);
        w->wlen += n;
        if (w->wlen > n)
            return 0; /* nothing went to the file */
    }
    return rc ? rc : fl_wb_advance(w->shard.fd, &w->wb, w->pos - w->wlen);
}

static int wzeros(fl_writer *w, size_t n)
{
    static const uint8_t z[4096];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        int rc = wput(w, z, k);
        if (rc)
            return rc;
        n -= k;
    }
    return 0;
}

static int io_fail(fl_writer *w, int rc, const char *what, fl_error *err)
{
    w->failed = rc;
    return fl_error_set(err, rc, "%s: %s: %s", w->shard.fd >= 0 ? w->shard.tmp : w->partial, what,
                        strerror(-rc));
}

static int shard_start(fl_writer *w, fl_error *err)
{
    char name[64], path[PATH_MAX];
    shard_name(name, sizeof name, w->shard_no);
    snprintf(path, sizeof path, "%s/%s", w->partial, name);
    /* only a regular file (or nothing) is replaced: fl_file_begin would write into a FIFO or a
     * device in place (and block opening a FIFO), and a shard must become a file of the folder */
    struct stat st;
    int rc = lstat(path, &st) == 0 && !S_ISREG(st.st_mode)
                 ? -EEXIST
                 : fl_file_begin(path, 0644, &w->shard, NULL);
    if (!rc && !w->shard.tmp) { /* in place: the target turned into a non-file meanwhile */
        fl_file_abort(&w->shard);
        rc = -EEXIST;
    }
    if (rc) {
        w->shard.fd = -1;
        w->failed = rc;
        return fl_error_set(err, rc, "%s.tmp: cannot create: %s", path,
                            rc == -EEXIST ? "the shard's name is taken by something not a file"
                                          : strerror(-rc));
    }
    w->pos = 0;
    w->wlen = 0;
    memset(&w->wb, 0, sizeof w->wb);
    w->wb.on = w->drop_cache;
    w->shard_first = w->total;
    w->shard_count = 0;
    w->index.len = 0;
    w->names.len = 0;
    memset(w->shard_max, 0, sizeof w->shard_max);
    rc = wzeros(w, FL_SHARD_HEADER_SIZE); /* the header is written last, at offset 0 */
    if (!rc && w->dict_len)
        rc = wput(w, w->dict, w->dict_len);
    w->data_offset = (w->pos + FL_SHARD_ALIGN - 1) / FL_SHARD_ALIGN * FL_SHARD_ALIGN;
    if (!rc)
        rc = wzeros(w, (size_t)(w->data_offset - w->pos));
    if (rc)
        return io_fail(w, rc, "write failed", err);
    return 0;
}

int fl_shard_compress_index = 1;

int fl_wr_shard_finish(fl_writer *w, fl_error *err)
{
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
    fl_wr32(foot + FLF_VERSION, w->version);
    fl_wr32(foot + FLF_FLAGS, flags);
    fl_wr32(foot + FLF_FOOTER_CRC, fl_crc32c(0, foot, FLF_FOOTER_CRC));
    uint8_t *hdr = calloc(1, FL_SHARD_HEADER_SIZE);
    if (!hdr) {
        free(zblock);
        return io_fail(w, -ENOMEM, "out of memory", err);
    }
    memcpy(hdr + FLH_MAGIC, FL_SHARD_MAGIC, 8);
    fl_wr32(hdr + FLH_VERSION, w->version);
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
    for (uint32_t k = 0; w->version >= 3 && k < w->num_fields; k++)
        fl_wr32(hdr + FLH_FIELD_MAX + 4 * k, w->shard_max[k]);
    fl_wr32(hdr + FLH_HEADER_CRC, fl_crc32c(0, hdr, FL_SHARD_HEADER_SIZE));
    int rc;
    if (block) {
        rc = wput(w, block, block_len);
    } else {
        rc = wput(w, w->index.p, w->index.len);
        if (!rc)
            rc = wput(w, w->names.p, w->names.len);
    }
    free(zblock);
    if (!rc)
        rc = wput(w, foot, sizeof foot);
    if (!rc)
        rc = wflush(w);
    if (!rc && pwrite(w->shard.fd, hdr, FL_SHARD_HEADER_SIZE, 0) != (ssize_t)FL_SHARD_HEADER_SIZE)
        rc = errno ? -errno : -EIO;
    free(hdr);
    /* durable: none of its pages is dirty, drop them all (the reader reads it from the disk);
     * the commit's own fsync then finds nothing to write */
    if (!rc && w->drop_cache && fsync(w->shard.fd))
        rc = -errno;
    if (rc)
        return io_fail(w, rc, "write failed", err);
    if (w->drop_cache)
        fl_cache_drop_file(w->shard.fd);
    char name[64], tmp[PATH_MAX];
    shard_name(name, sizeof name, w->shard_no);
    snprintf(tmp, sizeof tmp, "%s", w->shard.tmp);
    fl_write_step step;
    rc = fl_file_commit(&w->shard, &step); /* fsync, close, rename, directory fsync */
    if (rc) {
        w->failed = rc;
        return fl_error_set(err, rc, "%s: %s failed: %s",
                            step == FL_WRITE_SYNC_DIR ? w->partial : tmp,
                            step == FL_WRITE_RENAME     ? "rename"
                            : step == FL_WRITE_SYNC_DIR ? "directory fsync"
                                                        : "write",
                            strerror(-rc));
    }
    if (w->num_done == w->cap_done) {
        uint32_t cap = w->cap_done ? w->cap_done * 2 : 16;
        fl_manifest_shard *d = realloc(w->done, cap * sizeof *d);
        if (!d)
            return io_fail(w, -ENOMEM, "out of memory", err);
        w->done = d;
        w->cap_done = cap;
    }
    fl_manifest_shard *d = &w->done[w->num_done];
    d->file = strdup(name);
    if (!d->file)
        return io_fail(w, -ENOMEM, "out of memory", err);
    d->records = w->shard_count;
    d->bytes = file_size;
    w->num_done++;
    w->shard_no++;
    return 0;
}

/* ---- resume --------------------------------------------------------------------------------- */

static int add_done(fl_writer *w, const char *name, uint64_t records, uint64_t bytes)
{
    if (w->num_done == w->cap_done) {
        uint32_t cap = w->cap_done ? w->cap_done * 2 : 16;
        fl_manifest_shard *d = realloc(w->done, cap * sizeof *d);
        if (!d)
            return -ENOMEM;
        w->done = d;
        w->cap_done = cap;
    }
    w->done[w->num_done].file = strdup(name);
    if (!w->done[w->num_done].file)
        return -ENOMEM;
    w->done[w->num_done].records = records;
    w->done[w->num_done].bytes = bytes;
    w->num_done++;
    return 0;
}

/* Keep the complete shards 0..k-1 of an earlier run; delete the first bad one, everything after it,
 * and leftover .tmp files. */
static int resume_shards(fl_writer *w, fl_error *err)
{
    char name[64], path[PATH_MAX];
    int stop = 0;
    for (uint32_t k = 0;; k++) {
        shard_name(name, sizeof name, k);
        snprintf(path, sizeof path, "%s/%s", w->partial, name);
        if (access(path, F_OK) != 0)
            break;
        if (!stop) {
            fl_shard_view v;
            fl_error e;
            int rc = fl_shard_open(path, &v, &e);
            if (rc == 0) {
                /* a shard of another run (another id, or written by a v1 writer) is redone */
                int ok = v.number == k && v.first_record == w->total && v.version == w->version &&
                         memcmp(v.dataset_id, w->dataset_id, FL_DATASET_ID_BYTES) == 0 &&
                         v.schema.encoding == w->opt.schema.encoding &&
                         v.schema.compression == w->opt.schema.compression &&
                         v.schema.channels == w->opt.schema.channels &&
                         v.schema.height == w->opt.schema.height &&
                         v.schema.width == w->opt.schema.width && v.dict_len == w->dict_len &&
                         (!w->dict_len || memcmp(v.dict, w->dict, w->dict_len) == 0);
                if (ok) {
                    for (uint64_t i = 0; i < v.count; i++) {
                        fl_record_info r;
                        fl_shard_entry(&v, i, &r, NULL, NULL);
                        if (r.label > w->max_label)
                            w->max_label = r.label;
                    }
                    for (uint32_t f = 0; f < w->num_fields; f++)
                        if (v.field_max[f] > w->field_max[f])
                            w->field_max[f] = v.field_max[f];
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

/* ---- API ------------------------------------------------------------------------------------ */

void fl_wr_free(fl_writer *w)
{
    if (!w)
        return;
    if (w->shard.fd >= 0)
        fl_file_abort(&w->shard); /* an open shard's records are not durable */
    free(w->dst);
    free(w->partial);
    free(w->options_json);
    free(w->tool_version);
    free(w->dict);
    fl_compressor_free(w->comp);
    free(w->cbuf);
    for (uint32_t i = 0; i < w->num_done; i++)
        free(w->done[i].file);
    free(w->done);
    free(w->index.p);
    free(w->names.p);
    free(w->wbuf);
    fl_writer_lock_release(w->own_lock);
    free(w);
}

/* The caller's options, before anything is touched: backend, schema, fields, dictionary, part,
 * options JSON. */
static int check_options(const char *dst, const fl_writer_options *opt, fl_error *err)
{
    if (!dst || !*dst || !opt)
        return fl_error_set(err, FL_E_INVALID, "writer: no destination");
    if (opt->backend != FL_BACKEND_SHARDS && opt->backend != FL_BACKEND_LMDB)
        return fl_error_set(err, FL_E_INVALID, "%s: unknown backend %d", dst, (int)opt->backend);
    if (!fl_schema_valid(&opt->schema))
        return fl_error_set(err, FL_E_INVALID, "%s: invalid schema", dst);
    if (opt->fields || opt->num_fields) {
        int rc = fl_fields_validate(opt->fields, opt->num_fields, err);
        if (rc)
            return fl_error_prefix(err, "%s", dst);
        /* the loaders' batches carry each variable field's per-record counts as NAME_count
         * (fastload.FieldsBatch, fastload.torch): a field of that name would replace them */
        for (uint32_t i = 0; i < opt->num_fields; i++) {
            const fl_field *v = &opt->fields[i];
            if (!fl_field_is_variable(v->type))
                continue;
            for (uint32_t j = 0; j < opt->num_fields; j++) {
                const char *n = opt->fields[j].name;
                size_t len = strlen(v->name);
                if (!strncmp(n, v->name, len) && !strcmp(n + len, "_count"))
                    return fl_error_set(err, FL_E_INVALID,
                                        "%s: field \"%s\" is the name the loaders give field "
                                        "\"%s\"'s per-record counts (%s, a variable field): "
                                        "choose another name",
                                        dst, n, v->name, fl_field_type_name(v->type));
            }
        }
        int image = fl_fields_image_index(opt->fields, opt->num_fields) >= 0;
        if (image != (opt->schema.encoding != FL_ENC_NONE))
            return fl_error_set(err, FL_E_INVALID, "%s: %s", dst,
                                image ? "an image field, but the schema encoding is none"
                                      : "no image field: the schema encoding must be none");
    } else if (opt->schema.encoding == FL_ENC_NONE) {
        return fl_error_set(err, FL_E_INVALID, "%s: schema encoding none needs fields (no image)",
                            dst);
    }
    if (opt->zstd_dict_len > FL_MAX_DICT_BYTES)
        return fl_error_set(err, FL_E_INVALID, "%s: zstd dictionary over %u bytes", dst,
                            FL_MAX_DICT_BYTES);
    if (opt->part_count ? opt->part_index >= opt->part_count : opt->part_index != 0)
        return fl_error_set(err, FL_E_INVALID, "%s: bad part %u/%u", dst, opt->part_index,
                            opt->part_count);
    if (opt->options_json && opt->options_json[0]) {
        fl_jdoc *doc;
        int rc = fl_jparse(opt->options_json, strlen(opt->options_json), "options", &doc, err);
        if (rc)
            return rc;
        int is_obj = fl_jroot(doc)->type == FL_J_OBJECT;
        fl_jfree(doc);
        if (!is_obj)
            return fl_error_set(err, FL_E_INVALID, "%s: options must be a JSON object", dst);
    }
    return 0;
}

/* Reuse <dst>.partial (resume: same state.json and plan) or start it afresh (cleared, then the
 * dictionary, plan and state written). *fresh says which. */
static int start_partial(fl_writer *w, const fl_writer_options *opt, const fl_tbuf *state,
                         int *fresh_out, fl_error *err)
{
    const char *dst = w->dst;
    struct stat st;
    int rc = 0;
    int fresh = 1;
    if (opt->resume && stat(w->partial, &st) == 0 && S_ISDIR(st.st_mode)) {
        char p[PATH_MAX];
        uint8_t *old = NULL;
        size_t old_len = 0;
        snprintf(p, sizeof p, "%s/%s", w->partial, STATE_FILE);
        if (fl_wr_read_small_file(p, 1 << 16, &old, &old_len) == 0) {
            int same = old_len == state->len && memcmp(old, state->data, old_len) == 0;
            char why[512];
            if (!same)
                state_difference(old, old_len, state, why, sizeof why);
            free(old);
            if (!same) {
                rc = fl_error_set(err, FL_E_INVALID,
                                  "%s: cannot resume: the partial dataset was started with other "
                                  "settings (%s); remove it or do not resume",
                                  w->partial, why);
                return rc;
            }
            if (opt->plan) {
                uint8_t *saved = NULL;
                size_t saved_len = 0;
                snprintf(p, sizeof p, "%s/%s", w->partial, PLAN_FILE);
                int prc = fl_wr_read_small_file(p, (size_t)1 << 30, &saved, &saved_len);
                int same_plan = prc == 0 && saved_len == opt->plan_len &&
                                memcmp(saved, opt->plan, saved_len) == 0;
                free(saved);
                if (!same_plan) {
                    rc = fl_error_set(err, FL_E_INVALID,
                                      "%s: cannot resume: %s; remove it or start over", w->partial,
                                      prc == -ENOENT
                                          ? "it records no plan (started by an older version), so "
                                            "its inputs cannot be checked"
                                          : "it was started for other inputs or options");
                    return rc;
                }
            }
            fresh = 0;
            snprintf(p, sizeof p, "%s/%s", w->partial, DICT_FILE);
            int drc = fl_wr_read_small_file(p, FL_MAX_DICT_BYTES, &w->dict, &w->dict_len);
            if (drc && drc != -ENOENT) {
                rc = fl_error_set(err, FL_E_FORMAT, "%s: unreadable saved dictionary", p);
                return rc;
            }
            if (drc == 0 && w->dict_len == 0) {
                free(w->dict);
                w->dict = NULL;
            }
        }
    }
    if (fresh) {
        /* start over: an unusable or unwanted partial directory is ours to clear */
        rc = fl_wr_clear_partial(w->partial); /* every file in it is ours: checked above */
        if (rc && rc != -ENOENT) {
            rc = fl_error_set(err, rc, "%s: cannot clear: %s", w->partial, strerror(-rc));
            return rc;
        }
        if (mkdir(w->partial, 0755)) {
            int e = errno;
            if (e == ENOENT || e == ENOTDIR)
                rc = fl_wr_parent_error(w->dst, e, w->partial, err);
            else
                rc = fl_error_set(err, -e, "%s: cannot create: %s", w->partial, strerror(e));
            return rc;
        }
        if (opt->schema.compression == FL_COMP_ZSTD && opt->zstd_dict && opt->zstd_dict_len) {
            w->dict = malloc(opt->zstd_dict_len);
            if (!w->dict) {
                rc = fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
                return rc;
            }
            memcpy(w->dict, opt->zstd_dict, opt->zstd_dict_len);
            w->dict_len = opt->zstd_dict_len;
        }
        /* the dictionary first, then the state that says the directory is resumable */
        rc = fl_wr_write_file_atomic(w->partial, DICT_FILE, w->dict ? (const void *)w->dict : "",
                                     w->dict_len, err);
        if (!rc && opt->plan)
            rc = fl_wr_write_file_atomic(w->partial, PLAN_FILE, opt->plan, opt->plan_len, err);
        if (!rc)
            rc = fl_wr_write_file_atomic(w->partial, STATE_FILE, state->data, state->len, err);
        if (rc)
            return rc;
    }
    *fresh_out = fresh;
    return 0;
}

int fl_writer_open(const char *dst, const fl_writer_options *opt, fl_writer **out, fl_error *err)
{
    *out = NULL;
    int crc = check_options(dst, opt, err);
    if (crc)
        return crc;
    char *ndst =
        NULL; /* "out/" names the same dataset as "out"; the partial dir is "out.partial" */
    int nrc = fl_wr_dst_normalise(dst, &ndst, err);
    if (nrc)
        return nrc;

    fl_writer *w = calloc(1, sizeof *w);
    if (!w) {
        free(ndst);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
    }
    w->shard.fd = -1;
    w->opt = *opt;
    w->max_label = -1;
    w->drop_cache = fl_cache_drop_enabled();
    if (!w->opt.shard_bytes)
        w->opt.shard_bytes = DEFAULT_SHARD_BYTES;
    w->dst = ndst;
    w->partial = malloc(strlen(ndst) + 16);
    w->options_json = strdup(opt->options_json ? opt->options_json : "");
    w->tool_version = strdup(opt->tool_version ? opt->tool_version : "");
    w->wbuf = malloc(WBUF_SIZE);
    if (!w->dst || !w->partial || !w->options_json || !w->tool_version || !w->wbuf) {
        fl_wr_free(w);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
    }
    w->opt.options_json = w->options_json;
    w->opt.tool_version = w->tool_version;
    if (opt->num_fields && !fl_fields_is_classic(opt->fields, opt->num_fields)) {
        w->num_fields = opt->num_fields;
        memcpy(w->fields, opt->fields, opt->num_fields * sizeof *opt->fields);
        for (uint32_t f = 0; f < w->num_fields; f++)
            w->fields[f].max_count = 0;
        w->version = FL_FORMAT_VERSION;
    } else {
        w->num_fields = 2;
        fl_fields_classic(w->fields);
        w->version = FL_FORMAT_VERSION_CLASSIC;
    }
    w->opt.fields = w->fields;
    w->opt.num_fields = w->num_fields;
    w->label_field = fl_fields_label_index(w->fields, w->num_fields);
    w->min_fields = w->version >= 3 ? fl_fields_min_block(w->fields, w->num_fields) : 0;
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
        if (rc)
            goto fail;
    }
    {
        fl_writer_dst_info info;
        rc = fl_writer_inspect(w->dst, &info, err);
        if (rc)
            goto fail;
        fl_writer_dst_info_free(&info);
        if (info.dst != FL_DST_NONE && !opt->overwrite) {
            rc = fl_error_set(err, -EEXIST, "%s: already exists (overwrite not requested)", w->dst);
            goto fail;
        }
        if (info.dst == FL_DST_OTHER) {
            rc = fl_error_set(err, FL_E_INVALID,
                              "cannot replace %s: %s; only a dataset this tool "
                              "wrote is replaced, nothing was changed",
                              w->dst, info.why);
            goto fail;
        }
        if (info.partial == FL_PARTIAL_OTHER) {
            rc = fl_error_set(err, FL_E_INVALID,
                              "%s: it is not a partial dataset of this tool; "
                              "nothing was changed",
                              info.partial_why);
            goto fail;
        }
    }
    if (state_text(w, &state)) {
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory", dst);
        goto fail;
    }
    int fresh = 1;
    rc = start_partial(w, opt, &state, &fresh, err);
    if (rc)
        goto fail;
    rc = load_or_make_id(w, fresh, err);
    if (rc)
        goto fail;
    if (opt->schema.compression == FL_COMP_ZSTD) {
        rc = fl_compressor_create(opt->zstd_level, w->dict, w->dict_len, &w->comp, err);
        if (rc)
            goto fail;
    }
    if (opt->backend == FL_BACKEND_LMDB) {
        uint64_t existing = 0;
        rc = fl_lmdb_writer_open(w->partial, !fresh, w->version, w->dataset_id, w->dict,
                                 w->dict_len, &w->lmdb, &existing, err);
        if (rc == 0)
            rc = fl_lmdb_writer_track_max(w->lmdb, w->field_max,
                                          w->version >= 3 ? w->num_fields : 0, err);
        if (rc)
            goto fail;
        w->total = w->resume_count = existing;
        /* labels of resumed records are checked by the reader; track the max from here on */
    } else if (!fresh) {
        rc = resume_shards(w, err);
        if (rc)
            goto fail;
    }
    fl_tbuf_free(&state);
    *out = w;
    return 0;
fail:
    fl_tbuf_free(&state);
    fl_wr_free(w);
    return rc;
}

uint64_t fl_writer_resume_count(const fl_writer *w) { return w->resume_count; }

const void *fl_writer_dictionary(const fl_writer *w, size_t *len)
{
    if (len)
        *len = w->dict_len;
    return w->dict_len ? w->dict : NULL;
}

static int check_record(fl_writer *w, fl_encoding format, size_t raw_len, int32_t label,
                        const char *name, uint32_t height, uint32_t width, size_t *name_len,
                        fl_error *err)
{
    if (w->failed)
        return fl_error_set(err, w->failed, "%s: writer stopped after an earlier error",
                            w->partial);
    const fl_schema *s = &w->opt.schema;
    if (!name)
        name = "";
    if (!fl_format_allowed(s->encoding, (uint32_t)format))
        return fl_error_set(
            err, FL_E_INVALID,
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
    if (s->encoding == FL_ENC_NONE && (raw_len || height || width))
        return fl_error_set(err, FL_E_INVALID,
                            "record %llu (%s): a payload or image size in a "
                            "dataset without images",
                            (unsigned long long)w->total, name);
    return 0;
}

/* The record's fields block: parsed as a reader will (fl_fields_parse), checked against the image
 * (boxes inside, masks of its size); counts[] receives each field's count. Classic datasets take
 * no block. */
static int check_fields(const fl_writer *w, const void *block, size_t len, uint32_t height,
                        uint32_t width, const char *name, uint32_t *counts, fl_error *err)
{
    if (w->version < 3) {
        if (len)
            return fl_error_set(err, FL_E_INVALID,
                                "record %llu (%s): a fields block in a dataset "
                                "of image and label only",
                                (unsigned long long)w->total, name);
        return 0;
    }
    if (len && !block)
        return fl_error_set(err, FL_E_INVALID, "record %llu (%s): no fields block data",
                            (unsigned long long)w->total, name);
    fl_field_value v[FL_MAX_FIELDS];
    char what[96];
    snprintf(what, sizeof what, "record %llu (%.40s)", (unsigned long long)w->total, name);
    fl_error e;
    int rc = fl_fields_parse(w->fields, w->num_fields, block, len, v, what, &e);
    if (rc == 0)
        rc = fl_fields_check_record(w->fields, w->num_fields, v, width, height, what, &e);
    if (rc)
        return fl_error_set(err, FL_E_INVALID, "%s", e.msg);
    for (uint32_t f = 0; f < w->num_fields; f++)
        counts[f] = v[f].count;
    return 0;
}

/* The record's counts into the dataset's and the open shard's largest ones (before it is stored:
 * an LMDB batch committed by this add records them with it). */
static void note_counts(fl_writer *w, const uint32_t *counts)
{
    for (uint32_t f = 0; w->version >= 3 && f < w->num_fields; f++) {
        if (!fl_field_is_variable(w->fields[f].type))
            continue;
        if (counts[f] > w->field_max[f])
            w->field_max[f] = counts[f];
        if (counts[f] > w->shard_max[f])
            w->shard_max[f] = counts[f];
    }
}

/* A record whose stored payload and fields block are checked: its bytes (payload then block, one
 * CRC32C) to LMDB or the open shard. */
static int add_stored(fl_writer *w, fl_encoding format, const void *stored, size_t stored_len,
                      size_t raw_len, const void *block, size_t block_len, int32_t label,
                      const char *name, size_t name_len, uint32_t height, uint32_t width,
                      const uint32_t *counts, fl_error *err)
{
    if (stored_len > FL_MAX_RECORD_BYTES || block_len > FL_MAX_RECORD_BYTES - stored_len)
        return fl_error_set(err, FL_E_INVALID, "record %llu (%s): stored size over 1 GiB",
                            (unsigned long long)w->total, name);
    uint32_t crc = stored_len ? fl_crc32c(0, stored, stored_len) : 0;
    if (block_len)
        crc = fl_crc32c(crc, block, block_len);
    int rc;
    if (w->label_field < 0)
        label = 0; /* no label field: the slot holds 0 */
    if (w->lmdb) {
        note_counts(w, counts);
        rc = fl_lmdb_writer_add(w->lmdb, w->total, format, stored, stored_len, block, block_len,
                                (uint32_t)raw_len, label, crc, name, name_len, height, width, err);
        if (rc) {
            w->failed = rc;
            return rc;
        }
    } else {
        size_t total = stored_len + block_len;
        if (w->shard.fd >= 0 && w->shard_count > 0 &&
            (w->pos + total > w->opt.shard_bytes || w->names.len + name_len > (1u << 30))) {
            rc = fl_wr_shard_finish(w, err);
            if (rc)
                return rc;
        }
        if (w->shard.fd < 0) {
            rc = shard_start(w, err);
            if (rc)
                return rc;
        }
        note_counts(w, counts);
        uint8_t e[FL_SHARD_INDEX_ENTRY];
        fl_wr64(e + FLI_OFFSET, w->pos);
        fl_wr32(e + FLI_STORED_LEN, (uint32_t)total);
        fl_wr32(e + FLI_RAW_LEN, (uint32_t)raw_len);
        fl_wr32(e + FLI_LABEL, (uint32_t)label);
        fl_wr32(e + FLI_CRC, crc);
        fl_wr32(e + FLI_HEIGHT, height);
        fl_wr32(e + FLI_WIDTH, width);
        fl_wr32(e + FLI_NAME_OFFSET, (uint32_t)w->names.len);
        fl_wr32(e + FLI_NAME_LEN, (uint32_t)name_len);
        fl_wr32(e + FLI_FORMAT, (uint32_t)format);
        fl_wr32(e + FLI_FIELDS_LEN, (uint32_t)block_len); /* version 2: reserved, 0 */
        if (gb_append(&w->index, e, sizeof e) || gb_append(&w->names, name, name_len))
            return io_fail(w, -ENOMEM, "out of memory", err);
        rc = stored_len ? wput(w, stored, stored_len) : 0; /* none: no payload at all */
        if (!rc && block_len)
            rc = wput(w, block, block_len);
        if (rc)
            return io_fail(w, rc, "write failed", err);
        w->shard_count++;
    }
    if (label > w->max_label)
        w->max_label = label;
    w->total++;
    return 0;
}

int fl_writer_add_record(fl_writer *w, const fl_record_in *r, fl_error *err)
{
    if (!r)
        return fl_error_set(err, FL_E_INVALID, "%s: no record", w->partial);
    const char *name = r->name ? r->name : "";
    size_t raw_len = r->compressed ? r->raw_len : r->stored_len;
    size_t name_len = 0;
    int rc =
        check_record(w, r->format, raw_len, r->label, name, r->height, r->width, &name_len, err);
    if (rc)
        return rc;
    uint32_t counts[FL_MAX_FIELDS] = {0};
    rc = check_fields(w, r->fields_block, r->fields_len, r->height, r->width, name, counts, err);
    if (rc)
        return rc;
    if (r->stored_len && !r->stored)
        return fl_error_set(err, FL_E_INVALID, "record %llu (%s): no payload data",
                            (unsigned long long)w->total, name);
    if (r->compressed && w->opt.schema.compression != FL_COMP_ZSTD)
        return fl_error_set(err, FL_E_INVALID,
                            "record %llu (%s): a compressed payload in an "
                            "uncompressed dataset",
                            (unsigned long long)w->total, name);
    const void *stored = r->stored;
    size_t stored_len = r->stored_len;
    if (w->comp && !r->compressed) {
        size_t bound = fl_compress_bound(stored_len);
        if (bound > w->cbuf_cap) {
            uint8_t *b = realloc(w->cbuf, bound);
            if (!b)
                return fl_error_set(err, -ENOMEM, "record %llu: out of memory",
                                    (unsigned long long)w->total);
            w->cbuf = b;
            w->cbuf_cap = bound;
        }
        rc = fl_compressor_compress(w->comp, r->stored, r->stored_len, w->cbuf, w->cbuf_cap,
                                    &stored_len, err);
        if (rc)
            return fl_error_prefix(err, "record %llu (%s)", (unsigned long long)w->total, name);
        stored = w->cbuf;
    }
    return add_stored(w, r->format, stored, stored_len, raw_len, r->fields_block, r->fields_len,
                      r->label, name, name_len, r->height, r->width, counts, err);
}

int fl_writer_add(fl_writer *w, const void *payload, size_t len, int32_t label, const char *name,
                  uint32_t height, uint32_t width, fl_error *err)
{
    return fl_writer_add_as(w, w->opt.schema.encoding, payload, len, label, name, height, width,
                            err);
}

int fl_writer_add_as(fl_writer *w, fl_encoding format, const void *payload, size_t len,
                     int32_t label, const char *name, uint32_t height, uint32_t width,
                     fl_error *err)
{
    fl_record_in r = {.format = format,
                      .stored = payload,
                      .stored_len = len,
                      .raw_len = len,
                      .label = label,
                      .name = name,
                      .height = height,
                      .width = width};
    return fl_writer_add_record(w, &r, err);
}

int fl_writer_add_stored(fl_writer *w, const void *stored, size_t stored_len, size_t raw_len,
                         int32_t label, const char *name, uint32_t height, uint32_t width,
                         fl_error *err)
{
    return fl_writer_add_stored_as(w, w->opt.schema.encoding, stored, stored_len, raw_len, label,
                                   name, height, width, err);
}

int fl_writer_add_stored_as(fl_writer *w, fl_encoding format, const void *stored, size_t stored_len,
                            size_t raw_len, int32_t label, const char *name, uint32_t height,
                            uint32_t width, fl_error *err)
{
    if (w->opt.schema.compression == FL_COMP_NONE && stored_len != raw_len && !w->failed)
        return fl_error_set(err, FL_E_INVALID,
                            "record %llu (%s): stored %zu bytes != raw %zu in an "
                            "uncompressed dataset",
                            (unsigned long long)w->total, name ? name : "", stored_len, raw_len);
    fl_record_in r = {.format = format,
                      .stored = stored,
                      .stored_len = stored_len,
                      .raw_len = raw_len,
                      .compressed = w->opt.schema.compression == FL_COMP_ZSTD,
                      .label = label,
                      .name = name,
                      .height = height,
                      .width = width};
    return fl_writer_add_record(w, &r, err);
}

void fl_writer_abort(fl_writer *w)
{
    if (!w)
        return;
    if (w->shard.fd >= 0)
        fl_file_abort(&w->shard);
    if (w->lmdb)
        fl_lmdb_writer_abort(w->lmdb);
    w->lmdb = NULL;
    fl_wr_free(w);
}
