/* lmdb_reader.c — the LMDB backend of fl_dataset: opens data.mdb read-only without a lock file
 * (a finished dataset is immutable), keeps one read transaction for the dataset's lifetime so
 * LMDB's zero-copy pointers stay valid until close, and resolves every record once at open
 * (bounds-checked) so the hot path makes no LMDB calls at all and is safe from any thread. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <zstd.h>

#include "fl_dataset_impl.h"
#include "fl_file.h"
#include "fl_lmdb.h"

struct fl_lmdb_reader {
    MDB_env *env;
    MDB_txn *txn;
    const uint8_t *base; /* where the file is mapped (NULL: unknown, values not bounded) */
    uint64_t used;       /* bytes of used pages: every value lies in [base, base + used) */
};

void fl_lmdb_reader_close(fl_dataset *ds)
{
    fl_lmdb_reader *r = ds->lmdb;
    if (!r)
        return;
    if (r->txn)
        mdb_txn_abort(r->txn);
    if (r->env)
        mdb_env_close(r->env);
    free(r);
    ds->lmdb = NULL;
}

void fl_lmdb_reader_drop_pages(const fl_dataset *ds)
{
    if (ds->lmdb && ds->lmdb->base && ds->lmdb->used)
        madvise((void *)ds->lmdb->base, (size_t)ds->lmdb->used, MADV_DONTNEED);
}

static uint64_t key_value(const uint8_t *k)
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++)
        v = (v << 8) | k[b];
    return v;
}

/* ---- the B-tree, checked before LMDB walks it ----------------------------------------------
 * LMDB trusts its pages: a node offset, key size or page number from a crafted file makes it
 * read outside the map (SIGSEGV inside liblmdb, found by fuzz_lmdb). So every page LMDB may visit
 * from the main database's root is checked first, over our own read-only mapping of the used
 * pages (LMDB 0.9, 64-bit layout): page header 16 bytes (pgno, pad, u16 flags at 10, u16 lower
 * and upper at 12/14, or u32 overflow page count at 12), then u16 node offsets; a node is u16
 * lo, hi (data size, or a branch's child page with flags as its top 16 bits), flags, key size,
 * then key and data. Each page is visited at most once (a cycle is refused), depth <= 32. */
enum {
    PG_BRANCH = 1,
    PG_LEAF = 2,
    PG_OVERFLOW = 4,
    ND_BIGDATA = 1,
    ND_SUBDATA = 2,
    ND_DUPDATA = 4
};
typedef struct page_walk {
    const uint8_t *map;
    uint64_t npages;
    uint32_t psize;
    uint8_t *seen;
    int64_t record; /* the record whose node was bad (its 8-byte big-endian key), or -1 */
    uint64_t visited;
} page_walk;

/* Pages of a file mapping read through so far leave the resident set (they stay in the page
 * cache; a later read faults them back in): walking a data set's pages once no longer makes the
 * process's peak RSS the size of the file. Every FL_LMDB_DROP_EVERY pages walked. */
