/* fl_shard.h — internal: the shard file layout (see SPEC.md) as constants, little-endian field
 * helpers, and the validated view of one shard file used by the reader and by writer resume. */
#ifndef FL_SHARD_H
#define FL_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fl_dataset.h"
#include "fl_error.h"

#define FL_SHARD_MAGIC          "FLSHARD1" /* 8 bytes at offset 0 */
#define FL_SHARD_FOOTER_MAGIC   "FLSFOOT1" /* 8 bytes at the start of the footer */
#define FL_SHARD_HEADER_SIZE    4096u
#define FL_SHARD_ALIGN          4096u
#define FL_SHARD_FOOTER_SIZE    64u
#define FL_SHARD_INDEX_ENTRY    48u /* format version 2; 40 in version 1 (no format field) */
#define FL_SHARD_INDEX_ENTRY_V1 40u
#define FL_DATASET_ID_BYTES     16u
#define FL_FORMAT_MIN_VERSION   1u         /* oldest format version this build still reads */
#define FL_MAX_RECORD_BYTES     (1u << 30) /* no single record over 1 GiB (stored or raw) */
#define FL_MAX_NAME_BYTES       4096u
#define FL_MAX_DICT_BYTES       (16u << 20)
/* A compressed record may not claim a raw length beyond FL_MAX_RAW_RATIO times its compressed
 * bytes plus FL_RAW_SLACK (a zstd frame of RLE blocks could claim 32,768x: a 33 KB record
 * would make every decode worker allocate and fill 1 GiB). Nearly constant images over 1 MiB
 * are the only real data that compress further. */
#define FL_MAX_RAW_RATIO 4096u
#define FL_RAW_SLACK     (1u << 20)
static inline int fl_raw_len_plausible(uint64_t raw_len, uint64_t stored)
{
    return raw_len <= stored * FL_MAX_RAW_RATIO + FL_RAW_SLACK;
}

/* header field offsets */
enum {
    FLH_MAGIC = 0,         /* 8  "FLSHARD1" */
    FLH_VERSION = 8,       /* u32 format version */
    FLH_HEADER_SIZE = 12,  /* u32 4096 */
    FLH_HEADER_CRC = 16,   /* u32 CRC32C of the 4096 header bytes with this field zero */
    FLH_ENCODING = 20,     /* u32 fl_encoding */
    FLH_COMPRESSION = 24,  /* u32 fl_compression */
    FLH_CHANNELS = 28,     /* u32 */
    FLH_HEIGHT = 32,       /* u32 (0 = variable) */
    FLH_WIDTH = 36,        /* u32 (0 = variable) */
    FLH_SHARD = 40,        /* u32 shard number */
    FLH_RESERVED0 = 44,    /* u32 0 */
    FLH_FIRST_RECORD = 48, /* u64 global index of the shard's first record */
    FLH_RECORD_COUNT = 56, /* u64 */
    FLH_DICT_OFFSET = 64,  /* u64 (0 when no dictionary) */
    FLH_DICT_LEN = 72,     /* u64 */
    FLH_DATA_OFFSET = 80,  /* u64 first record byte; multiple of 4096 */
    FLH_DATA_END = 88,     /* u64 one past the last record byte (== index offset) */
    FLH_FILE_SIZE = 96,    /* u64 total file size */
    FLH_DATASET_ID = 104,  /* 16 bytes: the dataset's random id (version 2; 0 in version 1) */
    FLH_FIELD_MAX = 120,   /* version 3: u32 per field (FL_MAX_FIELDS, schema order): the
                              largest count of a variable field in this shard, else 0 */
    FLH_END = 120 + 4 * FL_MAX_FIELDS
};

/* footer field offsets (relative to file_size - 64). The index block is the index entries
 * (record_count x 40 bytes) followed by the names blob, stored as is or as one zstd frame. */
