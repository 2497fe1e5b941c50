/* writer_impl.h — internal: the writer's state and the helpers its parts share (writer.c writes
 * shards and records, writer_lock.c holds the destination's lock, writer_inspect.c says what is at
 * <dst> and <dst>.partial and clears what is ours, writer_publish.c finishes and publishes). */
#ifndef FL_WRITER_IMPL_H
#define FL_WRITER_IMPL_H

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fl_file.h"
#include "fl_json.h"
#include "fl_lmdb.h"
#include "fl_manifest.h"
#include "fl_page_cache.h"
#include "fl_shard.h"
#include "fl_writer.h"

#define WBUF_SIZE           (1u << 20)
#define DEFAULT_SHARD_BYTES (256ull << 20)
#define STATE_FILE          "state.json"
#define DICT_FILE           "zstd.dict"
/* the dataset id (32 hex digits), chosen once, kept across --resume */
#define ID_FILE     "dataset.id"
#define PLAN_FILE   "plan.txt"
#define LOCK_SUFFIX ".lock"

typedef struct growbuf {
    uint8_t *p;
    size_t len, cap;
} growbuf;

static inline int gb_append(growbuf *g, const void *d, size_t n)
{
    if (n == 0)
        return 0; /* an empty payload (no image): memcpy with a NULL buffer is undefined */
    if (g->len + n > g->cap) {
        size_t cap = g->cap ? g->cap : 4096;
        while (cap < g->len + n)
            cap *= 2;
        uint8_t *q = realloc(g->p, cap);
        if (!q)
            return -ENOMEM;
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
    uint32_t version;                        /* 2 for the classic schema, 3 with fields */
    fl_field fields[FL_MAX_FIELDS]; /* the schema, max_count 0 (records are parsed against it) */
    uint32_t num_fields;
    int label_field;                   /* index of the label field, or -1 */
    size_t min_fields;                 /* the smallest fields block (fl_fields_min_block) */
    uint32_t field_max[FL_MAX_FIELDS]; /* largest count of each variable field so far (manifest) */
    uint32_t shard_max[FL_MAX_FIELDS]; /* the same in the open shard (its header) */
    uint64_t total;                    /* records added (including resumed) */
    int32_t max_label;
    int failed; /* a write error happened: the open shard is lost */
    /* complete shards */
    fl_manifest_shard *done;
    uint32_t num_done, cap_done;
    /* open shard: written as <name>.tmp, renamed when complete (fl_file_begin/commit); shard.fd
     * is -1 while none is open */
    fl_file_writer shard;
    uint32_t shard_no;
    uint64_t shard_first;
    uint64_t shard_count;
    uint64_t pos; /* file position of the next byte */
    uint64_t data_offset;
    growbuf index, names;
    uint8_t *wbuf;
    size_t wlen;
    fl_wb_window wb; /* the open shard's writeback (fl_page_cache.h) */
    int drop_cache;  /* written shards leave the page cache (fl_cache_drop_enabled) */
    /* LMDB */
    fl_lmdb_writer *lmdb;
    fl_writer_lock *own_lock; /* the destination's lock when open took it (none was given) */
};

struct fl_writer_lock {
    char *dst;  /* normalised destination */
    char *path; /* "<dst>.lock" */
    int fd;
};

/* Write a small file of dir durably (fl_file_replace: tmp, fsync, rename, dir fsync) (writer.c). */
int fl_wr_write_file_atomic(const char *dir, const char *name, const void *data, size_t n,
                            fl_error *err);
/* A whole small file: 0, -errno of open, FL_E_FORMAT (cannot stat, over `max` bytes), -ENOMEM,
 * or -EIO (a read error, or it ended early). NUL-terminated (writer.c). */
int fl_wr_read_small_file(const char *path, size_t max, uint8_t **out, size_t *len);
/* Close the open shard: index, footer, header, fsync, rename (writer.c). */
int fl_wr_shard_finish(fl_writer *w, fl_error *err);
/* Free everything the writer holds, releasing a lock open took (writer.c). */
void fl_wr_free(fl_writer *w);

/* A malloc'ed copy of dst without trailing slashes; refuses "", "/", ".", ".." (writer_lock.c). */
int fl_wr_dst_normalise(const char *dst, char **out, fl_error *err);
/* The folder holding `path` ("." when it has no slash). */
void fl_wr_parent_of(const char *path, char *out, size_t n);
/* The error for a destination whose parent folder is missing (ENOENT/ENOTDIR on create). */
int fl_wr_parent_error(const char *dst, int e, const char *what, fl_error *err);

/* Delete a partial directory whose files are all ours, state.json first (writer_inspect.c). */
int fl_wr_clear_partial(const char *partial);
/* Parse "<dir>/manifest.json": 0, -ENOENT, or a format error with the reason in err. */
int fl_wr_read_manifest(const char *dir, fl_manifest *m, fl_error *err);

#endif
