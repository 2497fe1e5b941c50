/* test_lmdb_max_count.c — a crafted `max_count` in an LMDB data set (format version 3), the
 * LMDB side of what formats_fields_dataset checks for shards. A loader sizes every batch slot
 * from max_count (B x max_count x 16 bytes of boxes), so open must refuse, naming the field:
 * a manifest max_count below what the records hold, or above the data file's largest count
 * (meta "field_max"); a data file whose "field_max" key is missing; and a data file whose
 * field_max and manifest agree on 2^28 boxes that no record's fields block could hold. The
 * process stays small throughout (nothing sized from the crafted count). */
#include <sys/resource.h>

#include "fmt_test.h"
#include "fl_fields.h"
#include "fl_lmdb.h"
#include "fl_shard.h"

enum { F_IMAGE, F_LABEL, F_BOXES, F_CLS, F_BLOB, NF };

static fl_field F[NF];

/* 10 records, record i with i % 8 boxes (so max_count 7) and as many class ids. */
static void write_set(const char *dst)
{
    tt_fields_detection(F); /* F_IMAGE, F_LABEL, F_BOXES, F_CLS */
    F[F_BLOB] = tt_field("blob", FL_FIELD_BYTES);
    fl_writer_options o = tt_options(FL_BACKEND_LMDB, FL_ENC_JPEG, 0);
    o.fields = F;
    o.num_fields = NF;
    fl_writer *w;
    fl_error err;
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    uint8_t *block = NULL;
    size_t cap = 0, blen = 0;
    for (uint64_t i = 0; i < 10; i++) {
        uint32_t h = 12, wd = 20, nb = (uint32_t)(i % 8);
        float boxes[8][4];
        int32_t cls[8];
        uint8_t blob[3] = {1, 2, 3};
        for (uint32_t b = 0; b < nb; b++) {
            boxes[b][0] = (float)b;
            boxes[b][1] = 0;
            boxes[b][2] = (float)(b + 1);
            boxes[b][3] = 5;
            cls[b] = (int32_t)b;
        }
        fl_field_value v[NF] = {{0}};
        v[F_BOXES] = (fl_field_value){boxes, nb * 16u, nb, 0, 0};
        v[F_CLS] = (fl_field_value){cls, nb * 4u, nb, 0, 0};
        v[F_BLOB] = (fl_field_value){blob, 3, 3, 0, 0};
        CHECK_OK(fl_fields_encode(F, NF, v, wd, h, 3, &block, &cap, &blen, &err), &err);
        tt_add_fields_record(w, i, h, wd, block, blen);
    }
    free(block);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
}

/* The manifest with `from` replaced by `to` (first occurrence). */
static void edit_manifest(const char *mpath, const char *orig, const char *from, const char *to)
{
    const char *at = strstr(orig, from);
    CHECK(at);
    size_t pre = (size_t)(at - orig), n = strlen(orig);
    char *t = malloc(n + strlen(to) + 1);
    memcpy(t, orig, pre);
    strcpy(t + pre, to);
    strcat(t, at + strlen(from));
    tt_spit(mpath, (const uint8_t *)t, strlen(t));
    free(t);
}

/* data.mdb with every copy of the meta "field_max" node changed: its key renamed to `key`
 * (same length) and/or the boxes field's count set to `boxes` (UINT32_MAX: unchanged). LMDB
 * keeps a leaf node's value right after its key. Returns how many copies were changed. */
static int edit_field_max(const uint8_t *orig, size_t n, const char *dpath, const char *key,
                          uint32_t boxes)
{
    uint8_t *m = malloc(n);
    memcpy(m, orig, n);
    const char *k = FL_LMDB_META_FIELD_MAX;
    size_t kl = strlen(k);
    int hits = 0;
    for (size_t i = 8; i + kl + 4 * NF <= n; i++) {
        if (memcmp(m + i, k, kl) != 0 || m[i - 2] != kl || m[i - 1] != 0 || m[i - 8] != 4 * NF ||
            m[i - 7] != 0)
            continue; /* a leaf node: lo, hi (data size), flags, key size, key, data */
        if (boxes != UINT32_MAX)
            fl_wr32(m + i + kl + 4 * F_BOXES, boxes);
        if (key)
            memcpy(m + i, key, kl);
        hits++;
    }
    tt_spit(dpath, m, n);
    free(m);
    return hits;
}