enum {
    FLF_MAGIC = 0,         /* 8  "FLSFOOT1" */
    FLF_INDEX_OFFSET = 8,  /* u64 file offset of the index block (== header data_end) */
    FLF_INDEX_STORED = 16, /* u64 bytes of the index block on disk (ends at the footer) */
    FLF_INDEX_SIZE = 24,   /* u64 = record_count * entry size (48; 40 in version 1) */
    FLF_NAMES_SIZE = 32,   /* u64 uncompressed names blob bytes */
    FLF_RECORD_COUNT = 40, /* u64 */
    FLF_INDEX_CRC = 48,    /* u32 CRC32C of the index block as stored on disk */
    FLF_VERSION = 52,      /* u32 format version */
    FLF_FLAGS = 56,        /* u32 bit 0: index block is a zstd frame; other bits 0 */
    FLF_FOOTER_CRC = 60    /* u32 CRC32C of footer bytes 0..59 */
};
#define FL_FOOTER_INDEX_ZSTD 1u
/* index entry field offsets */
enum {
    FLI_OFFSET = 0,       /* u64 absolute file offset of the stored bytes */
    FLI_STORED_LEN = 8,   /* u32 */
    FLI_RAW_LEN = 12,     /* u32 */
    FLI_LABEL = 16,       /* i32 */
    FLI_CRC = 20,         /* u32 CRC32C of the stored bytes */
    FLI_HEIGHT = 24,      /* u32 */
    FLI_WIDTH = 28,       /* u32 */
    FLI_NAME_OFFSET = 32, /* u32 offset in the names blob */
    FLI_NAME_LEN = 36,    /* u32 */
    FLI_FORMAT = 40,      /* u32 fl_encoding of this record (version 2 only) */
    FLI_RESERVED = 44,    /* u32 0 (version 2) */
    FLI_FIELDS_LEN = 44   /* u32 bytes of the fields block at the end of the stored bytes (v3) */
};

static inline uint32_t fl_rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v; /* the format is little-endian; so are all hosts we build for (checked in shard.c) */
}
static inline uint64_t fl_rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline void fl_wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void fl_wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* A validated, read-only mapping of one complete shard file. */
typedef struct fl_shard_view {
    char *path;         /* owned */
    const uint8_t *map; /* whole file, PROT_READ */
    uint64_t size;
    int fd;                            /* the file, open O_RDONLY until close (-1 when not open) */
    uint32_t version;                  /* format version of this shard (1, 2 or 3) */
    uint32_t field_max[FL_MAX_FIELDS]; /* v3: the header's largest count per field, else 0 */
    uint32_t entry_size;               /* index entry bytes: 40 (v1) or 48 (v2) */
    uint8_t dataset_id[FL_DATASET_ID_BYTES]; /* v2: from the header; v1: zeros */
    uint32_t number;
    uint64_t first_record;
    uint64_t count;
    fl_schema schema;
    const uint8_t *dict; /* inside map, or NULL */
    size_t dict_len;
    const uint8_t
        *index; /* count * entry_size bytes: inside map, or in index_heap when compressed */
    const uint8_t *names;
    uint8_t *index_heap; /* owned: the decompressed index block, or NULL */
    uint64_t names_size;
    uint64_t data_offset;
    uint64_t data_end;
    uint32_t max_raw_len;
    uint32_t max_stored_len;
    uint32_t max_fields_len; /* the largest record's fields block (version 3) */
} fl_shard_view;

/* Map and fully validate the shard at `path` (header, footer, index CRC, every index entry,
 * including each v2 entry's format against the schema and each v3 entry's fields_len: at most
 * stored_len, at least `min_fields` bytes — fl_shard_open_fd's argument, 0 from fl_shard_open —
 * with raw_len checks applied to the payload part). Does not check record payload CRCs.
 * Errors: -errno, FL_E_FORMAT, FL_E_VERSION, FL_E_TRUNCATED, FL_E_CHECKSUM, all naming the path. */
int fl_shard_open(const char *path, fl_shard_view *v, fl_error *err);
/* The same for an already open file: `fd` is taken over (closed by fl_shard_close, or on error);
 * `path` is only used in messages and v->path. */
