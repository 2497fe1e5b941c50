/* pack_internal.h — what the pieces of `packdata pack` share: parsed options, the plan (schema
 * and per-item transform), the per-thread worker context and the reorder-ring slot. */
#ifndef PACK_INTERNAL_H
#define PACK_INTERNAL_H

#include "packdata.h"

#include "fl_image.h"
#include "fl_writer.h"

/* PD_ENC_NONE: --no-image, records without an image (schema encoding none, empty payloads) */
typedef enum pd_encode {
    PD_ENC_DEFAULT = 0,
    PD_ENC_KEEP,
    PD_ENC_JPEG,
    PD_ENC_RAW,
    PD_ENC_NONE
} pd_encode;

typedef struct pd_pack_opts {
    const char *src, *dst;
    pd_source_opts so;
    pd_encode encode;
    int quality;
    int jpeg_restart; /* -2 default, -1 off, 0 one restart interval per MCU row, N: <= N MCUs */
    int mask_codec;   /* 0 default, else the fl_mask_codec of every MASK field */
    uint32_t max_side;
    uint32_t resize_w, resize_h;
    int gray;
    int compress; /* -1 default (zstd for raw, none otherwise), 0 none, 1 zstd */
    int level;
    int dict; /* train a dictionary for zstd (default on) */
    fl_backend backend;
    uint64_t shard_size;
    int shuffle;
    uint64_t seed;
    uint32_t workers;
    uint32_t part_index, part_count;
    int on_error_skip;
    const char *report;
    int resume, force, quiet, json;
    char *class_list_buf; /* storage behind so.class_names */
    /* given on the command line (for the warnings about options that do not apply) */
    int quality_given, seed_given, shard_size_given, cifar100_given, encode_given, compress_given,
        max_pixels_given;
} pd_pack_opts;

/* Parse `pack` arguments. Returns -1 when the pack should run, otherwise the exit status to
 * return at once (0 after --help/--version, 2 after a usage error, already printed). */
int pd_pack_parse_args(int argc, char **argv, pd_pack_opts *po);
void pd_pack_opts_free(pd_pack_opts *po);

/* What every record becomes. */
typedef struct pd_plan {
    fl_schema schema;
    pd_encode encode; /* KEEP, JPEG, RAW or NONE (resolved) */
    uint32_t channels;
    uint32_t resize_w, resize_h; /* exact output size, or 0 */
    uint32_t max_side;           /* longer side limit, or 0 */
    uint32_t fixed_w, fixed_h;   /* raw: every record must have this size */
    int quality;
    int jpeg_restart; /* -1: store JPEGs as produced; else fl_jpeg_add_restarts max_mcus */
    int level;
    uint64_t max_pixels;
    /* KEEP: each input is stored in its own format. keep_format is the one format of a dataset
     * whose inputs all have it (schema JPEG/PNG/WebP), FL_IMG_UNKNOWN when they mix (schema
     * FL_ENC_MIXED: every record carries its format). keep_count: inputs seen per format when
     * the plan sniffed them (by fl_image_format). */
    fl_image_format keep_format;
    uint64_t keep_count[4];
    /* KEEP under --part: keep_format and keep_count come from the job's file names
     * (pd_items.name_formats), not from the files' bytes (pd_plan_formats) */
    int keep_by_name;
    size_t dict_cap; /* most bytes of zstd dictionary to train (0: 110 KiB) */
    /* the schema when the source has fields beyond image + label (pd_items.fields), else 0 */
    const fl_field *fields;
    uint32_t num_fields;
} pd_plan;

/* The record encoding of an image format (FL_IMG_JPEG -> FL_ENC_JPEG, ...). */
fl_encoding pd_encoding_of(fl_image_format f);

/* The plan from the options and the source kind; raw without --resize takes its size from the
 * first input that probes. The stored image format under --encode keep is left to
 * pd_plan_formats. */
int pd_plan_make(const pd_pack_opts *po, pd_items *items, pd_reject_ctx *rc, pd_plan *plan,
                 fl_error *err);
