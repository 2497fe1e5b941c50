/* block_reader.c — coalesced extent reads for the quasi-random order (see block_reader.h).
 * One I/O thread per loader: for each epoch it computes the rank's sequence, counts the samples
 * that use each extent (refs), then walks the sequence and reads every extent at its first use,
 * up to `depth` reads in flight and `budget` bytes ahead of what the workers wait for. Workers
 * get a record's bytes from its extent (waiting for the read when needed) and put it back; the
 * last put frees the extent's buffer for another read. Extent state is kept per epoch parity,
 * so the next epoch's reads start while this one's last samples are still being used; the
 * thread starts epoch e only once every extent of epoch e-2 has been put back. */
#define _GNU_SOURCE
#include "block_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"

enum { EXT_EMPTY = 0, EXT_LOADING = 1, EXT_READY = 2 };

typedef struct ext_state {
    uint8_t *buf;
    uint64_t epoch; /* the epoch whose reads this state holds */
    uint32_t refs;  /* samples of that epoch not yet put back */
    uint32_t got;   /* bytes read */
    int res;        /* 0 or the read's error */
    int state;
} ext_state;

struct fl_block_reader {
    fl_block_config cfg;
    uint64_t n;
    uint64_t next;   /* extents */
    uint64_t *first; /* first record of each extent; first[next] = n */
    uint64_t *off;   /* span start in its shard */
    uint32_t *len;   /* span bytes (aligned with O_DIRECT) */
    uint32_t *need;  /* bytes up to the last record's end (an aligned span may pass EOF) */
    uint32_t *shard;
    size_t cap;       /* buffer bytes (the longest span) */
    ext_state *st[2]; /* by epoch parity */
    uint64_t busy[2]; /* extents of that parity still referenced */
    uint32_t *cnt;    /* the I/O thread's refs count scratch */
    fl_perm perm;
    void **pool; /* free buffers */
    size_t npool;
    void **slabs; /* huge-page slabs the buffers are cut from (fl_huge_alloc) */
    size_t nslabs, slab_bufs;
    uint64_t live;      /* bytes in buffers handed out */
    uint64_t need_seq;  /* 1 + the highest sequence position a worker waits for (0: none) */
    uint64_t asked_seq; /* 1 + the highest sequence position any worker has asked for */
    uint64_t ahead;     /* read no extent first used more than this many samples past asked_seq */
    int ahead_wait;     /* the I/O thread waits for asked_seq to move */
    uint32_t inflight;
    uint64_t bytes; /* read so far (relaxed atomic) */
    struct io_uring ring;
    int ring_ok;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t wcv, icv; /* workers wait on wcv, the I/O thread on icv */
    int stop;
};

static uint64_t align_down(uint64_t v) { return v / FL_DIRECT_ALIGN * FL_DIRECT_ALIGN; }

static uint64_t align_up(uint64_t v)
{
    return (v + FL_DIRECT_ALIGN - 1) / FL_DIRECT_ALIGN * FL_DIRECT_ALIGN;
}

uint64_t fl_block_window_bytes(const fl_dataset *ds, const fl_order_plan *plan, int direct)
{
    uint64_t n = fl_dataset_count(ds);
    uint64_t mean = n ? fl_dataset_total_bytes(ds) / n + 1 : 0;
    uint64_t recs = plan->block * plan->window;
    if (recs > n)
        recs = n;
    /* every extent of a window may carry up to two partial aligned pages */
    uint64_t exts = (recs * mean) / FL_EXTENT_MAX + plan->window + 1;
    return recs * mean + (direct ? exts * 2 * FL_DIRECT_ALIGN : 0);
}