static void open_refused(const char *what, const char *dir, const char *needle)
{
    fl_dataset *ds = NULL;
    fl_error err = {0};
    int rc = fl_dataset_open(dir, &ds, &err);
    EXPECTF(rc == FL_E_FORMAT && strstr(err.msg, needle) && strstr(err.msg, "boxes"),
            "%s: rc %d: %s", what, rc, err.msg);
    if (rc == 0) {
        /* what a loader would size its slots from */
        fprintf(stderr, "  opened with max_count %u\n", fl_dataset_fields(ds)[F_BOXES].max_count);
        fl_dataset_close(ds);
    }
}

int main(void)
{
    const char *dir = tt_path("lmdb");
    write_set(dir);
    char mpath[PATH_MAX + 32], dpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    snprintf(dpath, sizeof dpath, "%s/data.mdb", dir);
    size_t mn, dn;
    char *man = (char *)tt_slurp(mpath, &mn);
    uint8_t *data = tt_slurp(dpath, &dn);
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(dir, &ds, &err), &err);
    CHECK(fl_dataset_format_version(ds) == 3 && fl_dataset_fields(ds)[F_BOXES].max_count == 7);
    fl_dataset_close(ds);

    /* the manifest alone: below what the records hold, far above what the data file says */
    edit_manifest(mpath, man, "\"max_count\": 7", "\"max_count\": 6");
    open_refused("manifest max_count 6 < 7 boxes held", dir, "max_count is 6");
    edit_manifest(mpath, man, "\"max_count\": 7", "\"max_count\": 268435456");
    open_refused("manifest max_count 2^28", dir, "damaged or crafted");

    /* the data file's field_max missing: nothing to check the manifest's 2^28 against */
    CHECK(edit_field_max(data, dn, dpath, "field_mbx", UINT32_MAX) >= 1);
    open_refused("meta field_max missing, manifest 2^28", dir, "field_max");
    /* ... also with an honest manifest (the writer of a version-3 set always stores it) */
    tt_spit(mpath, (const uint8_t *)man, mn);
    open_refused("meta field_max missing", dir, "field_max");

    /* field_max and manifest agree on 2^28 boxes: no record's fields block holds 4 GiB */
    CHECK(edit_field_max(data, dn, dpath, NULL, 268435456u) >= 1);
    edit_manifest(mpath, man, "\"max_count\": 7", "\"max_count\": 268435456");
    open_refused("meta field_max and manifest 2^28", dir, "damaged or crafted");
    /* 16 boxes (256 bytes) in both: more than any fields block of this set holds (7 boxes, 7
     * ints, 3 bytes and the lengths: under 200 bytes) */
    CHECK(edit_field_max(data, dn, dpath, NULL, 16u) >= 1);
    edit_manifest(mpath, man, "\"max_count\": 7", "\"max_count\": 16");
    open_refused("meta field_max and manifest 16", dir, "damaged or crafted");

    /* the data file says more than the manifest (records with 7 boxes, manifest 6): refused at
     * open, as shards are, rather than at the first record read */
    CHECK(edit_field_max(data, dn, dpath, NULL, 7u) >= 1);
    edit_manifest(mpath, man, "\"max_count\": 7", "\"max_count\": 6");
    open_refused("meta field_max 7, manifest 6", dir, "max_count is 6");

    /* restored: opens again */
    tt_spit(mpath, (const uint8_t *)man, mn);
    tt_spit(dpath, data, dn);
    CHECK_OK(fl_dataset_open(dir, &ds, &err), &err);
    fl_dataset_close(ds);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    EXPECTF(ru.ru_maxrss < 256 * 1024, "peak RSS %ld KB", ru.ru_maxrss);
    free(man);
    free(data);
    return fl_check_status();
}
