/* packdata.h — internal interfaces of the packdata tool: the item list every source parser
 * produces, the handling of rejected inputs (--on-error, --report), and the subcommands. */
#ifndef PACKDATA_H
#define PACKDATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fl_dataset.h"
#include "fl_error.h"
#include "fl_fields.h"

#define PD_TOOL "packdata"
/* Most classes a dataset may have (class names are listed in the manifest). */
#define PD_MAX_CLASSES 1000000

/* How an item holds the value of one schema field (pd_value.kind). */
typedef enum pd_value_kind {
    PD_VAL_NONE = 0, /* no value: the image and label fields (they are pd_item's own), or an
                        empty variable field (0 boxes, 0 ints, 0 bytes) */
    PD_VAL_DATA,     /* data/len/count: the value's bytes exactly as fl_field_value wants them
                        for fl_fields_encode (INT/FLOAT 4 bytes, INT_LIST count x int32, BOXES
                        count x 4 float32 xyxy in pixels of the source image, NDARRAY the raw
                        row-major elements, BYTES/TEXT the bytes). The worker scales BOXES when
                        the image is resized */
    PD_VAL_FILE,     /* path: a file read by the worker. MASK: a PNG (gray values or palette
                        indices, fl_mask_decode) the size of the source image; NDARRAY: a .npy
                        file of the field's dtype and shape; BYTES: the file's bytes */
    PD_VAL_SEGMENTS  /* MASK rasterised by the worker from data/len (a pd_segments blob,
                        pd_coco.h) at the source image's size */
} pd_value_kind;

/* One field value of one item. data and path live in the item list's arena. */
typedef struct pd_value {
    pd_value_kind kind;
    uint32_t count; /* PD_VAL_DATA: as fl_field_value.count (ints, boxes, bytes; 1 for
                       INT/FLOAT, shape[0] for FLOAT_VECTOR) */
    const void *data;
    size_t len;
    const char *path;
} pd_value;

/* One input image: a file to read, or raw pixels held in memory (IDX, CIFAR). */
typedef struct pd_item {
    const char *name;      /* source name: relative path, or "file#index" (in the list's arena) */
    const char *path;      /* file to read, or NULL for in-memory pixels */
    const uint8_t *pixels; /* in-memory HWC pixels (points into pd_items.pixel_blocks) */
    uint32_t height, width, channels; /* of the in-memory pixels */
    int32_t label;
    /* With a schema (pd_items.num_fields > 0): values[i] for field i (pd_items.fields[i]), an
     * array of num_fields in the list's arena (pd_items_new_values); NULL for a classification
     * list. src_height/src_width: the size the source declares for the image (COCO's
     * "height"/"width"), which boxes and masks were checked against; 0 when it does not. */
    pd_value *values;
    uint32_t src_height, src_width;
    /* A member of a tar file (archive_source.h; in the list's arena): the image's bytes are
     * read from there, path is NULL. NULL for files and in-memory pixels. */
    const struct pd_member *member;
} pd_item;

/* How bad inputs are handled; shared by the parsers and the pack pipeline. */
typedef struct pd_reject_ctx {
    int skip;         /* --on-error skip: report and continue; otherwise fail */
    FILE *report;     /* --report FILE (TSV: source, reason), or NULL */
    uint64_t skipped; /* inputs skipped so far */
    int quiet_limit;  /* after this many messages, stop printing each one (still reported) */
    uint64_t printed;
    int silent; /* print nothing (fuzzing) */
} pd_reject_ctx;

/* Report one bad input: prints "packdata: error|skipping: SOURCE: REASON" on stderr (both
 * modes), appends "SOURCE\tREASON" to the report. Returns 0 when the caller should skip it and
 * continue (skip mode), -1 when it must fail. */
