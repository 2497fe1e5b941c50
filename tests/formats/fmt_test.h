#pragma GCC diagnostic ignored "-Wunused-function"
/* fmt_test.h — shared helpers for the formats tests: assertions that report file:line, a temp
 * directory removed at exit, whole-file read/write, deterministic fixtures, a one-call dataset
 * writer, and the field constructors and record writer of the fields tests. */
#ifndef FMT_TEST_H
#define FMT_TEST_H

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_dataset.h"
#include "fl_writer.h"

#include "fl_check.h" /* CHECK, CHECK_OK */

static char tt_dir[PATH_MAX];

static void tt_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            char p[PATH_MAX];
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                    continue;
                snprintf(p, sizeof p, "%s/%s", path, e->d_name);
                tt_rm_rf(p);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static pid_t tt_owner;
static void tt_cleanup(void)
{
    if (tt_dir[0] && getpid() == tt_owner && !getenv("FL_KEEP_TMP"))
        tt_rm_rf(tt_dir);
}

/* Create the test's temp dir (under $TMPDIR) once; returns it. */
static const char *tt_tmpdir(void)
{
    if (!tt_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tt_dir, sizeof tt_dir, "%s/fl-formats-XXXXXX", base && *base ? base : "/tmp");
        CHECK(mkdtemp(tt_dir) != NULL);
        tt_owner = getpid();
        atexit(tt_cleanup);
    }
    return tt_dir;
}

static char *tt_path(const char *name)
{
    static char bufs[8][PATH_MAX + 256];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, PATH_MAX + 256, "%s/%s", tt_tmpdir(), name);
    return b;
}

/* xorshift64*: deterministic fixture bytes */
static uint64_t tt_rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Record i of a fixture: bytes of varying length (raw: w*h*c bytes) derived from i. */
static size_t tt_payload(uint64_t i, int encoding, uint32_t h, uint32_t w, uint32_t c, uint8_t *out,
                         size_t cap)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL ^ (i * 0x100000001B3ULL + 1);
    size_t n;
    if (encoding == FL_ENC_RAW)
        n = (size_t)h * w * c;
    else
        n = 20 + (size_t)(tt_rng(&s) % 3000);
    if (n > cap)
        n = cap;
    for (size_t k = 0; k < n; k++) {
        if (encoding == FL_ENC_RAW) /* smooth-ish so zstd has something to do */
            out[k] = (uint8_t)((k / 7 + i * 3) & 0xFF) ^ (uint8_t)(tt_rng(&s) & 3);
        else
            out[k] = (uint8_t)tt_rng(&s);
    }
    if (encoding == FL_ENC_JPEG && n >= 4) {
        out[0] = 0xFF;
        out[1] = 0xD8;
        out[n - 2] = 0xFF;
        out[n - 1] = 0xD9;
    }
    if (encoding == FL_ENC_PNG && n >= 8)
        memcpy(out, "\x89PNG\r\n\x1a\n", 8);
    return n;
}

static void tt_name(uint64_t i, char *out, size_t n)
{
    snprintf(out, n, "class_%llu/img %05llu \xc3\xa9.bin", (unsigned long long)(i % 3),
             (unsigned long long)i);
}

static int32_t tt_label(uint64_t i) { return (int32_t)(i % 3); }

static const char *const tt_classes[3] = {"cat", "dog \"quoted\"", "n\xc3\xa4me/with\\slash"};

/* Default options for a fixture dataset. */
static fl_writer_options tt_options(fl_backend backend, int encoding, int zstd)
{
    fl_writer_options o;
    memset(&o, 0, sizeof o);
    o.backend = backend;
    o.schema.encoding = (fl_encoding)encoding;
    o.schema.compression = zstd ? FL_COMP_ZSTD : FL_COMP_NONE;
    o.schema.channels = encoding == FL_ENC_RAW ? 1 : 3;
    o.schema.height = encoding == FL_ENC_RAW ? 28 : 0;
    o.schema.width = encoding == FL_ENC_RAW ? 28 : 0;
    o.zstd_level = 3;
    o.tool_version = "test";
    o.options_json = "{\"test\": true}";
    return o;
}

/* Add fixture records [from, to) to w. */
static void tt_add(fl_writer *w, const fl_writer_options *o, uint64_t from, uint64_t to)
{
    static uint8_t buf[1 << 16];
    char name[128];
    fl_error err;
    for (uint64_t i = from; i < to; i++) {
        size_t n = tt_payload(i, o->schema.encoding, 28, 28, o->schema.channels, buf, sizeof buf);
        tt_name(i, name, sizeof name);
        uint32_t h = o->schema.encoding == FL_ENC_RAW ? 28 : 10 + (uint32_t)(i % 5);
        uint32_t wd = o->schema.encoding == FL_ENC_RAW ? 28 : 20 + (uint32_t)(i % 7);
        CHECK_OK(fl_writer_add(w, buf, n, tt_label(i), name, h, wd, &err), &err);
    }
}

/* Write a complete fixture dataset of n records at dst. */
static void tt_write(const char *dst, const fl_writer_options *o, uint64_t n)
{
    fl_writer *w;
    fl_error err;
    CHECK_OK(fl_writer_open(dst, o, &w, &err), &err);
    tt_add(w, o, 0, n);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
}

