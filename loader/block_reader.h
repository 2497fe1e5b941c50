/* block_reader.h — coalesced reads for the quasi-random order: the records of each quasi block
 * are read as a few large aligned extents (consecutive records of one shard, up to
 * FL_EXTENT_MAX bytes each) by one I/O thread that walks the epoch's sequence ahead of the
 * workers (at most two quasi windows past the furthest sample they asked for, and within the
 * byte budget), so every page of the data set is read once per epoch however many records share
 * it, and the reads are as large as the device likes. An extent stays in memory until the last
 * of this rank's samples in it has been used (the quasi window bounds that: every block of a
 * window is used up within the window), then its buffer is reused. Internal. */
#ifndef FL_BLOCK_READER_H
#define FL_BLOCK_READER_H

#include <stdint.h>

#include "fl_dataset.h"
#include "order.h"

#define FL_EXTENT_MAX (1u << 20)  /* bytes per coalesced read (an outsized record: its own) */
#define FL_EXTENT_GAP (64u << 10) /* a larger hole between records starts a new extent */

typedef struct fl_block_reader fl_block_reader;

typedef struct fl_block_config {
    const fl_dataset *ds;
    const int *fds;            /* readers' descriptor of each shard */
    const fl_order_plan *plan; /* FL_ORDER_QUASI */
    uint64_t first_ticket;     /* the first batch the loader hands out (resume) */
    int direct;                /* fds are O_DIRECT: spans aligned to FL_DIRECT_ALIGN */
    int drop_behind;           /* buffered: POSIX_FADV_DONTNEED each extent once read */
    uint32_t depth;            /* extent reads in flight */
    uint64_t budget;           /* bytes of extents read ahead of the workers' needs */
} fl_block_config;

/* Bytes of extent buffers the plan's quasi window holds at most (its records' aligned spans,
 * estimated from the data set's mean stored record): the memory the reader needs. */
uint64_t fl_block_window_bytes(const fl_dataset *ds, const fl_order_plan *plan, int direct);

/* Build the extent table and start the I/O thread. Errors: -ENOMEM, io_uring_queue_init's. */
int fl_block_reader_create(const fl_block_config *cfg, fl_block_reader **out, fl_error *err);

/* The stored bytes of record idx, used at sample position `seq` of the rank's sequence (ticket ×
 * batch + k) in `epoch`: waits until its extent is read. Returns 0 with *data valid until
 * fl_block_reader_put, or the read's -errno / FL_E_TRUNCATED (file shorter than its index) /
 * FL_E_CANCELLED (stopped). Each successful or failed get is followed by one put. */
int fl_block_reader_get(fl_block_reader *br, uint64_t epoch, uint64_t seq, uint64_t idx,
                        const fl_record_info *info, const uint8_t **data);
void fl_block_reader_put(fl_block_reader *br, uint64_t epoch, uint64_t idx);

/* Bytes read from the files so far (any thread). */
uint64_t fl_block_reader_bytes(const fl_block_reader *br);

/* Wake every waiter with FL_E_CANCELLED and stop the thread (before joining the workers). */
void fl_block_reader_stop(fl_block_reader *br);
void fl_block_reader_destroy(fl_block_reader *br);

#endif
