/* fl_dataset.h — read a packed fastload dataset: a directory of shard files plus a manifest, or
 * an LMDB environment holding the same records. The layout is specified byte by byte in
 * formats/SPEC.md. Every offset and length read from disk is bounds-checked here; a corrupt,
 * truncated or wrong-version file is reported with FL_E_FORMAT / FL_E_TRUNCATED / FL_E_VERSION /
 * FL_E_CHECKSUM and a message naming the file (and record), never a crash.
 *
 * Thread safety: after fl_dataset_open returns, all const accessors and fl_dataset_get /
 * fl_dataset_decompress may be called from many threads at once (each thread passes its own
 * output buffers). Open and close are not concurrent with anything else. */
#ifndef FL_DATASET_H
#define FL_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"
#include "fl_fields.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Newest format version this build reads and writes; it reads versions 1 to 3 (SPEC.md says what
 * differs). Writers write version 2 for a classification schema ([image "image", int "label"]:
 * the same bytes as before fields existed) and version 3 for any other (fields in the manifest, a
 * fields block after each record's payload). */
#define FL_FORMAT_VERSION         3u
#define FL_FORMAT_VERSION_CLASSIC 2u

/* How each record's payload is encoded. */
typedef enum fl_encoding {
    FL_ENC_JPEG = 1,  /* JPEG file bytes (kept as-is, or re-encoded by packdata) */
    FL_ENC_PNG = 2,   /* PNG file bytes kept as-is */
    FL_ENC_RAW = 3,   /* uint8 pixels, HWC, rows packed (height*width*channels bytes) */
    FL_ENC_WEBP = 4,  /* WebP file bytes kept as-is (format version 2) */
    FL_ENC_MIXED = 5, /* schema only (format version 2): encoded images kept in their own formats
                       * (JPEG, PNG, WebP); each record's format is in its index entry
                       * (fl_record_info.format) */
    FL_ENC_NONE = 6   /* no image (format version 3, a schema without an image field): every
                       * record's payload is empty, height = width = 0; channels 0, compression
                       * none */
} fl_encoding;

/* How each record's payload is compressed on disk (on top of the encoding). */
typedef enum fl_compression {
    FL_COMP_NONE = 0,
    FL_COMP_ZSTD = 1 /* one zstd frame per record, with the shard's dictionary when it has one */
} fl_compression;

typedef enum fl_backend { FL_BACKEND_SHARDS = 1, FL_BACKEND_LMDB = 2 } fl_backend;

/* Schema shared by every record of a dataset. */
typedef struct fl_schema {
    fl_encoding encoding;
    fl_compression compression;
    uint32_t channels; /* 1 (gray) or 3 (RGB): what decoding yields */
    uint32_t height;   /* fixed image height in pixels, or 0 when sizes vary */
    uint32_t width;    /* fixed image width in pixels, or 0 when sizes vary */
} fl_schema;

/* Where a record lives and what the index says about it. */
typedef struct fl_record_info {
    uint32_t shard;      /* shard number (0 for LMDB) */
    uint64_t offset;     /* byte offset of the stored payload in the shard file (0 for LMDB).
                          * Records are packed back to back from a 4 KiB-aligned start: an
                          * O_DIRECT reader reads [offset & ~4095, align_up(offset + stored_len))
                          * clamped to the file size (see SPEC.md). */
    uint32_t stored_len; /* bytes on disk (compressed size when compressed) */
    uint32_t raw_len;    /* bytes after decompression (== stored_len when uncompressed) */
    int32_t label;       /* integer class label, 0 <= label < num_classes */
    uint32_t crc32c;     /* CRC32C of the stored bytes */
    uint32_t height;     /* image height in pixels (as decoded) */
    uint32_t width;      /* image width in pixels */
    fl_encoding format;  /* this record's encoding (FL_ENC_JPEG, _PNG, _WEBP, _RAW or _NONE, never
                          * FL_ENC_MIXED): the schema's encoding unless the schema is mixed */
    uint32_t fields_len; /* format version 3: bytes of the fields block, the last fields_len of the
                          * stored bytes (<= stored_len); the payload is the first
                          * stored_len - fields_len bytes. 0 in versions 1 and 2 */
} fl_record_info;

typedef struct fl_dataset fl_dataset;

/* Open the dataset at `path` (a dataset directory written by packdata, shards or LMDB backend).
 * Reads and validates the manifest and every shard's header, footer and index (index CRC checked,
 * every entry bounds-checked, labels < number of classes, each record's format allowed by the
 * schema); each shard's size, format version and dataset id must equal the manifest's; maps the
 * shards read-only. For LMDB, checks data.mdb's size against the manifest and LMDB's last used
 * page, opens it read-only without a lock file and resolves every record once (see SPEC.md).
 * The directory is opened once and every file relative to it, so the dataset seen is one
 * dataset from open to close; when it is replaced during the open (pack --force), the open is
 * retried a few times, then fails with -EAGAIN ("... was replaced while being opened: open it
 * again") — never with a false corruption error.
 * Record payload checksums are checked by fl_dataset_get/check/verify.
 * Memory: every record's index entry is kept packed (each value in the bits its shard's range
 * needs: ~11 bytes a record for ImageNet-like JPEG shards, where the entry on disk is 48 bytes
 * plus the name); names are not kept (fl_dataset_record_name reads them back on demand); the
 * index pages of the mapped shards are released once validated.
 * On success *out owns the dataset; release with fl_dataset_close.
 * Errors: -ENOENT (no such directory, no manifest.json, missing shard), -EACCES..., FL_E_FORMAT,
 * FL_E_VERSION, FL_E_TRUNCATED, FL_E_CHECKSUM, FL_E_LMDB, -EAGAIN, -ENOMEM; err->msg names the
 * file. */
FL_API int fl_dataset_open(const char *path, fl_dataset **out, fl_error *err);

/* fl_dataset_open for what describes a dataset, not its records: the same checks (every shard's
 * index read and validated, or every LMDB record walked), but the index is not kept, so memory
 * does not grow with the record count (one shard's index at a time). Every accessor of this
 * header but those of records works; fl_dataset_record_info, _get, _check, _payload,
 * _record_fields and _verify fail with FL_E_UNSUPPORTED, fl_dataset_record_name returns NULL,
 * fl_dataset_prefetch_info does nothing. Errors: as fl_dataset_open. */
FL_API int fl_dataset_open_summary(const char *path, fl_dataset **out, fl_error *err);

/* Close and unmap. NULL is allowed. */
FL_API void fl_dataset_close(fl_dataset *ds);

FL_API uint64_t fl_dataset_count(const fl_dataset *ds);
FL_API const fl_schema *fl_dataset_schema(const fl_dataset *ds);
FL_API fl_backend fl_dataset_backend(const fl_dataset *ds);
FL_API uint32_t fl_dataset_num_classes(const fl_dataset *ds);
/* Name of class `label` (in label order), or NULL when out of range. */
FL_API const char *fl_dataset_class_name(const fl_dataset *ds, uint32_t label);
FL_API uint32_t fl_dataset_num_shards(const fl_dataset *ds);
/* Absolute path of shard `i` (the LMDB data file for the LMDB backend), or NULL. */
FL_API const char *fl_dataset_shard_path(const fl_dataset *ds, uint32_t i);
/* The open file descriptor of data file `i` (shard i, or data.mdb for LMDB), or -1 when i is out
 * of range. Every data file is opened once, by fl_dataset_open, relative to the dataset directory
 * it read the manifest from, and stays open until fl_dataset_close: reading through this fd (pread,
 * io_uring, or /proc/self/fd/N reopened with O_DIRECT) reads the very file that was validated,
 * even if the dataset at `path` has since been replaced (pack --force) or deleted. Owned by the
 * dataset: do not close it (dup it to keep it beyond close). */
FL_API int fl_dataset_file_fd(const fl_dataset *ds, uint32_t i);
/* The dataset's 16-byte id (format version 2: random, chosen when it was packed, in the manifest
 * and every data file), copied to `id`. Two packs never share one (unless FL_DATASET_ID forced
 * it), so it tells datasets apart where a path cannot (e.g. a checkpoint's data after a re-pack).
 * Returns 0, or -ENOENT for a version 1 dataset or one combined from --part datasets (no single
 * id; `id` is zeroed). */
FL_API int fl_dataset_id(const fl_dataset *ds, uint8_t id[16]);
/* Total bytes of all data files (shards or LMDB). */
FL_API uint64_t fl_dataset_total_bytes(const fl_dataset *ds);
/* The manifest as it is stored (JSON text, NUL-terminated). */
FL_API const char *fl_dataset_manifest_json(const fl_dataset *ds);
/* Largest raw_len of any record (for sizing decompression buffers). */
FL_API uint32_t fl_dataset_max_raw_len(const fl_dataset *ds);
/* Largest stored_len of any record (for sizing read buffers). */
FL_API uint32_t fl_dataset_max_stored_len(const fl_dataset *ds);

/* Index entry of record `i` (0 <= i < count). Errors: FL_E_RANGE. */
FL_API int fl_dataset_record_info(const fl_dataset *ds, uint64_t i, fl_record_info *out,
                                  fl_error *err);

/* A hint: start loading record `i`'s index entry into the CPU cache, so that a later
 * fl_dataset_record_info of many random records overlaps their cache misses. No effect when
 * i >= count. */
FL_API void fl_dataset_prefetch_info(const fl_dataset *ds, uint64_t i);

/* Source name of record `i` (relative path, or "file#index" for IDX/CIFAR), not NUL-terminated:
 * *len receives its length. Names are not held in memory with the index: a shard's names are
 * read from its index block on the first call for one of its records (decompressed when the
 * block is, then kept until close). Returns NULL on FL_E_RANGE, or when the names cannot be read
 * (out of memory; the shard changed on disk since the open). */
FL_API const char *fl_dataset_record_name(const fl_dataset *ds, uint64_t i, size_t *len);

/* Zero-copy access to record `i`'s stored bytes (points into the shard mapping or LMDB's map;
 * valid until close).
 * When `check` is non-zero the CRC32C is verified first (FL_E_CHECKSUM names shard and record);
 * that read is guarded: a file truncated since the open gives FL_E_TRUNCATED ("shorter than when
 * it was opened") instead of SIGBUS. The caller's own reads of *data are not guarded: a page
 * past the file's new end raises SIGBUS there (copy the bytes first, as the loader and
 * fl_dataset_verify do, where the file may change under the reader).
 * Errors: FL_E_RANGE, FL_E_CHECKSUM, FL_E_LMDB, FL_E_TRUNCATED. */
FL_API int fl_dataset_get(const fl_dataset *ds, uint64_t i, const uint8_t **data, size_t *len,
                          int check, fl_error *err);

/* The error of record `i` whose bytes could not be read through the mapping: rc is what
 * fl_mapped_run returned (FL_E_TRUNCATED: a page past the file's end, or one the disk failed to
 * read, faulted; else the guard could not be installed). Sets err naming file and record and
 * returns its code. */
FL_API int fl_dataset_mapping_error(const fl_dataset *ds, uint64_t i, int rc, fl_error *err);

/* Validate externally read stored bytes of record `i` (e.g. read with io_uring): length and
 * CRC32C against the index. Errors: FL_E_CHECKSUM, FL_E_FORMAT. */
FL_API int fl_dataset_check(const fl_dataset *ds, uint64_t i, const uint8_t *data, size_t len,
                            fl_error *err);

/* Format version of the dataset (1, 2 or 3; of its parts, which share it, for a --part set). */
FL_API uint32_t fl_dataset_format_version(const fl_dataset *ds);

/* The record's fields, in schema order (the manifest's "fields"; a version 1 or 2 dataset gives
 * [image "image" uint8, int "label" int32]). The array is owned by the dataset, valid until close;
 * each variable field's max_count is the largest count of any record (the manifest's). */
FL_API uint32_t fl_dataset_num_fields(const fl_dataset *ds);
FL_API const fl_field *fl_dataset_fields(const fl_dataset *ds);

/* Parse record `i`'s fields from its stored bytes (`stored`, `stored_len`: the whole record as
 * fl_dataset_get gives it or as read from the file; the caller checks the CRC first when it wants
 * it checked). values[] has fl_dataset_num_fields entries, filled in schema order: block fields as
 * fl_fields_parse gives them (pointers into `stored`); the IMAGE entry is the payload part
 * (data = stored, len = stored_len - fields_len, count 1, height/width of the record); the label
 * (first INT) entry points at its 4 little-endian bytes in the index (count 1), valid until close.
 * Checks what fl_fields_parse checks plus each box inside the record's image, each mask of its
 * size (a zstd mask's height/width are set from the record), lists as long as their boxes.
 * Does no allocation. Errors: FL_E_RANGE, FL_E_FORMAT (stored_len is not the record's, or a bad
 * block: the message names the file, the record and the field). */
FL_API int fl_dataset_record_fields(const fl_dataset *ds, uint64_t i, const uint8_t *stored,
                                    size_t stored_len, fl_field_value *values, fl_error *err);

/* Decompress NDARRAY field `field`'s value (as fl_dataset_record_fields gave it) into dst:
 * exactly fl_field_ndarray_bytes(&fields[field]) bytes, row-major, little-endian. Thread-safe
 * (the dataset's zstd context pool, as fl_dataset_payload). Errors: FL_E_RANGE (not an NDARRAY
 * field, or cap too small), FL_E_DECODE (corrupt frame or wrong size). */
FL_API int fl_dataset_ndarray(const fl_dataset *ds, uint32_t field, const fl_field_value *value,
                              void *dst, size_t cap, fl_error *err);

/* Turn record `i`'s stored bytes into its payload (format version 3: the payload part, the first
 * stored_len - fields_len bytes; `src_len` is the whole record's stored length): decompress into
 * dst (capacity dst_cap, must be
 * >= info.raw_len) for compressed datasets; for uncompressed ones copies nothing and returns 0 with
 * *payload = src. On success *payload and *payload_len describe the payload (JPEG/PNG file bytes or
 * raw pixels). Thread-safe: zstd contexts come from a per-dataset pool of 64 that are created on
 * first use and reused (no allocation once warm; a 65th concurrent caller gets a temporary one).
 * Errors: FL_E_DECODE (corrupt frame), FL_E_RANGE (dst too small). */
FL_API int fl_dataset_payload(const fl_dataset *ds, uint64_t i, const uint8_t *src, size_t src_len,
                              uint8_t *dst, size_t dst_cap, const uint8_t **payload,
                              size_t *payload_len, fl_error *err);

/* Callback for fl_dataset_verify: called once per bad record with its index and error.
 * Return non-zero to stop early. */
typedef int (*fl_verify_cb)(void *user, uint64_t index, const fl_error *err);

/* Check every record's CRC32C (and that compressed payloads decompress to raw_len; in version 3
 * that its fields block parses, fits the record's image, and its ndarrays decompress), in order,
 * on the calling thread. The messages passed to `cb` name the file and the record. The pages read
 * leave the process's resident set as the walk goes (madvise: they stay in the page cache), so
 * verifying a data set larger than RAM does not hold it as RSS.
 * Calls `cb` for each bad record. Returns 0 when all are good, FL_E_CHECKSUM when any is bad,
 * or another error when the walk itself failed. *n_bad receives the number of bad records. */
FL_API int fl_dataset_verify(const fl_dataset *ds, fl_verify_cb cb, void *user, uint64_t *n_bad,
                             fl_error *err);

/* CRC32C (Castagnoli) of `len` bytes, continuing from `crc` (start with 0). Uses the SSE4.2
 * instruction when the CPU has it, a table otherwise; both give the same result. */
FL_API uint32_t fl_crc32c(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