#define FL_LMDB_DROP_EVERY 4096u
static void drop_pages(const uint8_t *map, uint64_t len)
{
    if (map && len)
        madvise((void *)map, (size_t)len, MADV_DONTNEED);
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static const char *walk_page(page_walk *w, uint64_t pg, int depth, int main_db)
{
    if (pg < 2 || pg >= w->npages)
        return "a page number outside the used pages";
    if (depth > 32)
        return "a tree deeper than 32 levels";
    if (w->seen[pg >> 3] & (1u << (pg & 7)))
        return "a page reached twice (a cycle)";
    w->seen[pg >> 3] |= (uint8_t)(1u << (pg & 7));
    if (++w->visited % FL_LMDB_DROP_EVERY == 0) /* the pages being walked fault back in */
        drop_pages(w->map, w->npages * w->psize);
    const uint8_t *p = w->map + pg * w->psize;
    uint16_t flags = rd16(p + 10), lower = rd16(p + 12), upper = rd16(p + 14);
    int branch = (flags & PG_BRANCH) != 0, leaf = (flags & PG_LEAF) != 0;
    if (branch == leaf || (flags & ~(PG_BRANCH | PG_LEAF | 0x10)))
        return "a tree page that is neither a branch nor a leaf";
    if (lower < 16 || (lower - 16) % 2 || lower > upper || upper > w->psize ||
        (branch && lower == 16))
        return "a page whose node area is out of bounds";
    for (uint32_t i = 0; i < (uint32_t)(lower - 16) / 2; i++) {
        uint32_t off = rd16(p + 16 + 2 * i);
        if (off < upper || (uint64_t)off + 8 > w->psize)
            return "a node outside its page";
        const uint8_t *n = p + off;
        uint16_t nflags = rd16(n + 4), ksize = rd16(n + 6);
        uint64_t end = (uint64_t)off + 8 + ksize;
        if (end > w->psize)
            return "a key past the end of its page";
        if (branch) {
            uint64_t child = rd16(n) | (uint64_t)rd16(n + 2) << 16 | (uint64_t)nflags << 32;
            const char *why = walk_page(w, child, depth + 1, main_db);
            if (why)
                return why;
            continue;
        }
        uint64_t dsize = rd16(n) | (uint64_t)rd16(n + 2) << 16;
        if (!main_db && ksize == 8) {
            w->record = 0;
            for (int b = 0; b < 8; b++)
                w->record = w->record << 8 | n[8 + b];
            if (w->record < 0)
                w->record = -1;
        }
        if (nflags & ND_DUPDATA)
            return "duplicate-key data (not a fastload LMDB)";
        if (nflags & ND_BIGDATA) {
            if (end + 8 > w->psize)
                return "an overflow page number past the end of its page";
            uint64_t opg = fl_rd64(n + 8 + ksize);
            if (opg < 2 || opg >= w->npages)
                return "an overflow page outside the used pages";
            const uint8_t *op = w->map + opg * w->psize;
            uint64_t pages = fl_rd32(op + 12);
            if (!(rd16(op + 10) & PG_OVERFLOW) || !pages || pages > w->npages - opg ||
                dsize > pages * w->psize - 16)
                return "an overflow value larger than its pages or past the used pages";
        } else if (nflags & ND_SUBDATA) {
            if (!main_db || dsize != 48 || end + 48 > w->psize)
                return "a bad named database";
            uint64_t root = fl_rd64(n + 8 + ksize + 40);
            if (root != UINT64_MAX) {
                const char *why = walk_page(w, root, 0, 0);
                if (why)
                    return why;
            }
        } else if (end + dsize > w->psize) {
            return "a value past the end of its page";
        }
        w->record = -1;
    }
    return NULL;
}

static int check_pages(int fd, const char *path, uint32_t psize, uint64_t npages, uint64_t root,
                       fl_error *err)
{
    if (root == UINT64_MAX)
        return 0; /* an empty environment: the named databases are missing */
    size_t len = (size_t)(npages * psize);
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return fl_error_set(err, -errno, "%s: cannot map: %s", path, strerror(errno));
    page_walk w = {map, npages, psize, calloc(npages / 8 + 1, 1), -1, 0};
    const char *why = w.seen ? walk_page(&w, root, 0, 1) : NULL;
    int rc = w.seen ? 0 : fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    if (why && w.record >= 0)
        rc = fl_error_set(err, FL_E_FORMAT, "%s: record %lld: LMDB %s: damaged or crafted", path,
                          (long long)w.record, why);
    else if (why)
        rc = fl_error_set(err, FL_E_FORMAT, "%s: LMDB %s: damaged or crafted", path, why);
    free(w.seen);
    munmap(map, len);
    return rc;
}

/* LMDB's two meta pages, read before LMDB maps anything (0.9 layout, 64-bit: the page header is
 * 16 bytes; the meta follows: magic, version, address, mapsize, the free and main databases (48
 * bytes each, the page size in the first one's pad), last page, txnid). LMDB maps what the meta
 * declares and trusts its page numbers: a crafted map size fails with "Cannot allocate memory" or
 * reserves terabytes, a last page past the end faults. The newer meta is the one LMDB uses; its
 * page size, map size and last page are bounded by the file. *map_bytes: the map to ask for. */
#define FL_LMDB_META_MAGIC  0xBEEFC0DEu
#define FL_LMDB_MAX_MAPSIZE (1ull << 44) /* 16 TiB: no writer of this format asks for more */
static int check_meta(int fd, const char *path, uint64_t size, uint64_t *map_bytes, fl_error *err)
{
    uint8_t pg[2][160];
    size_t got = 0;
    if (fl_pread_full(fd, pg[0], sizeof pg[0], 0, &got) != 0 || got != sizeof pg[0])
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s: too short for an LMDB file: damaged or crafted", path);
    uint32_t psize = fl_rd32(pg[0] + 40);
    if (fl_rd32(pg[0] + 16) != FL_LMDB_META_MAGIC || fl_rd32(pg[0] + 20) != 1)
        return fl_error_set(err, FL_E_LMDB, "%s: not an LMDB file (meta magic/version)", path);
    if (psize < 512 || psize > 65536 || (psize & (psize - 1)) || size < 2ull * psize)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: LMDB page size %u for a %llu-byte file: damaged "
                            "or crafted",
                            path, psize, (unsigned long long)size);
    if (fl_pread_full(fd, pg[1], sizeof pg[1], psize, &got) != 0 || got != sizeof pg[1])
        return fl_error_set(err, FL_E_TRUNCATED, "%s: no second LMDB meta page: damaged or crafted",
                            path);
    int use =
        fl_rd32(pg[1] + 16) == FL_LMDB_META_MAGIC && fl_rd64(pg[1] + 144) > fl_rd64(pg[0] + 144);
    /* LMDB takes its page size from the meta it uses: both must agree with the layout */
    if (fl_rd32(pg[1] + 16) == FL_LMDB_META_MAGIC && fl_rd32(pg[1] + 40) != psize)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: LMDB meta 1 page size %u, meta 0 says %u: "
                            "damaged or crafted",
                            path, fl_rd32(pg[1] + 40), psize);
    const uint8_t *mp = pg[use];
    uint64_t mapsize = fl_rd64(mp + 32), last = fl_rd64(mp + 136);
    if (mapsize > FL_LMDB_MAX_MAPSIZE)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: LMDB meta %d declares a map of %llu bytes for a "
                            "%llu-byte file: damaged or crafted",
                            path, use, (unsigned long long)mapsize, (unsigned long long)size);
    if (last >= size / psize)
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s: LMDB meta %d says page %llu is used, the "
                            "%llu-byte file ends at page %llu: truncated, damaged or crafted",
                            path, use, (unsigned long long)last, (unsigned long long)size,
                            (unsigned long long)(size / psize));
    *map_bytes = (size + psize - 1) / psize * psize;
    return check_pages(fd, path, psize, last + 1, fl_rd64(mp + 128), err);
}

