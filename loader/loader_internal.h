/* loader_internal.h — the loader's private state shared by loader.c (life cycle, consumer side),
 * memory_reader.c and options.c. Workers see only fl_work_ctx (worker.h); the slot states live
 * in the ring (ring.h). Not installed. */
#ifndef FL_LOADER_INTERNAL_H
#define FL_LOADER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "augment.h"
#include "budget.h"
#include "fastload.h"
#include "fl_clock.h"
#include "fl_image.h"
#include "jpeg_index_cache.h"
#include "order.h"
#include "pinned.h"
#include "reader.h"
#include "ring.h"
#include "worker.h"

/* A ring slot's memory: the batch the caller sees and the buffers behind it. Which slot is
 * free, filling, ready or held is the ring's business (ring.h). */
typedef struct fl_slot {
    fl_batch b;    /* what the caller sees; must stay the first member */
    uint8_t *host; /* images, labels, then the other fields' arrays (each 64-byte
                      aligned): one host allocation */
    size_t host_bytes;
    size_t fields_off; /* where the other fields' arrays begin in host */
    int host_pinned;
    fl_batch_field *fields; /* b.fields */
    void *dev_images, *dev_labels, *event;
    void *dev_fields; /* device copy of host[fields_off, host_bytes) */
} fl_slot;

struct fl_loader {
    fl_loader_options opt;
    fl_dataset *ds;
    fl_schema schema;
    fl_backend backend;
    fl_order_plan plan;
    fl_aug_config aug;
    uint32_t out_h, out_w, out_c;
    size_t sample_bytes; /* out_h * out_w * out_c */
    uint32_t nfields;    /* the schema (fl_dataset_fields) and where each field goes */
    const fl_field *fields;
    fl_field_out *fout;
    int fields_on; /* see fl_work_ctx */
    int image_field, label_field, object_boxes;
    uint32_t chunk;     /* samples a worker claims at once */
    int direct;         /* effective O_DIRECT */
    int read_in_place;  /* see fl_work_ctx */
    int mapped;         /* see fl_work_ctx */
    fl_shard_copy *mem; /* FL_IO_MEMORY: each shard file's bytes (memory_reader.c) */
    uint32_t nmem;

    /* assign_batch's cache (loader.c): the sequence of epoch perm_epoch (n entries); only
     * touched from the ring's assign callback, which the ring's lock serialises */
    fl_perm perm;
    uint64_t perm_epoch;

    uint32_t nslots;
    fl_slot *slots;
    fl_batch **batches; /* &slots[i].b, the workers' view */
    fl_ring ring;       /* slot states; its own lock */
    int ring_init;
    fl_budget budget; /* decode memory shared by the workers (budget.h); its own lock */
    int budget_init;
    fl_jidx_cache jidx; /* JPEG entry-point indexes (jpeg_index_cache.h) */
    fl_work_ctx ctx; /* what the workers see */

    uint32_t nworkers;
    uint32_t nstarted;
    fl_worker *workers;

    int *fds;
    uint32_t nfds;

    fl_cuda cuda;
    int cuda_ok; /* runtime loaded and a device present */
    int dev_on;  /* device mode active */
    void *stream;

    double t_create;
    const char *io_backend;
    fl_block_reader *blocks; /* quasi order's coalesced extent reads (block_reader.h) or NULL */
    int drop_behind;         /* buffered reads of a data set larger than the expected page cache:
                                POSIX_FADV_DONTNEED behind each read */
    uint64_t cache_expect;   /* page cache the run can expect (io_auto.c), bytes */
    char io_reason[256];     /* how records are read and why (fl_loader_io_describe) */
};

int fl_loader_options_check(const fl_loader_options *o, fl_error *err);

/* io_auto.c: bytes of page cache the process can expect to keep, the smaller of MemAvailable
 * and its cgroup's memory limit less the group's non-cache usage (v1 and v2, ancestors
 * included); *why names which ("MemAvailable", "cgroup memory limit"). `root` stands in for
 * "/" (tests point it at fake /proc and /sys/fs/cgroup trees); fl_page_cache_root() is
 * $FL_PROC_ROOT or "". */
uint64_t fl_page_cache_expect(const char *root, const char **why);
const char *fl_page_cache_root(void);
/* io_auto.c: loader processes on this node sharing its memory, from the launcher's environment
 * (LOCAL_WORLD_SIZE of torchrun, OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS,
 * SLURM_NTASKS_PER_NODE; the first set), 1 when none is. Private buffers sized from the page
 * cache (the quasi extents) take their share of it. */
uint32_t fl_local_ranks(void);

/* FL_IO_MEMORY (memory_reader.c). FL_IO_AUTO picks it (fl_memory_auto returns 1) for shard
 * datasets of raw pixels of at most opt->memory_max bytes, by default FL_MEMORY_AUTO_MAX or 1/16
 * of physical memory, the smaller. */
#define FL_MEMORY_AUTO_MAX (256ull << 20)
int fl_memory_auto(const fl_loader_options *opt, const fl_schema *schema, uint64_t dataset_bytes);
/* Read every shard file into the loader's memory (L->mem; fl_memory_record in worker.h reads
 * a record from it). */
int fl_memory_load(fl_loader *L, fl_error *err);
void fl_memory_free(fl_loader *L);

#endif
