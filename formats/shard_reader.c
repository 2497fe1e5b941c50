/* shard_reader.c — maps one shard file and validates everything in it that the reader will trust
 * later: header, footer, index CRC, and every index entry's offsets and lengths. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "fl_file.h"
#include "fl_shard.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fastload's on-disk format readers assume a little-endian host"
#endif

const char *fl_encoding_name(fl_encoding e)
{
    switch (e) {
    case FL_ENC_JPEG: return "jpeg";
    case FL_ENC_PNG: return "png";
    case FL_ENC_RAW: return "raw";
    case FL_ENC_WEBP: return "webp";
    case FL_ENC_MIXED: return "mixed";
    case FL_ENC_NONE: return "none";
    }
    return "unknown";
}

const char *fl_compression_name(fl_compression c)
{
    switch (c) {
    case FL_COMP_NONE: return "none";
    case FL_COMP_ZSTD: return "zstd";
    }
    return "unknown";
}

fl_encoding fl_encoding_from_name(const char *s)
{
    if (!strcmp(s, "jpeg"))
        return FL_ENC_JPEG;
    if (!strcmp(s, "png"))
        return FL_ENC_PNG;
    if (!strcmp(s, "raw"))
        return FL_ENC_RAW;
    if (!strcmp(s, "webp"))
        return FL_ENC_WEBP;
    if (!strcmp(s, "mixed"))
        return FL_ENC_MIXED;
    if (!strcmp(s, "none"))
        return FL_ENC_NONE;
    return (fl_encoding)0;
}

int fl_compression_from_name(const char *s, fl_compression *out)
{
    if (!strcmp(s, "none"))
        *out = FL_COMP_NONE;
    else if (!strcmp(s, "zstd"))
        *out = FL_COMP_ZSTD;
    else
        return -1;
    return 0;
}

int fl_schema_valid(const fl_schema *s)
{
    if (s->encoding == FL_ENC_NONE) /* no image: nothing to decode, nothing to compress */
        return s->compression == FL_COMP_NONE && s->channels == 0 && s->height == 0 &&
               s->width == 0;
    if (s->encoding != FL_ENC_JPEG && s->encoding != FL_ENC_PNG && s->encoding != FL_ENC_RAW &&
        s->encoding != FL_ENC_WEBP && s->encoding != FL_ENC_MIXED)
        return 0;
    if (s->compression != FL_COMP_NONE && s->compression != FL_COMP_ZSTD)
        return 0;
    if (s->channels < 1 || s->channels > 4)
        return 0;
    if ((s->height == 0) != (s->width == 0))
        return 0;
    if (s->height > (1u << 20) || s->width > (1u << 20))
        return 0;
    return 1;
}

int fl_schema_valid_in(const fl_schema *s, uint32_t version)
{
    if (!fl_schema_valid(s))
        return 0;
    if (s->encoding == FL_ENC_NONE)
        return version >= 3;
    return version >= 2 || s->encoding == FL_ENC_JPEG || s->encoding == FL_ENC_PNG ||
           s->encoding == FL_ENC_RAW;
}

int fl_format_allowed(fl_encoding schema_enc, uint32_t format)
{
    if (schema_enc == FL_ENC_MIXED)
        return format == FL_ENC_JPEG || format == FL_ENC_PNG || format == FL_ENC_WEBP;
    return format == (uint32_t)schema_enc; /* FL_ENC_NONE: records of format none only */
}

