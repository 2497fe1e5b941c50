/* test_untrusted.c — data sets crafted to hurt the reader (a downloaded set is untrusted input):
 * each is opened, verified and read in a child process that must end with a clear error, not a
 * signal or a hang, and stay under a peak RSS far below what the crafted sizes claim. Cases: an
 * LMDB value pointing past the end of the file, an overflow page past the end, absurd LMDB map
 * sizes; a shard that is a symlink out of the folder or a FIFO, a FIFO manifest; a zstd index of
 * millions of copies of one entry; a zstd record whose raw_len (and frame) expands to 1 GiB; a
 * manifest declaring far more shards than the folder holds; a v3 fields block with a huge count. */
#include "corrupt.h"
#include "fl_lmdb.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <zstd.h>

#define RSS_LIMIT_KB (160 * 1024) /* every case stays far below this; the old code went to GBs */

static int failures;

/* The child: open, verify, read every record. Prints the first error; exits 0 when it contains
 * `needle`, 1 otherwise (opened cleanly, or another error). */
static void child(const char *dir, const char *needle)
{
    alarm(20); /* a FIFO that blocks the open ends here as SIGALRM: a failure */
    fl_dataset *ds = NULL;
    fl_error err;
    fl_error_clear(&err);
    int rc = fl_dataset_open(dir, &ds, &err);
    if (rc == 0) {
        uint64_t bad = 0;
        rc = fl_dataset_verify(ds, NULL, NULL, &bad, &err);
        fl_dataset_close(ds);
    }
    printf("    %s\n", rc ? err.msg : "(opened and verified)");
    fflush(stdout);
    _exit(rc && strstr(err.msg, needle) ? 0 : 1);
}

