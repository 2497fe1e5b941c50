/* fixture.h — small datasets for the loader tests, written with fl_writer (shards or LMDB):
 * raw records whose pixels are a known function of (record, y, x, c), JPEG records encoded
 * from such pixels, and a tensor-only set (no image); plus a temp-dir helper, a loader that
 * skips where io_uring is refused, a per-sample check, and hashing of batch streams. */
#ifndef FL_TEST_LOADER_FIXTURE_H
#define FL_TEST_LOADER_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fastload.h"
#include "fl_writer.h"

#include "fl_check.h" /* CHECK, CHECK_OK */

/* Pixel value of raw record i at (y, x, c). */
static inline uint8_t fx_pixel(uint64_t i, uint32_t y, uint32_t x, uint32_t c)
{
    return (uint8_t)(i * 37u + y * 5u + x * 3u + c * 101u + ((x * y) >> 3));
}

/* Label of record i when the dataset has `classes` classes sorted by class (class-contiguous). */
static inline int32_t fx_label(uint64_t i, uint64_t n, uint32_t classes)
{
    return (int32_t)(i * classes / n);
}

typedef struct fx_spec {
    fl_backend backend;
    fl_encoding encoding; /* FL_ENC_RAW or FL_ENC_JPEG */
    fl_compression compression;
    uint32_t n, height, width, channels, classes;
    uint64_t shard_bytes; /* small, to get several shards */
    int vary_size;        /* JPEG: sizes vary per record (schema size 0) */
} fx_spec;

/* The small JPEG set of several loader tests: n records of varying size around 40x48, 4
 * classes, in shards of 32 KiB (several shards), uncompressed. */
static inline fx_spec fx_jpeg_spec(uint32_t n)
{
    fx_spec j = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_JPEG,
                 .compression = FL_COMP_NONE,
                 .n = n,
                 .height = 40,
                 .width = 48,
                 .channels = 3,
                 .classes = 4,
                 .shard_bytes = 32 * 1024,
                 .vary_size = 1};
    return j;
}

/* A fresh directory under $TMPDIR (or /tmp); exits on failure. Caller frees. */
char *fx_tmpdir(const char *tag);
/* rm -rf dir. */
void fx_rmrf(const char *dir);
/* Write the dataset to dir/name; returns the malloc'ed path. Exits on failure; returns NULL
 * when the LMDB backend is asked for and this build does not have it. */
char *fx_make(const char *dir, const char *name, const fx_spec *s);
/* Size of record i for vary_size datasets. */
void fx_size(const fx_spec *s, uint64_t i, uint32_t *h, uint32_t *w);
/* Fill an HWC image of record i. */
void fx_fill(uint64_t i, uint32_t h, uint32_t w, uint32_t c, uint8_t *px);

/* Sample k of batch b is record i of the raw fixture s (fixed size): its index, label and
 * pixels; exits on any difference. */
void fx_check_sample(const fl_batch *b, uint32_t k, const fx_spec *s, uint64_t i);

/* The tensor-only data set (encoding none, format version 3, no image) at path: 10 records with
 * fields y (int), x (float_vector:5, record i: i*5 .. i*5+4) and t (ndarray float64 [4], record
 * i: i + k/2), record i labelled label(i), written with tool_version. Returns 0, or the writer's
 * error code with err filled (the writer aborted). */
int fx_write_tensor_set(const char *path, const char *tool_version, int32_t (*label)(int i),
                        fl_error *err);

/* FNV-1a 64 over bytes, chained. */
static inline uint64_t fx_hash(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
/* Hash of one batch (images, labels, indices, epoch, batch). */
uint64_t fx_batch_hash(const fl_batch *b);
/* A new loader on path with o; exits on error, except that it returns NULL (saying so) when
 * FL_IO_URING is asked for and the kernel refuses io_uring. */
fl_loader *fx_loader(const char *path, const fl_loader_options *o);
/* Hash of `nb` consecutive batches from a new loader, each batch hashed with fx_batch_hash; exits
 * on error; returns 0 when FL_IO_URING is asked for and the kernel refuses io_uring. */
uint64_t fx_stream_hash(const char *path, const fl_loader_options *o, uint64_t nb,
                        uint64_t *per_batch /* nb entries or NULL */);
/* fx_stream_hash with each batch hashed by `hash`. */
uint64_t fx_stream_hash_by(const char *path, const fl_loader_options *o, uint64_t nb,
                           uint64_t *per_batch, uint64_t (*hash)(const fl_batch *));
/* Quiet loader options for tests: no pinned memory lookup, small batches. */
void fx_options(fl_loader_options *o);

#endif
