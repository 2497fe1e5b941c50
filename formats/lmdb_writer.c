/* lmdb_writer.c — the LMDB backend's storage side of fl_writer: records under 8-byte big-endian
 * keys in the "records" DB (so key order is record order), metadata in "meta"; batched
 * transactions, and a map that doubles whenever LMDB reports MDB_MAP_FULL. */
#include <errno.h>
#include <lmdb.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_lmdb.h"
#include "fl_page_cache.h"
#include "fl_shard.h"

#define BATCH_RECORDS 4096u
#define BATCH_BYTES   (32u << 20)
size_t fl_lmdb_initial_mapsize = 64u << 20;

struct fl_lmdb_writer {
    char *dir;
    MDB_env *env;
    MDB_dbi rec_dbi, meta_dbi;
    size_t mapsize;
    uint64_t next; /* next record index expected */
    /* queued batch: values back to back; batch_first is the first queued index */
    uint8_t *vals;
    size_t vals_len, vals_cap;
    size_t *ends; /* end offset of each queued value */
    uint32_t nq, cap_q;
    uint64_t batch_first;
    int drop_cache;      /* committed pages leave the page cache (fl_cache_drop_enabled) */
    uint32_t version;    /* format version: value header size, meta */
    uint32_t *field_max; /* version 3: the writer's largest counts, stored with every batch */
    uint32_t n_fields;
};

/* After a commit (LMDB fsyncs data.mdb in it, so every written page is durable): drop the file's
 * cached pages. Pages LMDB reads through its map (the root, branch pages, the last leaf) are mapped
 * and stay; the appended leaves, never read again while packing, go. */
static void drop_committed(fl_lmdb_writer *lw)
{
    mdb_filehandle_t fd;
    if (lw->drop_cache && mdb_env_get_fd(lw->env, &fd) == 0)
        fl_cache_drop_file(fd);
}

static void key_of(uint64_t i, uint8_t k[8])
{
    for (int b = 7; b >= 0; b--) {
        k[b] = (uint8_t)(i & 0xFF);
        i >>= 8;
    }
}

static int lmdb_err(const fl_lmdb_writer *lw, int rc, const char *what, fl_error *err)
{
    return fl_error_set(err, rc > 0 && rc < 4096 ? -rc : FL_E_LMDB, /* errno or MDB_* code */
                        "%s/%s: %s: %s", lw->dir, FL_LMDB_DATA_FILE, what, mdb_strerror(rc));
}

static int grow_map(fl_lmdb_writer *lw, fl_error *err)
{
    size_t want = lw->mapsize * 2;
    int rc = mdb_env_set_mapsize(lw->env, want);
    if (rc)
        return lmdb_err(lw, rc, "cannot grow the map", err);
    lw->mapsize = want;
    return 0;
}

/* Run put-callback in a write txn, growing the map and retrying on MDB_MAP_FULL. */
typedef int (*txn_fn)(fl_lmdb_writer *lw, MDB_txn *txn, const void *arg);

static int with_txn(fl_lmdb_writer *lw, txn_fn fn, const void *arg, const char *what, fl_error *err)
{
    for (int attempt = 0; attempt < 40; attempt++) {
        MDB_txn *txn;
        int rc = mdb_txn_begin(lw->env, NULL, 0, &txn);
        if (rc == MDB_MAP_RESIZED) {
            rc = mdb_env_set_mapsize(lw->env, 0);
            if (rc == 0)
                continue;
        }
        if (rc)
            return lmdb_err(lw, rc, "cannot begin a transaction", err);
        rc = fn(lw, txn, arg);
        if (rc == 0) {
            rc = mdb_txn_commit(txn); /* frees txn whatever the outcome */
        } else {
            mdb_txn_abort(txn);
        }
        if (rc == 0)
            return 0;
        if (rc != MDB_MAP_FULL)
            return lmdb_err(lw, rc, what, err);
        rc = grow_map(lw, err);
        if (rc)
            return rc;
    }
    return fl_error_set(err, FL_E_LMDB, "%s/%s: %s: map keeps filling up", lw->dir,
                        FL_LMDB_DATA_FILE, what);
}

