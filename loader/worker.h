/* worker.h — a decode worker and the narrow context it works in: the dataset and its readers'
 * descriptors, the order plan and augmentation (read-only), the batch ring (ring.h) and the
 * batches its slots hold. Workers never see the rest of the loader. Internal. */
#ifndef FL_WORKER_H
#define FL_WORKER_H

#include <pthread.h>
#include <stdint.h>

#include "augment.h"
#include "block_reader.h"
#include "budget.h"
#include "fastload.h"
#include "fl_clock.h"
#include "fl_image.h"
#include "order.h"
#include "reader.h"
#include "ring.h"

/* Stage timers and counters: each worker keeps running totals and publishes them once per run
 * of samples (fl_worker_stats reads them from another thread), so the hot path touches no shared
 * counter and takes no lock for them. */
typedef struct fl_stage_stats {
    uint64_t bytes_read;
    double io_wait_s, decode_s, augment_s, slot_wait_s;
} fl_stage_stats;

/* One shard file read into memory (FL_IO_MEMORY): len bytes read, cap bytes mapped. */
typedef struct fl_shard_copy {
    uint8_t *p;
    size_t len, cap;
} fl_shard_copy;

/* Where one schema field goes in a batch (fl_batch_field): bytes per sample of its data and,
 * for the variable types, the rows each sample has room for (max_count) and their size. */
typedef struct fl_field_out {
    size_t sample_bytes;
    uint32_t rows;    /* variable fields: M (>= 1); else 0 */
    size_t row_bytes; /* variable fields: bytes per row */
} fl_field_out;

/* What every worker reads; set up by the loader before the workers start, constant after. */
typedef struct fl_work_ctx {
    fl_dataset *ds;
    fl_schema schema;
    fl_backend backend;
    const fl_order_plan *plan;
    const fl_aug_config *aug;
    fl_ring *ring;
    fl_batch **batches; /* the batch of each ring slot (ring->nslots) */
    uint32_t out_h, out_w, out_c;
    size_t sample_bytes; /* out_h * out_w * out_c */
    uint32_t batch_size;
    uint32_t chunk; /* samples a worker claims at once (the ring's run) */
    fl_on_corrupt on_corrupt;
    uint32_t decode_flags;
    int direct;               /* reads are O_DIRECT */
    int read_in_place;        /* raw, uncompressed, unchanged samples: read (or, mapped, copied
                                 with a fused CRC) straight into the batch */
    int mapped;               /* records come from memory: the dataset's mapping (LMDB, FL_IO_MMAP)
                                 or the loader's copy (FL_IO_MEMORY, mem != NULL) */
    const int *fds;           /* not mapped: the readers' descriptor of each shard */
    const fl_shard_copy *mem; /* FL_IO_MEMORY: each shard file's bytes (memory_reader.c) */
    uint32_t nmem;
    int drop_behind;         /* buffered reads: POSIX_FADV_DONTNEED each record once used */
    fl_block_reader *blocks; /* quasi order with coalesced extent reads (block_reader.h), or
                                NULL: each record is read on its own by the worker's reader */
    /* Fields. fields_on: the schema has more than an image and a label (a fields block to
     * deliver, or no image); a classification data set takes the path above, untouched. */
    int fields_on;
    uint32_t nfields;
    const fl_field *fields;   /* the schema (fl_dataset_fields) */
    const fl_field_out *fout; /* nfields entries */
    int has_image;            /* 0: FL_ENC_NONE, the records are their fields only */
    int label_field;          /* index of the label field (its values are fl_batch.labels), -1 */
    int object_boxes;         /* FL_AUG_OBJECT_CROP: the BOXES field whose centres it keeps */
    float box_min_visible;
    fl_budget *budget;          /* decode memory shared by the workers */
    struct fl_jidx_cache *jidx; /* JPEG entry-point indexes per record (jpeg_index_cache.h) */
} fl_work_ctx;

typedef struct fl_worker {
    const fl_work_ctx *ctx;
    pthread_t thread;
    uint32_t id;
    fl_reader *reader; /* not mapped: the worker's reader (the loader creates it) */
    fl_decoder *dec;
    uint8_t *payload; /* decompression scratch: max_raw_len */
    size_t payload_cap;
    uint8_t *conv; /* channel conversion of a raw crop (grow-only) */
    size_t conv_cap;
    uint8_t *rs; /* fl_resize scratch (grow-only) */
    size_t rs_cap;
    uint8_t *sync_buf;     /* aligned, max_stored_len: replacement reads (FL_CORRUPT_SKIP); mapped
                            * loaders: the copy of the record at hand (load_mapped) */
    fl_read_req *reqs;     /* reads of the worker's two chunks (2 × chunk) */
    fl_record_info *infos; /* their index entries (2 × chunk) */
    /* fields scratch (fields_on only), sized at init except the decoded mask */
    fl_field_value *vals;  /* nfields parsed values of the sample at hand */
    uint32_t **keep;       /* per BOXES field: source rows of its kept boxes (max_count) */
    uint32_t *nkept;       /* per field: boxes kept */
    float *boxes;          /* FL_AUG_OBJECT_CROP: the sample's boxes, aligned (max_count) */
    uint32_t *xmap, *ymap; /* output column / row → source (out_w, out_h) */
    uint8_t *mask;         /* a decoded mask at source size (grow-only) */
    uint8_t *jidx;         /* the record's JPEG entry-point index, copied from the cache */
    size_t jidx_cap;
    size_t mask_cap;
    fl_mask_decoder *maskdec; /* reused for every mask (made on first use) */
    fl_stage_stats st;        /* running totals (this thread only) */
    fl_stage_stats pub;       /* their last published copy (relaxed atomic stores and loads) */
} fl_worker;

/* Allocate a worker's buffers and decoder. Errors: -ENOMEM, those of fl_decoder_create. */
int fl_worker_init(fl_worker *w, const fl_work_ctx *ctx, uint32_t id, fl_error *err);
/* Free them (and the reader, when set). */
void fl_worker_free(fl_worker *w);
/* Thread entry: claims runs of samples from the ring until it stops. */
void *fl_worker_main(void *arg);
/* Add the worker's published totals to *sum (any thread). */
void fl_worker_stats(const fl_worker *w, fl_stage_stats *sum);

/* Stored bytes of record idx in the in-memory copy (FL_IO_MEMORY, memory_reader.c);
 * FL_E_TRUNCATED, naming shard and record, when the file was shorter than its index. */
int fl_memory_record(const fl_work_ctx *ctx, uint64_t idx, const fl_record_info *info,
                     const uint8_t **data, fl_error *err);

#endif
