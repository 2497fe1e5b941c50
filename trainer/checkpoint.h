/* checkpoint.h — trainfast checkpoints: the whole training state (model identity, fp32 params,
 * momentum, gradient accumulator, BN stats, EMA, loss scaler, counters, RNG seed, loader position)
 * in one versioned, checksummed file, written atomically (tmp + fsync + rename).
 *
 * File layout (little-endian), version 1:
 *   0   char[8]  magic "TFCKPT\r\n"
 *   8   u32      version (1)
 *   12  u32      header bytes H (from offset 0, i.e. where the arrays start)
 *   16  ...      fixed header fields (see checkpoint.c: tf_ckpt_header)
 *   H   f32[]    params, momentum, grad_accum (param_count each), stats (stat_count),
 *                then ema_params (param_count) and ema_stats (stat_count) when flags & EMA
 *   ..  u8[]     config JSON text (config_len bytes): the options that define the run, the
 *                dataset identity and its class names; --resume refuses a run that differs
 *                from it and eval a dataset that labels the classes differently (train.c)
 *   end u32      CRC32C of every byte before it
 * A reader checks magic, version, sizes against the file length, then the CRC, before trusting
 * anything. */
#ifndef TF_CHECKPOINT_H
#define TF_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "fl_error.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_CKPT_VERSION 1u

typedef struct tf_checkpoint {
    /* model identity: enough to rebuild the spec (tf_model_build) and check it */
    char model[32];
    uint32_t spec_id;
    int32_t in_c, in_h, in_w, num_classes;
    tf_model_options mopt;
    float mean[3], std[3];
    int64_t param_count, stat_count;
    int has_ema;
    /* optimizer/backend state: pointers into `storage` (owned) */
    tf_state st;
    /* loop position: the next batch to train on */
    uint64_t epoch, batch;
    uint64_t seed;
    /* running figures of the interrupted epoch, so a resumed run reports the same epoch totals */
    double epoch_loss_sum;
    uint64_t epoch_correct, epoch_seen;
    double wall_s;       /* training wall time before this checkpoint */
    char *config_json;   /* owned, NUL-terminated (may be empty) */
    float *storage;      /* owned */
} tf_checkpoint;

/* Size the arrays for a model (zeroed). Returns 0 or -ENOMEM. */
int tf_checkpoint_alloc(tf_checkpoint *ck, int64_t param_count, int64_t stat_count, int has_ema);

/* Free what ck owns. NULL allowed. */
void tf_checkpoint_free(tf_checkpoint *ck);

/* Serialise ck into a fresh malloc'ed buffer (*out, *len). Returns 0 or -ENOMEM. */
int tf_checkpoint_serialize(const tf_checkpoint *ck, uint8_t **out, size_t *len);

/* Parse and verify a checkpoint image of `len` bytes (copied; buf may be freed afterwards).
 * `name` is used in messages. Errors: FL_E_FORMAT (bad magic, inconsistent sizes),
 * FL_E_VERSION (other version: message says which), FL_E_TRUNCATED (shorter than declared),
 * FL_E_CHECKSUM (CRC mismatch), -ENOMEM. On error ck is left empty. */
int tf_checkpoint_parse(const void *buf, size_t len, const char *name, tf_checkpoint *ck,
                        fl_error *err);

/* Write ck as DIR/ckpt-<step>.tfc: to a .tmp name, fsync, rename, fsync DIR; then delete
 * checkpoints older than the previous one (the newest two are kept). The full path goes to
 * path_out (may be NULL). Errors: -errno naming the file. */
int tf_checkpoint_save(const char *dir, const tf_checkpoint *ck, char *path_out, size_t cap,
                       fl_error *err);

/* Read and verify one checkpoint file. Errors: -errno, and those of tf_checkpoint_parse. */
int tf_checkpoint_load(const char *path, tf_checkpoint *ck, fl_error *err);

/* Load the newest checkpoint in DIR that verifies. Damaged newer files are skipped; each one is
 * described in `skipped` (may be NULL; lines separated by '\n'). Returns 0 and fills ck/path, or
 * -ENOENT when DIR holds no valid checkpoint (message says what was found). */
int tf_checkpoint_load_latest(const char *dir, tf_checkpoint *ck, char *path_out, size_t cap,
                              char *skipped, size_t skipped_cap, fl_error *err);

#ifdef __cplusplus
}
#endif
#endif