/* --encode keep: the schema's image format. One process: the first bytes of every input (one
 * format: that format, several: FL_ENC_MIXED). Under --part the job's file names decide
 * (items->name_formats, counted over the whole job before the slice), so that every part
 * reaches the same schema without reading the other parts' files: one image extension
 * (.jpg/.jpeg/.jpe, .png or .webp) throughout: that format, and a file of this part whose bytes
 * are another format is a bad input; several, or a name that does not tell: FL_ENC_MIXED. */
void pd_plan_formats(const pd_pack_opts *po, const pd_items *items, pd_plan *plan);
void pd_plan_free(pd_plan *plan);

/* Warn ("packdata: warning: --root does not apply ...") about each option given that has no
 * effect on this run: the source kind (items->form) or the resolved plan makes it meaningless.
 * Prints only; the exit status does not change. (pack_args.c) */
void pd_pack_warn_unused(const pd_pack_opts *po, const pd_items *items, const pd_plan *plan);

enum { PD_SLOT_OK = 0, PD_SLOT_REJECT, PD_SLOT_FATAL };

/* One entry of the reorder ring: written by one worker, then read by the writer thread. */
typedef struct pd_slot {
    int state;    /* guarded by the pipeline mutex */
    int status;   /* PD_SLOT_* */
    uint8_t *buf; /* stored bytes (grow-only, reused) */
    size_t len, cap;
    size_t raw_len; /* payload size before compression */
    uint32_t height, width;
    fl_encoding format; /* the record's encoding (its own format under --encode keep) */
    uint64_t in_bytes;  /* input bytes (file size or raw pixels) */
    uint32_t src_height,
        src_width;       /* the image before any resize (boxes and masks scale from it) */
    uint8_t *fields_buf; /* the record's fields block (plan->num_fields > 0; grow-only, reused) */
    size_t fields_len, fields_cap;
    const char *source; /* item name or path, for messages */
    char *path;         /* the input's path when the list builds it (pd_items_get; grow-only) */
    size_t path_cap;
    char msg[800];
} pd_slot;

/* Per-thread state: codecs, compressor and grow-only scratch. */
typedef struct pd_worker_ctx {
    fl_decoder *dec;
    fl_encoder *enc;
    fl_encoder *renc; /* restart-marker rewrite (its output must not alias enc's) */
    fl_compressor *comp;
    uint8_t *file; /* file bytes */
    size_t file_cap;
    uint8_t *pix; /* converted / resized pixels */
    size_t pix_cap;
    uint8_t *scratch; /* resize scratch */
    size_t scratch_cap;
    /* fields: a mask's file, boxes scaled to the stored image, masks at source and stored
     * size; fval[i]: field i's bytes when they are not the item's own (a file's content, an
     * encoded mask), one buffer per field since the block is encoded from all of them at once
     * (grow-only) */
    uint8_t *ffile;
    size_t ffile_cap;
    uint8_t *fboxes, *mask, *mask2;
    size_t fboxes_cap, mask_cap, mask2_cap;
    uint8_t *fval[FL_MAX_FIELDS];
    size_t fval_cap[FL_MAX_FIELDS];
} pd_worker_ctx;

int pd_worker_init(pd_worker_ctx *c, const pd_plan *plan, const void *dict, size_t dict_len,
                   fl_error *err);
void pd_worker_free(pd_worker_ctx *c);
/* Turn one item into its stored bytes in `s` (status, buf/len, raw_len, size, msg). */
void pd_process_item(pd_worker_ctx *c, const pd_plan *plan, const pd_item *it, pd_slot *s);

/* Train the zstd dictionary from evenly spaced items. *dict malloc'ed (NULL, 0 when training
 * is not worth it or fails on too little data). */
int pd_train_dictionary(const pd_plan *plan, const pd_items *items, void **dict, size_t *len,
                        fl_error *err);

/* The options object stored in the manifest (malloc'ed JSON text), with
 * "inputs": {"count", "sha256"} (the job's input digest) when inputs_sha256 is not NULL. */
char *pd_options_json(const pd_pack_opts *po, const pd_plan *plan, const pd_items *items,
                      size_t dict_len, uint64_t input_count, const char *inputs_sha256);

void pd_print_summary(const pd_pack_opts *po, const pd_plan *plan, const pd_items *items,
                      uint64_t records, uint64_t skipped, uint64_t parse_skipped, uint64_t bytes_in,
                      uint64_t bytes_out, double seconds);

#endif
