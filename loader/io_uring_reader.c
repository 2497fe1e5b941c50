/* io_uring_reader.c — the record reader of each decode worker: one io_uring of `depth` entries
 * whose fixed buffers (io_uring_register_buffers) are slots of one aligned arena. All reads of
 * a chunk are submitted at once and each record is handed on as soon as its read completes;
 * short reads are continued, O_DIRECT reads cover the 4 KiB-aligned span of the record. */
#include "reader.h"

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

static double fl_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void queue_read(uring_reader *u, fl_read_req *req, unsigned slot)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    /* never NULL: at most depth reads are in flight on a ring of depth entries */
    uint8_t *dst = req->buf + req->got;
    unsigned len = req->span_len - req->got;
    uint64_t off = req->span_off + req->got;
    if (u->fixed && !req->dst)
        io_uring_prep_read_fixed(sqe, req->fd, dst, len, off, (int)slot);
    else
        io_uring_prep_read(sqe, req->fd, dst, len, off);
    io_uring_sqe_set_data64(sqe, slot);
}

static int uring_run(fl_reader *r, fl_read_req *reqs, unsigned n, fl_read_cb cb, void *user,
                     double *io_wait_s, uint64_t *bytes)
{
    uring_reader *u = (uring_reader *)r;
    if (u->broken) {
        for (unsigned i = 0; i < n; i++) {
            fl_reader_prepare(&reqs[i], r->arena + (size_t)i * r->slot_size, r->direct);
            reqs[i].res = -EIO;
            cb(user, &reqs[i]);
        }
        return -EIO;
    }
    for (unsigned i = 0; i < n; i++) {
        if (reqs[i].dst && r->direct)
            reqs[i].dst = NULL; /* O_DIRECT needs the aligned span buffer */
        fl_reader_prepare(&reqs[i], reqs[i].dst ? reqs[i].dst : r->arena + (size_t)i * r->slot_size,
                          reqs[i].dst ? 0 : r->direct);
        queue_read(u, &reqs[i], i);
    }
    unsigned pending = n;
    int rc = 0;
    while (pending > 0) {
        /* Submitting runs buffered reads of cached pages inline, so the wait covers them too. */
        double t0 = fl_mono_s();
        int s = io_uring_submit_and_wait(&u->ring, 1);
        *io_wait_s += fl_mono_s() - t0;
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
            unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);
            fl_read_req *req = &reqs[i];
            int res = cqe->res;
            uint32_t need = (uint32_t)(req->offset - req->span_off) + req->len;
            if (res == -EINTR || res == -EAGAIN) {
                queue_read(u, req, i);
                continue;
            }
            if (res < 0) {
                req->res = res;
            } else if (res == 0 && req->got < need) {
                req->res = FL_E_TRUNCATED;
            } else {
                req->got += (uint32_t)res;
                *bytes += (uint64_t)res;
                if (req->got < need && req->got < req->span_len) {
                    queue_read(u, req, i); /* short read: continue where it stopped */
                    continue;
                }
                req->res = 0;
            }
            pending--;
            cb(user, req);
        }
        io_uring_cq_advance(&u->ring, seen);
    }
    if (rc < 0) {
        u->broken = 1;
        /* The ring itself failed: drain what can be drained, then fail the rest. Requests
         * already handed to cb have res set and got == need or an error; the others get rc. */
        for (unsigned i = 0; i < n; i++) {
            uint32_t need = (uint32_t)(reqs[i].offset - reqs[i].span_off) + reqs[i].len;
            if (reqs[i].res == 0 && reqs[i].got < need) {
                reqs[i].res = rc;
                cb(user, &reqs[i]);
            }
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
    u->base.run = uring_run;
    u->base.destroy = uring_destroy;
    u->base.name = "io_uring";
    *out = &u->base;
    return 0;
}
