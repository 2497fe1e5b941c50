/* fuzz_common.h — helpers the dataset-reader harnesses (fuzz_dataset.c, fuzz_lmdb.c) share: a
 * fresh temporary directory, an input written to a file, the small seed dataset they fuzz around,
 * and a verify callback that never stops. Any failure aborts: in a harness an unexpected error is a
 * finding, not a result. */
#ifndef FL_FUZZ_COMMON_H
#define FL_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "fl_dataset.h"
#include "fl_writer.h"

/* Creates a fresh directory $TMPDIR/fl-fuzz-`what`-XXXXXX (/tmp without TMPDIR) and writes its
 * path to `out` (`n` bytes); aborts on any error. */
void fuzz_make_tmpdir(char *out, size_t n, const char *what);

/* Writes the `n` bytes at `data` to `dir`/`name` (created or truncated); aborts on any error. */
void fuzz_put_file(const char *dir, const char *name, const void *data, size_t n);

/* Writes the seed dataset at `at` with `backend` (FL_BACKEND_SHARDS or FL_BACKEND_LMDB): raw 4x4
 * one-channel pixels, zstd level 3, 5 records named img0..img4 with labels i % 2, classes a and b.
 * Aborts on any error. */
void fuzz_write_seed(const char *at, fl_backend backend);

/* An fl_dataset_verify callback that keeps going past every bad record. */
int fuzz_no_stop(void *u, uint64_t i, const fl_error *e);

#endif
