/* fl_fields.h — the fields of a record: a schema of named, typed fields declared once in the
 * manifest (image, mask, int, int list, float, float vector, boxes, ndarray, bytes, text), the
 * encoding of a record's non-image fields into one "fields block", and its bounds-checked parse.
 *
 * A record always has at most one image (its payload, fl_schema) and at most one "label" (the
 * first FL_FIELD_INT of the schema, stored in the index entry's label slot, checked against the
 * classes when the dataset has classes). Every other field is stored in the record's fields block,
 * appended to the payload's stored bytes (fl_record_info.fields_len bytes at the end), covered by
 * the record's one CRC32C. A classification dataset (fields: image, label) has no fields block and
 * is written exactly as before (format version 2); a dataset with any other field is version 3.
 * Layout byte by byte: formats/SPEC.md, "Fields".
 *
 * Thread safety: pure functions over caller-owned memory. */
#ifndef FL_FIELDS_H
#define FL_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FL_MAX_FIELDS     32 /* fields per record */
#define FL_MAX_FIELD_NAME 63 /* bytes of a field name: [A-Za-z_][A-Za-z0-9_]* */
#define FL_MAX_DIMS       4  /* dimensions of an ndarray / float_vector field */

typedef enum fl_field_type {
    FL_FIELD_IMAGE = 1,        /* the record's image: its payload (fl_schema); at most one */
    FL_FIELD_INT = 2,          /* one int32. The first INT field is the record's label */
    FL_FIELD_INT_LIST = 3,     /* a variable number of int32 (multi-label); with `of` naming a
                                  BOXES field: one int per box (class ids, iscrowd), kept or
                                  dropped with its box by the loader's geometry */
    FL_FIELD_FLOAT = 4,        /* one float32 (regression target) */
    FL_FIELD_FLOAT_VECTOR = 5, /* shape[0] float32 (an embedding): fixed length */
    FL_FIELD_BOXES = 6,        /* a variable number of boxes, 4 float32 each: x0, y0, x1, y1 in
                                  pixels of the stored image (x1, y1 exclusive: a box covering
                                  pixel columns 3..5 is x0 = 3, x1 = 6); 0 <= x0 <= x1 <= width,
                                  0 <= y0 <= y1 <= height */
    FL_FIELD_MASK = 7,         /* a label image the size of the image: uint8 or uint16 class ids
                                  per pixel, stored losslessly (PNG, or zstd of the raw pixels) */
    FL_FIELD_NDARRAY = 8,      /* dtype + fixed shape, row-major, stored as one zstd frame */
    FL_FIELD_BYTES = 9,        /* a variable number of bytes */
    FL_FIELD_TEXT = 10         /* variable UTF-8 text (validated when written) */
} fl_field_type;

typedef enum fl_dtype {
    FL_DTYPE_U8 = 1,
    FL_DTYPE_I8 = 2,
    FL_DTYPE_U16 = 3,
    FL_DTYPE_I16 = 4,
    FL_DTYPE_I32 = 5,
    FL_DTYPE_I64 = 6,
    FL_DTYPE_F16 = 7,
    FL_DTYPE_F32 = 8,
    FL_DTYPE_F64 = 9
} fl_dtype;

typedef enum fl_mask_codec {
    FL_MASK_PNG = 1, /* 8- or 16-bit grayscale PNG */
    FL_MASK_ZSTD = 2 /* one zstd frame of height x width elements, little-endian */
} fl_mask_codec;

