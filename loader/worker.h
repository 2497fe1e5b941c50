/* worker.h — a decode worker and the narrow context it works in: the dataset and its readers'
 * descriptors, the order plan and augmentation (read-only), the batch ring (ring.h) and the
 * batches its slots hold. Workers never see the rest of the loader. Internal. */
#ifndef FL_WORKER_H
#define FL_WORKER_H

#include <pthread.h>
#include <stdint.h>

#include "augment.h"
#include "block_reader.h"
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

/* What every worker reads; set up by the loader before the workers start, constant after. */
typedef struct fl_work_ctx {
    fl_dataset *ds;
    fl_schema schema;
    fl_backend backend;
    const fl_order_plan *plan;
    const fl_aug_config *aug;
    fl_ring *ring;
    fl_batch **batches;    /* the batch of each ring slot (ring->nslots) */
    uint32_t out_h, out_w, out_c;
    size_t sample_bytes;   /* out_h * out_w * out_c */
    uint32_t batch_size;
    uint32_t chunk;        /* samples a worker claims at once (the ring's run) */
    fl_on_corrupt on_corrupt;
    uint32_t decode_flags;
    int direct;            /* reads are O_DIRECT */
    int read_in_place;     /* raw, uncompressed, unchanged samples: read (or, mapped, copied
                              with a fused CRC) straight into the batch */
    int mapped;            /* records come from memory: the dataset's mapping (LMDB, FL_IO_MMAP)
                              or the loader's copy (FL_IO_MEMORY, mem != NULL) */
    const int *fds;        /* not mapped: the readers' descriptor of each shard */
    const fl_shard_copy *mem; /* FL_IO_MEMORY: each shard file's bytes (memory_reader.c) */
    uint32_t nmem;
    int drop_behind;          /* buffered reads: POSIX_FADV_DONTNEED each record once used */
    fl_block_reader *blocks;  /* quasi order with coalesced extent reads (block_reader.h), or
                                 NULL: each record is read on its own by the worker's reader */
} fl_work_ctx;

typedef struct fl_worker {
    const fl_work_ctx *ctx;
    pthread_t thread;
    uint32_t id;
    fl_reader *reader;      /* not mapped: the worker's reader (the loader creates it) */
    fl_decoder *dec;
    uint8_t *payload;       /* decompression scratch: max_raw_len */
    size_t payload_cap;
    uint8_t *conv;          /* channel conversion of a raw crop (grow-only) */
    size_t conv_cap;
    uint8_t *rs;            /* fl_resize scratch (grow-only) */
    size_t rs_cap;
    uint8_t *sync_buf;      /* aligned buffer for replacement reads (FL_CORRUPT_SKIP) */
    fl_read_req *reqs;      /* reads of the worker's two chunks (2 × chunk) */
    fl_record_info *infos;  /* their index entries (2 × chunk) */
    fl_stage_stats st;      /* running totals (this thread only) */
    fl_stage_stats pub;     /* their last published copy (relaxed atomic stores and loads) */
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
