/* loader_internal.h — the loader's private state shared by loader.c (life cycle, batch ring,
 * consumer side), worker.c (decode workers) and options.c. Not installed. */
#ifndef FL_LOADER_INTERNAL_H
#define FL_LOADER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "augment.h"
#include "fastload.h"
#include "fl_clock.h"
#include "fl_image.h"
#include "order.h"
#include "pinned.h"
#include "reader.h"

enum { SLOT_FREE = 0, SLOT_FILLING = 1, SLOT_READY = 2, SLOT_HELD = 3 };
#define FL_NO_ERROR_K UINT32_MAX

/* Stage timers and counters; each worker keeps its own and adds them to the loader's under the
 * lock once per chunk, so the hot path never touches shared counters. */
typedef struct fl_stage_stats {
    uint64_t bytes_read;
    uint64_t skipped;
    double io_wait_s, decode_s, augment_s, slot_wait_s;
} fl_stage_stats;

typedef struct fl_slot {
    fl_batch b;            /* what the caller sees; must stay the first member */
    int state;             /* SLOT_* (under L->mu) */
    uint64_t ticket;       /* absolute batch number: epoch * batches_per_epoch + batch */
    uint32_t claimed;      /* samples handed to workers */
    uint32_t done;         /* samples finished */
    uint32_t err_k;        /* lowest sample index that failed (FL_NO_ERROR_K: none) */
    fl_error err;          /* its error */
    uint8_t *host;         /* images then labels, one host allocation */
    size_t host_bytes;
    int host_pinned;
    void *dev_images, *dev_labels, *event;
} fl_slot;

typedef struct fl_worker fl_worker;

/* One shard file read into memory (FL_IO_MEMORY): len bytes read, cap bytes mapped. */
typedef struct fl_shard_copy {
    uint8_t *p;
    size_t len, cap;
} fl_shard_copy;
typedef struct fl_chunk fl_chunk;

struct fl_loader {
    fl_loader_options opt;
    fl_dataset *ds;
    fl_schema schema;
    fl_backend backend;
    fl_order_plan plan;
    fl_aug_config aug;
    uint32_t out_h, out_w, out_c;
    size_t sample_bytes;   /* out_h * out_w * out_c */
    uint32_t chunk;        /* samples a worker claims at once */
    int direct;            /* effective O_DIRECT */
    int read_in_place;     /* raw, uncompressed, unchanged samples: read (or, mapped, copied
                              with a fused CRC) straight into the batch */
    int mapped;            /* records come from memory: the dataset's mapping (LMDB, FL_IO_MMAP)
                              or the loader's own copy (FL_IO_MEMORY, mem != NULL) */
    fl_shard_copy *mem;    /* FL_IO_MEMORY: each shard file's bytes (memory_reader.c) */
    uint32_t nmem;

    uint64_t *perm;        /* sequence of the epoch perm_epoch (n entries) */
    uint64_t perm_epoch;

    uint32_t nslots;
    fl_slot *slots;

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* workers: a slot became free, or stop */
    pthread_cond_t done_cv; /* consumer: a slot became ready */
    int mu_init;
    int stop;
    int failed;
    fl_error fail_err;
    fl_slot *fill_slot;     /* slot whose samples are being claimed (NULL: none) */
    uint64_t fill_next;     /* next ticket to assign to a slot */
    uint64_t next_ticket;   /* next ticket the consumer gets */

    uint32_t nworkers;
    uint32_t nstarted;
    fl_worker *workers;

    int *fds;
    uint32_t nfds;

    fl_cuda cuda;
    int cuda_ok;            /* runtime loaded and a device present */
    int dev_on;             /* device mode active */
    void *stream;

    fl_stage_stats st;      /* summed worker stats (under mu) */
    uint64_t images, batches, skipped; /* delivered to the consumer */
    double consumer_wait_s;
    double t_create;
    const char *io_backend;
};

struct fl_worker {
    fl_loader *L;
    pthread_t thread;
    uint32_t id;
    fl_reader *reader;      /* shards backend */
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
    fl_stage_stats st;
};

int fl_loader_options_check(const fl_loader_options *o, fl_error *err);

/* FL_IO_MEMORY (memory_reader.c). FL_IO_AUTO picks it (fl_memory_auto returns 1) for shard
 * datasets of raw pixels of at most opt->memory_max bytes, by default FL_MEMORY_AUTO_MAX or 1/16
 * of physical memory, the smaller. */
#define FL_MEMORY_AUTO_MAX (256ull << 20)
int fl_memory_auto(const fl_loader_options *opt, const fl_schema *schema, uint64_t dataset_bytes);
/* Read every shard file into the loader's memory (L->mem). */
int fl_memory_load(fl_loader *L, fl_error *err);
/* Stored bytes of record idx in the copy; FL_E_TRUNCATED (naming shard and record) when the
 * file was shorter than its index. */
int fl_memory_record(const fl_loader *L, uint64_t idx, const fl_record_info *info,
                     const uint8_t **data, fl_error *err);
void fl_memory_free(fl_loader *L);

/* Worker thread entry (worker.c). */
void *fl_worker_main(void *arg);
/* Allocate a worker's buffers and decoder (worker.c). */
int fl_worker_init(fl_worker *w, fl_loader *L, uint32_t id, fl_error *err);
void fl_worker_free(fl_worker *w);

#endif