/* One field of the schema, as declared in the manifest's "fields" array. */
typedef struct fl_field {
    char name[FL_MAX_FIELD_NAME + 1];
    fl_field_type type;
    fl_dtype dtype; /* element type: INT, INT_LIST i32; FLOAT, FLOAT_VECTOR, BOXES f32;
                       MASK u8 or u16; NDARRAY any; BYTES, TEXT u8; IMAGE u8 */
    uint32_t ndim;  /* FLOAT_VECTOR 1, NDARRAY 1..FL_MAX_DIMS, others 0 */
    uint32_t shape[FL_MAX_DIMS];
    int32_t of;          /* INT_LIST: index of the BOXES field it is aligned with, or -1;
                            MASK: index of the IMAGE field it is aligned with; others -1 */
    fl_mask_codec codec; /* MASK only */
    uint32_t max_count;  /* variable fields (INT_LIST, BOXES, BYTES, TEXT): the largest count
                            (ints, boxes, bytes) of any record, recorded by the writer in the
                            manifest; lets a reader size padded batches up front. 0 on input
                            to the writer */
} fl_field;

/* Size in bytes of one element of `t` (0 for an unknown type). */
FL_API size_t fl_dtype_size(fl_dtype t);
FL_API const char *fl_dtype_name(fl_dtype t);                /* "uint8", "int32", "float32", ... */
FL_API int fl_dtype_from_name(const char *s, fl_dtype *out); /* 0, or -1 when unknown */
FL_API const char *fl_field_type_name(fl_field_type t);      /* "image", "int", "int_list", ... */
FL_API int fl_field_type_from_name(const char *s, fl_field_type *out);

/* Check a schema's field list: 1..FL_MAX_FIELDS fields, names valid and unique, types known,
 * dtype exactly fl_field_type_dtype(type) (MASK uint8/uint16, NDARRAY any), ndim/shape only where
 * the type has one (unused shape entries 0), codec only on MASK, max_count only on variable
 * fields, `of` -1 except on INT_LIST (-1 or a BOXES field) and MASK (the IMAGE field), at most one
 * IMAGE, BOXES and MASK only with an IMAGE. Note that `of` must be set to -1 explicitly (a zeroed
 * fl_field has of = 0, which names field 0). Fills err naming the field and why.
 * Errors: FL_E_INVALID. */
FL_API int fl_fields_validate(const fl_field *fields, uint32_t n, fl_error *err);

/* 1 when the list is the classification pair: an IMAGE named "image", then an INT named "label"
 * (the names a version 1/2 dataset's reader gives them, so they survive a round trip). Such a
 * dataset has no fields block and is written as format version 2, byte for byte as before. */
FL_API int fl_fields_is_classic(const fl_field *fields, uint32_t n);

/* Fill out[0..1] with the classic schema: [image "image" uint8, int "label" int32], `of` -1. */
FL_API void fl_fields_classic(fl_field out[2]);

/* The dtype a field of type `t` always has (IMAGE, BYTES, TEXT uint8; INT, INT_LIST int32; FLOAT,
 * FLOAT_VECTOR, BOXES float32), or 0 for MASK and NDARRAY whose field declares it. */
FL_API fl_dtype fl_field_type_dtype(fl_field_type t);
/* 1 for the variable-count types (INT_LIST, BOXES, BYTES, TEXT): they have a max_count. */
FL_API int fl_field_is_variable(fl_field_type t);
/* Bytes of one row of a variable field (INT_LIST 4, BOXES 16, BYTES/TEXT 1), else 0. */
FL_API size_t fl_field_row_bytes(const fl_field *f);
/* Elements of a fixed field: product of the shape (NDARRAY), shape[0] (FLOAT_VECTOR), else 1. */
FL_API uint64_t fl_field_elements(const fl_field *f);
/* Decompressed bytes of an NDARRAY value (elements x dtype size); 0 for other types. */
FL_API size_t fl_field_ndarray_bytes(const fl_field *f);
/* The smallest fields block a record of this schema can have (length words and fixed values). */
FL_API size_t fl_fields_min_block(const fl_field *fields, uint32_t n);

/* Index of the label field (the first INT), of the image field, or of the field called `name`;
 * -1 when there is none. */
FL_API int fl_fields_label_index(const fl_field *fields, uint32_t n);
FL_API int fl_fields_image_index(const fl_field *fields, uint32_t n);
FL_API int fl_fields_find(const fl_field *fields, uint32_t n, const char *name);

