/* checkpoint.h — trainfast checkpoints: the whole training state (model identity, fp32 params,
 * momentum, gradient accumulator, BN stats, EMA, loss scaler, counters, RNG seed, loader position)
 * in one versioned, checksummed file, written atomically (tmp + fsync + rename).
 *
 * File layout (little-endian), version 2:
 *   0   char[8]  magic "TFCKPT\r\n"
 *   8   u32      version (2)
 *   12  u32      header bytes H (from offset 0, i.e. where the arrays start)
 *   16  ...      fixed header fields (see checkpoint.c: tf_ckpt_header)
 *   H   f32[]    params, momentum, grad_accum (param_count each), stats (stat_count),
 *                then ema_params (param_count) and ema_stats (stat_count) when flags & EMA
 *   ..  u8[]     the run's config (config_len bytes, tf_run_config): the options that define
 *                the run, the dataset identity and its class names; --resume refuses a run that
 *                differs from it (train_config.c) and eval a dataset that labels the classes
 *                differently (train_eval.c). Typed fields, little-endian:
 *                  0   u32 world, batch (per rank), pad_tail, epochs, accum
 *                  20  f32 lr, wd, momentum, label_smoothing, warmup_epochs, ema
 *                  44  u32 nesterov, cosine, crop_pad, flip, size
 *                  64  char[32] model, char[16] device (NUL-padded)
 *                  112 u32 data_len, data_id_len, class_count
 *                  124 data (data_len bytes), data_id (data_id_len bytes), then class_count
 *                      class names, each as u32 length + bytes (no NULs in any string)
 *   end u32      CRC32C of every byte before it
 * Version 1 (older trainfast) is the same file with version 1 and the config as JSON
 * text ({"world":..,"batch":..,"lr":..,"classes":[..],..}); it still loads: its keys become the
 * same typed fields (those it lacks are left out of tf_run_config.present), and re-serialising
 * it writes version 1 again, byte for byte. A reader checks magic, version, sizes against the
 * file length, then the CRC, before trusting anything. */
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

#define TF_CKPT_VERSION     2u /* written */
#define TF_CKPT_VERSION_MIN 1u /* oldest read */

/* tf_run_config.present: which fields a checkpoint holds (version 2: all; version 1: the keys
 * its JSON config had; none when it had no config) */
enum {
    TF_CFG_WORLD = 1u << 0,
    TF_CFG_BATCH = 1u << 1,
    TF_CFG_PAD_TAIL = 1u << 2,
    TF_CFG_EPOCHS = 1u << 3,
    TF_CFG_ACCUM = 1u << 4,
    TF_CFG_LR = 1u << 5,
    TF_CFG_WD = 1u << 6,
    TF_CFG_MOMENTUM = 1u << 7,
    TF_CFG_LABEL_SMOOTHING = 1u << 8,
    TF_CFG_WARMUP = 1u << 9,
    TF_CFG_EMA = 1u << 10,
    TF_CFG_NESTEROV = 1u << 11,
    TF_CFG_SCHEDULE = 1u << 12,
    TF_CFG_CROP_PAD = 1u << 13,
    TF_CFG_FLIP = 1u << 14,
    TF_CFG_SIZE = 1u << 15,
    TF_CFG_MODEL = 1u << 16,
    TF_CFG_DEVICE = 1u << 17,
    TF_CFG_DATA = 1u << 18,
    TF_CFG_DATA_ID = 1u << 19,
    TF_CFG_CLASSES = 1u << 20,
    TF_CFG_ALL = (1u << 21) - 1
};

/* The options that define a run, as the run that wrote a checkpoint had them. */
typedef struct tf_run_config {
    uint32_t present;                /* TF_CFG_* bits */
    uint32_t world, batch, pad_tail; /* processes, per-rank batch, tail padded by wrap-around */
    uint32_t epochs, accum;
    float lr, wd, momentum, label_smoothing, warmup_epochs, ema;
    uint32_t nesterov, cosine, crop_pad, flip, size; /* cosine: 1 cosine, 0 linear schedule */
    char model[32], device[16];                      /* --model as given; backend name */
    char *data, *data_id; /* owned: --data path; dataset identity (train_config.c) */
    uint32_t class_count;
    char **classes; /* owned: class_count names in label order */
} tf_run_config;

