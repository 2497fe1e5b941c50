/* lmdb_reader.c — the LMDB backend of fl_dataset: opens data.mdb read-only without a lock file
 * (a finished dataset is immutable), keeps one read transaction for the dataset's lifetime so
 * LMDB's zero-copy pointers stay valid until close, and resolves every record once at open
 * (bounds-checked: from the record index the writer left in meta, or by walking the records of
 * a data set written without one) so the hot path makes no LMDB calls at all and is safe from
 * any thread. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
    uint32_t psize;      /* LMDB's page size */
    uint64_t npages;     /* used pages, as the meta LMDB uses says */
    uint64_t rec_root;   /* the records database's root page, its pages not checked yet
                          * (UINT64_MAX: none, or checked) */
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
    uint64_t *defer; /* non-NULL: the records database is not walked, its root is kept here */
    int deferred;    /* times the records database was found (a second is refused) */
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
            /* the records are checked after meta is read: with a record index, never */
            if (w->defer && ksize == strlen(FL_LMDB_RECORDS_DB) &&
                !memcmp(n + 8, FL_LMDB_RECORDS_DB, ksize)) {
                if (w->deferred++) /* LMDB would take either: one of them never checked */
                    return "the records database named twice";
                *w->defer = root;
            } else if (root != UINT64_MAX) {
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

/* Check the pages under `root` (the main database's, main_db = 1, with the records database's
 * root left in *defer when defer is non-NULL; or one named database's). */
static int check_pages(int fd, const char *path, uint32_t psize, uint64_t npages, uint64_t root,
                       int main_db, uint64_t *defer, fl_error *err)
{
    if (root == UINT64_MAX)
        return 0; /* an empty environment: the named databases are missing */
    size_t len = (size_t)(npages * psize);
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return fl_error_set(err, -errno, "%s: cannot map: %s", path, strerror(errno));
    /* without the records, a few pages scattered through the file: read each alone, not the
     * megabytes around it (read_ahead_kb) */
    if (defer)
        madvise(map, len, MADV_RANDOM);
    page_walk w = {map, npages, psize, calloc(npages / 8 + 1, 1), -1, 0, defer, 0};
    const char *why = w.seen ? walk_page(&w, root, 0, main_db) : NULL;
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
static int check_meta(int fd, const char *path, uint64_t size, uint64_t *map_bytes,
                      fl_lmdb_reader *r, fl_error *err)
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
    r->psize = psize;
    r->npages = last + 1;
    r->rec_root = UINT64_MAX;
    return check_pages(fd, path, psize, last + 1, fl_rd64(mp + 128), 1, &r->rec_root, err);
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
    int rc = check_meta(fd, path, size, &map_bytes, r, err);
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
static int open_meta(fl_dataset *ds, const fl_manifest *m, MDB_dbi *rec, MDB_dbi *meta_out,
                     uint32_t *ver_out, fl_error *err)
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
    *meta_out = meta;
    return 0;
}

/* The value header of `ver` at p into e (label .. fields_len; not the lengths it implies). */
static void read_header(const uint8_t *p, uint32_t ver, const fl_schema *s, fl_lmdb_rec *e)
{
    e->label = (int32_t)fl_rd32(p);
    e->crc32c = fl_rd32(p + 4);
    e->raw_len = fl_rd32(p + 8);
    e->height = fl_rd32(p + 12);
    e->width = fl_rd32(p + 16);
    e->name_len = fl_rd32(p + 20);
    e->format = ver >= 2 ? fl_rd32(p + 24) : (uint32_t)s->encoding;
    e->fields_len = ver >= 3 ? fl_rd32(p + 28) : 0;
}

/* The checks of a record whose name and stored bytes are placed (e->stored_len, saturated at
 * UINT32_MAX): the shard index entry's. NULL or why it is bad. */
static const char *check_rec(const fl_dataset *ds, const fl_manifest *m, uint32_t ver,
                             const fl_lmdb_rec *e, size_t min_fields)
{
    const fl_schema *s = &m->schema;
    uint64_t fixed_raw =
        s->encoding == FL_ENC_RAW && s->height ? (uint64_t)s->height * s->width * s->channels : 0;
    if (!fl_format_allowed(s->encoding, e->format))
        return "record format unknown or not allowed by the schema";
    size_t sl = e->stored_len;
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

/* Value of record i: header, name, stored bytes; NULL or why it is bad. */
static const char *record_value(const fl_dataset *ds, const fl_manifest *m, uint32_t ver,
                                const MDB_val *v, fl_lmdb_rec *e, size_t min_fields)
{
    const size_t hsz = fl_lmdb_value_header(ver);
    if (v->mv_size < hsz)
        return "value shorter than its header";
    const uint8_t *p = v->mv_data;
    read_header(p, ver, &m->schema, e);
    size_t rest = v->mv_size - hsz;
    if (e->name_len > FL_MAX_NAME_BYTES || e->name_len > rest)
        return "name longer than the value";
    e->name = (const char *)p + hsz;
    e->stored = p + hsz + e->name_len;
    size_t sl = rest - e->name_len;
    e->stored_len = sl > UINT32_MAX ? UINT32_MAX : (uint32_t)sl;
    return check_rec(ds, m, ver, e, min_fields);
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

/* What the open keeps of each checked record: the largest lengths. */
static void note_rec(fl_dataset *ds, const fl_lmdb_rec *e, uint32_t *max_fields)
{
    if (e->raw_len > ds->max_raw_len)
        ds->max_raw_len = e->raw_len;
    if (e->stored_len > ds->max_stored_len)
        ds->max_stored_len = e->stored_len;
    if (e->fields_len > *max_fields)
        *max_fields = e->fields_len;
}

/* Walk every record once: keys 0..n-1, each value checked (record_value), packed into ds->ix a
 * segment (FL_LMDB_SEG records) at a time. */
static int walk_records(fl_dataset *ds, const fl_manifest *m, MDB_dbi rec, uint32_t ver,
                        uint32_t *max_fields, fl_error *err)
{
    const char *path = ds->file_paths[0];
    fl_lmdb_reader *r = ds->lmdb;
    int rc;
    MDB_val k, v;
    size_t min_fields = ver >= 3 ? fl_fields_min_block(m->fields, m->num_fields) : 0;
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
        note_rec(ds, e, max_fields);
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
    if (rc != 0 && rc != MDB_NOTFOUND && i < m->records)
        return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %s: damaged or crafted", path,
                            (unsigned long long)i, mdb_strerror(rc));
    if (i != m->records)
        return fl_error_set(err, FL_E_FORMAT, "%s: found %llu records, manifest says %llu", path,
                            (unsigned long long)i, (unsigned long long)m->records);
    return 0;
}

/* Entry j of a decompressed index chunk into e, its value placed at r->base + offset: NULL or
 * why it cannot be (the value must lie in the used pages past the two meta pages). */
static const char *index_entry(const fl_lmdb_reader *r, const uint8_t *p, size_t hsz,
                               fl_lmdb_rec *e)
{
    uint64_t off = fl_rd64(p);
    e->stored_len = fl_rd32(p + 8);
    e->raw_len = fl_rd32(p + 12);
    e->label = (int32_t)fl_rd32(p + 16);
    e->crc32c = fl_rd32(p + 20);
    e->height = fl_rd32(p + 24);
    e->width = fl_rd32(p + 28);
    e->name_len = fl_rd32(p + 36);
    e->format = fl_rd32(p + 40);
    e->fields_len = fl_rd32(p + 44);
    if (fl_rd32(p + 32) != 0)
        return "reserved field not 0";
    if (e->name_len > FL_MAX_NAME_BYTES || e->stored_len > FL_MAX_RECORD_BYTES)
        return "name or record length over the limit";
    if (off < 2ull * r->psize || off > r->used ||
        hsz + e->name_len + (uint64_t)e->stored_len > r->used - off)
        return "value outside the file's used pages";
    e->name = (const char *)r->base + off + hsz;
    e->stored = r->base + off + hsz + e->name_len;
    return NULL;
}

/* The index entry of the record whose value is at byte `off` of data.mdb agrees with the value's
 * own header. Read with pread, not through the map: a fault there reads ahead megabytes
 * (read_ahead_kb) for the few bytes of one record a chunk. */
static int header_matches(int fd, uint64_t off, uint32_t ver, const fl_schema *s,
                          const fl_lmdb_rec *e)
{
    fl_lmdb_rec h;
    uint8_t v[FL_LMDB_VALUE_HEADER_V3];
    size_t got = 0, hsz = fl_lmdb_value_header(ver);
    if (fl_pread_full(fd, v, hsz, off, &got) != 0 || got != hsz)
        return 0;
    read_header(v, ver, s, &h);
    return h.label == e->label && h.crc32c == e->crc32c && h.raw_len == e->raw_len &&
           h.height == e->height && h.width == e->width && h.name_len == e->name_len &&
           h.format == e->format && h.fields_len == e->fields_len;
}

_Static_assert(FL_LMDB_INDEX_CHUNK == FL_LMDB_SEG, "an index chunk is a segment of ds->ix");

/* The record index's header (meta "record_index"): 1 when there is none (a data set written
 * before it, or of a layout this build does not read: the records are walked instead), 0 when
 * it describes exactly this records database, else refused. */
static int index_header(fl_lmdb_reader *r, MDB_dbi meta, const MDB_stat *ms, uint64_t records,
                        const char *path, fl_error *err)
{
    MDB_val k = {strlen(FL_LMDB_META_INDEX), (void *)FL_LMDB_META_INDEX}, v;
    int rc = mdb_get(r->txn, meta, &k, &v);
    if (rc == MDB_NOTFOUND)
        return 1;
    if (rc)
        return fl_error_set(err, FL_E_LMDB, "%s: %s", path, mdb_strerror(rc));
    const uint8_t *h = v.mv_data;
    if (!in_map(r, v.mv_data, v.mv_size) || v.mv_size < 4)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: meta \"%s\" outside the used pages or too short: damaged or "
                            "crafted",
                            path, FL_LMDB_META_INDEX);
    if (fl_rd32(h) != FL_LMDB_INDEX_VERSION)
        return 1;
    if (v.mv_size != FL_LMDB_INDEX_HEADER || fl_crc32c(0, h, 48) != fl_rd32(h + 48) ||
        fl_rd32(h + 4) != FL_LMDB_INDEX_ENTRY || fl_rd32(h + 8) != FL_LMDB_INDEX_CHUNK)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: meta \"%s\": bad header (size, CRC, entry or chunk size): "
                            "damaged or crafted",
                            path, FL_LMDB_META_INDEX);
    if (fl_rd64(h + 16) != records || ms->ms_entries != records)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: record index of %llu records, the database holds %llu, the "
                            "manifest says %llu: damaged or crafted",
                            path, (unsigned long long)fl_rd64(h + 16),
                            (unsigned long long)ms->ms_entries, (unsigned long long)records);
    if (fl_rd32(h + 12) != ms->ms_depth || fl_rd64(h + 24) != ms->ms_branch_pages ||
        fl_rd64(h + 32) != ms->ms_leaf_pages || fl_rd64(h + 40) != ms->ms_overflow_pages)
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: record index made for another state of the records database "
                            "(depth, branch, leaf or overflow pages differ): damaged or crafted",
                            path);
    return 0;
}