/* Append an extent; grows the arrays by half. */
static int push_extent(fl_block_reader *br, uint64_t first, uint32_t shard, uint64_t off,
                       uint64_t end, size_t *cap)
{
    if (br->next + 1 >= *cap) {
        size_t c = *cap ? *cap + *cap / 2 : 1024;
        uint64_t *f = realloc(br->first, (c + 1) * sizeof *f);
        if (f)
            br->first = f;
        uint64_t *o = realloc(br->off, c * sizeof *o);
        if (o)
            br->off = o;
        uint32_t *l = realloc(br->len, c * sizeof *l), *nd = realloc(br->need, c * sizeof *nd);
        if (l)
            br->len = l;
        if (nd)
            br->need = nd;
        uint32_t *s = realloc(br->shard, c * sizeof *s);
        if (s)
            br->shard = s;
        if (!f || !o || !l || !nd || !s)
            return -ENOMEM;
        *cap = c;
    }
    uint64_t e = br->next++;
    uint64_t start = br->cfg.direct ? align_down(off) : off;
    uint64_t stop = br->cfg.direct ? align_up(end) : end;
    br->first[e] = first;
    br->shard[e] = shard;
    br->off[e] = start;
    br->len[e] = (uint32_t)(stop - start);
    br->need[e] = (uint32_t)(end - start);
    if (br->len[e] > br->cap)
        br->cap = br->len[e];
    return 0;
}

/* Extents: consecutive records of one quasi block in one shard, ascending and close together,
 * up to FL_EXTENT_MAX bytes of span. */
static int build_extents(fl_block_reader *br, fl_error *err)
{
    size_t cap = 0;
    uint64_t block = br->cfg.plan->block, first = 0, off = 0, end = 0;
    uint32_t shard = 0;
    int open = 0;
    for (uint64_t i = 0; i < br->n; i++) {
        fl_record_info r;
        int rc = fl_dataset_record_info(br->cfg.ds, i, &r, err);
        if (rc < 0)
            return rc;
        uint64_t r_end = r.offset + r.stored_len;
        int fresh =
            !open || i % block == 0 || r.shard != shard || r.offset < end ||
            r.offset - end > FL_EXTENT_GAP ||
            (br->cfg.direct ? align_up(r_end) - align_down(off) : r_end - off) > FL_EXTENT_MAX;
        if (fresh) {
            if (open && push_extent(br, first, shard, off, end, &cap) < 0)
                return fl_error_set(err, -ENOMEM, "out of memory for the extent table");
            first = i;
            shard = r.shard;
            off = r.offset;
            open = 1;
        }
        end = r_end;
    }
    if (open && push_extent(br, first, shard, off, end, &cap) < 0)
        return fl_error_set(err, -ENOMEM, "out of memory for the extent table");
    br->first[br->next] = br->n;
    return 0;
}

static uint64_t ext_of(const fl_block_reader *br, uint64_t idx)
{
    uint64_t lo = 0, hi = br->next; /* first[lo] <= idx < first[hi] */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (br->first[mid] <= idx)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* With the lock held: the extent's last sample is done; its buffer goes back to the pool and
 * the state can serve a later epoch of the same parity. */
static void retire(fl_block_reader *br, int p, ext_state *s)
{
    if (s->buf) {
        br->pool[br->npool++] = s->buf; /* the pool can hold every buffer ever made */
        br->live -= br->cap;
        s->buf = NULL;
    }
    s->state = EXT_EMPTY;
    s->epoch = UINT64_MAX; /* never issued again this epoch */
    br->busy[p]--;
    pthread_cond_signal(&br->icv);
}

static void submit_read(fl_block_reader *br, int p, uint64_t e)
{
    ext_state *s = &br->st[p][e];
    struct io_uring_sqe *sqe = io_uring_get_sqe(&br->ring); /* never NULL: inflight <= depth */
    io_uring_prep_read(sqe, br->cfg.fds[br->shard[e]], s->buf + s->got, br->len[e] - s->got,
                       br->off[e] + s->got);
    io_uring_sqe_set_data64(sqe, (uint64_t)p << 63 | e);
    io_uring_submit(&br->ring);
}

/* A completion: continue a short read, or publish the extent to the workers. */
static void complete(fl_block_reader *br, uint64_t ud, int res)
{
    int p = (int)(ud >> 63);
    uint64_t e = ud & ~(1ull << 63);
    ext_state *s = &br->st[p][e];
    if (res == -EINTR || res == -EAGAIN) {
        submit_read(br, p, e);
        return;
    }
    if (res > 0) {
        s->got += (uint32_t)res;
        __atomic_fetch_add(&br->bytes, (uint64_t)res, __ATOMIC_RELAXED);
        if (s->got < br->need[e] && s->got < br->len[e]) {
            submit_read(br, p, e);
            return;
        }
    }
    if (br->cfg.drop_behind && s->got) /* every page touched, edge pages included (worker.c) */
        posix_fadvise(br->cfg.fds[br->shard[e]], (off_t)align_down(br->off[e]),
                      (off_t)(align_up(br->off[e] + s->got) - align_down(br->off[e])),
                      POSIX_FADV_DONTNEED);
    pthread_mutex_lock(&br->mu);
    s->res = res < 0 ? res : 0;
    s->state = EXT_READY;
    br->inflight--;
    if (s->refs == 0) /* every sample was put back while it was read (failed lookups, stop) */
        retire(br, p, s);
    pthread_cond_broadcast(&br->wcv);
    pthread_mutex_unlock(&br->mu);
}

/* Handle the completions at hand; with `wait`, first wait up to 1 ms for one. */
static void reap(fl_block_reader *br, int wait)
{
    struct io_uring_cqe *cqe;
    if (wait) {
        struct __kernel_timespec ts = {0, 1000000};
        io_uring_wait_cqe_timeout(&br->ring, &cqe, &ts);
    }
    while (io_uring_peek_cqe(&br->ring, &cqe) == 0) {
        uint64_t ud = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&br->ring, cqe);
        complete(br, ud, res);
    }
}

