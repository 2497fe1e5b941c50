/* lmdb_writer.c — the LMDB backend's storage side of fl_writer: records under 8-byte big-endian
 * keys in the "records" DB (so key order is record order), metadata in "meta"; batched
 * transactions, a map that doubles whenever LMDB reports MDB_MAP_FULL, and at finish the record
 * index (every record's entry and its value's place in data.mdb) that lets a reader open
 * without walking the records. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "fl_lmdb.h"
#include "fl_page_cache.h"
#include "fl_shard.h"

#define BATCH_RECORDS 4096u
#define BATCH_BYTES   (32u << 20)
size_t fl_lmdb_initial_mapsize = 64u << 20;
int fl_lmdb_write_index = 1;

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
    /* the record index: entries of records [ix_first, resolved) are final and waiting in ix
     * (ix_first is a chunk's first record); kpage: the leaf page holding each one's key */
    int ix_off; /* no index this run (fl_lmdb_write_index 0, or values could not be placed) */
    uint8_t *ix;
    uint64_t *kpage;
    uint64_t ix_first, resolved;
    ZSTD_CCtx *cc;
    uint8_t *z;
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

/* ---- the record index (SPEC.md, "LMDB backend") ---------------------------------------------
 * Every record's entry (the shard index entry, offset = its value's byte offset in data.mdb) in
 * meta "record_index.C", so a reader places every value without reading it. A value's place is
 * final once its transaction is committed, except for inline values in the last leaf page:
 * appending (MDB_APPEND) copies only the rightmost path of the tree, so the next batch moves
 * that leaf and nothing else (overflow pages never move). After each commit, while its pages
 * are still in the page cache, the records since the last final one are read back through
 * LMDB's map; a chunk whose records are all final goes into meta in a transaction of its own
 * (writing meta moves no page of the records). The header, bound to the records database's
 * shape, goes in with the manifest at finish. */
#define IX_CAP (2u * FL_LMDB_INDEX_CHUNK + BATCH_RECORDS)

/* Where LMDB mapped data.mdb, from a page it returned a pointer into: the page header starts
 * with the page's number (LMDB 0.9). NULL when that does not hold together. */
static const uint8_t *map_base(const void *inside, uint32_t psize, uint64_t npages)
{
    uintptr_t page = (uintptr_t)inside & ~(uintptr_t)(psize - 1);
    uint64_t pgno = fl_rd64((const uint8_t *)page);
    if (pgno < 2 || pgno >= npages || (uint64_t)page < pgno * psize)
        return NULL;
    return (const uint8_t *)(page - (uintptr_t)(pgno * psize));
}

/* Record i's entry from its value at v (key k), into ix. 0, or 1 when it cannot be placed. */
static int entry_of(fl_lmdb_writer *lw, uint64_t i, const MDB_val *k, const MDB_val *v,
                    const uint8_t *base, uint64_t used, uint32_t psize)
{
    uint8_t want[8];
    key_of(i, want);
    size_t hsz = fl_lmdb_value_header(lw->version);
    const uint8_t *p = v->mv_data;
    if (k->mv_size != 8 || memcmp(k->mv_data, want, 8) || v->mv_size < hsz ||
        p < base + 2ull * psize || (uint64_t)(p - base) > used ||
        v->mv_size > used - (uint64_t)(p - base) || i - lw->ix_first >= IX_CAP)
        return 1;
    uint32_t name_len = fl_rd32(p + 20);
    if (name_len > v->mv_size - hsz)
        return 1;
    uint8_t *e = lw->ix + (i - lw->ix_first) * FL_LMDB_INDEX_ENTRY;
    fl_wr64(e, (uint64_t)(p - base));
    fl_wr32(e + 8, (uint32_t)(v->mv_size - hsz - name_len)); /* stored_len */
    fl_wr32(e + 12, fl_rd32(p + 8));                         /* raw_len */
    fl_wr32(e + 16, fl_rd32(p));                             /* label */
    fl_wr32(e + 20, fl_rd32(p + 4));                         /* crc32c */
    fl_wr32(e + 24, fl_rd32(p + 12));                        /* height */
    fl_wr32(e + 28, fl_rd32(p + 16));                        /* width */
    fl_wr32(e + 32, 0);                                      /* the name is in the value */
    fl_wr32(e + 36, name_len);
    fl_wr32(e + 40, fl_rd32(p + 24)); /* format */
    fl_wr32(e + 44, lw->version >= 3 ? fl_rd32(p + 28) : 0);
    lw->kpage[i - lw->ix_first] = (uint64_t)((const uint8_t *)k->mv_data - base) / psize;
    return 0;
}

