/* reader.h — the per-worker record reader interface shared by the io_uring reader and the pread
 * fallback: queue a group of reads into the reader's own buffers (one aligned arena, one slot per
 * read in flight), queue the next group while the first is being processed, and hand each record
 * of a group to a callback as soon as it is complete. Internal. */
#ifndef FL_READER_H
#define FL_READER_H

#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"

#define FL_DIRECT_ALIGN 4096u

typedef struct fl_read_req {
    int fd;
    uint64_t offset;     /* record's first byte in the file */
    uint32_t len;        /* record length */
    uint32_t tag;        /* caller's (e.g. the sample's slot in the batch) */
    uint8_t *dst;        /* optional: read straight here instead of into the reader's buffer
                            (buffered reads only: no alignment is required of dst) */
    const uint8_t *data; /* out: the record's bytes inside the reader's buffer (valid in cb) */
    int res;             /* out: 0, -errno, or FL_E_TRUNCATED when the file ended early */
    /* private to the reader */
    uint64_t span_off; /* first byte read (aligned down for O_DIRECT) */
    uint32_t span_len; /* bytes needed from span_off */
    uint32_t got;
    uint32_t slot;     /* arena slot (registered buffer index) */
    uint8_t done;      /* the read finished (res set) */
    uint8_t delivered; /* handed to the callback */
    uint8_t *buf;
} fl_read_req;

/* Called once per request, in completion order, from the thread draining its group. */
typedef void (*fl_read_cb)(void *user, fl_read_req *req);

typedef struct fl_reader fl_reader;
struct fl_reader {
    /* Queue reqs[0..n) into arena slots first_slot .. first_slot+n-1 (<= depth); the requests
     * must stay in place until drained. io_uring starts the reads (buffered reads of cached
     * pages complete inside this call: that time is added to *io_wait_s); pread only records
     * them. Groups using disjoint slots may be queued before the earlier one is drained. */
    void (*submit)(fl_reader *r, fl_read_req *reqs, unsigned n, unsigned first_slot,
                   double *io_wait_s);
    /* Wait for every request of a submitted group, calling cb for each as it completes
     * (completions of other groups seen meanwhile are kept for their own drain). Adds the time
     * blocked to *io_wait_s and the bytes read to *bytes. Returns 0, or a negative code when
     * the reader itself failed (the group's requests not yet delivered then reach cb with it). */
    int (*drain)(fl_reader *r, fl_read_req *reqs, unsigned n, fl_read_cb cb, void *user,
                 double *io_wait_s, uint64_t *bytes);
    void (*destroy)(fl_reader *r);
    const char *name; /* "io_uring" or "pread" */
    int registered;   /* io_uring: the arena is registered (fixed-buffer reads) */
    unsigned depth;
    int direct;       /* reads are aligned to FL_DIRECT_ALIGN */
    size_t slot_size; /* bytes per buffer slot */
    uint8_t *arena;   /* depth × slot_size, FL_DIRECT_ALIGN-aligned */
};

/* Submit and drain one group using slots from 0. */
static inline int fl_reader_run(fl_reader *r, fl_read_req *reqs, unsigned n, fl_read_cb cb,
                                void *user, double *io_wait_s, uint64_t *bytes)
{
    r->submit(r, reqs, n, 0, io_wait_s);
    return r->drain(r, reqs, n, cb, user, io_wait_s, bytes);
}

/* Buffer slot size able to hold any record up to max_len bytes, aligned spans included. */
size_t fl_reader_slot_size(size_t max_len, int direct);

/* Work out the span to read for req (aligned when direct) into buffer `buf`. */
void fl_reader_prepare(fl_read_req *req, uint8_t *buf, int direct);

/* Synchronous read of one request into buf (at least fl_reader_slot_size bytes, aligned),
 * short reads continued; used by the pread reader and for replacement reads. */
int fl_pread_span(fl_read_req *req, uint8_t *buf, int direct, uint64_t *bytes);

/* Create an io_uring reader: a ring of `depth` entries, buffers registered when the kernel
 * allows (plain reads otherwise). Errors: -errno of io_uring_queue_init (ENOSYS, EPERM in
 * restricted containers...), -ENOMEM. */
int fl_uring_reader_create(unsigned depth, size_t max_len, int direct, fl_reader **out,
                           fl_error *err);

/* Create a pread reader (same interface, synchronous reads in the calling worker thread). */
int fl_pread_reader_create(unsigned depth, size_t max_len, int direct, fl_reader **out,
                           fl_error *err);

/* Read buffers in transparent huge pages (madvise; 2 MiB-aligned, the length rounded up to 2 MiB
 * when it is at least 512 KiB): every 4 KiB page of an O_DIRECT read's buffer is a DMA segment
 * the device (or the hypervisor behind a virtio disk) handles on its own, and a 2 MiB page makes
 * a 150 KiB read one or two. Measured on this project's virtio disk, 147 KiB random O_DIRECT
 * reads, 2 workers, 5 interleaved rounds: 3.1-3.9 GB/s with 4 KiB pages, 6.3-7.3 with huge pages.
 * Free with free(). Returns 0 or -ENOMEM. */
#define FL_HUGE_PAGE (2u << 20)
int fl_huge_alloc(void **p, size_t len);

/* Allocate depth slots for r (shared by both implementations), in huge pages (fl_huge_alloc). */
int fl_reader_alloc_arena(fl_reader *r, unsigned depth, size_t max_len, int direct);

#endif