int fl_shard_open_fd(int fd, const char *path, fl_shard_view *v, fl_error *err);
/* fl_shard_open_fd with the smallest fields block a v3 record of the schema has
 * (fl_fields_min_block): every v3 entry's fields_len must be at least that. */
int fl_shard_open_fd_min(int fd, const char *path, size_t min_fields, fl_shard_view *v,
                         fl_error *err);
/* Memory for decompressed index blocks shared by the shards of one open: grown to the largest
 * block, reused, released with fl_index_scratch_free (a fresh block per shard costs a page fault
 * per 4 KiB of index, ~0.1 s of CPU per million records). */
typedef struct fl_index_scratch {
    uint8_t *p;
    size_t cap;
} fl_index_scratch;
void fl_index_scratch_free(fl_index_scratch *s);
/* fl_shard_open_fd_min decompressing the index block into `scratch` (NULL: its own block): the
 * view's index then lives there, valid until the next open with the same scratch or
 * fl_shard_drop_index; index_heap stays NULL. */
int fl_shard_open_fd_scratch(int fd, const char *path, size_t min_fields, fl_index_scratch *scratch,
                             fl_shard_view *v, fl_error *err);
void fl_shard_close(fl_shard_view *v);

/* After the open: let go of the index block. A decompressed one is freed (v->index and v->names
 * become NULL); one stored as is stays readable in the mapping. Either way its pages leave this
 * process's resident set (the page cache keeps them). fl_shard_index_load reads it again. */
void fl_shard_drop_index(fl_shard_view *v);
/* The index block of a validated shard whose decompressed block was dropped, read again from the
 * mapping: footer and block CRC checked again, decompressed into a new buffer (count *
 * entry_size bytes of entries, then names_size bytes of names; the caller frees it). Errors:
 * -ENOMEM, FL_E_CHECKSUM / FL_E_FORMAT (the file changed since it was opened). Release it with
 * fl_shard_index_free. */
int fl_shard_index_load(const fl_shard_view *v, uint8_t **out, fl_error *err);
/* Release a block of fl_shard_index_load (NULL is allowed). */
void fl_shard_index_free(const fl_shard_view *v, uint8_t *block);

/* Read index entry `i` (< v->count) of a validated shard. */
void fl_shard_entry(const fl_shard_view *v, uint64_t i, fl_record_info *out, uint32_t *name_off,
                    uint32_t *name_len);

/* Writers compress the index block when that saves space (default 1); tests set 0 to get
 * plain index entries they can patch. */
extern int fl_shard_compress_index;

const char *fl_encoding_name(fl_encoding e);
const char *fl_compression_name(fl_compression c);
/* Parse names back; return 0 when unknown. */
fl_encoding fl_encoding_from_name(const char *s);
int fl_compression_from_name(const char *s, fl_compression *out);
/* Schema sanity (known enums, channels 1..4, sizes both zero or both non-zero and <= 1<<20;
 * FL_ENC_NONE: channels, sizes 0 and no compression). Every encoding is valid here (FL_ENC_WEBP
 * and FL_ENC_MIXED need format version 2, FL_ENC_NONE version 3: see fl_schema_valid_in). */
int fl_schema_valid(const fl_schema *s);
/* fl_schema_valid, and the encoding exists in format `version` (1: JPEG, PNG, raw only; none
 * from 3 on). */
int fl_schema_valid_in(const fl_schema *s, uint32_t version);
/* Whether a record of format `format` may appear in a dataset of schema encoding `schema_enc`:
 * mixed allows JPEG, PNG and WebP; any other schema only its own encoding. */
int fl_format_allowed(fl_encoding schema_enc, uint32_t format);
/* 32 lowercase hex characters + NUL for a dataset id. */
void fl_dataset_id_hex(const uint8_t id[FL_DATASET_ID_BYTES],
                       char out[2 * FL_DATASET_ID_BYTES + 1]);
/* Parse 32 hex characters; returns 0, or -1 when s is not exactly that. */
int fl_dataset_id_parse(const char *s, uint8_t id[FL_DATASET_ID_BYTES]);

#endif
