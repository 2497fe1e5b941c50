/* inspect_fields.h — the record fields of a packed dataset as `packdata info`, `verify --decode`
 * and `extract` show, check and write them (inspect_fields.c). */
#ifndef INSPECT_FIELDS_H
#define INSPECT_FIELDS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fl_dataset.h"
#include "fl_error.h"
#include "fl_fields.h"

struct fl_json;

/* One line describing field i of the schema: type, dtype, shape, max_count, of, codec
 * ("int_list  int32  max_count 4  of boxes"), cut to cap - 1 bytes. */
void pd_field_describe(const fl_field *fields, uint32_t n, uint32_t i, char *out, size_t cap);

/* Append the schema as a JSON array value to j: one object per field with "name", "type",
 * "dtype", and where they apply "shape", "max_count", "of" (the field's name), "codec". */
void pd_fields_json(struct fl_json *j, const fl_field *fields, uint32_t n);

/* Grow-only buffers for checking/extracting records' fields. */
typedef struct pd_fields_scratch {
    uint8_t *buf; /* decoded mask / decompressed ndarray */
    size_t cap;
    uint8_t *enc; /* an encoded PNG */
    size_t enc_cap;
} pd_fields_scratch;
void pd_fields_scratch_free(pd_fields_scratch *s);

/* Check record i's fields in its stored bytes (data, len: as fl_dataset_get gives them, CRC
 * already checked): the block parses (fl_dataset_record_fields), every ndarray decompresses to
 * its size and every mask decodes at the record's size. Returns 0, or the error (err names the
 * record and field): FL_E_FORMAT, FL_E_DECODE, -ENOMEM. */
int pd_fields_check(const fl_dataset *ds, uint64_t i, const uint8_t *data, size_t len,
                    pd_fields_scratch *s, fl_error *err);

/* Write record i's fields as files named from `prefix`: PREFIX.json (the record's index, name,
 * size and every number field: ints, floats, int lists, float vectors, boxes as
 * [[x0,y0,x1,y1],...] with their per-box lists beside them, and the file name of each field
 * written apart), PREFIX.NAME.png for a mask (8/16-bit gray), PREFIX.NAME.npy for an ndarray,
 * PREFIX.NAME.txt for text, PREFIX.NAME.bin for bytes. `image_file` is the name the image was
 * written to (NULL without an image); `replace`: as pd_write_output's. Each written file's name is
 * printed on `log`. Returns 0, or an error with err naming the record/file: FL_E_FORMAT,
 * FL_E_DECODE, -errno of a write, -ENOMEM. */
int pd_fields_extract(const fl_dataset *ds, uint64_t i, const uint8_t *data, size_t len,
                      const char *prefix, const char *image_file, int replace, pd_fields_scratch *s,
                      FILE *log, fl_error *err);

/* Write n bytes to path ("-": standard output), a file extract writes. A new file is created; an
 * existing regular file is replaced only when `replace` (the user named it with -o, or passed
 * --force): extract's own names come from the records' source names, and run where the sources
 * lie they would overwrite the originals (with the re-encoded copy of a lossy pack). A device or
 * FIFO is written as it is. Returns 0, -EEXIST (refused), or -errno. */
int pd_write_output(const char *path, const void *d, size_t n, int replace);

/* The reason to print after "PATH: cannot write: " for pd_write_output's error r. */
const char *pd_write_why(int r);

#endif