/* With the lock held: let time pass until something may have changed (a read completed, a
 * buffer came back, a worker asked for a position, or stop). */
static void io_wait_locked(fl_block_reader *br)
{
    if (br->inflight) {
        pthread_mutex_unlock(&br->mu);
        reap(br, 1);
        pthread_mutex_lock(&br->mu);
    } else {
        pthread_cond_wait(&br->icv, &br->mu);
    }
}

/* Count the rank's samples per extent for `epoch` from batch b0 on and publish them. */
static int start_epoch(fl_block_reader *br, uint64_t epoch, uint64_t b0)
{
    const fl_order_plan *P = br->cfg.plan;
    int p = (int)(epoch & 1);
    pthread_mutex_lock(&br->mu);
    while (!br->stop && br->busy[p])
        io_wait_locked(br);
    int stop = br->stop;
    pthread_mutex_unlock(&br->mu);
    if (stop)
        return -1;
    fl_order_epoch_perm(P, epoch, &br->perm);
    memset(br->cnt, 0, br->next * sizeof *br->cnt);
    for (uint64_t b = b0; b < P->batches; b++)
        for (uint32_t k = 0; k < P->batch; k++)
            br->cnt[ext_of(br, fl_perm_at(&br->perm, fl_order_pos(P, b, k) % br->n))]++;
    pthread_mutex_lock(&br->mu);
    for (uint64_t e = 0; e < br->next; e++) {
        if (!br->cnt[e])
            continue;
        ext_state *s = &br->st[p][e];
        s->refs = br->cnt[e];
        s->epoch = epoch;
        s->state = EXT_EMPTY;
        s->got = 0;
        s->res = 0;
        br->busy[p]++;
    }
    pthread_mutex_unlock(&br->mu);
    return 0;
}

/* With the lock held: a slab of slab_bufs buffers in huge pages (each extent read is then a few
 * DMA segments, not one per 4 KiB page: reader.h), all into the pool. */
static void add_slab(fl_block_reader *br)
{
    void *m;
    size_t stride = (br->cap + FL_DIRECT_ALIGN - 1) / FL_DIRECT_ALIGN * FL_DIRECT_ALIGN;
    if (fl_huge_alloc(&m, stride * br->slab_bufs) != 0)
        return;
    br->slabs[br->nslabs++] = m;
    for (size_t i = 0; i < br->slab_bufs; i++)
        br->pool[br->npool++] = (uint8_t *)m + i * stride;
}

