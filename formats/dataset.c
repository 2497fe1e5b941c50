/* dataset.c — the reader API (fl_dataset.h): opens a dataset directory through its manifest,
 * validates every shard (or the LMDB environment), and serves records zero-copy with CRC32C checks
 * and pooled zstd decompression. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "fl_dataset_impl.h"
#include "fl_file.h"
#include "fl_lmdb.h"
#include "fl_mapped_guard.h"

#define FL_MAX_MANIFEST_BYTES (256u << 20)

static char *path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 2);
    if (!p)
        return NULL;
    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
    return p;
}

/* Read a whole small file `name` of directory `dirfd` into a NUL-terminated buffer; `shown` names
 * it in messages. */
static int read_file_at(int dirfd, const char *name, const char *shown, size_t max, char **out,
                        size_t *out_len, fl_error *err)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    fl_read_step step;
    int rc = fl_read_file_at(dirfd, name, max, FL_READ_REGULAR | FL_READ_NONBLOCK, &buf, NULL, &n,
                             &step);
    *out = NULL;
    if (rc)
        free(buf);
    switch (step) {
    case FL_READ_DONE: break;
    case FL_READ_OPEN: return fl_error_set(err, rc, "%s: cannot open: %s", shown, strerror(-rc));
    case FL_READ_STAT:
    case FL_READ_NOT_REGULAR:
        return fl_error_set(err, FL_E_FORMAT, "%s: not a regular file", shown);
    case FL_READ_TOO_LARGE:
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: %lld bytes, larger than the %zu bytes its folder "
                            "can justify (16 MiB + 1 KiB a file): damaged or crafted",
                            shown, (long long)n, max);
    case FL_READ_ALLOC: return fl_error_set(err, -ENOMEM, "%s: out of memory", shown);
    case FL_READ_READ: return fl_error_set(err, rc, "%s: read failed: %s", shown, strerror(-rc));
    case FL_READ_SHRANK:
        return fl_error_set(err, FL_E_TRUNCATED, "%s: read failed: %s", shown,
                            "file shrank while reading");
    }
    *out = (char *)buf;
    *out_len = n;
    return 0;
}

/* The largest manifest a folder can justify: 16 MiB (a long class list) plus 1 KiB for each
 * entry of the folder (a shard is listed in under 100 bytes). A manifest declaring millions of
 * shards that are not there is refused before it is parsed (parsing costs about 12x its size). */
static size_t manifest_limit(int dir_fd)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return FL_MAX_MANIFEST_BYTES;
    }
    uint64_t entries = 0;
    while (readdir(d) && entries < FL_MAX_MANIFEST_BYTES / 1024)
        entries++;
    closedir(d);
    uint64_t lim = (16u << 20) + entries * 1024;
    return lim < FL_MAX_MANIFEST_BYTES ? (size_t)lim : FL_MAX_MANIFEST_BYTES;
}

/* ---- directories held during open ------------------------------------------------------------
 * Every file of a dataset is opened relative to its directory's fd, so one open sees one
 * directory, whatever renames happen meanwhile (pack --force publishing a new dataset). The
 * directories are remembered with their paths: when the open fails, a path that no longer leads
 * to the directory we hold (or a directory that was deleted) means the dataset was replaced while
 * we read it, and the open is retried instead of reporting damage that is not there. */

typedef struct fl_held_dir {
    char *path;
    int fd;
} fl_held_dir;

typedef struct fl_open_ctx {
    fl_held_dir *dirs;
    uint32_t n, cap;
} fl_open_ctx;

/* Open directory `name` relative to `at` (AT_FDCWD for an absolute path) and hold it.
 * Returns the fd, or -errno. */
static int hold_dir(fl_open_ctx *c, int at, const char *name, const char *path)
{
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 4;
        fl_held_dir *d = realloc(c->dirs, cap * sizeof *d);
        if (!d)
            return -ENOMEM;
        c->dirs = d;
        c->cap = cap;
    }
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        free(p);
        return -e;
    }
    c->dirs[c->n].path = p;
    c->dirs[c->n].fd = fd;
    c->n++;
    return fd;
}

static void release_dirs(fl_open_ctx *c)
{
    for (uint32_t i = 0; i < c->n; i++) {
        close(c->dirs[i].fd);
        free(c->dirs[i].path);
    }
    free(c->dirs);
    memset(c, 0, sizeof *c);
}

/* Was any held directory renamed away, replaced or deleted since we opened it? */
static int dirs_replaced(const fl_open_ctx *c)
{
    for (uint32_t i = 0; i < c->n; i++) {
        struct stat a, b;
        if (fstat(c->dirs[i].fd, &a) != 0 || a.st_nlink == 0)
            return 1;
        if (stat(c->dirs[i].path, &b) != 0)
            return 1;
        if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
            return 1;
    }
    return 0;
}

void fl_dataset_close(fl_dataset *ds)
{
    if (!ds)
        return;
    if (ds->lmdb)
        fl_lmdb_reader_close(ds);
    if (ds->lmdb_fd >= 0)
        close(ds->lmdb_fd);
    ZSTD_freeDDict(ds->lmdb_ddict);
    fl_rindex_free(&ds->ix);
    free(ds->label_values);
    for (uint32_t i = 0; ds->shard_index && i < ds->num_open; i++)
        fl_shard_index_free(&ds->shards[i], ds->shard_index[i]);
    free(ds->shard_index);
    for (uint32_t i = 0; ds->shards && i < ds->num_open; i++)
        fl_shard_close(&ds->shards[i]);
    free(ds->shards);
    free(ds->shard_first);
    free(ds->shard_ddict);
    for (uint32_t i = 0; i < ds->num_ddicts; i++)
        ZSTD_freeDDict(ds->ddicts_owned[i]);
    free(ds->ddicts_owned);
    for (uint32_t i = 0; ds->file_paths && i < ds->num_files; i++)
        free(ds->file_paths[i]);
    free(ds->file_paths);
    for (uint32_t i = 0; i < ds->num_classes; i++)
        free(ds->classes[i]);
    free(ds->classes);
    free(ds->manifest_text);
    fl_dctx_pool_destroy(&ds->pool);
    free(ds->dir);
    free(ds);
}

/* The schema's fields, the format version and where the image and label are. */
static void set_fields(fl_dataset *ds, const fl_manifest *m)
{
    ds->version = m->version;
    ds->num_fields = m->num_fields;
    memcpy(ds->fields, m->fields, sizeof ds->fields);
    ds->label_field = fl_fields_label_index(m->fields, m->num_fields);
    ds->image_field = fl_fields_image_index(m->fields, m->num_fields);
}

static int same_schema(const fl_schema *a, const fl_schema *b)
{
    return a->encoding == b->encoding && a->compression == b->compression &&
           a->channels == b->channels && a->height == b->height && a->width == b->width;
}

/* Is shard file v the one manifest `om` lists as entry `k`: same format version, same dataset id
 * (v2), same size. A shard copied in from another dataset fails here even when its records fit. */