/* Set cfg's strings (copies; NULL = ""); 0 or -ENOMEM. */
int tf_run_config_set_strings(tf_run_config *cfg, const char *data, const char *data_id,
                              const char *const *classes, uint32_t class_count);

/* Free what cfg owns and zero it. */
void tf_run_config_free(tf_run_config *cfg);

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
    double wall_s;     /* training wall time before this checkpoint */
    tf_run_config cfg; /* owned strings */
    uint32_t version;  /* format version read; 0 or TF_CKPT_VERSION for a new checkpoint.
                          serialize writes this version */
    char *v1_config;   /* version 1: its JSON config text as read (owned; serialize writes it
                          back), else NULL */
    float *storage;    /* owned */
} tf_checkpoint;

/* Size the arrays for a model (zeroed). Returns 0 or -ENOMEM. */
int tf_checkpoint_alloc(tf_checkpoint *ck, int64_t param_count, int64_t stat_count, int has_ema);

/* tf_checkpoint_alloc for `spec`'s counts, then the model's identity filled from it: name,
 * spec_id, input shape, classes, mean/std, and `mopt` (NULL: zeros). What a run writes into every
 * checkpoint it keeps. Returns 0 or the error of tf_checkpoint_alloc. */
int tf_checkpoint_for_model(tf_checkpoint *ck, const tf_model_spec *spec,
                            const tf_model_options *mopt, int has_ema);

/* Free what ck owns. NULL allowed. */
void tf_checkpoint_free(tf_checkpoint *ck);

/* Serialise ck (in format ck->version: a version 1 checkpoint read keeps its bytes) into a fresh
 * malloc'ed buffer (*out, *len). Returns 0, -ENOMEM, or -EINVAL (a string too long for the
 * format, or a version this trainfast does not write). */
int tf_checkpoint_serialize(const tf_checkpoint *ck, uint8_t **out, size_t *len);

/* Parse and verify a checkpoint image of `len` bytes (copied; buf may be freed afterwards).
 * `name` is used in messages. Errors: FL_E_FORMAT (bad magic, inconsistent sizes),
 * FL_E_VERSION (other version: message says which it found and which it reads), FL_E_TRUNCATED
 * (shorter than declared), FL_E_CHECKSUM (CRC mismatch), -ENOMEM. On error ck is left empty. */
int tf_checkpoint_parse(const void *buf, size_t len, const char *name, tf_checkpoint *ck,
                        fl_error *err);

/* Write ck as DIR/ckpt-<step>.tfc: to a .tmp name, fsync, rename, fsync DIR; then delete
 * checkpoints older than its predecessor (it and the one before it are kept; files of later
 * steps, such as damaged ones a --resume skipped, are left alone). The full path goes to
 * path_out (may be NULL). Errors: -errno naming the file. */
int tf_checkpoint_save(const char *dir, const tf_checkpoint *ck, char *path_out, size_t cap,
                       fl_error *err);

/* The lock file a training run holds in its checkpoint folder (tf_checkpoint_dir_check). */
#define TF_CKPT_LOCK_NAME ".trainfast.lock"

/* Check, before training, that checkpoints can be written into DIR: create DIR when it is
 * missing (its parent must exist, as for tf_checkpoint_save), then create and remove a probe
 * file in it (a read-only file system or folder, a path under a regular file all fail here);
 * then lock DIR for this run (an flock on DIR/.trainfast.lock): *lock_fd (out) holds it until
 * closed or the process ends, -1 on error. fresh: the run does not resume, so DIR must hold no
 * checkpoint yet. Errors: -errno with a message naming DIR; -EBUSY when another run holds DIR
 * (its pid named); -EEXIST when fresh and DIR holds checkpoints (the newest named). */
int tf_checkpoint_dir_check(const char *dir, int fresh, int *lock_fd, fl_error *err);

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