void fl_dataset_id_hex(const uint8_t id[FL_DATASET_ID_BYTES], char out[2 * FL_DATASET_ID_BYTES + 1])
{
    static const char hx[] = "0123456789abcdef";
    for (unsigned i = 0; i < FL_DATASET_ID_BYTES; i++) {
        out[2 * i] = hx[id[i] >> 4];
        out[2 * i + 1] = hx[id[i] & 15];
    }
    out[2 * FL_DATASET_ID_BYTES] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int fl_dataset_id_parse(const char *s, uint8_t id[FL_DATASET_ID_BYTES])
{
    if (!s || strlen(s) != 2 * FL_DATASET_ID_BYTES)
        return -1;
    for (unsigned i = 0; i < FL_DATASET_ID_BYTES; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        id[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

void fl_shard_entry(const fl_shard_view *v, uint64_t i, fl_record_info *out, uint32_t *name_off,
                    uint32_t *name_len)
{
    const uint8_t *e = v->index + i * v->entry_size;
    out->shard = v->number;
    out->offset = fl_rd64(e + FLI_OFFSET);
    out->stored_len = fl_rd32(e + FLI_STORED_LEN);
    out->raw_len = fl_rd32(e + FLI_RAW_LEN);
    out->label = (int32_t)fl_rd32(e + FLI_LABEL);
    out->crc32c = fl_rd32(e + FLI_CRC);
    out->height = fl_rd32(e + FLI_HEIGHT);
    out->width = fl_rd32(e + FLI_WIDTH);
    /* v1: every record has the schema's encoding */
    out->format = v->version >= 2 ? (fl_encoding)fl_rd32(e + FLI_FORMAT) : v->schema.encoding;
    out->fields_len = v->version >= 3 ? fl_rd32(e + FLI_FIELDS_LEN) : 0;
    if (name_off)
        *name_off = fl_rd32(e + FLI_NAME_OFFSET);
    if (name_len)
        *name_len = fl_rd32(e + FLI_NAME_LEN);
}

/* A decompressed index block's memory: its own mapping, so that freeing it gives the memory back
 * to the system at once (a freed malloc block of a few MiB may stay in the heap: opening shard
 * after shard then kept one block's worth more per shard opened). */
static uint8_t *index_alloc(size_t bytes)
{
    void *p =
        mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static size_t index_bytes(const fl_shard_view *v)
{
    return (size_t)(v->count * v->entry_size + v->names_size);
}

void fl_shard_index_free(const fl_shard_view *v, uint8_t *block)
{
    if (block)
        munmap(block, index_bytes(v) ? index_bytes(v) : 1);
}

void fl_index_scratch_free(fl_index_scratch *s)
{
    if (s->p)
        munmap(s->p, s->cap);
    s->p = NULL;
    s->cap = 0;
}

/* `bytes` of s, or NULL when out of memory. */
static uint8_t *scratch_get(fl_index_scratch *s, size_t bytes)
{
    if (bytes <= s->cap && s->p)
        return s->p;
    fl_index_scratch_free(s);
    s->cap = bytes ? bytes : 1;
    s->p = index_alloc(s->cap);
    if (!s->p)
        s->cap = 0;
    return s->p;
}

void fl_shard_close(fl_shard_view *v)
{
    if (!v)
        return;
    if (v->map && v->size)
        munmap((void *)v->map, v->size);
    if (v->fd >= 0)
        close(v->fd);
    fl_shard_index_free(v, v->index_heap);
    free(v->path);
    memset(v, 0, sizeof *v);
    v->fd = -1;
}

/* Start reading [off, off + len) of the mapping m (page-aligned outward). */
static void will_need(const uint8_t *m, uint64_t off, uint64_t len)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t a = off / (uint64_t)(ps > 0 ? ps : 4096) * (uint64_t)(ps > 0 ? ps : 4096);
    if (len)
        madvise((void *)(m + a), (size_t)(off + len - a), MADV_WILLNEED);
}

/* The header: magic, version, CRC, file size, schema, data region, dictionary. */
static int validate_header(fl_shard_view *v, const char *path, fl_error *err)
{
    const uint8_t *m = v->map;
    uint64_t size = v->size;
    if (size < FL_SHARD_HEADER_SIZE)
        return fl_error_set(
            err, size >= 8 && memcmp(m, FL_SHARD_MAGIC, 8) != 0 ? FL_E_FORMAT : FL_E_TRUNCATED,
            "%s: %s (%llu bytes, shorter than the %u-byte header)", path,
            size >= 8 && memcmp(m, FL_SHARD_MAGIC, 8) != 0 ? "not a fastload shard"
                                                           : "truncated shard",
            (unsigned long long)size, FL_SHARD_HEADER_SIZE);
    if (memcmp(m + FLH_MAGIC, FL_SHARD_MAGIC, 8) != 0)
        return fl_error_set(err, FL_E_FORMAT, "%s: not a fastload shard (bad magic)", path);
    uint32_t version = fl_rd32(m + FLH_VERSION);
    if (version < FL_FORMAT_MIN_VERSION || version > FL_FORMAT_VERSION)
        return fl_error_set(err, FL_E_VERSION,
                            "%s: shard format version %u, this build reads versions %u to %u", path,
                            version, FL_FORMAT_MIN_VERSION, FL_FORMAT_VERSION);
    v->version = version;
    v->entry_size = version >= 2 ? FL_SHARD_INDEX_ENTRY : FL_SHARD_INDEX_ENTRY_V1;
    if (fl_rd32(m + FLH_HEADER_SIZE) != FL_SHARD_HEADER_SIZE)
        return fl_error_set(err, FL_E_FORMAT, "%s: bad header size %u", path,
                            fl_rd32(m + FLH_HEADER_SIZE));
    uint8_t hdr[FL_SHARD_HEADER_SIZE];
    memcpy(hdr, m, sizeof hdr);
    uint32_t want_hcrc = fl_rd32(hdr + FLH_HEADER_CRC);
    fl_wr32(hdr + FLH_HEADER_CRC, 0);
    uint32_t got_hcrc = fl_crc32c(0, hdr, sizeof hdr);
    if (got_hcrc != want_hcrc)
        return fl_error_set(err, FL_E_CHECKSUM,
                            "%s: header checksum mismatch (stored 0x%08x, computed 0x%08x)", path,
                            want_hcrc, got_hcrc);
    uint64_t file_size = fl_rd64(m + FLH_FILE_SIZE);
    if (size < file_size)
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s: truncated shard: %llu bytes, header says %llu", path,
                            (unsigned long long)size, (unsigned long long)file_size);
    if (size != file_size)
        return fl_error_set(err, FL_E_FORMAT, "%s: %llu bytes, header says %llu", path,
                            (unsigned long long)size, (unsigned long long)file_size);
    fl_schema *s = &v->schema;
    s->encoding = (fl_encoding)fl_rd32(m + FLH_ENCODING);
    s->compression = (fl_compression)fl_rd32(m + FLH_COMPRESSION);
    s->channels = fl_rd32(m + FLH_CHANNELS);
    s->height = fl_rd32(m + FLH_HEIGHT);
    s->width = fl_rd32(m + FLH_WIDTH);
    if (!fl_schema_valid_in(s, version))
        return fl_error_set(err, FL_E_FORMAT, "%s: invalid schema in header", path);
    if (version >= 2)
        memcpy(v->dataset_id, m + FLH_DATASET_ID, FL_DATASET_ID_BYTES);
    for (uint32_t k = 0; version >= 3 && k < FL_MAX_FIELDS; k++)
        v->field_max[k] = fl_rd32(m + FLH_FIELD_MAX + 4 * k);
    v->number = fl_rd32(m + FLH_SHARD);
    v->first_record = fl_rd64(m + FLH_FIRST_RECORD);
    v->count = fl_rd64(m + FLH_RECORD_COUNT);
    uint64_t dict_off = fl_rd64(m + FLH_DICT_OFFSET), dict_len = fl_rd64(m + FLH_DICT_LEN);
    v->data_offset = fl_rd64(m + FLH_DATA_OFFSET);
    v->data_end = fl_rd64(m + FLH_DATA_END);
    if (v->data_offset < FL_SHARD_HEADER_SIZE || v->data_offset % FL_SHARD_ALIGN ||
        v->data_offset > size || v->data_end < v->data_offset || v->data_end > size)
        return fl_error_set(err, FL_E_FORMAT, "%s: bad data region [%llu, %llu)", path,
                            (unsigned long long)v->data_offset, (unsigned long long)v->data_end);
    if (dict_len) {
        if (dict_len > FL_MAX_DICT_BYTES || dict_off < FL_SHARD_HEADER_SIZE ||
            dict_off > v->data_offset || dict_len > v->data_offset - dict_off)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: bad dictionary span (offset %llu, %llu bytes)", path,
                                (unsigned long long)dict_off, (unsigned long long)dict_len);
        if (s->compression != FL_COMP_ZSTD)
            return fl_error_set(err, FL_E_FORMAT, "%s: dictionary in an uncompressed shard", path);
        will_need(m, dict_off, dict_len);
        v->dict = m + dict_off;
        v->dict_len = dict_len;
    }
    return 0;
}

/* The footer and the index block it describes (CRC, decompression). */
static int validate_footer(fl_shard_view *v, const char *path, size_t min_fields,
                           fl_index_scratch *scratch, fl_error *err)
{
    const uint8_t *m = v->map;
    uint64_t size = v->size;
    uint32_t version = v->version;
    /* footer */
    if (size < (uint64_t)FL_SHARD_HEADER_SIZE + FL_SHARD_FOOTER_SIZE)
        return fl_error_set(err, FL_E_TRUNCATED, "%s: no footer (unfinished or truncated shard)",
                            path);
    const uint8_t *f = m + size - FL_SHARD_FOOTER_SIZE;
    if (memcmp(f + FLF_MAGIC, FL_SHARD_FOOTER_MAGIC, 8) != 0)
        return fl_error_set(err, FL_E_TRUNCATED,
                            "%s: no valid footer (unfinished or truncated shard)", path);
    uint32_t fcrc = fl_crc32c(0, f, FLF_FOOTER_CRC);
    if (fcrc != fl_rd32(f + FLF_FOOTER_CRC))
        return fl_error_set(err, FL_E_CHECKSUM,
                            "%s: footer checksum mismatch (stored 0x%08x, computed 0x%08x)", path,
                            fl_rd32(f + FLF_FOOTER_CRC), fcrc);
    if (fl_rd32(f + FLF_VERSION) != version)
        return fl_error_set(err, FL_E_VERSION, "%s: footer format version %u, header says %u", path,
                            fl_rd32(f + FLF_VERSION), version);
    uint64_t idx_off = fl_rd64(f + FLF_INDEX_OFFSET), idx_stored = fl_rd64(f + FLF_INDEX_STORED);
    uint64_t idx_size = fl_rd64(f + FLF_INDEX_SIZE), names_size = fl_rd64(f + FLF_NAMES_SIZE);
    uint64_t fcount = fl_rd64(f + FLF_RECORD_COUNT);
    uint32_t flags = fl_rd32(f + FLF_FLAGS);
    uint64_t tail = size - FL_SHARD_FOOTER_SIZE;
    if (fcount != v->count)
        return fl_error_set(err, FL_E_FORMAT, "%s: footer says %llu records, header %llu", path,
                            (unsigned long long)fcount, (unsigned long long)v->count);
    int zindex = (flags & FL_FOOTER_INDEX_ZSTD) != 0;
    /* What the file can justify: a record with an image or a fields block has at least one
     * byte in the data region, so the index (48 bytes a record) is at most 48x the data. */
    uint64_t data_bytes = v->data_end - v->data_offset;
    if ((v->schema.encoding != FL_ENC_NONE || min_fields) &&
        v->count > data_bytes / (min_fields > 1 ? min_fields : 1))
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: %llu records cannot fit in a %llu-byte data region: damaged or "
                            "crafted",
                            path, (unsigned long long)v->count, (unsigned long long)data_bytes);
    /* A compressed block may not claim more than 256x its size (+1 MiB): every entry carries a
     * 4-byte CRC and an offset that differ between records, so a real index compresses about
     * 5-12x (200,000 records: 5.4x); a forged footer cannot make us allocate gigabytes. Names
     * are at most FL_MAX_NAME_BYTES a record. */
    uint64_t raw_cap =
        zindex ? (idx_stored < (1ull << 40) ? idx_stored * 256 + (1u << 20) : 0) : idx_stored;
    if ((flags & ~FL_FOOTER_INDEX_ZSTD) != 0 || v->count > (1ull << 40) ||
        names_size > v->count * FL_MAX_NAME_BYTES || idx_size != v->count * v->entry_size ||
        idx_off != v->data_end || idx_off > tail || idx_stored != tail - idx_off ||
        names_size > raw_cap || idx_size > raw_cap - names_size ||
        (!zindex && idx_size + names_size != idx_stored))
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: corrupt footer (index block %llu+%llu, index %llu, names %llu, "
                            "%llu records, flags 0x%x)",
                            path, (unsigned long long)idx_off, (unsigned long long)idx_stored,
                            (unsigned long long)idx_size, (unsigned long long)names_size,
                            (unsigned long long)v->count, flags);
    will_need(m, idx_off, idx_stored); /* one read-ahead of the index instead of a fault a page */
    uint32_t icrc = fl_crc32c(0, m + idx_off, idx_stored);
    if (icrc != fl_rd32(f + FLF_INDEX_CRC))
        return fl_error_set(err, FL_E_CHECKSUM,
                            "%s: index checksum mismatch (stored 0x%08x, computed 0x%08x)", path,
                            fl_rd32(f + FLF_INDEX_CRC), icrc);
    if (zindex) {
        size_t raw = (size_t)(idx_size + names_size);
        v->names_size = names_size; /* index_bytes() of the block */
        uint8_t *block = scratch ? scratch_get(scratch, raw) : (v->index_heap = index_alloc(raw));
        if (!block)
            return fl_error_set(err, -ENOMEM, "%s: out of memory for the index", path);
        size_t r = ZSTD_decompress(block, raw, m + idx_off, idx_stored);
        if (ZSTD_isError(r) || r != raw)
            return fl_error_set(err, FL_E_FORMAT, "%s: corrupt compressed index (%s)", path,
                                ZSTD_isError(r) ? ZSTD_getErrorName(r) : "wrong size");
        v->index = block;
    } else {
        v->index = m + idx_off;
    }
    v->names = v->index + idx_size;
    v->names_size = names_size;
    return 0;
}

/* Every index entry: payload inside the data region, lengths, labels, names, formats; v3: the
 * fields block inside the stored bytes and at least min_fields long, raw_len checks on the
 * payload part. */
static int validate_entries(fl_shard_view *v, const char *path, size_t min_fields, fl_error *err)
{
    const fl_schema *s = &v->schema;
    uint32_t version = v->version;
    uint64_t names_size = v->names_size;
    uint64_t fixed_raw = 0;
    if (s->encoding == FL_ENC_RAW && s->height)
        fixed_raw = (uint64_t)s->height * s->width * s->channels;
    for (uint64_t i = 0; i < v->count; i++) {
        fl_record_info r;
        uint32_t noff, nlen;
        fl_shard_entry(v, i, &r, &noff, &nlen);
        const char *why = NULL;
        uint32_t payload = r.stored_len - (r.fields_len <= r.stored_len ? r.fields_len : 0);
        if (r.offset < v->data_offset || r.offset > v->data_end ||
            r.stored_len > v->data_end - r.offset)
            why = "payload outside the data region";
        else if (r.stored_len > FL_MAX_RECORD_BYTES || r.raw_len > FL_MAX_RECORD_BYTES)
            why = "record length over 1 GiB";
        else if (r.fields_len > r.stored_len)
            why = "fields block longer than the record";
        else if (version >= 3 && r.fields_len < min_fields)
            why = "fields block shorter than the schema's fixed fields";
        else if (s->compression == FL_COMP_NONE && r.raw_len != payload)
            why = "raw length differs from stored length in an uncompressed shard";
        else if (!fl_raw_len_plausible(r.raw_len, payload))
            why = "raw length beyond what its compressed bytes can hold (4096x + 1 MiB): crafted";
        else if (s->encoding == FL_ENC_NONE && (payload || r.height || r.width))
            why = "a payload or image size in a dataset without images";
        else if (fixed_raw && r.raw_len != fixed_raw)
            why = "raw length does not match the fixed image size";
        else if (s->height && (r.height != s->height || r.width != s->width))
            why = "image size does not match the fixed schema";
        else if (r.label < 0)
            why = "negative label";
        else if (nlen > FL_MAX_NAME_BYTES || noff > names_size || nlen > names_size - noff)
            why = "name outside the names blob";
        else if (version >= 2 && !fl_format_allowed(s->encoding, (uint32_t)r.format))
            why = "record format unknown or not allowed by the schema";
        else if (version == 2 && fl_rd32(v->index + i * v->entry_size + FLI_RESERVED) != 0)
            why = "reserved field is not 0";
        if (why)
            return fl_error_set(
                err, FL_E_FORMAT, "%s: record %llu (global %llu): corrupt index: %s", path,
                (unsigned long long)i, (unsigned long long)(v->first_record + i), why);
        if (r.raw_len > v->max_raw_len)
            v->max_raw_len = r.raw_len;
        if (r.stored_len > v->max_stored_len)
            v->max_stored_len = r.stored_len;
        if (r.fields_len > v->max_fields_len)
            v->max_fields_len = r.fields_len;
    }
    return 0;
}

void fl_shard_drop_index(fl_shard_view *v)
{
    if (!v->map || v->size < FL_SHARD_FOOTER_SIZE)
        return;
    /* [the page holding the index block's start, the end of the file) */
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t page = (uint64_t)(ps > 0 ? ps : 4096);
    uint64_t a = v->data_end / page * page;
    if (a < v->size)
        madvise((void *)(v->map + a), (size_t)(v->size - a), MADV_DONTNEED);
    if (v->index && (v->index < v->map || v->index >= v->map + v->size)) {
        fl_shard_index_free(v, v->index_heap); /* NULL when in a scratch */
        v->index_heap = NULL;
        v->index = NULL;
        v->names = NULL;
    }
}

int fl_shard_index_load(const fl_shard_view *v, uint8_t **out, fl_error *err)
{
    *out = NULL;
    const uint8_t *f = v->map + v->size - FL_SHARD_FOOTER_SIZE;
    uint64_t idx_off = fl_rd64(f + FLF_INDEX_OFFSET), idx_stored = fl_rd64(f + FLF_INDEX_STORED);
    uint64_t idx_size = v->count * v->entry_size;
    if (fl_crc32c(0, f, FLF_FOOTER_CRC) != fl_rd32(f + FLF_FOOTER_CRC) || idx_off != v->data_end ||
        idx_stored != v->size - FL_SHARD_FOOTER_SIZE - idx_off ||
        fl_rd64(f + FLF_INDEX_SIZE) != idx_size || fl_rd64(f + FLF_NAMES_SIZE) != v->names_size)
        return fl_error_set(err, FL_E_FORMAT, "%s: footer changed since the shard was opened",
                            v->path);
    if (fl_crc32c(0, v->map + idx_off, idx_stored) != fl_rd32(f + FLF_INDEX_CRC))
        return fl_error_set(err, FL_E_CHECKSUM, "%s: index changed since the shard was opened",
                            v->path);
    size_t raw = index_bytes(v);
    uint8_t *p = index_alloc(raw);
    if (!p)
        return fl_error_set(err, -ENOMEM, "%s: out of memory for the index", v->path);
    size_t r = ZSTD_decompress(p, raw, v->map + idx_off, idx_stored);
    if (ZSTD_isError(r) || r != raw) {
        fl_shard_index_free(v, p);
        return fl_error_set(err, FL_E_FORMAT, "%s: corrupt compressed index (%s)", v->path,
                            ZSTD_isError(r) ? ZSTD_getErrorName(r) : "wrong size");
    }
    *out = p;
    return 0;
}

static int validate(fl_shard_view *v, const char *path, size_t min_fields,
                    fl_index_scratch *scratch, fl_error *err)
{
    int rc = validate_header(v, path, err);
    if (!rc)
        rc = validate_footer(v, path, min_fields, scratch, err);
    if (!rc)
        rc = validate_entries(v, path, min_fields, err);
    return rc;
}

int fl_shard_open(const char *path, fl_shard_view *v, fl_error *err)
{
    int fd = fl_open_regular_at(AT_FDCWD, path, 0, NULL); /* a FIFO never blocks the open */
    if (fd < 0) {
        memset(v, 0, sizeof *v);
        v->fd = -1;
        if (fd == -EISDIR)
            return fl_error_set(err, FL_E_FORMAT, "%s: not a regular file", path);
        return fl_error_set(err, fd, "%s: cannot open shard: %s", path, strerror(-fd));
    }
    return fl_shard_open_fd(fd, path, v, err);
}

int fl_shard_open_fd(int fd, const char *path, fl_shard_view *v, fl_error *err)
{
    return fl_shard_open_fd_min(fd, path, 0, v, err);
}

int fl_shard_open_fd_min(int fd, const char *path, size_t min_fields, fl_shard_view *v,
                         fl_error *err)
{
    return fl_shard_open_fd_scratch(fd, path, min_fields, NULL, v, err);
}

int fl_shard_open_fd_scratch(int fd, const char *path, size_t min_fields, fl_index_scratch *scratch,
                             fl_shard_view *v, fl_error *err)
{
    memset(v, 0, sizeof *v);
    v->fd = -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fl_error_set(err, -e, "%s: cannot stat shard: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fl_error_set(err, FL_E_FORMAT, "%s: not a regular file", path);
    }
    v->path = strdup(path);
    if (!v->path) {
        close(fd);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    }
    v->fd = fd; /* kept: the loader reads this very file through it (never the path again) */
    v->size = (uint64_t)st.st_size;
    if (v->size == 0) {
        fl_shard_close(v);
        return fl_error_set(err, FL_E_TRUNCATED, "%s: empty shard file (unfinished write?)", path);
    }
    void *m = mmap(NULL, v->size, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    if (m == MAP_FAILED) {
        v->size = 0;
        fl_shard_close(v);
        return fl_error_set(err, -e, "%s: cannot map shard: %s", path, strerror(e));
    }
    v->map = m;
    /* Validation touches the header, the footer and the index (and the dictionary): read only
     * those pages. A fault on a file mapping otherwise reads the device's whole read-ahead window
     * around it (8 MiB on some virtual disks: 12 MiB cached per shard before a single record is
     * read, which O_DIRECT runs then keep for nothing). validate() asks for the index range with
     * MADV_WILLNEED; the mapping goes back to normal read-around afterwards (FL_IO_MMAP reads
     * records through it). */
    madvise(m, v->size, MADV_RANDOM);
    int rc = validate(v, path, min_fields, scratch, err);
    if (rc)
        fl_shard_close(v);
    else
        madvise(m, v->size, MADV_NORMAL);
    return rc;
}