static void expect_refused(const char *what, const char *dir, const char *needle, const char * not )
{
    printf("%s:\n", what);
    fflush(stdout);
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        child(dir, needle);
    }
    close(fd[1]);
    char out[2048] = {0};
    size_t n = 0;
    ssize_t r;
    while (n < sizeof out - 1 && (r = read(fd[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    close(fd[0]);
    int st;
    struct rusage ru;
    CHECK(wait4(pid, &st, 0, &ru) == pid);
    fputs(out, stdout);
    const char *bad = NULL;
    if (WIFSIGNALED(st))
        bad = WTERMSIG(st) == SIGALRM ? "hung (killed after 20 s)" : strsignal(WTERMSIG(st));
    else if (WEXITSTATUS(st) != 0)
        bad = "not refused with the expected reason";
    else if (ru.ru_maxrss > RSS_LIMIT_KB)
        bad = "peak RSS over the limit";
    else if (not &&strstr(out, not ))
        bad = "the message reveals what it must not";
    printf("    peak RSS %ld KB -> %s (want \"%s\")\n", ru.ru_maxrss, bad ? bad : "ok", needle);
    if (bad)
        failures++;
}

static void be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static void set_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

/* Replace every `"key": old` of a manifest by `"key": new`. */
static void manifest_set(const char *dir, const char *key, uint64_t old, uint64_t new)
{
    char path[PATH_MAX + 300], pat[128], rep[128];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    size_t n;
    char *t = (char *)tt_slurp(path, &n);
    t[n] = 0;
    snprintf(pat, sizeof pat, "\"%s\": %llu", key, (unsigned long long)old);
    snprintf(rep, sizeof rep, "\"%s\": %llu", key, (unsigned long long)new);
    char *o = malloc(n * 2 + 256), *w = o;
    for (const char *p = t; *p;) {
        if (!strncmp(p, pat, strlen(pat)) && (p[strlen(pat)] < '0' || p[strlen(pat)] > '9')) {
            w += sprintf(w, "%s", rep);
            p += strlen(pat);
        } else {
            *w++ = *p++;
        }
    }
    tt_spit(path, o, (size_t)(w - o));
    free(o);
    free(t);
}

/* ---- LMDB ------------------------------------------------------------------------------------ */

/* The leaf node of key `k` in data.mdb (LMDB 0.9: u16 lo, hi (data size), flags, ksize; key). */
static size_t find_node(const uint8_t *m, size_t n, uint64_t k, int bigdata)
{
    uint8_t pat[10] = {8, 0};
    be64(pat + 2, k);
    for (size_t i = 6; i + 10 <= n; i++)
        if (!memcmp(m + i, pat, 10) && m[i - 2] == (bigdata ? 1 : 0) && m[i - 1] == 0)
            return i - 6;
    return 0;
}

static void lmdb_cases(void)
{
    /* crafted B-tree nodes of the records: what a data set written before the record index (read
     * by walking its records) is checked for. With the index those pages are never read
     * (formats_lmdb_index crafts the index itself). */
    fl_lmdb_write_index = 0;
    const char *good = tt_path("lgood");
    fl_writer_options o = tt_options(FL_BACKEND_LMDB, FL_ENC_RAW, 1);
    tt_write(good, &o, 20);
    const char *bad = tt_path("lbad");
    char data[PATH_MAX + 300];
    snprintf(data, sizeof data, "%s/data.mdb", bad);
    size_t n;
    uint8_t *m;

    /* a value 16 MiB past its leaf page: past the end of the file (SIGBUS at the CRC) */
    copy_dir(good, bad);
    m = tt_slurp(data, &n);
    size_t node = find_node(m, n, 5, 0);
    CHECK(node);
    m[node + 2] = 0, m[node + 3] = 1; /* hi half of the data size: + 16 MiB */
    tt_spit(data, m, n);
    free(m);
    expect_refused("lmdb value past the end of the file", bad, "record 5: LMDB a value past", NULL);

    /* absurd map sizes in both meta pages */
    uint64_t sizes[2] = {1ull << 46, 1ull << 62};
    for (int k = 0; k < 2; k++) {
        copy_dir(good, bad);
        m = tt_slurp(data, &n);
        uint32_t psize = fl_rd32(m + 40);
        set_u64(m + 32, sizes[k]);
        set_u64(m + psize + 32, sizes[k]);
        tt_spit(data, m, n);
        free(m);
        expect_refused(k ? "lmdb mapsize 2^62" : "lmdb mapsize 2^46", bad, "damaged or crafted",
                       NULL);
    }

    /* an overflow page past the end: PNG records over half a page are stored in overflow pages */
    const char *pgood = tt_path("lpng");
    fl_writer_options po = tt_options(FL_BACKEND_LMDB, FL_ENC_PNG, 0);
    tt_write(pgood, &po, 20);
    copy_dir(pgood, bad);
    m = tt_slurp(data, &n);
    size_t big = 0;
    for (uint64_t k = 0; k < 20 && !big; k++)
        big = find_node(m, n, k, 1);
    CHECK(big);
    set_u64(m + big + 16, 0x7fffffffull); /* the overflow page number after the key */
    tt_spit(data, m, n);
    free(m);
    expect_refused("lmdb overflow page past the end", bad, "damaged or crafted", NULL);

    /* a FIFO and a symlink in place of data.mdb */
    copy_dir(good, bad);
    unlink(data);
    CHECK(mkfifo(data, 0644) == 0);
    expect_refused("lmdb data.mdb is a FIFO", bad, "not a regular file", NULL);
    unlink(data);
    char secret[PATH_MAX + 300];
    snprintf(secret, sizeof secret, "%s/secret", tt_tmpdir());
    CHECK(symlink(secret, data) == 0);
    expect_refused("lmdb data.mdb is a symlink", bad, "symbolic link", "12345");
    fl_lmdb_write_index = 1;
}

/* ---- shards ---------------------------------------------------------------------------------- */

/* Rewrite shard 0 of `dir` (a one-shard set with a plain index) with `count` copies of its
 * entry 0 followed by `names` random name bytes and `zero_names` zero bytes, the index block a
 * zstd frame; header, footer
 * and manifest made consistent, so only the sizes are a lie. */
static void index_bomb(const char *dir, uint64_t count, size_t names, size_t zero_names)
{
    char path[PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/shard-00000.fls", dir);
    size_t n;
    uint8_t *m = tt_slurp(path, &n);
    uint64_t old_count = fl_rd64(m + FLH_RECORD_COUNT), data_end = fl_rd64(m + FLH_DATA_END);
    uint8_t entry[48];
    memcpy(entry, m + data_end, 48);
    fl_wr32(entry + FLI_NAME_OFFSET, 0);
    size_t cap = ZSTD_compressBound(64u << 20) + (1u << 20);
    uint8_t *z = malloc(cap);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setPledgedSrcSize(cc, count * 48 + names + zero_names);
    enum { CHUNK = 1024 };
    uint8_t *chunk = malloc(CHUNK * 48 + names);
    for (int i = 0; i < CHUNK; i++)
        memcpy(chunk + i * 48, entry, 48);
    ZSTD_outBuffer out = {z, cap, 0};
    for (uint64_t done = 0; done < count;) {
        uint64_t k = count - done < CHUNK ? count - done : CHUNK;
        ZSTD_inBuffer in = {chunk, k * 48, 0};
        while (in.pos < in.size)
            CHECK(!ZSTD_isError(ZSTD_compressStream2(cc, &out, &in, ZSTD_e_continue)));
        done += k;
    }
    uint64_t s = 1;
    for (size_t i = 0; i < names; i++)
        chunk[i] = (uint8_t)(tt_rng(&s) >> 24);
    ZSTD_inBuffer in = {chunk, names, 0};
    while (in.pos < in.size)
        CHECK(!ZSTD_isError(ZSTD_compressStream2(cc, &out, &in, ZSTD_e_continue)));
    memset(chunk, 0, CHUNK * 48); /* a names blob that compresses away */
    for (size_t done = 0; done < zero_names;) {
        size_t k = zero_names - done < CHUNK * 48 ? zero_names - done : CHUNK * 48;
        ZSTD_inBuffer zin = {chunk, k, 0};
        while (zin.pos < zin.size)
            CHECK(!ZSTD_isError(ZSTD_compressStream2(cc, &out, &zin, ZSTD_e_continue)));
        done += k;
    }
    in.size = in.pos = 0;
    size_t left;
    do
        left = ZSTD_compressStream2(cc, &out, &in, ZSTD_e_end);
    while (left && !ZSTD_isError(left));
    CHECK(!ZSTD_isError(left));
    ZSTD_freeCCtx(cc);
    free(chunk);
    /* header count and file size, index block, footer */
    uint64_t size = data_end + out.pos + FL_SHARD_FOOTER_SIZE;
    uint8_t *f = malloc(size);
    memcpy(f, m, data_end);
    memcpy(f + data_end, z, out.pos);
    set_u64(f + FLH_RECORD_COUNT, count);
    set_u64(f + FLH_FILE_SIZE, size);
    patch_header32(f, FLH_HEADER_CRC, 0);
    uint8_t *ft = f + data_end + out.pos;
    memcpy(ft, m + n - FL_SHARD_FOOTER_SIZE, FL_SHARD_FOOTER_SIZE);
    set_u64(ft + FLF_INDEX_STORED, out.pos);
    set_u64(ft + FLF_INDEX_SIZE, count * 48);
    set_u64(ft + FLF_NAMES_SIZE, names + zero_names);
    set_u64(ft + FLF_RECORD_COUNT, count);
    fl_wr32(ft + FLF_INDEX_CRC, fl_crc32c(0, z, out.pos));
    fl_wr32(ft + FLF_FLAGS, 1);
    fl_wr32(ft + FLF_FOOTER_CRC, fl_crc32c(0, ft, FLF_FOOTER_CRC));
    tt_spit(path, f, size);
    manifest_set(dir, "records", old_count, count);
    manifest_set(dir, "bytes", n, size);
    free(f);
    free(z);
    free(m);
}

/* A zstd frame of `blocks` RLE blocks of 128 KiB (4 bytes each): 32,768x expansion. */
static size_t rle_bomb(uint8_t *out, uint32_t blocks)
{
    size_t k = 0;
    fl_wr32(out, 0xFD2FB528u);
    out[4] = 0xE0; /* single segment, 8-byte content size */
    set_u64(out + 5, (uint64_t)blocks << 17);
    k = 13;
    for (uint32_t b = 0; b < blocks; b++) {
        uint32_t h = (b + 1 == blocks) | (1u << 1) | (131072u << 3);
        out[k++] = (uint8_t)h, out[k++] = (uint8_t)(h >> 8), out[k++] = (uint8_t)(h >> 16);
        out[k++] = 0;
    }
    return k;
}

static void shard_cases(void)
{
    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    fl_shard_compress_index = 0;
    const char *good = tt_path("sgood");
    tt_write(good, &o, 60);
    bad_paths b;
    bad_paths_init(&b);

    /* 6 M copies of one entry in a 100 KB zstd index block (288 MB of index) */
    copy_dir(good, b.dir);
    index_bomb(b.dir, 6000000, 100000, 0);
    expect_refused("zstd index of 6 M copies of one entry", b.dir, "cannot fit in a", NULL);
    /* 60 valid entries and a names blob of 100 KB random + 250 MB of zeros in a ~110 KB block */
    copy_dir(good, b.dir);
    index_bomb(b.dir, 60, 100000, 250u << 20);
    expect_refused("zstd index whose names claim 250 MB", b.dir, "corrupt footer", NULL);

    /* a shard symlinked to a file outside the folder, a FIFO shard, a FIFO manifest */
    char secret[PATH_MAX + 300];
    snprintf(secret, sizeof secret, "%s/secret", tt_tmpdir());
    uint8_t sb[12345] = {0};
    tt_spit(secret, sb, sizeof sb);
    copy_dir(good, b.dir);
    unlink(b.shard0);
    CHECK(symlink(secret, b.shard0) == 0);
    expect_refused("shard symlinked out of the folder", b.dir, "symbolic link", "12345");
    unlink(b.shard0);
    CHECK(mkfifo(b.shard0, 0644) == 0);
    expect_refused("shard is a FIFO", b.dir, "not a regular file", NULL);
    copy_dir(good, b.dir);
    unlink(b.manifest);
    CHECK(mkfifo(b.manifest, 0644) == 0);
    expect_refused("manifest is a FIFO", b.dir, "not a regular file", NULL);

    /* a manifest declaring 400,000 shards in a folder of 2 files */
    copy_dir(good, b.dir);
    size_t n;
    char *t = (char *)tt_slurp(b.manifest, &n);
    t[n] = 0;
    char *sh = strstr(t, "\"shards\": [");
    CHECK(sh);
    sh += strlen("\"shards\": [");
    FILE *mf = fopen(b.manifest, "wb");
    CHECK(mf);
    fwrite(t, 1, (size_t)(sh - t), mf);
    for (int i = 0; i < 400000; i++)
        fprintf(mf, "{\"file\": \"shard-%08d.fls\", \"records\": 0, \"bytes\": 8192},\n  ",
                i + 100);
    fputs(sh, mf);
    fclose(mf);
    free(t);
    expect_refused("manifest of 400,000 absent shards", b.dir, "can justify", NULL);

    /* a zstd record whose frame and raw_len expand to 1 GiB (33 KB stored) */
    fl_writer_options z = tt_options(FL_BACKEND_SHARDS, FL_ENC_PNG, 1);
    const char *zgood = tt_path("zgood");
    tt_write(zgood, &z, 1);
    copy_dir(zgood, b.dir);
    uint8_t *m = tt_slurp(b.shard0, &n);
    uint64_t data_off = fl_rd64(m + FLH_DATA_OFFSET), data_end = fl_rd64(m + FLH_DATA_END);
    uint8_t *frame = malloc(8192 * 4 + 64);
    size_t fl = rle_bomb(frame, 8192);
    size_t idx_len = n - FL_SHARD_FOOTER_SIZE - data_end;
    size_t size = data_off + fl + idx_len + FL_SHARD_FOOTER_SIZE;
    uint8_t *f = calloc(1, size);
    memcpy(f, m, data_off);
    memcpy(f + data_off, frame, fl);
    uint8_t *ix = f + data_off + fl;
    memcpy(ix, m + data_end, idx_len);
    set_u64(ix + FLI_OFFSET, data_off);
    fl_wr32(ix + FLI_STORED_LEN, (uint32_t)fl);
    fl_wr32(ix + FLI_RAW_LEN, 1u << 30);
    fl_wr32(ix + FLI_CRC, fl_crc32c(0, frame, fl));
    set_u64(f + FLH_DATA_END, data_off + fl);
    set_u64(f + FLH_FILE_SIZE, size);
    patch_header32(f, FLH_HEADER_CRC, 0);
    uint8_t *ft = f + size - FL_SHARD_FOOTER_SIZE;
    memcpy(ft, m + n - FL_SHARD_FOOTER_SIZE, FL_SHARD_FOOTER_SIZE);
    set_u64(ft + FLF_INDEX_OFFSET, data_off + fl);
    fl_wr32(ft + FLF_INDEX_CRC, fl_crc32c(0, ix, idx_len));
    fl_wr32(ft + FLF_FOOTER_CRC, fl_crc32c(0, ft, FLF_FOOTER_CRC));
    tt_spit(b.shard0, f, size);
    manifest_set(b.dir, "bytes", n, size);
    free(f);
    free(frame);
    free(m);
    expect_refused("zstd record expanding to 1 GiB", b.dir, "beyond what its compressed bytes",
                   NULL);
}

int main(void)
{
    lmdb_cases();
    shard_cases();
    if (failures) {
        fprintf(stderr, "untrusted: %d case(s) failed\n", failures);
        return 1;
    }
    printf("untrusted ok\n");
    return 0;
}