static int shard_matches(const fl_shard_view *v, const fl_manifest *om, uint32_t k, fl_error *err)
{
    if (v->version != om->version)
        return fl_error_set(
            err, FL_E_FORMAT,
            "%s: shard format version %u, the manifest says %u: it belongs to another "
            "dataset",
            v->path, v->version, om->version);
    if (om->has_id && memcmp(v->dataset_id, om->dataset_id, FL_DATASET_ID_BYTES) != 0) {
        char got[2 * FL_DATASET_ID_BYTES + 1], want[2 * FL_DATASET_ID_BYTES + 1];
        fl_dataset_id_hex(v->dataset_id, got);
        fl_dataset_id_hex(om->dataset_id, want);
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: belongs to another dataset (id %s, the manifest's is %s)", v->path,
                            got, want);
    }
    if (v->size != om->shards[k].bytes)
        return fl_error_set(err, FL_E_FORMAT, "%s: %llu bytes, the manifest says %llu", v->path,
                            (unsigned long long)v->size, (unsigned long long)om->shards[k].bytes);
    return 0;
}

/* Every label of shard v below the number of classes (when there are classes); 0 when the
 * schema has no label field. */
static int check_labels(const fl_dataset *ds, const fl_shard_view *v, uint64_t first, fl_error *err)
{
    if (!ds->num_classes && ds->label_field >= 0)
        return 0;
    for (uint64_t r = 0; r < v->count; r++) {
        fl_record_info ri;
        fl_shard_entry(v, r, &ri, NULL, NULL);
        if (ds->label_field < 0 && ri.label != 0)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: record %llu: label %d in a dataset without "
                                "a label field",
                                v->path, (unsigned long long)(first + r), ri.label);
        if (ds->num_classes && (uint32_t)ri.label >= ds->num_classes)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: record %llu: label %d out of range (%u classes)", v->path,
                                (unsigned long long)(first + r), ri.label, ds->num_classes);
    }
    return 0;
}

/* The message of a refused fl_open_regular_at: a link or a non-regular file is named for what
 * it is (never with its size: a link may lead to a file the user cannot read). */
int fl_dataset_open_refused(const char *path, const char *what, int rc, fl_error *err)
{
    if (rc == -ELOOP)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: a symbolic link: %s must be a regular file "
                            "inside the dataset folder",
                            path, what);
    if (rc == -EISDIR)
        return fl_error_set(err, FL_E_FORMAT, "%s: not a regular file (%s must be one)", path,
                            what);
    return fl_error_set(err, rc, "%s: cannot open %s: %s", path, what, strerror(-rc));
}

/* The manifest's max_count of each variable field is the largest count of any record: the
 * largest of its shards' header counts. A loader sizes every batch slot from it, so a larger one
 * (a crafted 2^28 boxes) would cost gigabytes of pinned memory for nothing. Header counts and
 * manifest crafted together (with the header's CRC recomputed) are caught by the index: the
 * max_count rows of a field lie in some record's fields block, so they cannot need more bytes
 * than the largest block any index entry declares. */
static int check_max_counts(fl_dataset *ds, const fl_manifest *m, uint32_t n, fl_error *err)
{
    uint32_t max_fields = 0;
    for (uint32_t i = 0; i < n; i++)
        if (ds->shards[i].max_fields_len > max_fields)
            max_fields = ds->shards[i].max_fields_len;
    for (uint32_t f = 0; f < m->num_fields; f++) {
        const fl_field *fd = &m->fields[f];
        if (!fl_field_is_variable(fd->type))
            continue;
        uint32_t most = 0;
        for (uint32_t i = 0; i < n; i++)
            if (ds->shards[i].field_max[f] > most)
                most = ds->shards[i].field_max[f];
        if (fd->max_count > most)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: field \"%s\": the manifest's max_count is "
                                "%u, its shards' largest count %u: damaged or crafted",
                                ds->dir, fd->name, fd->max_count, most);
        uint64_t need = (uint64_t)fd->max_count * fl_field_row_bytes(fd);
        if (need > max_fields)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: field \"%s\": max_count %u takes %llu bytes, more than "
                                "the largest record's fields block (%u bytes): damaged or crafted",
                                ds->dir, fd->name, fd->max_count, (unsigned long long)need,
                                max_fields);
    }
    return 0;
}

/* Row i of a validated shard's index for the packed index (fl_record_index.h). */
static void shard_row(const void *src, uint64_t i, int64_t v[FL_IX_COLS])
{
    fl_record_info r;
    fl_shard_entry(src, i, &r, NULL, NULL);
    v[FL_IX_OFFSET] = (int64_t)r.offset;
    v[FL_IX_STORED] = r.stored_len;
    v[FL_IX_RAW] = (int64_t)r.raw_len - (int64_t)(r.stored_len - r.fields_len);
    v[FL_IX_LABEL] = r.label;
    v[FL_IX_CRC] = r.crc32c;
    v[FL_IX_HEIGHT] = r.height;
    v[FL_IX_WIDTH] = r.width;
    v[FL_IX_FORMAT] = r.format;
    v[FL_IX_FIELDS] = r.fields_len;
    v[FL_IX_NAME] = 0;
}

/* The labels' 4-byte values for fl_dataset_record_fields (the index entries they were read from
 * are not kept): a table of 0..L-1, L above every label of the set (the number of classes, or
 * the labels' packed range). No table past 2^20 labels (4 MiB): the shard's index is read again
 * for a label then. */
static int make_label_values(fl_dataset *ds, fl_error *err)
{
    if (ds->label_field < 0)
        return 0;
    uint64_t top = ds->num_classes;
    for (uint32_t s = 0; !ds->num_classes && s < ds->ix.nsegs; s++) {
        const fl_ix_seg *g = &ds->ix.segs[s];
        uint64_t t =
            g->count ? (uint64_t)g->base[FL_IX_LABEL] + (1ull << g->width[FL_IX_LABEL]) : 0;
        if (t > top)
            top = t;
    }
    if (top == 0 || top > (1u << 20))
        return 0;
    ds->label_values = malloc(top * sizeof *ds->label_values);
    if (!ds->label_values)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", ds->dir);
    for (uint64_t l = 0; l < top; l++)
        ds->label_values[l] = (int32_t)l;
    ds->num_label_values = (uint32_t)top;
    return 0;
}

/* part_start[i]: non-zero when shard i is the first of a --part dataset (numbering restarts);
 * NULL for a plain dataset. owner[i]/owner_k[i]: the part manifest listing shard i and its
 * position there; dirfd[i]: that part's directory (NULL: m itself, position i, dir_fd). Shard i
 * is the file owner's shards[k].file in that directory. */
