/* fl_manifest.h — internal: the dataset manifest (manifest.json, see SPEC.md) parsed into a struct,
 * and written from one. */
#ifndef FL_MANIFEST_H
#define FL_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "fl_dataset.h"
#include "fl_fields.h"
#include "fl_json.h"

#define FL_MANIFEST_NAME   "manifest.json"
#define FL_MANIFEST_FORMAT "fastload-dataset"
#define FL_MAX_CLASSES     (1u << 24)
#define FL_MAX_SHARDS      (1u << 24)

typedef struct fl_manifest_shard {
    char *file; /* plain file name inside the dataset directory (no '/') */
    uint64_t records;
    uint64_t bytes;
} fl_manifest_shard;

typedef struct fl_manifest {
    uint32_t version; /* format_version read (1, 2 or 3), or the one to write (2 for a classic
                       * schema, 3 otherwise; 0 writes 2) */
    int has_id;       /* dataset_id present (required in version 2) */
    uint8_t dataset_id[16];
    fl_backend backend;
    fl_schema schema;
    fl_field fields[FL_MAX_FIELDS]; /* the record's fields; versions 1 and 2 (no "fields"
                                     * member): [image "image", int "label"] */
    uint32_t num_fields;
    uint64_t records;
    char **classes;
    uint32_t num_classes;
    fl_manifest_shard *shards;
    uint32_t num_shards;
    /* written only (ignored by the parser beyond a type check), except part_index/part_count */
    int zstd_level;
    uint64_t dict_bytes;
    const char *tool_version;
    const char *options_json; /* an object's JSON text, embedded as is */
    uint32_t part_index, part_count;
} fl_manifest;

/* Parse and validate (format name, version 1 to 3, backend, schema valid in that version, the
 * 32-hex-digit dataset_id of versions 2 and 3, version 3's "fields" (fl_fields_validate; an image
 * field exactly when the encoding is not "none"), counts consistent with the shard list, plain
 * shard file names). `what` names the file in messages.
 * Errors: FL_E_FORMAT, FL_E_VERSION, -ENOMEM. */
int fl_manifest_parse(const char *text, size_t len, const char *what, fl_manifest *m,
                      fl_error *err);
void fl_manifest_free(fl_manifest *m);

/* Write `m` as JSON text into b (format_version m->version, 2 when 0; "fields" from version 3 on;
 * dataset_id when m->has_id; creation time: now, UTC). Returns 0 or -ENOMEM. */
int fl_manifest_write(fl_tbuf *b, const fl_manifest *m);

/* The fields as the manifest's JSON array (SPEC.md, "Fields"): one object per field, `sep` between
 * them (", " or ",\n    "); max_count written when with_max. */
void fl_fields_write_json(fl_tbuf *b, const fl_field *f, uint32_t n, int with_max, const char *sep);
/* Parse such an array (a JSON array node) into f[] (*n fields); `what` names the file.
 * Errors: FL_E_FORMAT (shape of the JSON, unknown names, or fl_fields_validate's reason). */
int fl_fields_parse_json(const fl_jnode *arr, const char *what, fl_field *f, uint32_t *n,
                         fl_error *err);

#endif