/* Read extent e of parity p when it is its first use this epoch. Returns -1 when stopping. */
static int issue(fl_block_reader *br, int p, uint64_t e, uint64_t epoch, uint64_t seq)
{
    pthread_mutex_lock(&br->mu);
    ext_state *s = &br->st[p][e];
    if (s->epoch != epoch || s->state != EXT_EMPTY) {
        pthread_mutex_unlock(&br->mu);
        return 0;
    }
    /* ahead: a run that stops reads at most two windows it does not use, whatever the budget */
    while (!br->stop && (br->inflight >= br->cfg.depth || seq >= br->asked_seq + br->ahead ||
                         (br->live + br->cap > br->cfg.budget && seq >= br->need_seq))) {
        br->ahead_wait = seq >= br->asked_seq + br->ahead;
        io_wait_locked(br);
    }
    br->ahead_wait = 0;
    if (br->stop) {
        pthread_mutex_unlock(&br->mu);
        return -1;
    }
    if (!br->npool)
        add_slab(br);
    s->buf = br->npool ? br->pool[--br->npool] : NULL;
    if (!s->buf) {
        s->state = EXT_READY;
        s->res = -ENOMEM;
        pthread_cond_broadcast(&br->wcv);
        pthread_mutex_unlock(&br->mu);
        return 0;
    }
    br->live += br->cap;
    s->state = EXT_LOADING;
    br->inflight++;
    pthread_mutex_unlock(&br->mu);
    submit_read(br, p, e);
    return 0;
}

static void *io_main(void *arg)
{
    fl_block_reader *br = arg;
    const fl_order_plan *P = br->cfg.plan;
    uint64_t t0 = br->cfg.first_ticket;
    for (uint64_t epoch = t0 / P->batches;; epoch++) {
        uint64_t b0 = epoch == t0 / P->batches ? t0 % P->batches : 0;
        if (start_epoch(br, epoch, b0) < 0)
            break;
        int p = (int)(epoch & 1), stop = 0;
        for (uint64_t b = b0; b < P->batches && !stop; b++)
            for (uint32_t k = 0; k < P->batch && !stop; k++) {
                uint64_t seq = (epoch * P->batches + b) * P->batch + k;
                uint64_t idx = fl_perm_at(&br->perm, fl_order_pos(P, b, k) % br->n);
                stop = issue(br, p, ext_of(br, idx), epoch, seq) < 0;
                reap(br, 0);
            }
        if (stop)
            break;
    }
    pthread_mutex_lock(&br->mu); /* stopping: let the reads in flight land before the buffers go */
    while (br->inflight)
        io_wait_locked(br);
    pthread_mutex_unlock(&br->mu);
    return NULL;
}

int fl_block_reader_get(fl_block_reader *br, uint64_t epoch, uint64_t seq, uint64_t idx,
                        const fl_record_info *info, const uint8_t **data)
{
    uint64_t e = ext_of(br, idx);
    ext_state *s = &br->st[epoch & 1][e];
    int rc = 0;
    pthread_mutex_lock(&br->mu);
    if (seq + 1 > br->asked_seq) {
        br->asked_seq = seq + 1;
        if (br->ahead_wait)
            pthread_cond_signal(&br->icv);
    }
    while (!br->stop && (s->epoch != epoch || s->state != EXT_READY)) {
        if (seq + 1 > br->need_seq) {
            br->need_seq = seq + 1;
            pthread_cond_signal(&br->icv);
        }
        pthread_cond_wait(&br->wcv, &br->mu);
    }
    if (br->stop && (s->epoch != epoch || s->state != EXT_READY))
        rc = FL_E_CANCELLED;
    else if (s->res < 0)
        rc = s->res;
    else if (info->offset + info->stored_len > br->off[e] + s->got)
        rc = FL_E_TRUNCATED;
    else
        *data = s->buf + (info->offset - br->off[e]);
    pthread_mutex_unlock(&br->mu);
    return rc;
}

void fl_block_reader_put(fl_block_reader *br, uint64_t epoch, uint64_t idx)
{
    ext_state *s = &br->st[epoch & 1][ext_of(br, idx)];
    pthread_mutex_lock(&br->mu);
    /* a read in flight keeps its buffer: complete() retires the extent when it lands */
    if (s->epoch == epoch && s->refs > 0 && --s->refs == 0 && s->state != EXT_LOADING)
        retire(br, (int)(epoch & 1), s);
    pthread_mutex_unlock(&br->mu);
}