/* Open data.mdb relative to the dataset directory, check its size against the manifest and
 * LMDB's last used page, and open the environment on that very file (read-only, no lock). */
static int open_env(fl_dataset *ds, const fl_manifest *m, int dir_fd, fl_error *err)
{
    const char *path = ds->file_paths[0];
    /* The file as the manifest describes it: opened relative to the directory the manifest came
     * from, kept open, its size checked before LMDB maps anything (a mapping past the end of a
     * truncated file kills the process with SIGBUS at the first touch). */
    int fd = fl_open_regular_at(dir_fd, m->shards[0].file, FL_OPEN_NOFOLLOW, NULL);
    if (fd < 0) {
        if (fd == -ELOOP || fd == -EISDIR)
            return fl_dataset_open_refused(path, "an LMDB data file", fd, err);
        return fl_error_set(err, fd, "%s: %s", path, strerror(-fd));
    }
    ds->lmdb_fd = fd;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        return fl_error_set(err, -e, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode))
        return fl_error_set(err, FL_E_FORMAT, "%s: not a regular file", path);
    uint64_t size = (uint64_t)st.st_size, want = m->shards[0].bytes;
    if (size != want)
        return fl_error_set(err, size < want ? FL_E_TRUNCATED : FL_E_FORMAT,
                            "%s is %llu bytes, the manifest says %llu: %s", path,
                            (unsigned long long)size, (unsigned long long)want,
                            size < want ? "truncated" : "not the file the manifest describes");
    ds->total_bytes = size;
    fl_lmdb_reader *r = calloc(1, sizeof *r);
    if (!r)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    ds->lmdb = r;
    /* LMDB opens by name: name the file through the directory fd we hold, so it is the same
     * directory's data.mdb even if the dataset is being replaced; the inode is compared below. */
    char via[64 + 256];
    snprintf(via, sizeof via, "/proc/self/fd/%d/%s", dir_fd, m->shards[0].file);
    const char *open_path = access(via, F_OK) == 0 ? via : path;
    uint64_t map_bytes = 0;
    int rc = check_meta(fd, path, size, &map_bytes, err);
    if (rc)
        return rc;
    /* MDB_NOTLS: the one read txn is not tied to this thread; MDB_NOLOCK: immutable data, no
     * lock file (the dataset directory may be read-only). The map is the file's own size, not
     * the one its meta declares: a reader never maps more than it can read. */
    rc = mdb_env_create(&r->env);
    if (rc == 0)
        rc = mdb_env_set_maxdbs(r->env, 2);
    if (rc == 0)
        rc = mdb_env_set_mapsize(r->env, (size_t)map_bytes);
    if (rc == 0)
        rc = mdb_env_open(r->env, open_path, MDB_RDONLY | MDB_NOLOCK | MDB_NOSUBDIR | MDB_NOTLS,
                          0644);
    if (rc)
        return fl_error_set(err, FL_E_LMDB, "%s: cannot open LMDB environment: %s", path,
                            mdb_strerror(rc));
    int lfd = -1;
    struct stat lst;
    if (mdb_env_get_fd(r->env, &lfd) != 0 || fstat(lfd, &lst) != 0 || lst.st_dev != st.st_dev ||
        lst.st_ino != st.st_ino)
        return fl_error_set(err, -EAGAIN,
                            "%s: the dataset was replaced while being opened: open it again", path);
    /* LMDB's own claim: every page up to the last one used must be in the file (and in the map) */
    MDB_envinfo info;
    MDB_stat es;
    rc = mdb_env_info(r->env, &info);
    if (rc == 0)
        rc = mdb_env_stat(r->env, &es);
    if (rc)
        return fl_error_set(err, FL_E_LMDB, "%s: %s", path, mdb_strerror(rc));
    uint64_t used = ((uint64_t)info.me_last_pgno + 1) * es.ms_psize;
    if (used > size)
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s is %llu bytes, LMDB's last used page ends at byte %llu: truncated",
                            path, (unsigned long long)size, (unsigned long long)used);
    if ((uint64_t)info.me_mapsize < used)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: LMDB map (%zu bytes) smaller than its %llu used bytes", path,
                            info.me_mapsize, (unsigned long long)used);
    r->used = used;
    return 0;
}