typedef struct index_put {
    const uint8_t *chunk; /* NULL: the header and the manifest */
    size_t chunk_len;
    uint64_t c, records;
    const char *manifest;
    size_t manifest_len;
} index_put;

static int put_index(fl_lmdb_writer *lw, MDB_txn *txn, const void *arg)
{
    const index_put *ip = arg;
    char key[48];
    if (ip->chunk) {
        snprintf(key, sizeof key, "%s.%llu", FL_LMDB_META_INDEX, (unsigned long long)ip->c);
        MDB_val k = {strlen(key), key}, v = {ip->chunk_len, (void *)ip->chunk};
        return mdb_put(txn, lw->meta_dbi, &k, &v, 0);
    }
    MDB_val mk = {strlen(FL_LMDB_META_MANIFEST), (void *)FL_LMDB_META_MANIFEST};
    MDB_val mv = {ip->manifest_len, (void *)ip->manifest};
    if (lw->ix_off)
        return mdb_put(txn, lw->meta_dbi, &mk, &mv, 0);
    /* the header names the records database's shape, read in this very transaction */
    MDB_stat ms;
    int rc = mdb_stat(txn, lw->rec_dbi, &ms);
    if (rc)
        return rc;
    uint8_t h[FL_LMDB_INDEX_HEADER];
    fl_wr32(h, FL_LMDB_INDEX_VERSION);
    fl_wr32(h + 4, FL_LMDB_INDEX_ENTRY);
    fl_wr32(h + 8, FL_LMDB_INDEX_CHUNK);
    fl_wr32(h + 12, ms.ms_depth);
    fl_wr64(h + 16, ip->records);
    fl_wr64(h + 24, ms.ms_branch_pages);
    fl_wr64(h + 32, ms.ms_leaf_pages);
    fl_wr64(h + 40, ms.ms_overflow_pages);
    fl_wr32(h + 48, fl_crc32c(0, h, 48));
    MDB_val k = {strlen(FL_LMDB_META_INDEX), (void *)FL_LMDB_META_INDEX}, v = {sizeof h, h};
    rc = mdb_put(txn, lw->meta_dbi, &k, &v, 0);
    return rc ? rc : mdb_put(txn, lw->meta_dbi, &mk, &mv, 0);
}

/* Store the first `cnt` entries of ix as chunk ix_first / CHUNK and drop them from ix. */
static int flush_chunk(fl_lmdb_writer *lw, size_t cnt, fl_error *err)
{
    size_t bytes = cnt * FL_LMDB_INDEX_ENTRY, zcap = 4 + ZSTD_compressBound(bytes);
    if (!lw->cc && !(lw->cc = ZSTD_createCCtx()))
        return fl_error_set(err, -ENOMEM, "%s: out of memory", lw->dir);
    if (!lw->z &&
        !(lw->z = malloc(4 + ZSTD_compressBound(FL_LMDB_INDEX_CHUNK * FL_LMDB_INDEX_ENTRY))))
        return fl_error_set(err, -ENOMEM, "%s: out of memory", lw->dir);
    size_t zn = ZSTD_compressCCtx(lw->cc, lw->z + 4, zcap - 4, lw->ix, bytes, 3);
    if (ZSTD_isError(zn))
        return fl_error_set(err, FL_E_INVALID, "%s: record index: %s", lw->dir,
                            ZSTD_getErrorName(zn));
    fl_wr32(lw->z, fl_crc32c(0, lw->ix, bytes));
    index_put ip = {lw->z, 4 + zn, lw->ix_first / FL_LMDB_INDEX_CHUNK, 0, NULL, 0};
    int rc = with_txn(lw, put_index, &ip, "cannot store the record index", err);
    if (rc)
        return rc;
    size_t keep = (size_t)(lw->resolved - lw->ix_first) - cnt;
    memmove(lw->ix, lw->ix + bytes, keep * FL_LMDB_INDEX_ENTRY);
    memmove(lw->kpage, lw->kpage + cnt, keep * sizeof *lw->kpage);
    lw->ix_first += cnt;
    return 0;
}