static int open_shards_in(fl_dataset *ds, const fl_manifest *m, const uint8_t *part_start,
                          const fl_manifest *const *owner, const uint32_t *owner_k,
                          const int *dirfd, int dir_fd, fl_index_scratch *scratch, fl_error *err)
{
    uint32_t n = m->num_shards;
    uint32_t local = 0; /* shard number inside its part */
    uint64_t local_first = 0;
    ds->shards = calloc(n ? n : 1, sizeof *ds->shards);
    ds->shard_first = calloc(n ? n : 1, sizeof *ds->shard_first);
    ds->shard_ddict = calloc(n ? n : 1, sizeof *ds->shard_ddict);
    ds->ddicts_owned = calloc(n ? n : 1, sizeof *ds->ddicts_owned);
    ds->shard_index = calloc(n ? n : 1, sizeof *ds->shard_index);
    if (!ds->shards || !ds->shard_first || !ds->shard_ddict || !ds->ddicts_owned ||
        !ds->shard_index)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", ds->dir);
    uint64_t first = 0;
    size_t min_fields = m->version >= 3 ? fl_fields_min_block(m->fields, m->num_fields) : 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *path = ds->file_paths[i];
        fl_shard_view *v = &ds->shards[i];
        if (part_start && part_start[i]) {
            local = 0;
            local_first = 0;
        }
        const fl_manifest *om = owner ? owner[i] : m;
        uint32_t k = owner ? owner_k[i] : i;
        int fd = fl_open_regular_at(dirfd ? dirfd[i] : dir_fd, om->shards[k].file, FL_OPEN_NOFOLLOW,
                                    NULL);
        if (fd < 0)
            return fl_dataset_open_refused(path, "a shard", fd, err);
        int rc = fl_shard_open_fd_scratch(fd, path, min_fields, scratch, v, err);
        ds->num_open = i + 1; /* so close() releases what is open */
        if (rc)
            return rc;
        rc = shard_matches(v, om, k, err);
        if (rc)
            return rc;
        for (uint32_t f = 0; f < m->num_fields; f++)
            if (v->field_max[f] > m->fields[f].max_count && fl_field_is_variable(m->fields[f].type))
                return fl_error_set(err, FL_E_FORMAT,
                                    "%s: field \"%s\": up to %u per record, the "
                                    "manifest's max_count is %u",
                                    path, m->fields[f].name, v->field_max[f],
                                    m->fields[f].max_count);
        if (v->number != local || v->first_record != local_first ||
            v->count != m->shards[i].records)
            return fl_error_set(
                err, FL_E_FORMAT,
                "%s: shard %u holds records [%llu, +%llu), manifest expects shard %u "
                "with [%llu, +%llu)",
                path, v->number, (unsigned long long)v->first_record, (unsigned long long)v->count,
                local, (unsigned long long)local_first, (unsigned long long)m->shards[i].records);
        local++;
        local_first += v->count;
        if (!same_schema(&v->schema, &m->schema))
            return fl_error_set(err, FL_E_FORMAT, "%s: shard schema differs from the manifest's",
                                path);
        rc = check_labels(ds, v, first, err);
        if (rc)
            return rc;
        if (!ds->summary && fl_rindex_add(&ds->ix, v->count, shard_row, v))
            return fl_error_set(err, -ENOMEM, "%s: out of memory for the index", path);
        fl_shard_drop_index(v); /* names and labels are read from it again when asked for */
        ds->shard_first[i] = first;
        first += v->count;
        ds->total_bytes += v->size;
        if (v->max_raw_len > ds->max_raw_len)
            ds->max_raw_len = v->max_raw_len;
        if (v->max_stored_len > ds->max_stored_len)
            ds->max_stored_len = v->max_stored_len;
        if (v->dict) {
            /* Shards of one run carry the same dictionary: digest it once. */
            if (i > 0 && ds->shards[i - 1].dict && ds->shards[i - 1].dict_len == v->dict_len &&
                memcmp(ds->shards[i - 1].dict, v->dict, v->dict_len) == 0) {
                ds->shard_ddict[i] = ds->shard_ddict[i - 1];
            } else {
                ZSTD_DDict *dd = ZSTD_createDDict(v->dict, v->dict_len);
                if (!dd)
                    return fl_error_set(err, FL_E_FORMAT, "%s: unusable zstd dictionary", path);
                ds->ddicts_owned[ds->num_ddicts++] = dd;
                ds->shard_ddict[i] = dd;
            }
        }
    }
    int rc = check_max_counts(ds, m, n, err);
    if (rc == 0 && !ds->summary) {
        fl_rindex_trim(&ds->ix);
        rc = make_label_values(ds, err);
    }
    return rc;
}

/* open_shards_in with one scratch for the shards' decompressed index blocks (each is packed
 * into ds->ix and dropped before the next shard is opened). */
static int open_shards(fl_dataset *ds, const fl_manifest *m, const uint8_t *part_start,
                       const fl_manifest *const *owner, const uint32_t *owner_k, const int *dirfd,
                       int dir_fd, fl_error *err)
{
    fl_index_scratch scratch = {NULL, 0};
    int rc = open_shards_in(ds, m, part_start, owner, owner_k, dirfd, dir_fd, &scratch, err);
    for (uint32_t i = 0; i < ds->num_open; i++)
        if (ds->shards[i].index_heap == NULL && ds->shards[i].index &&
            (ds->shards[i].index < ds->shards[i].map ||
             ds->shards[i].index >= ds->shards[i].map + ds->shards[i].size))
            ds->shards[i].index = ds->shards[i].names = NULL; /* was in the scratch */
    fl_index_scratch_free(&scratch);
    return rc;
}

/* ---- datasets packed in parts (packdata --part I/N) ------------------------------------------
 * A directory without a manifest whose sub-directories are the N parts of one job (each a complete
 * dataset whose manifest says part I of N) opens as one dataset: the parts' records in part order.
 * All parts must be present once, use the shards backend and share schema and classes. */

typedef struct fl_part_dir {
    char *dir;
    int fd; /* held in the open context (closed there) */
    fl_manifest m;
} fl_part_dir;

static int cmp_part(const void *a, const void *b)
{
    const fl_part_dir *x = a, *y = b;
    return (x->m.part_index > y->m.part_index) - (x->m.part_index < y->m.part_index);
}

/* The same fields, max_count aside (each part records its own largest counts). */
static int same_fields(const fl_manifest *a, const fl_manifest *b)
{
    if (a->num_fields != b->num_fields)
        return 0;
    for (uint32_t i = 0; i < a->num_fields; i++) {
        fl_field x = a->fields[i], y = b->fields[i];
        x.max_count = y.max_count = 0;
        if (memcmp(&x, &y, sizeof x) != 0)
            return 0;
    }
    return 1;
}

static int same_classes(const fl_manifest *a, const fl_manifest *b)
{
    if (a->num_classes != b->num_classes)
        return 0;
    for (uint32_t i = 0; i < a->num_classes; i++)
        if (strcmp(a->classes[i], b->classes[i]) != 0)
            return 0;
    return 1;
}

/* The sub-directories of ds->dir holding a manifest, each parsed (*parts, *np: freed by the
 * caller whatever the outcome). -ENOENT (err untouched) when the directory cannot be listed. */