/* Where LMDB mapped the file: the mapping of /proc/self/maps that holds `p` and maps this very
 * file (device, inode) from offset 0. Every value LMDB hands back must lie in [base, base +
 * used): a crafted page can point a value past the end of the file (SIGBUS at the first touch)
 * or past the map. Returns 0 and *base, or -1 when /proc is not there (the bound is then off). */
static int find_map(const void *p, const struct stat *st, const uint8_t **base)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[512];
    int found = -1;
    uintptr_t a = (uintptr_t)p;
    while (found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off, ino;
        unsigned maj, mnr;
        char perm[8];
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perm, &off, &maj, &mnr, &ino) != 7)
            continue;
        if (a >= lo && a < hi && off == 0 && ino == (unsigned long)st->st_ino &&
            maj == major(st->st_dev) && mnr == minor(st->st_dev)) {
            *base = (const uint8_t *)lo;
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* Is the value [v, v + n) inside the used pages of the map? */
static int in_map(const fl_lmdb_reader *r, const void *v, size_t n)
{
    if (!r->base)
        return 1;
    const uint8_t *p = v;
    return p >= r->base && (uint64_t)(p - r->base) <= r->used &&
           n <= r->used - (uint64_t)(p - r->base);
}

/* Version 3: the manifest's max_count of each variable field is the largest count the writer
 * kept in meta "field_max" (a u32 per field, always written with the fields). A loader sizes
 * every batch slot from it, so a missing field_max, or a max_count above (a crafted 2^28 boxes)
 * or below (records would overflow their slots) it, is refused here. */
static int check_field_max(fl_lmdb_reader *r, MDB_dbi meta, const fl_manifest *m, const char *path,
                           fl_error *err)
{
    int var = -1;
    for (uint32_t f = 0; f < m->num_fields && var < 0; f++)
        if (fl_field_is_variable(m->fields[f].type))
            var = (int)f;
    if (var < 0)
        return 0;
    MDB_val k = {strlen(FL_LMDB_META_FIELD_MAX), (void *)FL_LMDB_META_FIELD_MAX}, v;
    int rc = mdb_get(r->txn, meta, &k, &v);
    if (rc != 0 || v.mv_size != 4u * m->num_fields || !in_map(r, v.mv_data, v.mv_size))
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: field \"%s\": no meta \"%s\" (%u counts) to check the "
                            "manifest's max_count against: damaged or crafted",
                            path, m->fields[var].name, FL_LMDB_META_FIELD_MAX, m->num_fields);
    for (uint32_t f = 0; f < m->num_fields; f++) {
        uint32_t most = fl_rd32((const uint8_t *)v.mv_data + 4 * f);
        if (!fl_field_is_variable(m->fields[f].type) || m->fields[f].max_count == most)
            continue;
        if (m->fields[f].max_count > most)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: field \"%s\": the manifest's max_count is %u, the data "
                                "file's largest count %u: damaged or crafted",
                                path, m->fields[f].name, m->fields[f].max_count, most);
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: field \"%s\": up to %u per record, the manifest's max_count "
                            "is %u",
                            path, m->fields[f].name, most, m->fields[f].max_count);
    }
    return 0;
}

