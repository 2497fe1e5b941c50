/* io_uring_reader.c — the record reader of each decode worker: one io_uring of `depth` entries
 * whose fixed buffers (io_uring_register_buffers) are slots of one aligned arena. All reads of
 * a group are submitted at once (the next group can be in flight while one is processed) and
 * each record is handed on as soon as its read completes; short reads are continued, O_DIRECT
 * reads cover the 4 KiB-aligned span of the record. */
#include "reader.h"
#include "fl_clock.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

typedef struct uring_reader {
    fl_reader base;
    struct io_uring ring;
    int fixed;  /* buffers registered: use read_fixed */
    int broken; /* the ring failed with reads possibly in flight: refuse further use */
} uring_reader;

static void queue_read(uring_reader *u, fl_read_req *req)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    /* never NULL: at most depth reads are in flight on a ring of depth entries */
    uint8_t *dst = req->buf + req->got;
    unsigned len = req->span_len - req->got;
    uint64_t off = req->span_off + req->got;
    if (u->fixed && !req->dst)
        io_uring_prep_read_fixed(sqe, req->fd, dst, len, off, (int)req->slot);
    else
        io_uring_prep_read(sqe, req->fd, dst, len, off);
    io_uring_sqe_set_data(sqe, req);
}

static uint32_t needed(const fl_read_req *req)
{
    return (uint32_t)(req->offset - req->span_off) + req->len;
}

static void uring_submit(fl_reader *r, fl_read_req *reqs, unsigned n, unsigned first_slot,
                         double *io_wait_s)
{
    uring_reader *u = (uring_reader *)r;
    for (unsigned i = 0; i < n; i++) {
        fl_read_req *q = &reqs[i];
        q->slot = first_slot + i;
        q->done = q->delivered = 0;
        if (q->dst && r->direct)
            q->dst = NULL; /* O_DIRECT needs the aligned span buffer */
        fl_reader_prepare(q, q->dst ? q->dst : r->arena + (size_t)q->slot * r->slot_size,
                          q->dst ? 0 : r->direct);
        if (u->broken) {
            q->res = -EIO;
            q->done = 1;
            continue;
        }
        queue_read(u, q);
    }
    if (!u->broken) {
        /* buffered reads of cached pages run inline here: count them as I/O time */
        double t0 = fl_now_s();
        io_uring_submit(&u->ring); /* a refusal is retried by drain's submit_and_wait */
        *io_wait_s += fl_now_s() - t0;
    }
}

static int in_group(const fl_read_req *q, const fl_read_req *reqs, unsigned n)
{
    return q >= reqs && q < reqs + n;
}

static int uring_drain(fl_reader *r, fl_read_req *reqs, unsigned n, fl_read_cb cb, void *user,
                       double *io_wait_s, uint64_t *bytes)
{
    uring_reader *u = (uring_reader *)r;
    unsigned left = 0;
    for (unsigned i = 0; i < n; i++) {
        if (reqs[i].delivered)
            continue;
        if (reqs[i].done) { /* completed while another group was drained */
            reqs[i].delivered = 1;
            cb(user, &reqs[i]);
        } else {
            left++;
        }
    }
    int rc = u->broken ? -EIO : 0;
    while (left > 0 && rc == 0) {
        double t0 = fl_now_s();
        int s = io_uring_submit_and_wait(&u->ring, 1);
        *io_wait_s += fl_now_s() - t0;
        if (s < 0 && s != -EINTR && s != -EAGAIN && s != -EBUSY) {
            rc = s;
            break;
        }
        if (s < 0 && io_uring_cq_ready(&u->ring) == 0) {
            /* the kernel is short of resources: let in-flight reads finish, then resubmit */
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
            continue;
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&u->ring, head, cqe)
        {
            seen++;
            fl_read_req *req = io_uring_cqe_get_data(cqe);
            int res = cqe->res;
            if (res == -EINTR || res == -EAGAIN) {
                queue_read(u, req);
                continue;
            }
            if (res < 0) {
                req->res = res;
            } else if (res == 0 && req->got < needed(req)) {
                req->res = FL_E_TRUNCATED;
            } else {
                req->got += (uint32_t)res;
                *bytes += (uint64_t)res;
                if (req->got < needed(req) && req->got < req->span_len) {
                    queue_read(u, req); /* short read: continue where it stopped */
                    continue;
                }
                req->res = 0;
            }
            req->done = 1;
            if (in_group(req, reqs, n)) {
                left--;
                req->delivered = 1;
                cb(user, req);
            }
        }
        io_uring_cq_advance(&u->ring, seen);
    }
    if (rc < 0) {
        /* The ring itself failed: reads may still be in flight, so it is never used again;
         * what this group still waits for fails with rc. */
        u->broken = 1;
        for (unsigned i = 0; i < n; i++)
            if (!reqs[i].delivered) {
                reqs[i].res = reqs[i].done ? reqs[i].res : rc;
                reqs[i].done = reqs[i].delivered = 1;
                cb(user, &reqs[i]);
            }
    }
    return rc;
}

static void uring_destroy(fl_reader *r)
{
    if (!r)
        return;
    uring_reader *u = (uring_reader *)r;
    if (u->fixed)
        io_uring_unregister_buffers(&u->ring);
    io_uring_queue_exit(&u->ring);
    free(r->arena);
    free(u);
}

int fl_uring_reader_create(unsigned depth, size_t max_len, int direct, fl_reader **out,
                           fl_error *err)
{
    uring_reader *u = calloc(1, sizeof *u);
    if (!u)
        return fl_error_set(err, -ENOMEM, "io_uring reader: out of memory");
    int rc = io_uring_queue_init(depth, &u->ring, 0);
    if (rc < 0) {
        free(u);
        return fl_error_set(err, rc, "io_uring_queue_init: %s", strerror(-rc));
    }
    if (fl_reader_alloc_arena(&u->base, depth, max_len, direct) != 0) {
        io_uring_queue_exit(&u->ring);
        free(u);
        return fl_error_set(err, -ENOMEM, "io_uring reader: out of memory for %u buffers", depth);
    }
    struct iovec *iov = calloc(depth, sizeof *iov);
    if (!iov) {
        io_uring_queue_exit(&u->ring);
        free(u->base.arena);
        free(u);
        return fl_error_set(err, -ENOMEM, "io_uring reader: out of memory");
    }
    for (unsigned i = 0; i < depth; i++) {
        iov[i].iov_base = u->base.arena + (size_t)i * u->base.slot_size;
        iov[i].iov_len = u->base.slot_size;
    }
    /* Registration pins the arena once instead of per read; it can fail on RLIMIT_MEMLOCK,
     * in which case plain reads into the same buffers give the same bytes. */
    u->fixed = io_uring_register_buffers(&u->ring, iov, depth) == 0;
    u->base.registered = u->fixed;
    free(iov);
    u->base.submit = uring_submit;
    u->base.drain = uring_drain;
    u->base.destroy = uring_destroy;
    u->base.name = "io_uring";
    *out = &u->base;
    return 0;
}