static int put_batch(fl_lmdb_writer *lw, MDB_txn *txn, const void *arg)
{
    size_t start = 0;
    for (uint32_t j = 0; j < lw->nq; j++) {
        uint8_t k[8];
        key_of(lw->batch_first + j, k);
        MDB_val key = {8, k}, val = {lw->ends[j] - start, lw->vals + start};
        /* keys arrive in ascending order: append mode fills pages completely */
        int rc = mdb_put(txn, lw->rec_dbi, &key, &val, MDB_APPEND);
        if (rc)
            return rc;
        start = lw->ends[j];
    }
    if (lw->n_fields) { /* the counts of exactly the records committed with them */
        MDB_val key = {strlen(FL_LMDB_META_FIELD_MAX), (void *)FL_LMDB_META_FIELD_MAX};
        MDB_val val = {lw->n_fields * 4u, lw->field_max};
        int rc = mdb_put(txn, lw->meta_dbi, &key, &val, 0);
        if (rc)
            return rc;
    }
    return 0;
}

static int commit_batch(fl_lmdb_writer *lw, fl_error *err)
{
    if (lw->nq == 0)
        return 0;
    int rc = with_txn(lw, put_batch, NULL, "cannot store records", err);
    if (rc)
        return rc;
    lw->batch_first += lw->nq;
    lw->nq = 0;
    lw->vals_len = 0;
    drop_committed(lw);
    return 0;
}

typedef struct meta_item {
    const char *key;
    const void *val;
    size_t len;
} meta_item;

static int put_meta(fl_lmdb_writer *lw, MDB_txn *txn, const void *arg)
{
    const meta_item *m = arg;
    MDB_val key = {strlen(m->key), (void *)m->key}, val = {m->len, (void *)m->val};
    return mdb_put(txn, lw->meta_dbi, &key, &val, 0);
}

static int set_meta(fl_lmdb_writer *lw, const char *k, const void *v, size_t n, fl_error *err)
{
    meta_item m = {k, v, n};
    return with_txn(lw, put_meta, &m, "cannot store metadata", err);
}

static void lw_free(fl_lmdb_writer *lw)
{
    if (!lw)
        return;
    if (lw->env)
        mdb_env_close(lw->env);
    free(lw->dir);
    free(lw->vals);
    free(lw->ends);
    free(lw);
}