/* The read transaction kept until close, the two databases, and meta: format version (the
 * manifest's), dataset id, dictionary. */
static int open_meta(fl_dataset *ds, const fl_manifest *m, MDB_dbi *rec, uint32_t *ver_out,
                     fl_error *err)
{
    const char *path = ds->file_paths[0];
    fl_lmdb_reader *r = ds->lmdb;
    int rc;
    rc = mdb_txn_begin(r->env, NULL, MDB_RDONLY, &r->txn);
    if (rc)
        return fl_error_set(err, FL_E_LMDB, "%s: cannot begin read txn: %s", path,
                            mdb_strerror(rc));
    MDB_dbi meta;
    rc = mdb_dbi_open(r->txn, FL_LMDB_RECORDS_DB, 0, rec);
    if (rc == 0)
        rc = mdb_dbi_open(r->txn, FL_LMDB_META_DB, 0, &meta);
    if (rc)
        return fl_error_set(err, FL_E_FORMAT, "%s: not a fastload LMDB dataset (%s)", path,
                            mdb_strerror(rc));
    MDB_val k, v;
    k.mv_data = FL_LMDB_META_VERSION;
    k.mv_size = strlen(FL_LMDB_META_VERSION);
    rc = mdb_get(r->txn, meta, &k, &v);
    struct stat st;
    if (rc == 0 && (fstat(ds->lmdb_fd, &st) != 0 || find_map(v.mv_data, &st, &r->base) != 0))
        r->base = NULL;
    if (rc == 0 && !in_map(r, v.mv_data, v.mv_size))
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: meta \"%s\" lies outside the file's used pages: "
                            "damaged or crafted",
                            path, FL_LMDB_META_VERSION);
    if (rc || v.mv_size != 4)
        return fl_error_set(err, FL_E_FORMAT, "%s: missing meta \"%s\"", path,
                            FL_LMDB_META_VERSION);
    uint32_t ver = fl_rd32(v.mv_data);
    if (ver < FL_FORMAT_MIN_VERSION || ver > FL_FORMAT_VERSION)
        return fl_error_set(
            err, FL_E_VERSION,
            "%s: LMDB dataset format version %u, this build reads versions %u to %u", path, ver,
            FL_FORMAT_MIN_VERSION, FL_FORMAT_VERSION);
    if (ver != m->version)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: LMDB format version %u, the manifest says %u: the file belongs to "
                            "another dataset",
                            path, ver, m->version);
    if (ver >= 2) {
        k.mv_data = FL_LMDB_META_ID;
        k.mv_size = strlen(FL_LMDB_META_ID);
        rc = mdb_get(r->txn, meta, &k, &v);
        if (rc || v.mv_size != FL_DATASET_ID_BYTES || !in_map(r, v.mv_data, v.mv_size))
            return fl_error_set(err, FL_E_FORMAT, "%s: missing meta \"%s\"", path, FL_LMDB_META_ID);
        if (memcmp(v.mv_data, m->dataset_id, FL_DATASET_ID_BYTES) != 0) {
            char got[2 * FL_DATASET_ID_BYTES + 1], mid[2 * FL_DATASET_ID_BYTES + 1];
            fl_dataset_id_hex(v.mv_data, got);
            fl_dataset_id_hex(m->dataset_id, mid);
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: belongs to another dataset (id %s, the manifest's is %s)",
                                path, got, mid);
        }
    }
    if (ver >= 3 && (rc = check_field_max(r, meta, m, path, err)) < 0)
        return rc;
    if (m->schema.compression == FL_COMP_ZSTD) {
        k.mv_data = FL_LMDB_META_DICT;
        k.mv_size = strlen(FL_LMDB_META_DICT);
        rc = mdb_get(r->txn, meta, &k, &v);
        if (rc == 0) {
            if (v.mv_size > FL_MAX_DICT_BYTES || !in_map(r, v.mv_data, v.mv_size))
                return fl_error_set(err, FL_E_FORMAT, "%s: dictionary too large", path);
            ds->lmdb_ddict = ZSTD_createDDict(v.mv_data, v.mv_size);
            if (!ds->lmdb_ddict)
                return fl_error_set(err, FL_E_FORMAT, "%s: unusable zstd dictionary", path);
        } else if (rc != MDB_NOTFOUND) {
            return fl_error_set(err, FL_E_LMDB, "%s: %s", path, mdb_strerror(rc));
        }
    }
    *ver_out = ver;
    return 0;
}