static int find_parts(fl_dataset *ds, fl_open_ctx *c, int root_fd, fl_part_dir **pp, uint32_t *np,
                      fl_error *err)
{
    int lfd = dup(root_fd); /* fdopendir takes it */
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d) {
        if (lfd >= 0)
            close(lfd);
        return -ENOENT;
    }
    fl_part_dir *parts = NULL;
    uint32_t n = 0, cap = 0;
    *pp = NULL;
    *np = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *sub = path_join(ds->dir, e->d_name);
        char *mp = sub ? path_join(sub, FL_MANIFEST_NAME) : NULL;
        char *text = NULL;
        size_t len = 0;
        struct stat st;
        if (!mp || fstatat(root_fd, e->d_name, &st, 0) != 0 || !S_ISDIR(st.st_mode)) {
            free(sub);
            free(mp);
            continue;
        }
        int sfd = hold_dir(c, root_fd, e->d_name, sub);
        if (sfd < 0 || fstatat(sfd, FL_MANIFEST_NAME, &st, 0) != 0 || !S_ISREG(st.st_mode)) {
            free(sub);
            free(mp);
            if (sfd == -ENOMEM) {
                rc = fl_error_set(err, -ENOMEM, "%s: out of memory", ds->dir);
                break;
            }
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            fl_part_dir *np_ = realloc(parts, cap * sizeof *parts);
            if (!np_) {
                free(sub);
                free(mp);
                rc = fl_error_set(err, -ENOMEM, "%s: out of memory", ds->dir);
                break;
            }
            parts = np_;
            *pp = parts;
        }
        memset(&parts[n], 0, sizeof parts[n]);
        parts[n].dir = sub;
        parts[n].fd = sfd;
        rc = read_file_at(sfd, FL_MANIFEST_NAME, mp, manifest_limit(sfd), &text, &len, err);
        if (rc == 0)
            rc = fl_manifest_parse(text, len, mp, &parts[n].m, err);
        free(text);
        free(mp);
        *np = ++n;
        if (rc)
            break;
    }
    closedir(d);
    return rc;
}

/* Exactly parts 0..N-1 once each, all shards, one schema, one format version, the same fields
 * (max_count aside) and classes. */
static int check_parts(const fl_dataset *ds, fl_part_dir *parts, uint32_t n, fl_error *err)
{
    int rc = 0;
    if (rc == 0) {
        qsort(parts, n, sizeof *parts, cmp_part);
        uint32_t count = parts[0].m.part_count;
        if (count == 0)
            rc =
                fl_error_set(err, FL_E_FORMAT,
                             "%s: no manifest.json, and %s is a whole dataset, not a --part of one",
                             ds->dir, parts[0].dir);
        else if (n != count)
            rc = fl_error_set(err, FL_E_FORMAT,
                              "%s: %u part dataset(s) found, their manifests say %u parts", ds->dir,
                              n, count);
        for (uint32_t i = 0; rc == 0 && i < n; i++) {
            const fl_manifest *pm = &parts[i].m;
            if (pm->part_count != count || pm->part_index != i)
                rc = fl_error_set(err, FL_E_FORMAT,
                                  "%s: part %u of %u is missing or duplicated (%s says %u/%u)",
                                  ds->dir, i, count, parts[i].dir, pm->part_index, pm->part_count);
            else if (pm->backend != FL_BACKEND_SHARDS)
                rc = fl_error_set(err, FL_E_UNSUPPORTED,
                                  "%s: only shard datasets can be combined from parts",
                                  parts[i].dir);
            else if (!same_schema(&pm->schema, &parts[0].m.schema) ||
                     !same_classes(pm, &parts[0].m))
                rc = fl_error_set(err, FL_E_FORMAT, "%s: schema or classes differ from %s's",
                                  parts[i].dir, parts[0].dir);
            else if (pm->version != parts[0].m.version || !same_fields(pm, &parts[0].m))
                rc = fl_error_set(err, FL_E_FORMAT, "%s: format version or fields differ from %s's",
                                  parts[i].dir, parts[0].dir);
        }
    }
    return rc;
}

/* Returns -ENOENT (with err untouched) when ds->dir holds no part datasets at all. */
static int open_parts(fl_dataset *ds, fl_open_ctx *c, int root_fd, fl_error *err)
{
    fl_part_dir *parts = NULL;
    uint32_t n = 0;
    int rc = find_parts(ds, c, root_fd, &parts, &n, err);
    if (rc == 0 && n == 0)
        rc = -ENOENT;
    if (rc == 0)
        rc = check_parts(ds, parts, n, err);
    /* Build the combined manifest: every part's shards in part order. */
    fl_manifest all;
    memset(&all, 0, sizeof all);
    uint8_t *part_start = NULL;
    const fl_manifest **owner = NULL;
    uint32_t *owner_k = NULL;
    int *dirfd = NULL;
    if (rc == 0) {
        uint32_t shards = 0;
        for (uint32_t i = 0; i < n; i++) {
            shards += parts[i].m.num_shards;
            all.records += parts[i].m.records;
        }
        all.version = parts[0].m.version;
        all.backend = FL_BACKEND_SHARDS;
        all.schema = parts[0].m.schema;
        all.num_fields = parts[0].m.num_fields;
        memcpy(all.fields, parts[0].m.fields, sizeof all.fields);
        for (uint32_t i = 1; i < n; i++) /* the largest count of any part */
            for (uint32_t f = 0; f < all.num_fields; f++)
                if (parts[i].m.fields[f].max_count > all.fields[f].max_count)
                    all.fields[f].max_count = parts[i].m.fields[f].max_count;
        all.num_shards = shards;
        all.shards = calloc(shards ? shards : 1, sizeof *all.shards);
        ds->file_paths = calloc(shards ? shards : 1, sizeof *ds->file_paths);
        part_start = calloc(shards ? shards : 1, 1);
        owner = calloc(shards ? shards : 1, sizeof *owner);
        owner_k = calloc(shards ? shards : 1, sizeof *owner_k);
        dirfd = calloc(shards ? shards : 1, sizeof *dirfd);
        if (!all.shards || !ds->file_paths || !part_start || !owner || !owner_k || !dirfd)
            rc = fl_error_set(err, -ENOMEM, "%s: out of memory", ds->dir);
        uint32_t k = 0;
        for (uint32_t i = 0; rc == 0 && i < n; i++) {
            const char *base = strrchr(parts[i].dir, '/') + 1;
            for (uint32_t j = 0; rc == 0 && j < parts[i].m.num_shards; j++, k++) {
                all.shards[k] = parts[i].m.shards[j];
                part_start[k] = j == 0;
                owner[k] = &parts[i].m;
                owner_k[k] = j;
                dirfd[k] = parts[i].fd;
                ds->file_paths[k] = path_join(parts[i].dir, parts[i].m.shards[j].file);
                size_t fl = strlen(base) + strlen(parts[i].m.shards[j].file) + 2;
                char *rel = malloc(fl);
                if (rel)
                    snprintf(rel, fl, "%s/%s", base, parts[i].m.shards[j].file);
                all.shards[k].file = rel;
                ds->num_files = k + 1;
                if (!ds->file_paths[k] || !rel)
                    rc = fl_error_set(err, -ENOMEM, "%s: out of memory", ds->dir);
            }
        }
    }
    if (rc == 0) {
        ds->backend = FL_BACKEND_SHARDS;
        ds->schema = all.schema;
        set_fields(ds, &all);
        ds->count = all.records;
        ds->classes = parts[0].m.classes;
        ds->num_classes = parts[0].m.num_classes;
        parts[0].m.classes = NULL;
        parts[0].m.num_classes = 0;
        rc = open_shards(ds, &all, part_start, owner, owner_k, dirfd, -1, err);
    }
    if (rc == 0) {
        fl_tbuf b;
        memset(&b, 0, sizeof b);
        all.classes = ds->classes;
        all.num_classes = ds->num_classes;
        all.tool_version = "combined parts";
        all.part_count = n;
        if (fl_manifest_write(&b, &all) != 0 || !b.data) {
            rc = fl_error_set(err, -ENOMEM, "%s: out of memory", ds->dir);
        } else {
            ds->manifest_text = b.data;
            b.data = NULL;
        }
        fl_tbuf_free(&b);
        all.classes = NULL;
        all.num_classes = 0;
    }
    for (uint32_t k = 0; all.shards && k < all.num_shards; k++)
        free(all.shards[k].file);
    free(all.shards);
    free(part_start);
    free(owner);
    free(owner_k);
    free(dirfd);
    for (uint32_t i = 0; i < n; i++) {
        free(parts[i].dir);
        fl_manifest_free(&parts[i].m);
    }
    free(parts);
    return rc;
}