/* Read back the committed records [resolved, batch_first) and keep their entries; all of them
 * are final when `last` (no record follows), else all but the inline values of the last leaf.
 * Complete chunks are stored. A layout other than the one expected turns the index off. */
static int resolve(fl_lmdb_writer *lw, int last, fl_error *err)
{
    if (lw->ix_off || lw->resolved >= lw->batch_first)
        return 0;
    if (!lw->ix) {
        lw->ix = malloc((size_t)IX_CAP * FL_LMDB_INDEX_ENTRY);
        lw->kpage = malloc((size_t)IX_CAP * sizeof *lw->kpage);
        if (!lw->ix || !lw->kpage)
            return fl_error_set(err, -ENOMEM, "%s: out of memory", lw->dir);
    }
    MDB_txn *txn;
    MDB_cursor *cur = NULL;
    MDB_envinfo info = {0};
    MDB_stat st = {0};
    int rc = mdb_txn_begin(lw->env, NULL, MDB_RDONLY, &txn);
    if (rc)
        return lmdb_err(lw, rc, "cannot begin a transaction", err);
    if ((rc = mdb_env_info(lw->env, &info)) == 0 && (rc = mdb_env_stat(lw->env, &st)) == 0)
        rc = mdb_cursor_open(txn, lw->rec_dbi, &cur);
    uint64_t npages = (uint64_t)info.me_last_pgno + 1, used = npages * st.ms_psize;
    /* the last final record, where it was: still there (what the append rule promises) */
    uint64_t i = lw->resolved > lw->ix_first ? lw->resolved - 1 : lw->resolved;
    uint8_t k0[8], before[FL_LMDB_INDEX_ENTRY];
    key_of(i, k0);
    MDB_val k = {8, k0}, v;
    if (rc == 0)
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY);
    const uint8_t *base = rc == 0 ? map_base(k.mv_data, st.ms_psize, npages) : NULL;
    int bad = rc == 0 && !base;
    if (!bad && rc == 0 && i < lw->resolved) {
        memcpy(before, lw->ix + (i - lw->ix_first) * FL_LMDB_INDEX_ENTRY, sizeof before);
        bad = entry_of(lw, i, &k, &v, base, used, st.ms_psize) ||
              memcmp(before, lw->ix + (i - lw->ix_first) * FL_LMDB_INDEX_ENTRY, sizeof before);
        if (!bad)
            rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
        i++;
    }
    for (; !bad && rc == 0 && i < lw->batch_first; i++) {
        bad = entry_of(lw, i, &k, &v, base, used, st.ms_psize);
        if (!bad && i + 1 < lw->batch_first)
            rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    if (cur)
        mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    if (base) /* the pages read leave the resident set (the page cache keeps them) */
        madvise((void *)base, (size_t)used, MADV_DONTNEED);
    if (rc)
        return lmdb_err(lw, rc, "cannot read back the records for the record index", err);
    if (bad) {
        lw->ix_off = 1; /* the data set is still read whole, by walking its records */
        return 0;
    }
    uint64_t end = lw->batch_first;
    if (!last) { /* inline values in the leaf of the last key move with the next batch: the
                  * entries start again at the first of them */
        uint64_t leaf = lw->kpage[end - 1 - lw->ix_first], j = end;
        while (j > lw->resolved && lw->kpage[j - 1 - lw->ix_first] == leaf) {
            j--;
            if (fl_rd64(lw->ix + (j - lw->ix_first) * FL_LMDB_INDEX_ENTRY) / st.ms_psize == leaf)
                end = j;
        }
    }
    lw->resolved = end;
    while (rc == 0 && lw->resolved - lw->ix_first >= FL_LMDB_INDEX_CHUNK)
        rc = flush_chunk(lw, FL_LMDB_INDEX_CHUNK, err);
    return rc;
}