/* Value of record i: header, name, stored bytes; NULL or why it is bad. */
static const char *record_value(const fl_dataset *ds, const fl_manifest *m, uint32_t ver,
                                const MDB_val *v, fl_lmdb_rec *e, size_t min_fields)
{
    const fl_schema *s = &m->schema;
    const size_t hsz = ver >= 3   ? FL_LMDB_VALUE_HEADER_V3
                       : ver >= 2 ? FL_LMDB_VALUE_HEADER
                                  : FL_LMDB_VALUE_HEADER_V1;
    uint64_t fixed_raw =
        s->encoding == FL_ENC_RAW && s->height ? (uint64_t)s->height * s->width * s->channels : 0;
    if (v->mv_size < hsz)
        return "value shorter than its header";
    const uint8_t *p = v->mv_data;
    e->label = (int32_t)fl_rd32(p);
    e->crc32c = fl_rd32(p + 4);
    e->raw_len = fl_rd32(p + 8);
    e->height = fl_rd32(p + 12);
    e->width = fl_rd32(p + 16);
    e->name_len = fl_rd32(p + 20);
    e->format = ver >= 2 ? fl_rd32(p + 24) : (uint32_t)s->encoding;
    e->fields_len = ver >= 3 ? fl_rd32(p + 28) : 0;
    size_t rest = v->mv_size - hsz;
    if (e->name_len > FL_MAX_NAME_BYTES || e->name_len > rest)
        return "name longer than the value";
    if (!fl_format_allowed(s->encoding, e->format))
        return "record format unknown or not allowed by the schema";
    e->name = (const char *)p + hsz;
    e->stored = p + hsz + e->name_len;
    size_t sl = rest - e->name_len;
    e->stored_len = (uint32_t)sl;
    if (sl > FL_MAX_RECORD_BYTES || e->raw_len > FL_MAX_RECORD_BYTES)
        return "record length over 1 GiB";
    if (e->fields_len > sl)
        return "fields block longer than the record";
    if (ver >= 3 && e->fields_len < min_fields)
        return "fields block shorter than the schema's fixed fields";
    size_t payload = sl - e->fields_len;
    if (s->compression == FL_COMP_NONE && e->raw_len != payload)
        return "raw length differs from stored length in an uncompressed dataset";
    if (!fl_raw_len_plausible(e->raw_len, payload))
        return "raw length beyond what its compressed bytes can hold (4096x + 1 MiB): crafted";
    if (s->encoding == FL_ENC_NONE && (payload || e->height || e->width))
        return "a payload or image size in a dataset without images";
    if (fixed_raw && e->raw_len != fixed_raw)
        return "raw length does not match the fixed image size";
    if (s->height && (e->height != s->height || e->width != s->width))
        return "image size does not match the fixed schema";
    if (e->label < 0 || (ds->num_classes && (uint32_t)e->label >= ds->num_classes))
        return "label out of range";
    if (ds->label_field < 0 && e->label != 0)
        return "a label in a dataset without a label field";
    return NULL;
}

