/* fl_writer.h — write a fastload dataset (shards + manifest, or LMDB) atomically and resumably.
 *
 * Everything is written under "<dst>.partial/"; shards are written as "<name>.tmp", fsync'ed and
 * renamed when complete, so a killed run leaves only complete shards there plus at most one .tmp.
 * fl_writer_finish writes the manifest, fsyncs and publishes "<dst>.partial" as "<dst>": a rename,
 * or, replacing a previous complete dataset (only when `overwrite` is set, and only after the new
 * one is complete), an atomic exchange followed by the deletion of the old dataset's own files.
 * With `resume` set, complete shards already in "<dst>.partial/" are kept and
 * fl_writer_resume_count() says how many records they hold: the caller skips that many records of
 * its (deterministically ordered) input and adds the rest.
 *
 * Page cache: what the writer writes leaves the page cache as it goes (fl_page_cache.h: each
 * shard's chunks are written back and dropped while it is written, the whole shard once fsync'ed;
 * LMDB's data.mdb after each committed batch), so packing a data set bigger than RAM keeps a few
 * MiB cached instead of filling the cache with pages nobody reads back. Durability is unchanged
 * (the same fsyncs). The environment variable FL_WRITER_KEEP_CACHE=1 leaves the pages to the
 * kernel.
 *
 * What the writer touches at <dst> (SPEC.md, "Writing, resuming, publishing"):
 * - "<dst>.lock": an exclusive flock(2) held from open to finish/abort (fl_writer_lock_acquire), so
 *   two writers never share a destination; the kernel drops it when the process dies, so a file
 *   left by a killed run never blocks the next one.
 * - "<dst>" is replaced only when it is a dataset this writer made: a folder whose manifest.json
 *   is a fastload manifest and which holds nothing else than the files that manifest lists (and
 *   LMDB's lock.mdb). Anything else (a user's folder, a file, a link) is refused, untouched.
 * - "<dst>.partial" is cleared or resumed only when every file in it has a name this writer
 *   creates; anything else is refused, untouched.
 *
 * Not thread-safe: one thread adds records, in order. Compression can run on many threads with
 * one fl_compressor each, then fl_writer_add_stored() takes the compressed bytes. */
#ifndef FL_WRITER_H
#define FL_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "fl_dataset.h"
#include "fl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The lock on a destination (see fl_writer_lock_acquire). */
typedef struct fl_writer_lock fl_writer_lock;

typedef struct fl_writer_options {
    fl_backend backend;    /* FL_BACKEND_SHARDS or FL_BACKEND_LMDB */
    fl_schema schema;      /* encoding, compression, channels, fixed size (0 = variable) */
    int zstd_level;        /* compression level when schema.compression == FL_COMP_ZSTD */
    const void *zstd_dict; /* optional dictionary (see fl_zstd_train_dictionary); copied */
    size_t zstd_dict_len;
    uint64_t shard_bytes; /* target shard size in bytes (shards backend); 0 = 256 MiB */
    const char
        *options_json; /* JSON object text recorded in the manifest as "options" (may be NULL) */
    const char *tool_version; /* recorded as "packdata_version" */
    uint32_t part_index;      /* --part I/N: recorded in the manifest; 0/0 when not split */
    uint32_t part_count;
    int resume;           /* keep complete shards of an earlier killed run */
    int overwrite;        /* replace an existing complete <dst> (a dataset of ours) at finish */
    fl_writer_lock *lock; /* the destination's lock, taken by the caller (who releases it
                           * after finish/abort), or NULL: open takes it, finish/abort release it */
    const void *plan;     /* what the job is (e.g. its options and input list), saved in
                           * "<dst>.partial/plan.txt" when the partial dataset is created; a
                           * resume requires the same bytes. NULL: nothing saved or checked */
    size_t plan_len;
    const fl_field *fields; /* the record's fields (fl_fields.h), schema order, copied; NULL/0:
                             * the classic [image "image", int "label"]. A classic list writes
                             * format version 2 exactly as without fields; any other writes
                             * version 3 (each record's fields block: fl_writer_add_record).
                             * An image field exactly when schema.encoding != FL_ENC_NONE.
                             * max_count is ignored: the writer records the largest count of
                             * each variable field in the manifest */
    uint32_t num_fields;
} fl_writer_options;

/* One record for fl_writer_add_record. */
typedef struct fl_record_in {
    fl_encoding format; /* the payload's format (as fl_writer_add_as); FL_ENC_NONE in a
                         * dataset without images (then stored_len 0, height = width = 0) */
    const void *stored; /* the payload: as is, or a zstd frame when `compressed` */
    size_t stored_len;
    size_t raw_len;           /* payload bytes uncompressed (used when `compressed`) */
    int compressed;           /* stored was compressed by an fl_compressor with this writer's
                               * dictionary (fl_writer_dictionary); else the writer compresses it
                               * when the schema says zstd */
    const void *fields_block; /* fl_fields_encode's output for this record (NULL/0 in a classic
                               * dataset) */
    size_t fields_len;
    int32_t label;          /* the label field's value (>= 0); ignored (stored as 0) when the
                             * schema has no INT field */
    const char *name;       /* source name, NUL-terminated (may be NULL) */
    uint32_t height, width; /* the image's decoded size (0, 0 without an image) */
} fl_record_in;