/* 1 when field i lives in the fields block (everything but the image and the label). */
FL_API int fl_field_in_block(const fl_field *fields, uint32_t n, uint32_t i);

/* One field's value, as given to fl_fields_encode and as returned by fl_fields_parse.
 * `data`/`len` are the value's bytes as stored in the block:
 *   INT, FLOAT: 4 bytes; INT_LIST: count x 4 (int32); FLOAT_VECTOR: shape[0] x 4;
 *   BOXES: count x 16 (x0 y0 x1 y1 float32); BYTES, TEXT: count bytes;
 *   MASK: the PNG or zstd bytes (codec); NDARRAY: the zstd frame (when parsed) — on encode, the
 *   raw row-major elements, which fl_fields_encode compresses.
 * count: elements for the variable types (ints, boxes, bytes), 1 for INT/FLOAT, shape[0] for
 * FLOAT_VECTOR. height/width: MASK only (must equal the record's image size). */
/* Parsed `data` points into the block and is not aligned: read it with memcpy. */
typedef struct fl_field_value {
    const void *data;
    size_t len;
    uint32_t count;
    uint32_t height, width;
} fl_field_value;

/* Encode the block fields of one record (values[i] for every schema field i; the entries of the
 * image and label fields are ignored; variable fields give count = len / row bytes, a MASK its
 * height and width) into `out` (grow-only: *out and *cap are realloc'ed as needed,
 * *len set). NDARRAY values are compressed here (zstd level `level`; raw MASK values are given as
 * PNG or zstd bytes already: see fl_mask_encode in fl_image.h). Checks each value against its
 * field: lengths, counts, shapes, boxes inside image_width x image_height with x0 <= x1 and
 * y0 <= y1, finite floats, a mask of the image's size, `of` lists as long as their boxes, TEXT
 * valid UTF-8. Errors: FL_E_INVALID naming the field and why, -ENOMEM. */
FL_API int fl_fields_encode(const fl_field *fields, uint32_t n, const fl_field_value *values,
                            uint32_t image_width, uint32_t image_height, int level, uint8_t **out,
                            size_t *cap, size_t *len, fl_error *err);

/* Parse a record's fields block (untrusted bytes): every length inside the block, every fixed
 * field of its exact size, counts <= the field's max_count when it is set, the block consumed
 * exactly. Fills values[i] for each block field (pointers into `block`; the image and label
 * entries are zeroed). `what` names the record in messages ("shard-00003.fls: record 17").
 * Errors: FL_E_FORMAT. */
FL_API int fl_fields_parse(const fl_field *fields, uint32_t n, const uint8_t *block, size_t len,
                           fl_field_value *values, const char *what, fl_error *err);
/* What fl_fields_parse checks besides the block itself: every length word inside the block,
 * INT/FLOAT/FLOAT_VECTOR of their exact size and finite, variable fields a whole number of rows
 * (count = len / row bytes) and <= max_count when set, boxes finite with 0 <= x0 <= x1 and
 * 0 <= y0 <= y1, TEXT valid UTF-8, a MASK a gray PNG of the dtype's depth (height/width filled from
 * its IHDR) or a zstd frame carrying its content size (height/width 0), an NDARRAY a zstd frame
 * whose content size is fl_field_ndarray_bytes, an `of` list as long as its boxes. */

/* The checks that need the record's image size (fl_fields_encode does them; readers call this
 * after fl_fields_parse, fl_dataset_record_fields does): every box inside image_width x
 * image_height, every mask of that size, `of` lists as long as their boxes. `what` names the
 * record. Errors: FL_E_INVALID. */
FL_API int fl_fields_check_record(const fl_field *fields, uint32_t n, const fl_field_value *values,
                                  uint32_t image_width, uint32_t image_height, const char *what,
                                  fl_error *err);

#ifdef __cplusplus
}
#endif
#endif