/* One attempt at opening `path`. *replaced is set when it failed because the directory was
 * swapped (or is being swapped) under us; *absent when the error is about `path` itself (not
 * there, or no manifest in it) rather than a file inside it. */
static int open_once(const char *path, int summary, fl_dataset **out, fl_error *err, int *replaced,
                     int *absent)
{
    *out = NULL;
    *replaced = 0;
    *absent = 0;
    fl_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    ds->lmdb_fd = -1;
    ds->summary = summary;
    fl_dctx_pool_init(&ds->pool);
    fl_open_ctx c;
    memset(&c, 0, sizeof c);
    fl_manifest m;
    memset(&m, 0, sizeof m);
    int rc = 0;
    char *abs = realpath(path, NULL);
    if (!abs) {
        int e = errno;
        fl_dataset_close(ds);
        *absent = e == ENOENT;
        if (e == ENOENT) {
            /* between the two renames of a replace, DST is briefly absent while DST.partial is
             * there; and the second rename may land between our two looks */
            char *partial = malloc(strlen(path) + 16);
            struct stat st;
            if (partial) {
                sprintf(partial, "%s.partial", path);
                *replaced = stat(partial, &st) == 0 || stat(path, &st) == 0;
            }
            free(partial);
        }
        return fl_error_set(err, -e, "%s: %s", path, strerror(e));
    }
    ds->dir = abs;
    int dir_fd = hold_dir(&c, AT_FDCWD, abs, abs);
    if (dir_fd < 0) {
        rc = fl_error_set(err, dir_fd, "%s: %s", abs, strerror(-dir_fd));
        if (dir_fd == -ENOENT)
            *replaced = *absent = 1;
        goto fail;
    }
    char *mpath = path_join(ds->dir, FL_MANIFEST_NAME);
    if (!mpath) {
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    size_t mlen = 0;
    rc = read_file_at(dir_fd, FL_MANIFEST_NAME, mpath, manifest_limit(dir_fd), &ds->manifest_text,
                      &mlen, err);
    if (rc == -ENOENT) {
        int prc = open_parts(ds, &c, dir_fd, err);
        if (prc != -ENOENT) {
            free(mpath);
            if (prc) {
                rc = prc;
                goto fail;
            }
            release_dirs(&c);
            *out = ds;
            return 0;
        }
        struct stat st;
        char *partial = malloc(strlen(path) + 16);
        int unfinished = 0;
        if (partial) {
            sprintf(partial, "%s.partial", path);
            unfinished = stat(partial, &st) == 0;
        }
        free(partial);
        *absent = 1;
        fl_error_set(err, -ENOENT, "%s: no %s: not a fastload dataset%s", ds->dir, FL_MANIFEST_NAME,
                     unfinished ? " (an unfinished one is in .partial: resume packing it)" : "");
    }
    if (rc == 0)
        rc = fl_manifest_parse(ds->manifest_text, mlen, mpath, &m, err);
    free(mpath);
    if (rc)
        goto fail;
    ds->backend = m.backend;
    ds->schema = m.schema;
    set_fields(ds, &m);
    ds->count = m.records;
    ds->has_id = m.has_id;
    memcpy(ds->dataset_id, m.dataset_id, FL_DATASET_ID_BYTES);
    /* take ownership of the class names */
    ds->classes = m.classes;
    ds->num_classes = m.num_classes;
    m.classes = NULL;
    m.num_classes = 0;
    ds->file_paths = calloc(m.num_shards ? m.num_shards : 1, sizeof *ds->file_paths);
    if (!ds->file_paths) {
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (uint32_t i = 0; i < m.num_shards; i++) {
        ds->file_paths[i] = path_join(ds->dir, m.shards[i].file);
        if (!ds->file_paths[i]) {
            ds->num_files = i;
            rc = fl_error_set(err, -ENOMEM, "%s: out of memory", path);
            goto fail;
        }
    }
    ds->num_files = m.num_shards;
    if (ds->backend == FL_BACKEND_SHARDS)
        rc = open_shards(ds, &m, NULL, NULL, NULL, NULL, dir_fd, err);
    else
        rc = fl_lmdb_reader_open(ds, &m, dir_fd, err);
    if (rc)
        goto fail;
    fl_manifest_free(&m);
    release_dirs(&c);
    *out = ds;
    return 0;
fail:
    *replaced = *replaced || dirs_replaced(&c);
    release_dirs(&c);
    fl_manifest_free(&m);
    fl_dataset_close(ds);
    return rc;
}

/* Attempts at opening a dataset that is being replaced (pack --force) before giving up. */
#define FL_OPEN_ATTEMPTS 8

static int open_retrying(const char *path, int summary, fl_dataset **out, fl_error *err)
{
    *out = NULL;
    if (!path || !*path)
        return fl_error_set(err, FL_E_INVALID, "dataset path is empty");
    for (int attempt = 1;; attempt++) {
        int replaced = 0, absent = 0;
        int rc = open_once(path, summary, out, err, &replaced, &absent);
        if (rc == 0 || !replaced)
            return rc;
        if (attempt == FL_OPEN_ATTEMPTS) {
            /* gone, and a .partial beside it: say that, as before. A shard that vanished
             * because its directory was replaced and deleted is -EAGAIN, like any other file */
            if (rc == -ENOENT && absent)
                return rc;
            return fl_error_set(err, -EAGAIN,
                                "%s: the dataset was replaced while being opened: open it again",
                                path);
        }
        usleep(2000u << (attempt < 6 ? attempt : 6)); /* 4 ms, 8 ms, ... 128 ms */
    }
}

int fl_dataset_open(const char *path, fl_dataset **out, fl_error *err)
{
    return open_retrying(path, 0, out, err);
}

int fl_dataset_open_summary(const char *path, fl_dataset **out, fl_error *err)
{
    return open_retrying(path, 1, out, err);
}

uint64_t fl_dataset_count(const fl_dataset *ds) { return ds->count; }
const fl_schema *fl_dataset_schema(const fl_dataset *ds) { return &ds->schema; }
fl_backend fl_dataset_backend(const fl_dataset *ds) { return ds->backend; }
uint32_t fl_dataset_num_classes(const fl_dataset *ds) { return ds->num_classes; }
const char *fl_dataset_class_name(const fl_dataset *ds, uint32_t label)
{
    return label < ds->num_classes ? ds->classes[label] : NULL;
}
uint32_t fl_dataset_num_shards(const fl_dataset *ds) { return ds->num_files; }
const char *fl_dataset_shard_path(const fl_dataset *ds, uint32_t i)
{
    return i < ds->num_files ? ds->file_paths[i] : NULL;
}
int fl_dataset_id(const fl_dataset *ds, uint8_t id[16])
{
    if (!ds->has_id) {
        memset(id, 0, FL_DATASET_ID_BYTES);
        return -ENOENT;
    }
    memcpy(id, ds->dataset_id, FL_DATASET_ID_BYTES);
    return 0;
}
int fl_dataset_file_fd(const fl_dataset *ds, uint32_t i)
{
    if (i >= ds->num_files)
        return -1;
    return ds->backend == FL_BACKEND_LMDB ? ds->lmdb_fd : ds->shards[i].fd;
}
uint64_t fl_dataset_total_bytes(const fl_dataset *ds) { return ds->total_bytes; }
const char *fl_dataset_manifest_json(const fl_dataset *ds) { return ds->manifest_text; }
uint32_t fl_dataset_max_raw_len(const fl_dataset *ds) { return ds->max_raw_len; }
uint32_t fl_dataset_max_stored_len(const fl_dataset *ds) { return ds->max_stored_len; }

/* Shard holding global record i (i < count). */
static uint32_t find_shard(const fl_dataset *ds, uint64_t i)
{
    uint32_t lo = 0, hi = ds->num_files; /* invariant: shard_first[lo] <= i < shard_first[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ds->shard_first[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    /* empty shards share their first index with the next one: step past them */
    while (lo + 1 < ds->num_files && ds->shards[lo].count == 0)
        lo++;
    return lo;
}

/* The index segment of record i (< count) and its row there. */
static const fl_ix_seg *record_row(const fl_dataset *ds, uint64_t i, uint64_t *row, uint32_t *shard)
{
    if (ds->backend == FL_BACKEND_LMDB) {
        *row = i & (FL_LMDB_SEG - 1);
        *shard = 0;
        return &ds->ix.segs[i >> FL_LMDB_SEG_BITS];
    }
    uint32_t s = find_shard(ds, i);
    *row = i - ds->shard_first[s];
    *shard = s;
    return &ds->ix.segs[s];
}

/* Where an LMDB record's value (header, name, stored bytes) starts. */
static const uint8_t *lmdb_value(const fl_dataset *ds, const int64_t v[FL_IX_COLS])
{
    return ds->lmdb_anchor + v[FL_IX_OFFSET];
}

/* Resolve record i (< count, the dataset indexed): info and stored-bytes pointer. */
static void locate(const fl_dataset *ds, uint64_t i, fl_record_info *info, const uint8_t **stored,
                   uint32_t *shard_out)
{
    uint64_t k;
    uint32_t s;
    const fl_ix_seg *g = record_row(ds, i, &k, &s);
    int64_t v[FL_IX_COLS];
    fl_rindex_row(&ds->ix, g, k, v);
    uint32_t stored_len = (uint32_t)v[FL_IX_STORED], fields_len = (uint32_t)v[FL_IX_FIELDS];
    int lmdb = ds->backend == FL_BACKEND_LMDB;
    if (info) {
        info->shard = s; /* the dataset's shard index (a part's header numbers its shards from 0) */
        info->offset = lmdb ? 0 : (uint64_t)v[FL_IX_OFFSET];
        info->stored_len = stored_len;
        info->raw_len = (uint32_t)(v[FL_IX_RAW] + (int64_t)(stored_len - fields_len));
        info->label = (int32_t)v[FL_IX_LABEL];
        info->crc32c = (uint32_t)v[FL_IX_CRC];
        info->height = (uint32_t)v[FL_IX_HEIGHT];
        info->width = (uint32_t)v[FL_IX_WIDTH];
        info->format = (fl_encoding)v[FL_IX_FORMAT];
        info->fields_len = fields_len;
    }
    if (stored)
        *stored = lmdb ? lmdb_value(ds, v) + fl_lmdb_value_header(ds->version) + v[FL_IX_NAME]
                       : ds->shards[s].map + v[FL_IX_OFFSET];
    if (shard_out)
        *shard_out = s;
}

/* Shard s's index block: entries (entry_size bytes each) then names. In the mapping when stored
 * as is; else decompressed on first use and kept until close (published with one atomic
 * exchange: two threads asking at once may both decompress it, one copy is kept). NULL when it
 * cannot be read again (out of memory, or the file changed since the open). */
static const uint8_t *shard_index_block(const fl_dataset *ds, uint32_t s)
{
    const fl_shard_view *v = &ds->shards[s];
    if (v->index)
        return v->index;
    uint8_t *p = __atomic_load_n(&ds->shard_index[s], __ATOMIC_ACQUIRE);
    if (p)
        return p;
    fl_error e;
    if (fl_shard_index_load(v, &p, &e))
        return NULL;
    uint8_t *expected = NULL;
    if (!__atomic_compare_exchange_n(&ds->shard_index[s], &expected, p, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        fl_shard_index_free(v, p);
        p = expected;
    }
    return p;
}

/* Record i's (< count) name from its shard's index block or its LMDB value; NULL when that
 * cannot be read. */
static const char *locate_name(const fl_dataset *ds, uint64_t i, size_t *len)
{
    uint64_t k;
    uint32_t s;
    const fl_ix_seg *g = record_row(ds, i, &k, &s);
    *len = 0;
    if (ds->backend == FL_BACKEND_LMDB) {
        int64_t v[FL_IX_COLS];
        fl_rindex_row(&ds->ix, g, k, v);
        *len = (size_t)v[FL_IX_NAME];
        return (const char *)lmdb_value(ds, v) + fl_lmdb_value_header(ds->version);
    }
    const fl_shard_view *sv = &ds->shards[s];
    const uint8_t *block = shard_index_block(ds, s);
    if (!block)
        return NULL;
    const uint8_t *e = block + k * sv->entry_size;
    uint32_t noff = fl_rd32(e + FLI_NAME_OFFSET), nlen = fl_rd32(e + FLI_NAME_LEN);
    if (noff > sv->names_size || nlen > sv->names_size - noff)
        return NULL; /* checked at open: only a file changed since can get here */
    *len = nlen;
    return (const char *)block + sv->count * sv->entry_size + noff;
}

static const char *record_file(const fl_dataset *ds, uint64_t i)
{
    return ds->file_paths[ds->backend == FL_BACKEND_LMDB ? 0 : find_shard(ds, i)];
}

/* Is record i there to read (in range, and the dataset opened with its index)? */
static int readable(const fl_dataset *ds, uint64_t i) { return i < ds->count && !ds->summary; }

/* The error for a record that is not readable. */
static int not_readable(const fl_dataset *ds, uint64_t i, fl_error *err)
{
    if (ds->summary && i < ds->count)
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "%s: record %llu: the dataset was opened for a summary, "
                            "without its index",
                            ds->dir, (unsigned long long)i);
    return fl_error_set(err, FL_E_RANGE, "%s: record %llu out of range (%llu records)", ds->dir,
                        (unsigned long long)i, (unsigned long long)ds->count);
}

void fl_dataset_prefetch_info(const fl_dataset *ds, uint64_t i)
{
    if (!readable(ds, i))
        return;
    uint64_t k;
    uint32_t s;
    const fl_ix_seg *g = record_row(ds, i, &k, &s);
    const uint8_t *a = fl_rindex_addr(&ds->ix, g, k);
    __builtin_prefetch(a);
    __builtin_prefetch(a + (g->row_bits + 7) / 8 + 7); /* a row may straddle two lines */
}

int fl_dataset_record_info(const fl_dataset *ds, uint64_t i, fl_record_info *out, fl_error *err)
{
    if (!readable(ds, i))
        return not_readable(ds, i, err);
    locate(ds, i, out, NULL, NULL);
    return 0;
}

const char *fl_dataset_record_name(const fl_dataset *ds, uint64_t i, size_t *len)
{
    size_t n = 0;
    const char *name = readable(ds, i) ? locate_name(ds, i, &n) : NULL;
    if (len)
        *len = name ? n : 0;
    return name;
}

int fl_dataset_check(const fl_dataset *ds, uint64_t i, const uint8_t *data, size_t len,
                     fl_error *err)
{
    if (!readable(ds, i))
        return not_readable(ds, i, err);
    fl_record_info r;
    locate(ds, i, &r, NULL, NULL);
    if (len != r.stored_len)
        return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %zu bytes, index says %u",
                            record_file(ds, i), (unsigned long long)i, len, r.stored_len);
    uint32_t crc = fl_crc32c(0, data, len);
    if (crc != r.crc32c)
        return fl_error_set(err, FL_E_CHECKSUM,
                            "%s: record %llu: CRC32C mismatch (index 0x%08x, data 0x%08x)",
                            record_file(ds, i), (unsigned long long)i, r.crc32c, crc);
    return 0;
}

/* fl_crc32c under the mapping guard (fl_mapped_guard.h) */
typedef struct crc_args {
    const uint8_t *p;
    size_t n;
    uint32_t crc;
} crc_args;

static void crc_fn(void *arg)
{
    crc_args *a = arg;
    a->crc = fl_crc32c(0, a->p, a->n);
}

int fl_dataset_mapping_error(const fl_dataset *ds, uint64_t i, int rc, fl_error *err)
{
    if (rc == FL_E_TRUNCATED)
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s: record %llu: the file is shorter than when it was opened "
                            "(truncated or rewritten since), or an I/O error hit its pages",
                            record_file(ds, i), (unsigned long long)i);
    return fl_error_set(err, rc, "%s: record %llu: cannot guard the file mapping: %s",
                        record_file(ds, i), (unsigned long long)i, fl_strerror(rc));
}

