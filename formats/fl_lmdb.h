/* fl_lmdb.h — internal: the LMDB backend's writer side (lmdb_writer.c), driven by writer.c. The
 * layout (named DBs "records" and "meta", 8-byte big-endian keys, value header) is in SPEC.md. */
#ifndef FL_LMDB_H
#define FL_LMDB_H

#include <stddef.h>
#include <stdint.h>

#include "fl_dataset.h"
#include "fl_error.h"

#define FL_LMDB_DATA_FILE      "data.mdb"
#define FL_LMDB_LOCK_FILE      "lock.mdb"
#define FL_LMDB_RECORDS_DB     "records"
#define FL_LMDB_META_DB        "meta"
#define FL_LMDB_META_MANIFEST  "manifest"
#define FL_LMDB_META_DICT      "zstd.dict"
#define FL_LMDB_META_VERSION   "format_version"
#define FL_LMDB_META_ID        "dataset_id" /* 16 bytes (format version 2) */
#define FL_LMDB_META_FIELD_MAX "field_max"  /* u32 per field (format version 3) */
/* The record index (SPEC.md, "LMDB backend"): meta "record_index" holds a header
 * (FL_LMDB_INDEX_HEADER bytes), meta "record_index.C" chunk C of the entries (records
 * [C * FL_LMDB_INDEX_CHUNK, ...)): a u32 CRC32C of the entries, then one zstd frame of them.
 * An entry has the shard index entry's layout with offset = the value's byte offset in data.mdb. */
#define FL_LMDB_META_INDEX    "record_index"
#define FL_LMDB_INDEX_VERSION 1u
#define FL_LMDB_INDEX_HEADER  52u
#define FL_LMDB_INDEX_ENTRY   48u
#define FL_LMDB_INDEX_CHUNK   16384u
#define FL_LMDB_VALUE_HEADER                                                                       \
    28u /* label, crc32c, raw_len, height, width, name_len, format: 7 x u32 LE */
#define FL_LMDB_VALUE_HEADER_V1 24u /* format version 1: no format field */
#define FL_LMDB_VALUE_HEADER_V3 32u /* format version 3: + fields_len (u32 at 28) */

/* The value header's size in format `version`. */
static inline size_t fl_lmdb_value_header(uint32_t version)
{
    return version >= 3   ? FL_LMDB_VALUE_HEADER_V3
           : version >= 2 ? FL_LMDB_VALUE_HEADER
                          : FL_LMDB_VALUE_HEADER_V1;
}

typedef struct fl_lmdb_writer fl_lmdb_writer;

/* Map size a new environment starts with (default 64 MiB; doubled on MDB_MAP_FULL). Tests lower
 * it to exercise growth. */
extern size_t fl_lmdb_initial_mapsize;
/* Write the record index at finish (default 1). Tests set 0 to write data sets as writers
 * before it did, which readers open by walking the records. */
extern int fl_lmdb_write_index;

/* Open (or, with resume, reopen) the environment in directory `dir`. *existing receives the number
 * of records already committed (0 when new). The dataset id (16 bytes) and the dictionary (may be
 * NULL) are stored under meta. Resuming an environment that holds records of another id (or of
 * format version 1) fails with FL_E_INVALID. */
int fl_lmdb_writer_open(const char *dir, int resume, uint32_t version, const uint8_t *dataset_id,
                        const void *dict, size_t dict_len, fl_lmdb_writer **out, uint64_t *existing,
                        fl_error *err);
/* Format version 3: keep field_max[0..n) (the largest count of each field) in meta "field_max"
 * (n u32), written in the transaction of every batch, so a resumed run starts from the counts of
 * the records it keeps: they are read back into field_max here (the larger of each pair). n = 0:
 * nothing kept (version 2). The array must outlive the writer. */
int fl_lmdb_writer_track_max(fl_lmdb_writer *lw, uint32_t *field_max, uint32_t n, fl_error *err);
/* Queue record `index` (must be the next one): its stored payload then its fields block (version
 * 3; header field fields_len); commits in batches. */
int fl_lmdb_writer_add(fl_lmdb_writer *lw, uint64_t index, fl_encoding format, const void *stored,
                       size_t stored_len, const void *block, size_t block_len, uint32_t raw_len,
                       int32_t label, uint32_t crc, const char *name, size_t name_len,
                       uint32_t height, uint32_t width, fl_error *err);
/* Commit everything, store the manifest text under meta, sync and close. Frees lw. */
int fl_lmdb_writer_finish(fl_lmdb_writer *lw, const char *manifest, size_t len, fl_error *err);
/* Commit what is queued (best effort), close, free. */
void fl_lmdb_writer_abort(fl_lmdb_writer *lw);

#endif