/* The records of one index segment as the walk read them, and where values are measured from. */
typedef struct lmdb_seg {
    const fl_lmdb_rec *rec;
    const uint8_t *anchor;
    size_t hsz;
} lmdb_seg;

/* Row i of a segment for the packed index (fl_record_index.h): the value's place relative to
 * the anchor (a record's value is its header, its name, then its stored bytes). */
static void lmdb_row(const void *src, uint64_t i, int64_t v[FL_IX_COLS])
{
    const lmdb_seg *g = src;
    const fl_lmdb_rec *e = &g->rec[i];
    v[FL_IX_OFFSET] = (int64_t)((uintptr_t)e->name - g->hsz - (uintptr_t)g->anchor);
    v[FL_IX_STORED] = e->stored_len;
    v[FL_IX_RAW] = (int64_t)e->raw_len - (int64_t)(e->stored_len - e->fields_len);
    v[FL_IX_LABEL] = e->label;
    v[FL_IX_CRC] = e->crc32c;
    v[FL_IX_HEIGHT] = e->height;
    v[FL_IX_WIDTH] = e->width;
    v[FL_IX_FORMAT] = e->format;
    v[FL_IX_FIELDS] = e->fields_len;
    v[FL_IX_NAME] = e->name_len;
}

/* Walk every record once: keys 0..n-1, each value checked (record_value), packed into ds->ix a
 * segment (FL_LMDB_SEG records) at a time. */