int fl_dataset_get(const fl_dataset *ds, uint64_t i, const uint8_t **data, size_t *len, int check,
                   fl_error *err)
{
    if (!readable(ds, i))
        return not_readable(ds, i, err);
    fl_record_info r;
    const uint8_t *p;
    locate(ds, i, &r, &p, NULL);
    if (check) { /* the first read of the mapping: guarded, as the file may have shrunk */
        crc_args a = {p, r.stored_len, 0};
        int rc = fl_mapped_run(crc_fn, &a);
        if (rc)
            return fl_dataset_mapping_error(ds, i, rc, err);
        if (a.crc != r.crc32c)
            return fl_error_set(err, FL_E_CHECKSUM,
                                "%s: record %llu: CRC32C mismatch (index 0x%08x, data 0x%08x)",
                                record_file(ds, i), (unsigned long long)i, r.crc32c, a.crc);
    }
    *data = p;
    *len = r.stored_len;
    return 0;
}

int fl_dataset_payload(const fl_dataset *ds, uint64_t i, const uint8_t *src, size_t src_len,
                       uint8_t *dst, size_t dst_cap, const uint8_t **payload, size_t *payload_len,
                       fl_error *err)
{
    if (!readable(ds, i))
        return not_readable(ds, i, err);
    fl_record_info r;
    uint32_t s;
    locate(ds, i, &r, NULL, &s);
    if (r.fields_len > src_len)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: record %llu: %zu stored bytes, its fields block "
                            "alone is %u",
                            record_file(ds, i), (unsigned long long)i, src_len, r.fields_len);
    src_len -= r.fields_len; /* the payload part */
    if (ds->schema.compression == FL_COMP_NONE) {
        *payload = src;
        *payload_len = src_len;
        return 0;
    }
    const ZSTD_DDict *dd = ds->backend == FL_BACKEND_LMDB ? ds->lmdb_ddict : ds->shard_ddict[s];
    int rc = fl_zstd_decompress((fl_dctx_pool *)&ds->pool, dd, src, src_len, dst, dst_cap,
                                r.raw_len, "record", err);
    if (rc) {
        /* build the full message only on the error path */
        char what[PATH_MAX + 64];
        snprintf(what, sizeof what, "%s: record %llu", record_file(ds, i), (unsigned long long)i);
        if (err)
            fl_error_prefix(err, "%s", what);
        return rc;
    }
    *payload = dst;
    *payload_len = r.raw_len;
    return 0;
}