int fl_lmdb_writer_open(const char *dir, int resume, uint32_t version, const uint8_t *dataset_id,
                        const void *dict, size_t dict_len, fl_lmdb_writer **out, uint64_t *existing,
                        fl_error *err)
{
    *out = NULL;
    *existing = 0;
    fl_lmdb_writer *lw = calloc(1, sizeof *lw);
    if (!lw || !(lw->dir = strdup(dir))) {
        free(lw);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", dir);
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, FL_LMDB_DATA_FILE);
    struct stat st;
    lw->drop_cache = fl_cache_drop_enabled();
    lw->version = version;
    lw->mapsize = fl_lmdb_initial_mapsize < (1u << 20) ? (1u << 20) : fl_lmdb_initial_mapsize;
    if (resume && stat(path, &st) == 0)
        while (lw->mapsize < (size_t)st.st_size * 2)
            lw->mapsize *= 2;
    int rc = mdb_env_create(&lw->env);
    if (rc == 0)
        rc = mdb_env_set_maxdbs(lw->env, 2);
    if (rc == 0)
        rc = mdb_env_set_mapsize(lw->env, lw->mapsize);
    /* dropping committed pages (drop_committed) makes LMDB fault the pages it walks back in through
     * its map; MDB_NORDAHEAD (MADV_RANDOM on the map, kept across map growth) keeps each such fault
     * to its own page instead of the device's read-around (read_ahead_kb: MiBs per fault) */
    if (rc == 0)
        rc = mdb_env_open(lw->env, dir, lw->drop_cache ? MDB_NORDAHEAD : 0, 0644);
    if (rc) {
        /* lw_free closes the environment: LMDB requires mdb_env_close after a failed open */
        int r = lmdb_err(lw, rc, "cannot open the environment", err);
        lw_free(lw);
        return r;
    }
    MDB_txn *txn;
    rc = mdb_txn_begin(lw->env, NULL, 0, &txn);
    if (rc == 0) {
        rc = mdb_dbi_open(txn, FL_LMDB_RECORDS_DB, MDB_CREATE, &lw->rec_dbi);
        if (rc == 0)
            rc = mdb_dbi_open(txn, FL_LMDB_META_DB, MDB_CREATE, &lw->meta_dbi);
        MDB_stat ms;
        if (rc == 0)
            rc = mdb_stat(txn, lw->rec_dbi, &ms);
        if (rc == 0 && ms.ms_entries > 0) {
            /* committed batches are whole: keys must be exactly 0..n-1 */
            MDB_cursor *cur;
            MDB_val k, v;
            rc = mdb_cursor_open(txn, lw->rec_dbi, &cur);
            if (rc == 0) {
                rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
                mdb_cursor_close(cur);
            }
            /* records of another run (another id, or a v1 writer's 24-byte value headers) cannot be
             * continued in this one */
            MDB_val mk = {strlen(FL_LMDB_META_ID), (void *)FL_LMDB_META_ID}, mv;
            MDB_val vk = {strlen(FL_LMDB_META_VERSION), (void *)FL_LMDB_META_VERSION}, vv;
            if (rc == 0 &&
                (mdb_get(txn, lw->meta_dbi, &mk, &mv) != 0 || mv.mv_size != FL_DATASET_ID_BYTES ||
                 memcmp(mv.mv_data, dataset_id, FL_DATASET_ID_BYTES) != 0 ||
                 mdb_get(txn, lw->meta_dbi, &vk, &vv) != 0 || vv.mv_size != 4 ||
                 fl_rd32(vv.mv_data) != version)) {
                mdb_txn_abort(txn);
                lw_free(lw);
                return fl_error_set(err, FL_E_INVALID,
                                    "%s: cannot resume: its records belong to another run (dataset "
                                    "id or format version differs); remove the partial dataset",
                                    path);
            }
            if (rc == 0) {
                uint8_t want[8];
                key_of(ms.ms_entries - 1, want);
                if (k.mv_size != 8 || memcmp(k.mv_data, want, 8) != 0) {
                    mdb_txn_abort(txn);
                    lw_free(lw);
                    return fl_error_set(err, FL_E_FORMAT,
                                        "%s: cannot resume: record keys are not 0..%zu", path,
                                        (size_t)ms.ms_entries - 1);
                }
            }
        }
        if (rc == 0)
            *existing = ms.ms_entries;
        if (rc == 0)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    if (rc) {
        int r = lmdb_err(lw, rc, "cannot open the record databases", err);
        lw_free(lw);
        return r;
    }
    lw->next = lw->batch_first = *existing;
    uint8_t ver[4];
    fl_wr32(ver, version);
    rc = set_meta(lw, FL_LMDB_META_VERSION, ver, 4, err);
    if (rc == 0)
        rc = set_meta(lw, FL_LMDB_META_ID, dataset_id, FL_DATASET_ID_BYTES, err);
    if (rc == 0 && dict_len)
        rc = set_meta(lw, FL_LMDB_META_DICT, dict, dict_len, err);
    if (rc) {
        lw_free(lw);
        return rc;
    }
    *out = lw;
    return 0;
}

int fl_lmdb_writer_track_max(fl_lmdb_writer *lw, uint32_t *field_max, uint32_t n, fl_error *err)
{
    lw->field_max = field_max;
    lw->n_fields = n;
    if (!n)
        return 0;
    MDB_txn *txn;
    int rc = mdb_txn_begin(lw->env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return lmdb_err(lw, rc, "cannot begin a transaction", err);
    MDB_val k = {strlen(FL_LMDB_META_FIELD_MAX), (void *)FL_LMDB_META_FIELD_MAX}, v;
    rc = mdb_get(txn, lw->meta_dbi, &k, &v);
    if (rc == 0 && v.mv_size == n * 4u)
        for (uint32_t f = 0; f < n; f++) {
            uint32_t c = fl_rd32((const uint8_t *)v.mv_data + 4 * f);
            if (c > field_max[f])
                field_max[f] = c;
        }
    mdb_txn_abort(txn);
    return 0;
}

int fl_lmdb_writer_add(fl_lmdb_writer *lw, uint64_t index, fl_encoding format, const void *stored,
                       size_t stored_len, const void *block, size_t block_len, uint32_t raw_len,
                       int32_t label, uint32_t crc, const char *name, size_t name_len,
                       uint32_t height, uint32_t width, fl_error *err)
{
    if (index != lw->next)
        return fl_error_set(err, FL_E_INVALID, "%s: record %llu added, %llu expected", lw->dir,
                            (unsigned long long)index, (unsigned long long)lw->next);
    size_t hsz = fl_lmdb_value_header(lw->version);
    size_t n = hsz + name_len + stored_len + block_len;
    if (lw->vals_len + n > lw->vals_cap) {
        size_t cap = lw->vals_cap ? lw->vals_cap : 1 << 20;
        while (cap < lw->vals_len + n)
            cap *= 2;
        uint8_t *v = realloc(lw->vals, cap);
        if (!v)
            return fl_error_set(err, -ENOMEM, "%s: out of memory", lw->dir);
        lw->vals = v;
        lw->vals_cap = cap;
    }
    if (lw->nq == lw->cap_q) {
        uint32_t cap = lw->cap_q ? lw->cap_q * 2 : 256;
        size_t *e = realloc(lw->ends, cap * sizeof *e);
        if (!e)
            return fl_error_set(err, -ENOMEM, "%s: out of memory", lw->dir);
        lw->ends = e;
        lw->cap_q = cap;
    }
    uint8_t *h = lw->vals + lw->vals_len;
    fl_wr32(h + 0, (uint32_t)label);
    fl_wr32(h + 4, crc);
    fl_wr32(h + 8, raw_len);
    fl_wr32(h + 12, height);
    fl_wr32(h + 16, width);
    fl_wr32(h + 20, (uint32_t)name_len);
    fl_wr32(h + 24, (uint32_t)format);
    if (lw->version >= 3)
        fl_wr32(h + 28, (uint32_t)block_len);
    memcpy(h + hsz, name, name_len);
    if (stored_len)
        memcpy(h + hsz + name_len, stored, stored_len);
    if (block_len)
        memcpy(h + hsz + name_len + stored_len, block, block_len);
    lw->vals_len += n;
    lw->ends[lw->nq++] = lw->vals_len;
    lw->next++;
    if (lw->nq >= BATCH_RECORDS || lw->vals_len >= BATCH_BYTES)
        return commit_batch(lw, err);
    return 0;
}

int fl_lmdb_writer_finish(fl_lmdb_writer *lw, const char *manifest, size_t len, fl_error *err)
{
    int rc = commit_batch(lw, err);
    if (rc == 0)
        rc = set_meta(lw, FL_LMDB_META_MANIFEST, manifest, len, err);
    if (rc == 0) {
        int r = mdb_env_sync(lw->env, 1);
        if (r)
            rc = lmdb_err(lw, r, "sync failed", err);
        else
            drop_committed(lw);
    }
    char lock[PATH_MAX];
    snprintf(lock, sizeof lock, "%s/%s", lw->dir, FL_LMDB_LOCK_FILE);
    lw_free(lw);
    if (rc == 0)
        unlink(lock); /* readers open the finished, immutable file with MDB_NOLOCK */
    return rc;
}

void fl_lmdb_writer_abort(fl_lmdb_writer *lw)
{
    if (!lw)
        return;
    /* queued records are complete: keep them for a resumed run */
    fl_error e;
    commit_batch(lw, &e);
    lw_free(lw);
}