/* Every record's entry from the record index instead of its value: no page of the records
 * database is read (the first record of each chunk excepted: its value's header must agree). */
static int read_index(fl_dataset *ds, const fl_manifest *m, MDB_dbi meta, uint32_t ver,
                      uint32_t *max_fields, fl_error *err)
{
    const char *path = ds->file_paths[0];
    fl_lmdb_reader *r = ds->lmdb;
    size_t min_fields = ver >= 3 ? fl_fields_min_block(m->fields, m->num_fields) : 0;
    size_t hsz = fl_lmdb_value_header(ver);
    uint64_t n = m->records;
    size_t cap = n < FL_LMDB_INDEX_CHUNK ? (size_t)n : FL_LMDB_INDEX_CHUNK;
    uint8_t *ent = malloc(cap ? cap * FL_LMDB_INDEX_ENTRY : 1);
    size_t zcap = 4 + ZSTD_compressBound(cap * FL_LMDB_INDEX_ENTRY);
    uint8_t *zbuf = malloc(zcap);
    fl_lmdb_rec *buf = calloc(ds->summary || !cap ? 1 : cap, sizeof *buf);
    int rc = 0;
    if (!ent || !zbuf || !buf)
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    lmdb_seg seg = {buf, r->base, hsz};
    for (uint64_t c = 0; rc == 0 && c * FL_LMDB_INDEX_CHUNK < n; c++) {
        uint64_t first = c * FL_LMDB_INDEX_CHUNK;
        size_t cnt = n - first < FL_LMDB_INDEX_CHUNK ? (size_t)(n - first) : FL_LMDB_INDEX_CHUNK;
        char key[48], what[PATH_MAX + 96];
        snprintf(key, sizeof key, "%s.%llu", FL_LMDB_META_INDEX, (unsigned long long)c);
        snprintf(what, sizeof what, "%s: meta \"%s\" (records %llu..%llu)", path, key,
                 (unsigned long long)first, (unsigned long long)(first + cnt - 1));
        MDB_val k = {strlen(key), key}, v;
        int g = mdb_get(r->txn, meta, &k, &v);
        if (g != 0 && g != MDB_NOTFOUND) {
            rc = fl_error_set(err, FL_E_LMDB, "%s: %s", what, mdb_strerror(g));
            break;
        }
        if (g == MDB_NOTFOUND || v.mv_size < 4 || v.mv_size > zcap ||
            !in_map(r, v.mv_data, v.mv_size)) {
            rc = fl_error_set(err, FL_E_FORMAT,
                              "%s: missing, of a wrong size or outside the used pages: damaged "
                              "or crafted",
                              what);
            break;
        }
        /* read with pread, not through the map: chunks written while packing lie apart, and a
         * fault in the map reads ahead megabytes (read_ahead_kb) around each */
        const uint8_t *cv = zbuf;
        size_t got = 0;
        if (fl_pread_full(ds->lmdb_fd, zbuf, v.mv_size,
                          (uint64_t)((const uint8_t *)v.mv_data - r->base), &got) != 0 ||
            got != v.mv_size) {
            rc = fl_error_set(err, FL_E_TRUNCATED, "%s: cannot be read", what);
            break;
        }
        size_t bytes = cnt * FL_LMDB_INDEX_ENTRY;
        rc = fl_zstd_decompress(&ds->pool, NULL, cv + 4, v.mv_size - 4, ent, bytes, bytes, what,
                                err);
        if (rc)
            break;
        if (fl_crc32c(0, ent, bytes) != fl_rd32(cv)) {
            rc = fl_error_set(err, FL_E_CHECKSUM, "%s: CRC mismatch: damaged or crafted", what);
            break;
        }
        for (size_t j = 0; j < cnt; j++) {
            fl_lmdb_rec *e = &buf[ds->summary ? 0 : j];
            const char *why = index_entry(r, ent + j * FL_LMDB_INDEX_ENTRY, hsz, e);
            if (!why)
                why = check_rec(ds, m, ver, e, min_fields);
            /* one value a chunk is read: an index that places values wrongly is caught here,
             * any other disagreement by the payload's CRC on access */
            if (!why && j == 0 &&
                !header_matches(ds->lmdb_fd, (uint64_t)((const uint8_t *)e->name - hsz - r->base),
                                ver, &m->schema, e))
                why = "the record index and the value's header disagree";
            if (why) {
                rc = fl_error_set(err, FL_E_FORMAT,
                                  "%s: record %llu: record index: %s: damaged "
                                  "or crafted",
                                  path, (unsigned long long)(first + j), why);
                break;
            }
            note_rec(ds, e, max_fields);
        }
        if (rc == 0 && !ds->summary && fl_rindex_add(&ds->ix, cnt, lmdb_row, &seg))
            rc = fl_error_set(err, -ENOMEM, "%s: out of memory for the index", path);
    }
    free(ent);
    free(zbuf);
    free(buf);
    drop_pages(r->base, r->used);
    ds->lmdb_anchor = r->base;
    return rc;
}