typedef struct fl_writer fl_writer;

/* Start writing the dataset that will appear at `dst`. A fresh run chooses the dataset's random
 * 16-byte id (getrandom; the environment variable FL_DATASET_ID, 32 hex digits, fixes it for
 * byte-identical packs); a resumed run keeps the id of the run it continues.  Without `resume`, an
 * existing
 * "<dst>.partial/" is cleared. With `resume`, it is reused only if it was started with the same
 * backend, schema and zstd level and the same opt->plan (else FL_E_INVALID); its saved
 * dictionary replaces opt->zstd_dict. Trailing slashes of dst are ignored. The lock is taken first
 * (unless opt->lock is given), then <dst> and <dst>.partial are checked. Errors: -EBUSY (another
 * process writes dst: "DST is being written by process N"), -EEXIST (dst exists and !overwrite),
 * -ENOENT/-ENOTDIR ("cannot create DST: parent folder P does not exist"), other -errno from
 * mkdir/open, FL_E_INVALID (dst is "", "/", "." or ".."; dst or dst.partial exists but is not
 * ours: the message names the path or the first foreign file; bad schema, level, part,
 * options_json not a JSON object, resume mismatch), FL_E_FORMAT (options_json is not JSON,
 * unreadable partial state), FL_E_LMDB. */
FL_API int fl_writer_open(const char *dst, const fl_writer_options *opt, fl_writer **out,
                          fl_error *err);

/* Records already durably written by an earlier run (0 unless resuming). */
FL_API uint64_t fl_writer_resume_count(const fl_writer *w);

/* The dictionary in use (the one stored by the earlier run when resuming), or NULL. */
FL_API const void *fl_writer_dictionary(const fl_writer *w, size_t *len);

/* Append one record. `payload` is the uncompressed payload (JPEG/PNG bytes or raw HWC pixels);
 * the writer compresses it when the schema says so. `name` is the source name (NUL-terminated).
 * `height`/`width` are the image's decoded size. Errors: -ENOSPC/-EIO/-EFBIG (nothing complete
 * is lost; every later call fails the same way: abort, then resume), FL_E_INVALID (raw payload
 * size != height*width*channels, size differs from a fixed schema, name over 4096 bytes, record
 * over 1 GiB), FL_E_LABEL (negative label), FL_E_LMDB. Record-level refusals (INVALID, LABEL)
 * leave the writer usable. */
FL_API int fl_writer_add(fl_writer *w, const void *payload, size_t len, int32_t label,
                         const char *name, uint32_t height, uint32_t width, fl_error *err);

/* fl_writer_add for a record in its own format: `format` is FL_ENC_JPEG, FL_ENC_PNG or
 * FL_ENC_WEBP in a dataset whose schema encoding is FL_ENC_MIXED; with any other schema it must
 * equal the schema's encoding. The format is stored in the record's index entry (format version
 * 2) and read back as fl_record_info.format. fl_writer_add(w, ...) is
 * fl_writer_add_as(w, schema encoding, ...), so a mixed dataset needs fl_writer_add_as.
 * Errors: as fl_writer_add, FL_E_INVALID for a format the schema does not allow (the writer stays
 * usable). */
FL_API int fl_writer_add_as(fl_writer *w, fl_encoding format, const void *payload, size_t len,
                            int32_t label, const char *name, uint32_t height, uint32_t width,
                            fl_error *err);

/* Append one record whose payload was already compressed (by an fl_compressor using the same
 * dictionary); raw_len is the uncompressed size. */
FL_API int fl_writer_add_stored(fl_writer *w, const void *stored, size_t stored_len, size_t raw_len,
                                int32_t label, const char *name, uint32_t height, uint32_t width,
                                fl_error *err);

/* fl_writer_add_stored for a record in its own format (as fl_writer_add_as). */
FL_API int fl_writer_add_stored_as(fl_writer *w, fl_encoding format, const void *stored,
                                   size_t stored_len, size_t raw_len, int32_t label,
                                   const char *name, uint32_t height, uint32_t width,
                                   fl_error *err);

/* Append one record with its fields block: the block is parsed as a reader will
 * (fl_fields_parse) and checked against the image (boxes inside height x width, masks of that
 * size, `of` lists as long as their boxes); each variable field's largest count goes to the
 * manifest's max_count. Stored bytes = payload (compressed when the schema says zstd) then the
 * block, one CRC32C over both. Errors: as fl_writer_add_stored_as; FL_E_INVALID naming the record
 * and field for a bad block (the writer stays usable), a block in a classic dataset, a compressed
 * payload in an uncompressed dataset. */
FL_API int fl_writer_add_record(fl_writer *w, const fl_record_in *r, fl_error *err);