uint32_t fl_dataset_format_version(const fl_dataset *ds) { return ds->version; }
uint32_t fl_dataset_num_fields(const fl_dataset *ds) { return ds->num_fields; }
const fl_field *fl_dataset_fields(const fl_dataset *ds) { return ds->fields; }

/* Where record i's 4 little-endian label bytes are (`label` is its value): its LMDB value
 * header, the label table, or its entry in the shard's index block. NULL when none can be read. */
static const uint8_t *label_bytes(const fl_dataset *ds, uint64_t i, int32_t label)
{
    uint64_t k;
    uint32_t s;
    const fl_ix_seg *g = record_row(ds, i, &k, &s);
    if (ds->backend == FL_BACKEND_LMDB) {
        int64_t v[FL_IX_COLS];
        fl_rindex_row(&ds->ix, g, k, v);
        return lmdb_value(ds, v);
    }
    if (label >= 0 && (uint32_t)label < ds->num_label_values)
        return (const uint8_t *)&ds->label_values[label];
    const uint8_t *block = shard_index_block(ds, s);
    return block ? block + k * ds->shards[s].entry_size + FLI_LABEL : NULL;
}

int fl_dataset_record_fields(const fl_dataset *ds, uint64_t i, const uint8_t *stored,
                             size_t stored_len, fl_field_value *values, fl_error *err)
{
    if (!readable(ds, i))
        return not_readable(ds, i, err);
    fl_record_info r;
    locate(ds, i, &r, NULL, NULL);
    if (stored_len != r.stored_len || (stored_len && !stored))
        return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %zu bytes, index says %u",
                            record_file(ds, i), (unsigned long long)i, stored_len, r.stored_len);
    int rc = 0;
    if (r.fields_len || ds->version >= 3) {
        fl_error e;
        rc = fl_fields_parse(ds->fields, ds->num_fields, stored + stored_len - r.fields_len,
                             r.fields_len, values, "record", &e);
        for (uint32_t f = 0; rc == 0 && f < ds->num_fields; f++)
            if (ds->fields[f].type == FL_FIELD_MASK && !values[f].height) {
                values[f].height = r.height; /* a zstd mask: its size is checked next */
                values[f].width = r.width;
            }
        if (rc == 0)
            rc = fl_fields_check_record(ds->fields, ds->num_fields, values, r.width, r.height,
                                        "record", &e);
        if (rc) /* "record: field ..." becomes "<file>: record N: field ..." */
            return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %s", record_file(ds, i),
                                (unsigned long long)i,
                                strncmp(e.msg, "record: ", 8) == 0 ? e.msg + 8 : e.msg);
    } else {
        memset(values, 0, ds->num_fields * sizeof *values);
    }
    if (ds->image_field >= 0) {
        fl_field_value *v = &values[ds->image_field];
        v->data = stored;
        v->len = stored_len - r.fields_len;
        v->count = 1;
        v->height = r.height;
        v->width = r.width;
    }
    if (ds->label_field >= 0) {
        fl_field_value *v = &values[ds->label_field];
        memset(v, 0, sizeof *v);
        v->data = label_bytes(ds, i, r.label);
        if (!v->data)
            return fl_error_set(err, -ENOMEM, "%s: record %llu: cannot read its label back",
                                record_file(ds, i), (unsigned long long)i);
        v->len = 4;
        v->count = 1;
    }
    return 0;
}