/* max_count rows of a variable field lie in some record's fields block: a count (meta and
 * manifest crafted together) that no block holds is refused before a loader sizes from it */
static int check_max_count(const fl_manifest *m, uint32_t ver, uint32_t max_fields,
                           const char *path, fl_error *err)
{
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

/* The records: counted against the manifest, then read from the record index when there is one,
 * else walked (their pages checked first). */
static int open_records(fl_dataset *ds, const fl_manifest *m, MDB_dbi rec, MDB_dbi meta,
                        uint32_t ver, fl_error *err)
{
    const char *path = ds->file_paths[0];
    fl_lmdb_reader *r = ds->lmdb;
    MDB_stat ms;
    int rc = mdb_stat(r->txn, rec, &ms);
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
    /* values are placed from where the file is mapped: without it (no /proc), the walk */
    rc = ver >= 2 && r->base ? index_header(r, meta, &ms, m->records, path, err) : 1;
    if (rc < 0)
        return rc;
    uint32_t max_fields = 0; /* the largest fields block */
    if (rc == 0) {
        rc = read_index(ds, m, meta, ver, &max_fields, err);
    } else {
        rc = check_pages(ds->lmdb_fd, path, r->psize, r->npages, r->rec_root, 0, NULL, err);
        r->rec_root = UINT64_MAX;
        if (rc == 0)
            rc = walk_records(ds, m, rec, ver, &max_fields, err);
    }
    if (rc == 0 && !ds->summary)
        fl_rindex_trim(&ds->ix);
    return rc ? rc : check_max_count(m, ver, max_fields, path, err);
}

int fl_lmdb_reader_open(fl_dataset *ds, const fl_manifest *m, int dir_fd, fl_error *err)
{
    MDB_dbi rec, meta;
    uint32_t ver = 0;
    int rc = open_env(ds, m, dir_fd, err);
    if (!rc)
        rc = open_meta(ds, m, &rec, &meta, &ver, err);
    if (!rc)
        rc = open_records(ds, m, rec, meta, ver, err);
    return rc;
}
