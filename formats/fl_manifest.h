/* fl_manifest.h — internal: the dataset manifest (manifest.json, see SPEC.md) parsed into a struct,
 * and written from one. */
#ifndef FL_MANIFEST_H
#define FL_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "fl_dataset.h"
#include "fl_json.h"

#define FL_MANIFEST_NAME "manifest.json"
#define FL_MANIFEST_FORMAT "fastload-dataset"
#define FL_MAX_CLASSES (1u << 24)
#define FL_MAX_SHARDS (1u << 24)

typedef struct fl_manifest_shard {
    char *file;       /* plain file name inside the dataset directory (no '/') */
    uint64_t records;
    uint64_t bytes;
} fl_manifest_shard;

typedef struct fl_manifest {
    uint32_t version;  /* format_version read (1 or 2); the writer always writes FL_FORMAT_VERSION */
    int has_id;        /* dataset_id present (required in version 2) */
    uint8_t dataset_id[16];
    fl_backend backend;
    fl_schema schema;
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

/* Parse and validate (format name, version 1 or 2, backend, schema valid in that version, the
 * 32-hex-digit dataset_id of version 2, counts consistent with the shard list, plain shard file
 * names). `what` names the file in messages.
 * Errors: FL_E_FORMAT, FL_E_VERSION, -ENOMEM. */
int fl_manifest_parse(const char *text, size_t len, const char *what, fl_manifest *m, fl_error *err);
void fl_manifest_free(fl_manifest *m);

/* Write `m` as JSON text into b (format_version FL_FORMAT_VERSION; dataset_id when m->has_id;
 * creation time: now, UTC). Returns 0 or -ENOMEM. */
int fl_manifest_write(fl_tbuf *b, const fl_manifest *m);

#endif