static int walk_records(fl_dataset *ds, const fl_manifest *m, MDB_dbi rec, uint32_t ver,
                        fl_error *err)
{
    const char *path = ds->file_paths[0];
    fl_lmdb_reader *r = ds->lmdb;
    int rc;
    MDB_val k, v;
    size_t min_fields = ver >= 3 ? fl_fields_min_block(m->fields, m->num_fields) : 0;
    MDB_stat ms;
    rc = mdb_stat(r->txn, rec, &ms);
    if (rc)
        return fl_error_set(err, FL_E_LMDB, "%s: %s", path, mdb_strerror(rc));
    if (ms.ms_entries != m->records)
        return fl_error_set(err, FL_E_FORMAT, "%s: %zu records, manifest says %llu", path,
                            (size_t)ms.ms_entries, (unsigned long long)m->records);
    /* a record is at least a leaf node: 8-byte node header, 8-byte key, the value header */
    if (m->records > r->used / 32)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: %llu records cannot fit in %llu bytes of pages: "
                            "damaged or crafted",
                            path, (unsigned long long)m->records, (unsigned long long)r->used);
    /* a summary keeps nothing: one record at a time */
    size_t seg_cap = ds->summary ? 1 : m->records < FL_LMDB_SEG ? (size_t)m->records : FL_LMDB_SEG;
    fl_lmdb_rec *buf = calloc(seg_cap ? seg_cap : 1, sizeof *buf);
    if (!buf)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    lmdb_seg seg = {buf, NULL, fl_lmdb_value_header(ver)};
    MDB_cursor *cur;
    rc = mdb_cursor_open(r->txn, rec, &cur);
    if (rc) {
        free(buf);
        return fl_error_set(err, FL_E_LMDB, "%s: %s", path, mdb_strerror(rc));
    }
    uint64_t i = 0;
    uint32_t max_fields = 0; /* the largest fields block */
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && i < m->records;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT), i++) {
        const char *why = NULL;
        fl_lmdb_rec *e = &buf[ds->summary ? 0 : i % FL_LMDB_SEG];
        if (!in_map(r, k.mv_data, k.mv_size) || !in_map(r, v.mv_data, v.mv_size)) {
            why = "key or value outside the file's used pages: damaged or crafted";
        } else if (k.mv_size != 8 || key_value(k.mv_data) != i) {
            why = "key is not the record index";
        } else {
            why = record_value(ds, m, ver, &v, e, min_fields);
        }
        if (why) {
            mdb_cursor_close(cur);
            free(buf);
            return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %s", path,
                                (unsigned long long)i, why);
        }
        if (e->raw_len > ds->max_raw_len)
            ds->max_raw_len = e->raw_len;
        if (e->stored_len > ds->max_stored_len)
            ds->max_stored_len = e->stored_len;
        if (e->fields_len > max_fields)
            max_fields = e->fields_len;
        if (i == 0)
            seg.anchor = v.mv_data; /* every value is measured from record 0's */
        if (!ds->summary && (i % FL_LMDB_SEG == FL_LMDB_SEG - 1 || i + 1 == m->records) &&
            fl_rindex_add(&ds->ix, i % FL_LMDB_SEG + 1, lmdb_row, &seg)) {
            mdb_cursor_close(cur);
            free(buf);
            return fl_error_set(err, -ENOMEM, "%s: out of memory for the index", path);
        }
        if (i % FL_LMDB_SEG == FL_LMDB_SEG - 1) /* the cursor's pages fault back in */
            drop_pages(r->base, r->used);
    }
    mdb_cursor_close(cur);
    free(buf);
    drop_pages(r->base, r->used);
    ds->lmdb_anchor = seg.anchor;
    if (!ds->summary)
        fl_rindex_trim(&ds->ix);
    if (rc != 0 && rc != MDB_NOTFOUND && i < m->records)
        return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %s: damaged or crafted", path,
                            (unsigned long long)i, mdb_strerror(rc));
    if (i != m->records)
        return fl_error_set(err, FL_E_FORMAT, "%s: found %llu records, manifest says %llu", path,
                            (unsigned long long)i, (unsigned long long)m->records);
    /* max_count rows of a variable field lie in some record's fields block: a count (meta and
     * manifest crafted together) that no block holds is refused before a loader sizes from it */
    for (uint32_t f = 0; ver >= 3 && f < m->num_fields; f++) {
        const fl_field *fd = &m->fields[f];
        uint64_t need = (uint64_t)fd->max_count * fl_field_row_bytes(fd);
        if (fl_field_is_variable(fd->type) && need > max_fields)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: field \"%s\": max_count %u takes %llu bytes, more than the "
                                "largest record's fields block (%u bytes): damaged or crafted",
                                path, fd->name, fd->max_count, (unsigned long long)need,
                                max_fields);
    }
    return 0;
}

int fl_lmdb_reader_open(fl_dataset *ds, const fl_manifest *m, int dir_fd, fl_error *err)
{
    MDB_dbi rec;
    uint32_t ver = 0;
    int rc = open_env(ds, m, dir_fd, err);
    if (!rc)
        rc = open_meta(ds, m, &rec, &ver, err);
    if (!rc)
        rc = walk_records(ds, m, rec, ver, err);
    return rc;
}