int pd_reject(pd_reject_ctx *rc, const char *source, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* For a parser after pd_reject() said "fail": the message was already printed, so set the code
 * with an empty message. Returns code. */
int pd_fail_reported(fl_error *err, int code);

/* The deterministic input list plus everything it points into. */
typedef struct pd_items {
    pd_item *v;
    size_t n, cap;
    char **class_names; /* label order; owned */
    uint32_t num_classes;
    int in_memory;    /* items carry pixels (IDX/CIFAR) rather than paths */
    const char *form; /* "imagefolder", "list", "csv", "idx", "cifar10", "cifar100",
                         "coco", "maskpairs", "jsonl" */
    /* The schema when the source has more than an image and a label (COCO, mask pairs,
     * --field): fields[0..num_fields) in record order, max_count 0 (the writer fills it in).
     * num_fields 0: the classic image + label. */
    fl_field fields[FL_MAX_FIELDS];
    uint32_t num_fields;
    /* Plain file inputs, held compactly (pd_items_push_file) instead of in v, which is then NULL:
     * input i is the file pd_path_join(base, names[i]) with label labels[i]. 12 bytes an input
     * plus its name; read them with pd_items_get / pd_items_name. */
    const char **names;
    int32_t *labels;
    const char *base;
    /* names[i] is relative to its class folder, class_names[labels[i]] (ImageFolder: the
     * folder's name is not stored once per input) */
    int class_prefix;
    /* Tar members held compactly beside names/labels (src_tar.c, archive_source.h): item i is
     * tar->recs[i]; pd_items_get builds its pd_member in the path buffer. NULL otherwise. */
    struct pd_tar_list *tar;
    /* A source that applied --part itself (pd_source_opts.part_count) holds only its slice:
     * presliced is set and job_n is the whole job's input count. */
    int presliced;
    uint64_t job_n;
    /* Inputs of the whole job per image format their names (or tar members' bytes) say:
     * [FL_IMG_UNKNOWN] a name that does not tell, [FL_IMG_JPEG..FL_IMG_WEBP], [4] a format
     * that cannot be kept (.gif .bmp .tif). Set by pd_items_count_formats or the source. */
    uint64_t name_formats[5];
    int name_formats_set;
    /* --no-image: rows that had a path (key or column) this run did not read, for the warning */
    uint64_t unread_paths;
    /* storage */
    char **arena; /* string arena blocks */
    size_t n_arena, arena_used, arena_cap;
    uint8_t **pixel_blocks;
    size_t n_blocks;
    struct pd_archive *archives; /* the tar files members are read from (archive_source.h) */
} pd_items;

void pd_items_init(pd_items *it);
void pd_items_free(pd_items *it);
/* Copy a string into the list's arena. Returns NULL on -ENOMEM. */
char *pd_items_strdup(pd_items *it, const char *s);
char *pd_items_strndup(pd_items *it, const char *s, size_t n);
/* Copy `n` bytes into the arena, 8-byte aligned (data may be NULL: zeroed). NULL on -ENOMEM. */
void *pd_items_memdup(pd_items *it, const void *data, size_t n);
/* A zeroed values array for one item (it->num_fields entries) in the arena; NULL on -ENOMEM. */
pd_value *pd_items_new_values(pd_items *it);
/* Add a field to the schema (name copied; dtype, shape as fl_field wants; of = -1 or an index).
 * Returns the field's index, or -1 when the schema is full. */
int pd_items_add_field(pd_items *it, const char *name, fl_field_type type, fl_dtype dtype,
                       uint32_t ndim, const uint32_t *shape, int32_t of);
/* Append an item (its strings must already live in the arena). Returns 0 or -ENOMEM. A list
 * holds either such items or compact file inputs (pd_items_push_file), never both (-EINVAL). */
int pd_items_push(pd_items *it, const pd_item *item);
/* Append a plain file input: `name` (copied into the arena) is the input's name, the file is
 * pd_path_join(base, name). base is copied at the first call; every call of one list passes the
 * same base. Returns 0, -ENOMEM, or -EINVAL when the list already holds pd_items_push items. */
int pd_items_push_file(pd_items *it, const char *base, const char *name, int32_t label);
/* Input i as a pd_item: &it->v[i], or, for compact file inputs, *tmp filled in. Its path (and
 * under class_prefix its name, which points into the path) is built in *path (malloc'ed,
 * grow-only, *cap its size; the caller frees it); path NULL leaves tmp->path NULL. Returns NULL
 * when building the path ran out of memory, or path is NULL under class_prefix. */
const pd_item *pd_items_get(const pd_items *it, size_t i, pd_item *tmp, char **path, size_t *cap);
/* The name of input i as stored: under class_prefix, relative to its class folder. */
const char *pd_items_name(const pd_items *it, size_t i);
/* Fill name_formats from the inputs now in the list (before --part slices it). */
void pd_items_count_formats(pd_items *it);
/* The image format a file name's extension says (FL_IMG_UNKNOWN when it does not tell), or 4
 * for an image extension whose format cannot be kept (.gif .bmp .tif .tiff). */
int pd_name_format(const char *name);
/* Keep ownership of a malloc'ed pixel block. Returns 0 or -ENOMEM (block freed). */
int pd_items_own_block(pd_items *it, uint8_t *block);
/* Set class names (copied). */
int pd_items_set_classes(pd_items *it, char *const *names, uint32_t n);
/* Default class names "0".."n-1". */
int pd_items_numeric_classes(pd_items *it, uint32_t n);
/* Permute deterministically from `seed` (Fisher-Yates with splitmix64). */
void pd_items_shuffle(pd_items *it, uint64_t seed);
/* Keep only slice `index` of `count` (contiguous, sizes differ by at most one). */
void pd_items_slice(pd_items *it, uint32_t index, uint32_t count);

/* Source options shared by the parsers. */
typedef struct pd_source_opts {
    const char *root;         /* --root: base directory of list/CSV paths (default: list's dir) */
    const char *csv;          /* --csv FILE */
    const char *path_column;  /* --path-column (default "path") */
    const char *label_column; /* --label-column (default "label") */
    const char *idx_images;   /* --idx IMAGES LABELS */
    const char *idx_labels;
    const char *split;   /* --split PREFIX: which IDX pair / CIFAR batches of a directory */
    int cifar100_coarse; /* --cifar100-labels coarse */
    long num_classes;    /* --num-classes, or -1 */
    char **class_names;  /* --classes FILE / --class-names a,b,c; NULL when not given */
    uint32_t n_class_names;
    uint64_t max_pixels;      /* --max-pixels */
    const char *wds;          /* --wds SHARDS: WebDataset tar shards (src_tar_wds.c) */
    const char *coco;         /* --coco INSTANCES.json (images under --root) */
    int masks;                /* --masks: COCO segmentations into a "mask" field */
    int allow_outside_root;   /* --allow-outside-root: list/CSV/JSONL/COCO paths and ImageFolder
                                 links may lead out of --root / SRC (refused by default) */
    const char *mask_dir;     /* --mask-dir: image/mask folder pairs */
    const char *mask_suffix;  /* --mask-suffix (default ".png") */
    const char *image_suffix; /* --image-suffix (default: any image extension) */
    const char *jsonl;        /* --jsonl FILE */
    const char *field_specs[FL_MAX_FIELDS]; /* --field NAME:TYPE[:SHAPE], in order */
    uint32_t n_field_specs;
    int no_image; /* --no-image: CSV/JSONL rows of --field values only (tensor-only records);
                     the path column/key is not read, each row is named FILE:LINE */
    /* --part I/N for a source that can list only its slice (ImageFolder): it keeps inputs
     * [n*I/N, n*(I+1)/N) of the n it lists, exactly those pd_items_slice would keep, and sets
     * presliced/job_n. part_count 0: list everything. */
    uint32_t part_index, part_count;
} pd_source_opts;

/* Build the item list from SRC (autodetected or forced by the options). Rejected entries go
 * through `rc`. Returns 0, or a negative code with err->msg naming the file/line and reason. */
int pd_source_load(const char *src, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                   fl_error *err);

int pd_src_imagefolder(const char *dir, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                       fl_error *err);
int pd_src_list(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                fl_error *err);
int pd_src_csv(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
               fl_error *err);
/* COCO instances JSON (src_coco.c; needs so->root). */
int pd_src_coco(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                fl_error *err);
/* Image/mask folder pairs (src_maskpairs.c): images under `dir`, masks under so->mask_dir. */
int pd_src_maskpairs(const char *dir, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                     fl_error *err);
/* JSON Lines: one object per line with "path", "label" and the --field keys (src_jsonl.c). */
int pd_src_jsonl(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                 fl_error *err);
/* --field NAME:TYPE[:SHAPE] (field_spec.c). pd_field_spec_add: one spec into it->fields
 * (NAME:int_list:of=BOXES: one value per box of an earlier boxes field, its `of`).
 * pd_fields_begin: the schema of a CSV/JSONL source with --field: image (not under --no-image),
 * "label" (INT) when with_label, then the specs in order; validated. pd_field_value_text / _json: a
 * CSV cell or a JSON value into *v (in the list's arena; paths resolved against root), checked
 * against f: int, int_list ("3 7 9" or [3,7,9]), float, float_vector, boxes ([[x0,y0,x1,y1],...]),
 * ndarray (a .npy path or a nested list), mask / bytes (a path), text (the string).
 * All return 0, -1 with `why` filled (the caller names the line and field), or -ENOMEM. */
struct fl_jnode;
int pd_field_spec_add(pd_items *it, const char *spec, char *why, size_t cap);
int pd_fields_begin(pd_items *it, const pd_source_opts *so, int with_label, char *why, size_t cap);
/* A row's values (it->num_fields of them) together: each int_list with an `of` holds one value
 * per box of its boxes field. 0, or -1 with why. */
int pd_fields_check_row(const pd_items *it, const pd_value *values, char *why, size_t cap);
int pd_field_value_text(pd_items *it, const fl_field *f, const char *s, const char *root,
                        pd_value *v, char *why, size_t cap);
int pd_field_value_json(pd_items *it, const fl_field *f, const struct fl_jnode *n, const char *root,
                        pd_value *v, char *why, size_t cap);

/* IDX from memory (for the fuzzer): parse an idx3 image file and idx1 label file. */
int pd_idx_parse(const uint8_t *img, size_t img_len, const uint8_t *lab, size_t lab_len,
                 const char *img_name, const char *lab_name, uint64_t max_pixels, pd_items *out,
                 fl_error *err);
int pd_src_idx(const char *images, const char *labels, const pd_source_opts *so, pd_reject_ctx *rc,
               pd_items *out, fl_error *err);
/* Find the IDX pair in a directory; 1 when found (paths malloc'ed), 0 when none, <0 error. */
int pd_idx_find(const char *dir, const char *split, char **images, char **labels, fl_error *err);
/* CIFAR: parse one batch in memory (the fuzzer uses this). `cifar100` selects 3074-byte records
 * (coarse, fine, pixels) over 3073-byte ones (label, pixels). */
int pd_cifar_parse(const uint8_t *data, size_t len, const char *file_name, int cifar100, int coarse,
                   pd_items *out, fl_error *err);
int pd_src_cifar(const char *src, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                 fl_error *err);
/* 1 when `dir` holds CIFAR batch files. */
int pd_cifar_detect(const char *dir);

/* Parse a label field: an integer, or a class name when class names are known. Returns 0 and
 * stores the label, or -1 with a reason in `why`. */
int pd_parse_label(const char *s, const pd_source_opts *so, int32_t *label, char *why, size_t cap);
/* The range a label must be in, wherever it comes from (a label column, a .cls member, the first
 * int --field): 0..--num-classes - 1, else 0..(--classes names) - 1, else 0..PD_MAX_CLASSES - 1.
 * Returns 0, or -1 with `why` saying the range. */
int pd_check_label(long long v, const pd_source_opts *so, char *why, size_t cap);

/* Read a whole file (gzip transparently when `gunzip` is set and the file is gzip'ed).
 * *data is malloc'ed. Errors: -errno, FL_E_TOO_LARGE (over max_len), FL_E_DECODE (bad gzip). */
int pd_read_file(const char *path, int gunzip, size_t max_len, uint8_t **data, size_t *len,
                 fl_error *err);

/* A .npy file in memory (untrusted): its dtype, shape (*ndim sizes) and element bytes (pointing
 * into d). Little-endian, C order, format 1-3. Returns 0, or -1 with `why` filled. (npy.c) */
int pd_npy_parse(const uint8_t *d, size_t len, fl_dtype *dtype, uint32_t *ndim, uint64_t *shape,
                 const uint8_t **data, size_t *data_len, char *why, size_t cap);
/* Write a .npy (version 1) header for these into out (cap >= 128 bytes); returns its length (a
 * multiple of 64), 0 when it does not fit or the dtype has no .npy name. */
size_t pd_npy_header(fl_dtype dtype, uint32_t ndim, const uint64_t *shape, char *out, size_t cap);

/* Join dir + "/" + name into a malloc'ed string. */
char *pd_path_join(const char *dir, const char *name);

/* 1 when `path`, taken relative to `root`, leads out of it: an absolute path not under root's
 * real path, or one whose ".." climb above root. A list from a stranger may name any file of the
 * user's machine; such paths are refused unless --allow-outside-root. Lexical (no file access
 * but one cached realpath of root for absolute paths). */
int pd_path_leaves(const char *root, const char *path);

/* 1 when the file system entry `path` (a symbolic link) resolves to a place outside the folder
 * whose real path is `real_root`; 0 inside or when it does not resolve (reported later). */
int pd_link_leaves(const char *real_root, const char *path);

/* A set of strings for duplicate detection (open addressing; strings not copied). */
typedef struct pd_strset {
    const char **slots;
    size_t cap, n;
} pd_strset;
/* Insert; returns 1 when inserted, 0 when already present, -ENOMEM. */
int pd_strset_add(pd_strset *s, const char *str);
void pd_strset_free(pd_strset *s);

/* One entry of a list or CSV source: parse its label, resolve `path` against `root`, refuse a
 * duplicate, append the item and raise *max_label. Returns 0 (added, or rejected and reported with
 * `src` naming the line), 1 when pd_reject() said to stop, or -ENOMEM. */
int pd_add_listed(pd_items *out, pd_strset *seen, pd_reject_ctx *rc, const pd_source_opts *so,
                  const char *src, const char *root, const char *path, const char *label_text,
                  int32_t *max_label);

/* Set class names for a list/CSV source: --classes/--class-names when given, else "0".."N-1"
 * with N = --num-classes or max label + 1. */
int pd_items_finish_classes(pd_items *it, const pd_source_opts *so, int32_t max_label);

/* The frame the list-file and CSV sources share. pd_listing_open reads the file (its text starts
 * at `start`, past a UTF-8 byte order mark: Windows editors write one) and sets the directory its
 * paths are relative to (--root, else the file's folder); each entry goes through
 * pd_listing_add; pd_listing_end finishes the items and frees the listing. */
typedef struct pd_listing {
    const char *file;
    uint8_t *data;
    size_t len, start;
    char *root;
    pd_strset seen;
    int32_t max_label;
} pd_listing;
/* Errors: those of pd_read_file, -ENOMEM; on error the listing holds nothing. */
int pd_listing_open(pd_listing *l, const char *file, const pd_source_opts *so, fl_error *err);
/* pd_add_listed with the listing's root, duplicate set and largest label. */
int pd_listing_add(pd_listing *l, pd_items *out, pd_reject_ctx *rc, const pd_source_opts *so,
                   const char *src, const char *path, const char *label_text);
/* --no-image: one row without an image, named "BASENAME:LINE" (the listing file's last path
 * component; unique, and the same wherever the file is), its label parsed from label_text (NULL:
 * no label, 0). Returns as pd_add_listed. The caller fills the item's values. */
int pd_listing_add_row(pd_listing *l, pd_items *out, pd_reject_ctx *rc, const pd_source_opts *so,
                       const char *src, size_t line, const char *label_text);
/* How a listing's parse ended, for pd_listing_end. */
enum { PD_LISTING_DONE = 0, PD_LISTING_OOM = 1, PD_LISTING_STOPPED = 2 };
/* DONE: set out->form and the class names, return 0; OOM: "out of memory reading FILE";
 * STOPPED (pd_reject said stop; already reported): FL_E_LABEL; any other value is an error the
 * caller already set in err, returned as is. Frees the listing. */
int pd_listing_end(pd_listing *l, int how, pd_items *out, const pd_source_opts *so,
                   const char *form, fl_error *err);

/* The tool and its sub-commands (option tables and run functions, fl_cli_table.h), dispatched
 * by main.c. */
struct fl_cli_tool;
struct fl_cli_cmd;
extern const struct fl_cli_tool pd_tool;
extern const struct fl_cli_cmd pd_pack_cmd, pd_info_cmd, pd_verify_cmd, pd_extract_cmd;
/* `packdata pack`: argc/argv start at "pack". Returns the process exit status. */
int pd_cmd_pack(int argc, char **argv);

#endif
