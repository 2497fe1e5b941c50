/* pread_reader.c — the fallback record reader: plain pread(2) into the same aligned slots the
 * io_uring reader uses, so results are byte-identical. Each decode worker owns one, which makes
 * the workers themselves the pread thread pool. Also the shared span/arena helpers. */
#include "reader.h"
#include "fl_clock.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

size_t fl_reader_slot_size(size_t max_len, int direct)
{
    size_t a = FL_DIRECT_ALIGN;
    if (max_len == 0)
        max_len = 1;
    /* direct: the span can start up to align-1 bytes before the record and is rounded up */
    size_t need = direct ? max_len + 2 * a : max_len;
    return (need + a - 1) / a * a;
}

void fl_reader_prepare(fl_read_req *req, uint8_t *buf, int direct)
{
    req->buf = buf;
    req->got = 0;
    req->res = 0;
    if (direct) {
        uint64_t a = FL_DIRECT_ALIGN;
        uint64_t start = req->offset / a * a;
        uint64_t end = (req->offset + req->len + a - 1) / a * a;
        req->span_off = start;
        req->span_len = (uint32_t)(end - start);
        req->data = buf + (req->offset - start);
    } else {
        req->span_off = req->offset;
        req->span_len = req->len;
        req->data = buf;
    }
}

/* Bytes of the span that must arrive: the record's end (an aligned span may run past EOF). */
static uint32_t needed(const fl_read_req *req)
{
    return (uint32_t)(req->offset - req->span_off) + req->len;
}

int fl_pread_span(fl_read_req *req, uint8_t *buf, int direct, uint64_t *bytes)
{
    fl_reader_prepare(req, buf, direct);
    uint32_t need = needed(req);
    while (req->got < need) {
        ssize_t k = pread(req->fd, req->buf + req->got, req->span_len - req->got,
                          (off_t)(req->span_off + req->got));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return req->res = -errno;
        }
        if (k == 0)
            return req->res = FL_E_TRUNCATED;
        req->got += (uint32_t)k;
        if (bytes)
            *bytes += (uint64_t)k;
    }
    return req->res = 0;
}

int fl_huge_alloc(void **p, size_t len)
{
    size_t align = FL_DIRECT_ALIGN;
    if (len >= FL_HUGE_PAGE / 4) { /* round up: at most one 2 MiB page more */
        len = (len + FL_HUGE_PAGE - 1) / FL_HUGE_PAGE * FL_HUGE_PAGE;
        align = FL_HUGE_PAGE;
    }
    *p = NULL;
    if (posix_memalign(p, align, len) != 0)
        return -ENOMEM;
    if (align == FL_HUGE_PAGE)
        madvise(*p, len, MADV_HUGEPAGE); /* a hint: THP "never" or no THP leaves 4 KiB pages */
    return 0;
}

int fl_reader_alloc_arena(fl_reader *r, unsigned depth, size_t max_len, int direct)
{
    r->depth = depth;
    r->direct = direct;
    r->slot_size = fl_reader_slot_size(max_len, direct);
    void *p = NULL;
    size_t len = r->slot_size * depth;
    if (fl_huge_alloc(&p, len) != 0)
        return -ENOMEM;
    memset(p, 0, len); /* resident up front; defined for valgrind (see pinned.c) */
    r->arena = p;
    return 0;
}

static void pread_submit(fl_reader *r, fl_read_req *reqs, unsigned n, unsigned first_slot,
                         double *io_wait_s)
{
    for (unsigned i = 0; i < n; i++) {
        reqs[i].slot = first_slot + i;
        reqs[i].done = reqs[i].delivered = 0;
    }
}

static int pread_drain(fl_reader *r, fl_read_req *reqs, unsigned n, fl_read_cb cb, void *user,
                       double *io_wait_s, uint64_t *bytes)
{
    for (unsigned i = 0; i < n; i++) {
        fl_read_req *q = &reqs[i];
        double t0 = fl_now_s();
        if (q->dst && !r->direct)
            fl_pread_span(q, q->dst, 0, bytes);
        else
            fl_pread_span(q, r->arena + (size_t)q->slot * r->slot_size, r->direct, bytes);
        *io_wait_s += fl_now_s() - t0;
        q->done = q->delivered = 1;
        cb(user, q);
    }
    return 0;
}

static void pread_destroy(fl_reader *r)
{
    if (!r)
        return;
    free(r->arena);
    free(r);
}

int fl_pread_reader_create(unsigned depth, size_t max_len, int direct, fl_reader **out,
                           fl_error *err)
{
    fl_reader *r = calloc(1, sizeof *r);
    if (!r || fl_reader_alloc_arena(r, depth, max_len, direct) != 0) {
        free(r);
        return fl_error_set(err, -ENOMEM, "pread reader: out of memory for %u buffers", depth);
    }
    r->submit = pread_submit;
    r->drain = pread_drain;
    r->destroy = pread_destroy;
    r->name = "pread";
    *out = r;
    return 0;
}