int fl_dataset_ndarray(const fl_dataset *ds, uint32_t field, const fl_field_value *value, void *dst,
                       size_t cap, fl_error *err)
{
    if (field >= ds->num_fields || ds->fields[field].type != FL_FIELD_NDARRAY)
        return fl_error_set(err, FL_E_RANGE, "%s: field %u is not an ndarray", ds->dir, field);
    const fl_field *f = &ds->fields[field];
    size_t want = fl_field_ndarray_bytes(f);
    if (cap < want)
        return fl_error_set(err, FL_E_RANGE, "%s: field \"%s\": %zu bytes of room, %zu needed",
                            ds->dir, f->name, cap, want);
    return fl_zstd_decompress((fl_dctx_pool *)&ds->pool, NULL, value->data, value->len, dst, cap,
                              want, f->name, err);
}

/* One record for fl_dataset_verify: CRC, payload, and (version 3) fields with their ndarrays,
 * from a copy in `copy` (max_stored_len) made under the mapping guard: the file may shrink while
 * it is verified, and nothing after the copy reads the mapping. */
static int verify_record(const fl_dataset *ds, uint64_t i, uint8_t *copy, uint8_t *buf, uint8_t *nd,
                         fl_field_value *vals, fl_error *e)
{
    const uint8_t *p, *pl;
    size_t n, pn;
    int rc = fl_dataset_get(ds, i, &p, &n, 0, e);
    if (rc == 0 && n > ds->max_stored_len)
        rc = fl_error_set(e, FL_E_FORMAT, "%s: record %llu: %zu bytes, more than the largest",
                          record_file(ds, i), (unsigned long long)i, n);
    if (rc == 0 && (rc = fl_mapped_copy(copy, p, n)) != 0)
        rc = fl_dataset_mapping_error(ds, i, rc, e);
    p = copy;
    if (rc == 0)
        rc = fl_dataset_check(ds, i, p, n, e);
    if (rc == 0 && buf)
        rc = fl_dataset_payload(ds, i, p, n, buf, ds->max_raw_len, &pl, &pn, e);
    if (rc || ds->version < 3)
        return rc;
    rc = fl_dataset_record_fields(ds, i, p, n, vals, e);
    for (uint32_t f = 0; rc == 0 && f < ds->num_fields; f++) {
        if (ds->fields[f].type != FL_FIELD_NDARRAY)
            continue;
        rc = fl_dataset_ndarray(ds, f, &vals[f], nd, fl_field_ndarray_bytes(&ds->fields[f]), e);
        if (rc)
            fl_error_prefix(e, "%s: record %llu", record_file(ds, i), (unsigned long long)i);
    }
    return rc;
}

int fl_dataset_verify(const fl_dataset *ds, fl_verify_cb cb, void *user, uint64_t *n_bad,
                      fl_error *err)
{
    uint64_t bad = 0;
    if (n_bad)
        *n_bad = 0;
    if (ds->summary)
        return not_readable(ds, 0, err);
    uint8_t *buf = NULL, *nd = NULL, *copy = malloc(ds->max_stored_len ? ds->max_stored_len : 1);
    size_t nd_cap = 0;
    for (uint32_t f = 0; f < ds->num_fields; f++)
        if (fl_field_ndarray_bytes(&ds->fields[f]) > nd_cap)
            nd_cap = fl_field_ndarray_bytes(&ds->fields[f]);
    fl_field_value vals[FL_MAX_FIELDS];
    if (ds->schema.compression != FL_COMP_NONE)
        buf = malloc(ds->max_raw_len ? ds->max_raw_len : 1);
    if (nd_cap)
        nd = malloc(nd_cap);
    if ((ds->schema.compression != FL_COMP_NONE && !buf) || (nd_cap && !nd) || !copy) {
        free(copy);
        free(buf);
        free(nd);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", ds->dir);
    }
    int stopped = 0;
    uint32_t shard = 0;
    for (uint64_t i = 0; i < ds->count && !stopped; i++) {
        fl_error e;
        fl_error_clear(&e);
        /* the pages read so far leave the resident set (the page cache keeps them): a shard once
         * its records are checked, LMDB's map every segment */
        if (ds->backend == FL_BACKEND_LMDB) {
            if (i && i % FL_LMDB_SEG == 0)
                fl_lmdb_reader_drop_pages(ds);
        } else if (find_shard(ds, i) != shard) {
            const fl_shard_view *v = &ds->shards[shard];
            madvise((void *)v->map, (size_t)v->size, MADV_DONTNEED);
            shard = find_shard(ds, i);
        }
        if (verify_record(ds, i, copy, buf, nd, vals, &e)) {
            bad++;
            if (cb && cb(user, i, &e))
                stopped = 1;
        }
    }
    free(copy);
    free(buf);
    free(nd);
    if (n_bad)
        *n_bad = bad;
    if (bad)
        return fl_error_set(err, FL_E_CHECKSUM, "%s: %llu of %llu records are bad%s", ds->dir,
                            (unsigned long long)bad, (unsigned long long)ds->count,
                            stopped ? " (stopped early)" : "");
    return 0;
}