/* Check every record of ds against the fixture (exact payload bytes, label, name, sizes). */
static void tt_check_all(const fl_dataset *ds, uint64_t n)
{
    static uint8_t want[1 << 16];
    fl_error err;
    CHECK(fl_dataset_count(ds) == n);
    const fl_schema *s = fl_dataset_schema(ds);
    uint8_t *dst = malloc(fl_dataset_max_raw_len(ds) + 1);
    CHECK(dst);
    char name[128];
    for (uint64_t i = 0; i < n; i++) {
        size_t wn = tt_payload(i, s->encoding, 28, 28, s->channels, want, sizeof want);
        const uint8_t *p, *pl;
        size_t len, pn;
        CHECK_OK(fl_dataset_get(ds, i, &p, &len, 1, &err), &err);
        CHECK_OK(fl_dataset_payload(ds, i, p, len, dst, fl_dataset_max_raw_len(ds), &pl, &pn, &err),
                 &err);
        if (pn != wn || memcmp(pl, want, wn) != 0) {
            fprintf(stderr, "record %llu: payload differs (%zu vs %zu bytes)\n",
                    (unsigned long long)i, pn, wn);
            exit(1);
        }
        fl_record_info info;
        CHECK_OK(fl_dataset_record_info(ds, i, &info, &err), &err);
        CHECK(info.label == tt_label(i));
        CHECK(info.raw_len == wn);
        CHECK(info.stored_len == len);
        CHECK(info.crc32c == fl_crc32c(0, p, len));
        if (s->encoding == FL_ENC_RAW)
            CHECK(info.height == 28 && info.width == 28);
        else
            CHECK(info.height == 10 + i % 5 && info.width == 20 + i % 7);
        size_t nl;
        const char *nm = fl_dataset_record_name(ds, i, &nl);
        tt_name(i, name, sizeof name);
        CHECK(nm && nl == strlen(name) && memcmp(nm, name, nl) == 0);
    }
    free(dst);
    CHECK(fl_dataset_num_classes(ds) == 3);
    for (uint32_t c = 0; c < 3; c++)
        CHECK(strcmp(fl_dataset_class_name(ds, c), tt_classes[c]) == 0);
    CHECK(fl_dataset_class_name(ds, 3) == NULL);
    const uint8_t *p;
    size_t len;
    CHECK(fl_dataset_get(ds, n, &p, &len, 1, &err) == FL_E_RANGE);
    uint64_t bad = 99;
    CHECK_OK(fl_dataset_verify(ds, NULL, NULL, &bad, &err), &err);
    CHECK(bad == 0);
}

/* The whole file at p, read into a malloc'ed buffer with a NUL after its *n bytes (so text files
 * read as strings). */
static uint8_t *tt_slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    CHECK(b && fread(b, 1, (size_t)sz, f) == (size_t)sz);
    fclose(f);
    b[sz] = 0;
    *n = (size_t)sz;
    return b;
}

/* Write the n bytes at b to p (created or truncated). */
static void tt_spit(const char *p, const void *b, size_t n)
{
    FILE *f = fopen(p, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    fclose(f);
}

/* A field named `name` of type t, with the type's default dtype and no `of` link (-1); the caller
 * sets shape, codec, max_count and `of` where the type wants them. */
static fl_field tt_field(const char *name, fl_field_type t)
{
    fl_field f;
    memset(&f, 0, sizeof f);
    snprintf(f.name, sizeof f.name, "%s", name);
    f.type = t;
    f.dtype = fl_field_type_dtype(t);
    f.of = -1;
    return f;
}

/* The fields every detection schema of these tests starts with, written to f[0..3]: "image",
 * "label" (int), "boxes", and "labels" (an int list, one per box). */
static void tt_fields_detection(fl_field *f)
{
    f[0] = tt_field("image", FL_FIELD_IMAGE);
    f[1] = tt_field("label", FL_FIELD_INT);
    f[2] = tt_field("boxes", FL_FIELD_BOXES);
    f[3] = tt_field("labels", FL_FIELD_INT_LIST);
    f[3].of = 2;
}

/* A mask field named `name` of the image field (f[0] of tt_fields_detection): pixels of `dtype`
 * stored with `codec`. */
static fl_field tt_field_mask(const char *name, fl_dtype dtype, fl_mask_codec codec)
{
    fl_field f = tt_field(name, FL_FIELD_MASK);
    f.dtype = dtype;
    f.codec = codec;
    f.of = 0;
    return f;
}

/* Add fixture record i to w as a JPEG (tt_payload's bytes, tt_name, tt_label) of h x wd pixels
 * with the fields block `block` of blen bytes. */
static void tt_add_fields_record(fl_writer *w, uint64_t i, uint32_t h, uint32_t wd,
                                 const uint8_t *block, size_t blen)
{
    static uint8_t buf[1 << 16];
    size_t n = tt_payload(i, FL_ENC_JPEG, h, wd, 3, buf, sizeof buf);
    char name[128];
    tt_name(i, name, sizeof name);
    fl_record_in in = {.format = FL_ENC_JPEG,
                       .stored = buf,
                       .stored_len = n,
                       .raw_len = n,
                       .fields_block = block,
                       .fields_len = blen,
                       .label = tt_label(i),
                       .name = name,
                       .height = h,
                       .width = wd};
    fl_error err;
    CHECK_OK(fl_writer_add_record(w, &in, &err), &err);
}

static fl_backend tt_backend_arg(int argc, char **argv)
{
    return argc > 1 && !strcmp(argv[1], "lmdb") ? FL_BACKEND_LMDB : FL_BACKEND_SHARDS;
}

#endif