uint64_t fl_block_reader_bytes(const fl_block_reader *br)
{
    return br ? __atomic_load_n(&br->bytes, __ATOMIC_RELAXED) : 0;
}

int fl_block_reader_create(const fl_block_config *cfg, fl_block_reader **out, fl_error *err)
{
    *out = NULL;
    fl_block_reader *br = calloc(1, sizeof *br);
    if (!br)
        return fl_error_set(err, -ENOMEM, "out of memory for the block reader");
    br->cfg = *cfg;
    br->n = cfg->plan->n;
    br->ahead = 2 * (uint64_t)cfg->plan->block * cfg->plan->window;
    br->asked_seq = cfg->first_ticket * cfg->plan->batch;
    pthread_mutex_init(&br->mu, NULL);
    pthread_cond_init(&br->wcv, NULL);
    pthread_cond_init(&br->icv, NULL);
    *out = br; /* fl_block_reader_destroy undoes whatever follows */
    int rc = build_extents(br, err);
    if (rc < 0)
        return rc;
    br->st[0] = calloc(br->next, sizeof *br->st[0]);
    br->st[1] = calloc(br->next, sizeof *br->st[1]);
    br->cnt = calloc(br->next, sizeof *br->cnt);
    int perm_rc = fl_perm_alloc(&br->perm, br->n, 0);
    /* buffers in use are bounded by the extents referenced in two epochs, reads ahead included;
     * slabs of ~8 MiB (whole huge pages), so at most slab_bufs - 1 buffers more are ever made */
    size_t stride = (br->cap + FL_DIRECT_ALIGN - 1) / FL_DIRECT_ALIGN * FL_DIRECT_ALIGN;
    br->slab_bufs = stride ? (8u << 20) / stride : 1;
    if (br->slab_bufs < 1)
        br->slab_bufs = 1;
    size_t most = 2 * br->next + br->slab_bufs;
    br->pool = malloc(most * sizeof *br->pool);
    br->slabs = malloc((most / br->slab_bufs + 1) * sizeof *br->slabs);
    if (!br->st[0] || !br->st[1] || !br->cnt || perm_rc || !br->pool || !br->slabs)
        return fl_error_set(err, -ENOMEM, "out of memory for the state of %llu extents",
                            (unsigned long long)br->next);
    rc = io_uring_queue_init(cfg->depth, &br->ring, 0);
    if (rc < 0)
        return fl_error_set(err, rc, "block reader: io_uring_queue_init: %s", strerror(-rc));
    br->ring_ok = 1;
    if ((rc = pthread_create(&br->thread, NULL, io_main, br)) != 0)
        return fl_error_set(err, -rc, "cannot start the block reader thread: %s", strerror(rc));
    br->started = 1;
    return 0;
}

void fl_block_reader_stop(fl_block_reader *br)
{
    if (!br)
        return;
    pthread_mutex_lock(&br->mu);
    br->stop = 1;
    pthread_cond_broadcast(&br->wcv);
    pthread_cond_broadcast(&br->icv);
    pthread_mutex_unlock(&br->mu);
}

void fl_block_reader_destroy(fl_block_reader *br)
{
    if (!br)
        return;
    fl_block_reader_stop(br);
    if (br->started)
        pthread_join(br->thread, NULL);
    if (br->ring_ok)
        io_uring_queue_exit(&br->ring);
    for (size_t i = 0; i < br->nslabs; i++) /* every buffer is cut from one */
        free(br->slabs[i]);
    free(br->slabs);
    free(br->pool);
    free(br->st[0]);
    free(br->st[1]);
    free(br->cnt);
    fl_perm_free(&br->perm);
    free(br->first);
    free(br->off);
    free(br->len);
    free(br->need);
    free(br->shard);
    pthread_mutex_destroy(&br->mu);
    pthread_cond_destroy(&br->wcv);
    pthread_cond_destroy(&br->icv);
    free(br);
}
