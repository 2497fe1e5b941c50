/* predict.h — `trainfast predict CKPT DATA...`: a checkpoint's predictions over a packed dataset
 * or image files. predict.c: the command (checkpoint, source, backend, loop, summary);
 * predict_images.c: image files decoded and resized as the loader decodes a record;
 * predict_out.c: per-record text or JSON lines on stdout, the CSV file and the .npy logits. */
#ifndef TF_PREDICT_H
#define TF_PREDICT_H

#include <stdint.h>
#include <stdio.h>

#include "fl_error.h"
#include "fl_file.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_predict_opts {
    const char *ckpt;  /* checkpoint file, or a --checkpoint DIR (its newest valid one) */
    char *const *data; /* one packed dataset, or image files */
    int ndata;
    uint32_t batch;          /* samples per batch (backend max_batch) */
    uint32_t top;            /* classes listed per record (clamped to the model's classes) */
    int json;                /* stdout: JSON lines (one object per record, then a summary) */
    int threads, workers;    /* CPU compute threads (0: all), loader workers (0: 1) */
    int cpu_impl;            /* --cpu-backend: tf_cpu_impl (0: the default) */
    const char *device;      /* cpu, cuda, auto */
    const char *logits_path; /* .npy of float32 [N, classes] logits, or NULL */
    const char *csv_path;    /* CSV of the per-record predictions, or NULL */
} tf_predict_opts;

/* Run `trainfast predict`; returns the exit status (0, FL_EXIT_DATA, FL_EXIT_USAGE). */
int tf_predict_main(const tf_predict_opts *o);

/* ---- predict_images.c ------------------------------------------------------------------------ */
typedef struct tf_images tf_images;

/* Image files (JPEG, PNG, WebP where built) as h x w x c uint8 samples, decoded and resampled
 * by the loader's own steps for an encoded record: the crop of the loader's augmentation
 * (fl_augment_params) then fl_decode_crop_resize. center = 1: FL_AUG_CENTER, the loader's
 * evaluation crop (shorter side to size / center_ratio, centre crop), as `trainfast eval` reads
 * a dataset of varying image sizes for a model trained at --size; center = 0: FL_AUG_NONE, the
 * whole image resampled to h x w (an image of that size is taken as it is), as for a model
 * trained on fixed-size data. `files` must outlive the object. Errors: -ENOMEM, those of
 * fl_decoder_create. */
int tf_images_open(char *const *files, int n, uint32_t h, uint32_t w, uint32_t c, int center,
                   tf_images **out, fl_error *err);

/* Decode the next min(max, files left) images into dst (each h*w*c bytes, NHWC); *got says how
 * many (0 at the end). Errors name the file: -errno (cannot read it), FL_E_DECODE (not an image,
 * corrupt), FL_E_UNSUPPORTED, FL_E_TOO_LARGE. */
int tf_images_next(tf_images *s, uint8_t *dst, uint32_t max, uint32_t *got, fl_error *err);

void tf_images_close(tf_images *s);

/* ---- predict_out.c --------------------------------------------------------------------------- */

/* Where predictions go. Files are durable writes (fl_file_begin, common/fl_file.h): a regular
 * file is written under PATH.tmp and renamed into place by tf_pred_out_commit, a device or FIFO
 * is written in place; tf_pred_out_close removes a temporary that was not committed. */
typedef struct tf_pred_out {
    uint32_t classes, top;
    const char *const *names;    /* class names in label order (classes of them) */
    int json;                    /* per-record JSON lines instead of text */
    int labelled;                /* records carry labels: top-1/top-5 counted */
    FILE *csv;                   /* on a dup of csv_w.fd; NULL without --csv */
    fl_file_writer csv_w, npy_w; /* fd -1: not open */
    const char *csv_path, *npy_path;
    uint64_t rows_expected, rows;
    uint64_t correct1, correct5;
    uint32_t *order; /* scratch: class indices by logit */
    double *prob;    /* scratch: softmax of one record */
} tf_pred_out;

/* Open the outputs for `rows` records of `classes` logits each: the .npy (header written) and
 * CSV (header row) when their paths are given. Errors: -errno naming the file, -ENOMEM. */
int tf_pred_out_open(tf_pred_out *o, const tf_predict_opts *opt, uint64_t rows, uint32_t classes,
                     const char *const *names, int labelled, fl_error *err);

/* Records first .. first+n-1: their logits (n x classes, fp32), labels (n, when labelled) and
 * file names (n, or NULL: records are named by index). Writes the per-record line on stdout,
 * the CSV rows and the .npy rows. Errors: -errno naming the file. */
int tf_pred_out_rows(tf_pred_out *o, uint64_t first, uint32_t n, const float *logits,
                     const int32_t *labels, char *const *files, fl_error *err);

/* All rows written: flush, close and rename the files into place. Errors: -errno naming the file,
 * FL_E_INVALID when fewer rows than announced came. */
int tf_pred_out_commit(tf_pred_out *o, fl_error *err);

/* Free; remove the temporaries of files not committed. */
void tf_pred_out_close(tf_pred_out *o);

#ifdef __cplusplus
}
#endif
#endif