/* At finish: every entry, the last chunk, then the header with the manifest (one transaction). */
static int write_index(fl_lmdb_writer *lw, const char *manifest, size_t len, fl_error *err)
{
    int rc = resolve(lw, 1, err);
    if (rc == 0 && !lw->ix_off && lw->resolved > lw->ix_first)
        rc = flush_chunk(lw, (size_t)(lw->resolved - lw->ix_first), err);
    if (rc)
        return rc;
    index_put ip = {NULL, 0, 0, lw->next, manifest, len};
    return with_txn(lw, put_index, &ip, "cannot store the record index", err);
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
    rc = resolve(lw, 0, err); /* before the pages leave the page cache */
    drop_committed(lw);
    return rc;
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
    free(lw->ix);
    free(lw->kpage);
    free(lw->z);
    ZSTD_freeCCtx(lw->cc);
    free(lw);
}

/* Resuming: the chunks an earlier run stored whole stay (their records have not moved since);
 * the entries start again at the first chunk missing or stored short. */
static void first_unindexed(fl_lmdb_writer *lw)
{
    MDB_txn *txn;
    uint64_t c = 0;
    if (mdb_txn_begin(lw->env, NULL, MDB_RDONLY, &txn) != 0) {
        lw->ix_off = 1;
        return;
    }
    for (;; c++) {
        char key[48];
        snprintf(key, sizeof key, "%s.%llu", FL_LMDB_META_INDEX, (unsigned long long)c);
        MDB_val k = {strlen(key), key}, v;
        if ((c + 1) * FL_LMDB_INDEX_CHUNK > lw->batch_first ||
            mdb_get(txn, lw->meta_dbi, &k, &v) != 0 || v.mv_size < 4 ||
            ZSTD_getFrameContentSize((const uint8_t *)v.mv_data + 4, v.mv_size - 4) !=
                (unsigned long long)FL_LMDB_INDEX_CHUNK * FL_LMDB_INDEX_ENTRY)
            break;
    }
    mdb_txn_abort(txn);
    lw->ix_first = lw->resolved = c * FL_LMDB_INDEX_CHUNK;
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
        /* a record index made by an earlier finish describes fewer records: made again at the
         * end of this run */
        MDB_val ik = {strlen(FL_LMDB_META_INDEX), (void *)FL_LMDB_META_INDEX};
        if (rc == 0 && ms.ms_entries > 0) {
            rc = mdb_del(txn, lw->meta_dbi, &ik, NULL);
            if (rc == MDB_NOTFOUND)
                rc = 0;
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
    lw->ix_off = !fl_lmdb_write_index;
    if (*existing && !lw->ix_off)
        first_unindexed(lw);
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
        rc = write_index(lw, manifest, len, err);
    if (rc == 0) {
        int r = mdb_env_sync(lw->env, 1);
        if (r)
            rc = lmdb_err(lw, r, "sync failed", err);
        else
            drop_committed(lw);
    }
    char lock[PATH_MAX], data[PATH_MAX];
    snprintf(lock, sizeof lock, "%s/%s", lw->dir, FL_LMDB_LOCK_FILE);
    snprintf(data, sizeof data, "%s/%s", lw->dir, FL_LMDB_DATA_FILE);
    int drop = lw->drop_cache;
    lw_free(lw);
    if (rc == 0)
        unlink(lock);      /* readers open the finished, immutable file with MDB_NOLOCK */
    if (rc == 0 && drop) { /* the pages the record index was read from, mapped until now */
        int fd = open(data, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            fl_cache_drop_file(fd);
            close(fd);
        }
    }
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
