/* fl_dataset_impl.h — internal: the fl_dataset structure shared by the generic reader
 * (dataset.c), the shard backend and the LMDB backend (lmdb_reader.c). */
#ifndef FL_DATASET_IMPL_H
#define FL_DATASET_IMPL_H

#include "fl_dataset.h"
#include "fl_manifest.h"
#include "fl_record_index.h"
#include "fl_shard.h"
#include "fl_zstd.h"

struct ZSTD_DDict_s;

/* One LMDB record as the open walk reads it: pointers into LMDB's read-only map. The records of
 * a segment (FL_LMDB_SEG of them) are packed into the dataset's index (fl_record_index.h). */
typedef struct fl_lmdb_rec {
    const uint8_t *stored;
    const char *name;
    uint32_t stored_len;
    uint32_t raw_len;
    int32_t label;
    uint32_t crc32c;
    uint32_t height;
    uint32_t width;
    uint32_t name_len;
    uint32_t format;     /* fl_encoding of the record (v1: the schema's) */
    uint32_t fields_len; /* v3: fields block bytes at the end of `stored` */
} fl_lmdb_rec;

typedef struct fl_lmdb_reader fl_lmdb_reader;

/* LMDB records per index segment (a power of two: record i is row i % FL_LMDB_SEG of segment
 * i / FL_LMDB_SEG). */
#define FL_LMDB_SEG_BITS 14u
#define FL_LMDB_SEG      (1u << FL_LMDB_SEG_BITS)

struct fl_dataset {
    char *dir;
    fl_backend backend;
    fl_schema schema;
    uint32_t version; /* format version (of every part) */
    fl_field fields[FL_MAX_FIELDS];
    uint32_t num_fields;
    int label_field; /* index of the label field, or -1 */
    int image_field; /* index of the image field, or -1 */
    uint64_t count;
    char **classes;
    uint32_t num_classes;
    char *manifest_text;
    int has_id; /* dataset_id is valid (a version 2 manifest of one dataset) */
    uint8_t dataset_id[FL_DATASET_ID_BYTES];
    uint32_t num_files;
    char **file_paths; /* absolute paths of shards (or data.mdb) */
    uint64_t total_bytes;
    uint32_t max_raw_len;
    uint32_t max_stored_len;
    fl_dctx_pool pool;
    /* Every record's index entry, packed (segment s: shard s, or LMDB records
     * [s * FL_LMDB_SEG, ...)). Empty when opened for a summary (fl_dataset_open_summary). */
    fl_rindex ix;
    int summary; /* opened by fl_dataset_open_summary: no record can be read */
    /* label_values[l] == l for l < num_label_values: the 4 bytes a record's label field points
     * at (fl_dataset_record_fields) when the index entry is not in memory; NULL when the labels
     * are too large for such a table (the shard's index block is then loaded for them) */
    int32_t *label_values;
    uint32_t num_label_values;
    /* shards backend */
    fl_shard_view *shards;
    uint32_t num_open;     /* shards[0..num_open) are mapped */
    uint64_t *shard_first; /* first global record of each shard, ascending */
    uint8_t **shard_index; /* per shard: its index block (entries, then names) decompressed on
                            * first use of a name (atomic pointer, NULL until then), or NULL
                            * when the block is stored as is (read in the mapping) */
    struct ZSTD_DDict_s **shard_ddict; /* per shard, may alias each other */
    struct ZSTD_DDict_s **ddicts_owned;
    uint32_t num_ddicts;
    /* LMDB backend */
    int lmdb_fd; /* data.mdb as checked against the manifest (-1 when none) */
    fl_lmdb_reader *lmdb;
    const uint8_t *lmdb_anchor; /* record values are at lmdb_anchor + their FL_IX_OFFSET */
    struct ZSTD_DDict_s *lmdb_ddict;
};

/* The error for fl_open_regular_at's failure `rc` on a data set's file `path` (`what`: "a shard",
 * "an LMDB data file"): links and non-regular files refused without their size (dataset.c). */
int fl_dataset_open_refused(const char *path, const char *what, int rc, fl_error *err);

/* LMDB backend (lmdb_reader.c): open the data file m->shards[0].file of directory `dir_fd`
 * (keeping its fd in ds->lmdb_fd), check its size against the manifest and LMDB's own claims,
 * open the environment on that very file, walk every record once (checked) and pack it into
 * ds->ix (not when ds->summary), dictionary, sizes.
 * Errors: -errno, FL_E_TRUNCATED, FL_E_LMDB, FL_E_FORMAT, FL_E_VERSION, -EAGAIN (replaced). */
int fl_lmdb_reader_open(fl_dataset *ds, const fl_manifest *m, int dir_fd, fl_error *err);
void fl_lmdb_reader_close(fl_dataset *ds);
/* Let the pages of data.mdb read so far leave the resident set (they stay in the page cache; a
 * later read faults them back in). No effect where the map's place is unknown. */
void fl_lmdb_reader_drop_pages(const fl_dataset *ds);

#endif
