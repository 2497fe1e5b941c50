/* fuzz_lmdb.c — libFuzzer harness for the LMDB backend of the dataset reader: each input is a
 * data.mdb, placed beside a manifest that agrees with what the input claims (its size, and the
 * format version, dataset id and record count found after the keys "format_version",
 * "dataset_id" and "records" in its pages), so mutations reach the page walk, the value checks
 * and the record reads. Every dataset that opens is read whole and verified. A crash, a SIGBUS
 * from a value past the end of the file, a leak or an RSS over the run's limit (a map or an
 * allocation sized from a crafted header) is a bug in formats/lmdb_reader.c.
 * FL_FUZZ_LMDB_SEED=PATH writes the seed data.mdb (raw 4x4 zstd, 5 records) to PATH and exits;
 * FL_FUZZ_VERBOSE=1 prints why each input did not open (to check that a corpus reaches deep). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"

static char base[256], dir[300];

static void cleanup(void)
{
    char p[400];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    unlink(p);
    rmdir(dir);
    rmdir(base);
}

static void setup(void)
{
    fuzz_make_tmpdir(base, sizeof base, "lmdb");
    snprintf(dir, sizeof dir, "%s/d", base);
    mkdir(dir, 0755);
    atexit(cleanup);
    const char *seed = getenv("FL_FUZZ_LMDB_SEED");
    if (seed && *seed) {
        char at[400], p[1100];
        snprintf(at, sizeof at, "%s/seed", base);
        fuzz_write_seed(at, FL_BACKEND_LMDB);
        snprintf(p, sizeof p, "cp '%s/data.mdb' '%s' && rm -r '%s'", at, seed, at);
        exit(system(p) == 0 ? 0 : 1);
    }
}

/* The bytes after the first occurrence of `key` (`k` bytes) in the input (NULL when absent or
 * too close to the end for `need` bytes). Keys are searched with the leaf node's flags and key
 * size before them (u16 each, written in octal escapes), so the manifest text kept in meta does
 * not match. */
static const uint8_t *after(const uint8_t *d, size_t n, const char *key, size_t k, size_t need)
{
    const uint8_t *p = n >= k ? memmem(d, n, key, k) : NULL;
    if (!p || (size_t)(d + n - (p + k)) < need)
        return NULL;
    return p + k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    uint32_t ver = 2;
    const uint8_t *v = after(data, size, "\0\0\016\0format_version", 18, 4);
    if (v)
        memcpy(&ver, v, 4);
    if (ver < 1 || ver > 2)
        ver = 2;
    char id[33] = "000102030405060708090a0b0c0d0e0f";
    const uint8_t *i = after(data, size, "\0\0\012\0dataset_id", 14, 16);
    if (i)
        for (int k = 0; k < 16; k++)
            snprintf(id + 2 * k, 3, "%02x", i[k]);
    /* the records database's MDB_db follows its name in the main database: entries at +32 */
    uint64_t records = 5;
    const uint8_t *r = after(data, size, "\002\0\007\0records", 11, 40);
    if (r)
        memcpy(&records, r + 32, 8);
    if (records > (1ull << 40))
        records = 5;
    char man[2048];
    int mn = snprintf(
        man, sizeof man,
        "{\"format\": \"fastload-dataset\", \"format_version\": %u,%s%s%s "
        "\"backend\": \"lmdb\", \"records\": %llu, \"classes\": [\"a\", \"b\"], "
        "\"schema\": {\"encoding\": \"raw\", \"compression\": \"zstd\", \"channels\": 1, "
        "\"height\": 4, \"width\": 4}, \"shards\": [{\"file\": \"data.mdb\", "
        "\"records\": %llu, \"bytes\": %zu}]}",
        ver, ver >= 2 ? " \"dataset_id\": \"" : "", ver >= 2 ? id : "", ver >= 2 ? "\"," : "",
        (unsigned long long)records, (unsigned long long)records, size);
    fuzz_put_file(dir, "manifest.json", man, (size_t)mn);
    fuzz_put_file(dir, "data.mdb", data, size);
    fl_dataset *ds;
    fl_error err;
    if (fl_dataset_open(dir, &ds, &err) != 0) {
        if (!err.msg[0])
            abort(); /* every failure must say why */
        if (getenv("FL_FUZZ_VERBOSE"))
            fprintf(stderr, "%s\n", err.msg);
        return 0;
    }
    uint64_t n = fl_dataset_count(ds);
    if (getenv("FL_FUZZ_VERBOSE"))
        fprintf(stderr, "opened: %llu records\n", (unsigned long long)n);
    for (uint64_t k = 0; k < n; k++) {
        const uint8_t *p;
        size_t len;
        if (fl_dataset_get(ds, k, &p, &len, 0, &err) == 0) {
            volatile uint8_t s = 0;
            for (size_t b = 0; b < len; b++)
                s ^= p[b];
            (void)s;
        }
        size_t nl;
        const char *name = fl_dataset_record_name(ds, k, &nl);
        if (name && nl) {
            volatile char c = name[nl - 1];
            (void)c;
        }
    }
    uint64_t bad;
    (void)fl_dataset_verify(ds, fuzz_no_stop, NULL, &bad, &err);
    fl_dataset_close(ds);
    return 0;
}