/* Finish: close the last shard, write the manifest with the class names (label order), fsync,
 * publish (rename, or exchange with the old dataset and delete its files), release the lock open
 * took. Frees `w` whatever the outcome. Errors: FL_E_LABEL (a label >= num_classes was added;
 * num_classes 0 skips the check), -EEXIST (dst appeared and !overwrite), FL_E_INVALID (dst is no
 * longer a dataset of ours: the partial dataset stays resumable), -errno, FL_E_LMDB; on error
 * <dst> is untouched. */
FL_API int fl_writer_finish(fl_writer *w, const char *const *class_names, uint32_t num_classes,
                            fl_error *err);

/* Stop without finishing (error path): closes files, deletes the open .tmp shard, leaves complete
 * shards (LMDB: commits the queued batch) for --resume, frees `w`. */
FL_API void fl_writer_abort(fl_writer *w);

/* ---- the destination ------------------------------------------------------------------------ */

/* Lock `dst` for writing: an exclusive, non-blocking flock(2) on "<dst>.lock" (created beside
 * dst, holding the holder's pid). Take it before looking at dst or dst.partial; hold it until the
 * dataset is published or given up. Errors: -EBUSY ("DST is being written by process N"),
 * FL_E_INVALID (dst is "", "/", "." or ".."; "<dst>.lock" exists and is not a lock file: a
 * directory, a link, or a file holding something else than a pid), -ENOENT/-ENOTDIR ("cannot
 * create DST: parent folder P does not exist"), other -errno. */
FL_API int fl_writer_lock_acquire(const char *dst, fl_writer_lock **out, fl_error *err);
/* Remove "<dst>.lock" and release the lock. NULL is a no-op. */
FL_API void fl_writer_lock_release(fl_writer_lock *lock);

typedef enum fl_dst_kind {
    FL_DST_NONE = 0, /* nothing there, or an empty folder (publication removes it first) */
    FL_DST_DATASET,  /* a dataset this writer made (replaceable with overwrite) */
    FL_DST_OTHER     /* something else: never touched (`why` says what) */
} fl_dst_kind;

typedef enum fl_partial_kind {
    FL_PARTIAL_NONE = 0,  /* no "<dst>.partial" */
    FL_PARTIAL_RESUMABLE, /* a run's state is there (`plan`: the plan it recorded, or NULL) */
    FL_PARTIAL_STALE,     /* ours, not resumable (interrupted clear or publication): cleared */
    FL_PARTIAL_OTHER      /* holds files we did not write: never touched (`partial_why`) */
} fl_partial_kind;

typedef struct fl_writer_dst_info {
    fl_dst_kind dst;
    uint64_t records; /* FL_DST_DATASET: its manifest's record count */
    char why[1024];   /* FL_DST_OTHER: "<dst> is not a fastload dataset (no manifest.json)",
                       * "<dst> holds <dst>/x, which is not part of the dataset", ... */
    fl_partial_kind partial;
    char partial_why[1024]; /* FL_PARTIAL_OTHER: names the first foreign file */
    char *plan;             /* FL_PARTIAL_RESUMABLE: plan.txt (malloc'ed, NUL-terminated) or NULL */
    size_t plan_len;
} fl_writer_dst_info;

/* Say what is at `dst` and "<dst>.partial" (call with the lock held). Free with
 * fl_writer_dst_info_free. Errors: FL_E_INVALID (bad dst, as fl_writer_lock_acquire), -errno. */
FL_API int fl_writer_inspect(const char *dst, fl_writer_dst_info *info, fl_error *err);
FL_API void fl_writer_dst_info_free(fl_writer_dst_info *info);

/* Delete "<dst>.partial" if it holds only files of ours (call with the lock held); 0 when there
 * is none. Errors: FL_E_INVALID (it holds other files: nothing removed), -errno. */
FL_API int fl_writer_remove_partial(const char *dst, fl_error *err);

/* Train a zstd dictionary of at most dict_cap bytes from `n` samples laid end to end in
 * `samples` (sizes[i] bytes each). On success *dict_len is the dictionary size.
 * Guidance: a few thousand samples and 16-64 KiB of dictionary; for Fashion-MNIST, 10,000 images
 * and 64 KiB at level 19 store records in 55% of their raw bytes (SPEC.md).
 * Errors: FL_E_INVALID (too few or too uniform samples: zstd's message is included). */
FL_API int fl_zstd_train_dictionary(const void *samples, const size_t *sizes, unsigned n,
                                    void *dict, size_t dict_cap, size_t *dict_len, fl_error *err);

/* One thread's zstd compression context bound to a level and an optional dictionary. Frames are
 * written without content size, checksum or dictionary ID (the index has raw_len and a CRC32C),
 * exactly as fl_writer_add writes them, so fl_writer_add_stored accepts its output. */
typedef struct fl_compressor fl_compressor;
FL_API int fl_compressor_create(int level, const void *dict, size_t dict_len, fl_compressor **out,
                                fl_error *err);
/* Worst-case compressed size of `len` bytes. */
FL_API size_t fl_compress_bound(size_t len);
FL_API int fl_compressor_compress(fl_compressor *c, const void *src, size_t len, void *dst,
                                  size_t cap, size_t *out_len, fl_error *err);
FL_API void fl_compressor_free(fl_compressor *c);

#ifdef __cplusplus
}
#endif
#endif
