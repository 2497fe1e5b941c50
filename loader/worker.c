/* worker.c — a decode worker: claims chunks of the batch being filled, reads their records
 * (io_uring / pread, or LMDB's mmap), checks CRC32C, decompresses into its own scratch, and
 * decodes + augments each sample straight into its place in the batch. No per-sample malloc. */
#include "loader_internal.h"

#include "fl_crc32c.h"

#include <errno.h>
#include <stdlib.h>

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = need + need / 4;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = n;
    return 0;
}

int fl_worker_init(fl_worker *w, fl_loader *L, uint32_t id, fl_error *err)
{
    memset(w, 0, sizeof *w);
    w->L = L;
    w->id = id;
    int rc = fl_decoder_create(0, &w->dec, err);
    if (rc < 0)
        return rc;
    fl_decoder_set_flags(w->dec, L->opt.decode_flags);
    w->payload_cap = fl_dataset_max_raw_len(L->ds);
    if (w->payload_cap == 0)
        w->payload_cap = 1;
    w->payload = malloc(w->payload_cap);
    w->reqs = calloc(2 * (size_t)L->chunk, sizeof *w->reqs);
    w->infos = calloc(2 * (size_t)L->chunk, sizeof *w->infos);
    void *sb = NULL;
    size_t sb_len = fl_reader_slot_size(fl_dataset_max_stored_len(L->ds), L->direct);
    if (posix_memalign(&sb, FL_DIRECT_ALIGN, sb_len) != 0)
        sb = NULL;
    w->sync_buf = sb;
    if (!w->payload || !w->reqs || !w->infos || !w->sync_buf)
        return fl_error_set(err, -ENOMEM, "worker %u: out of memory for scratch buffers", id);
    return 0;
}

void fl_worker_free(fl_worker *w)
{
    if (w->reader)
        w->reader->destroy(w->reader);
    fl_decoder_free(w->dec);
    free(w->payload);
    free(w->conv);
    free(w->rs);
    free(w->sync_buf);
    free(w->reqs);
    free(w->infos);
    memset(w, 0, sizeof *w);
}

/* Raw pixels: crop (a pointer offset), channel conversion when asked, then a plain copy when
 * the crop already has the output size (the common no-augment case: one memcpy) or fl_resize. */
static int raw_sample(fl_worker *w, const uint8_t *pix, uint32_t W, uint32_t C,
                      const fl_aug_params *ap, uint8_t *dst, fl_error *err)
{
    fl_loader *L = w->L;
    uint32_t oc = L->out_c, ow = L->out_w, oh = L->out_h;
    const fl_rect *r = &ap->crop;
    const uint8_t *src = pix + ((size_t)r->y * W + r->x) * C;
    size_t stride = (size_t)W * C;
    if (C != oc) {
        if (grow(&w->conv, &w->conv_cap, (size_t)r->width * r->height * oc) < 0)
            return fl_error_set(err, -ENOMEM, "out of memory converting channels");
        uint8_t *o = w->conv;
        for (uint32_t y = 0; y < r->height; y++) {
            const uint8_t *s = src + y * stride;
            for (uint32_t x = 0; x < r->width; x++, s += C) {
                if (oc == 3) { /* gray → RGB */
                    *o++ = s[0];
                    *o++ = s[0];
                    *o++ = s[0];
                } else { /* RGB → gray, ITU-R BT.601 luma as libjpeg computes it */
                    *o++ = (uint8_t)((299u * s[0] + 587u * s[1] + 114u * s[2] + 500u) / 1000u);
                }
            }
        }
        src = w->conv;
        stride = (size_t)r->width * oc;
    }
    size_t row = (size_t)ow * oc;
    if (r->width == ow && r->height == oh) {
        if (!ap->flip) {
            if (stride == row)
                memcpy(dst, src, row * oh);
            else
                for (uint32_t y = 0; y < oh; y++)
                    memcpy(dst + y * row, src + y * stride, row);
        } else {
            for (uint32_t y = 0; y < oh; y++) {
                const uint8_t *s = src + y * stride;
                uint8_t *d = dst + y * row;
                for (uint32_t x = 0; x < ow; x++)
                    memcpy(d + (size_t)x * oc, s + (size_t)(ow - 1 - x) * oc, oc);
            }
        }
        return 0;
    }
    size_t need = fl_resize_scratch_size(r->width, r->height, ow, oh, oc);
    if (grow(&w->rs, &w->rs_cap, need) < 0)
        return fl_error_set(err, -ENOMEM, "out of memory for resize scratch");
    return fl_resize(src, r->width, r->height, stride, oc, dst, ow, oh, row, ap->flip, w->rs,
                     w->rs_cap, err);
}

static const char *where(const fl_loader *L, const fl_record_info *info)
{
    const char *p = fl_dataset_shard_path(L->ds, L->backend == FL_BACKEND_LMDB ? 0 : info->shard);
    return p ? p : "?";
}

/* Length and CRC32C of the stored bytes against the index entry already at hand (what
 * fl_dataset_check does, without looking the entry up again). */
static int check_record(const fl_loader *L, uint64_t idx, const fl_record_info *info,
                        const uint8_t *data, size_t len, fl_error *err)
{
    if (len != info->stored_len)
        return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %zu bytes, index says %u",
                            where(L, info), (unsigned long long)idx, len, info->stored_len);
    uint32_t crc = fl_crc32c(0, data, len);
    if (crc != info->crc32c)
        return fl_error_set(err, FL_E_CHECKSUM,
                            "%s: record %llu: CRC32C mismatch (index 0x%08x, data 0x%08x)",
                            where(L, info), (unsigned long long)idx, info->crc32c, crc);
    return 0;
}

/* Raw, uncompressed, unchanged sample from the mapping: one pass copies it into the batch and
 * computes its CRC32C. Not timed here: a sample takes well under a microsecond, so the caller
 * times the whole chunk. */
static int copy_checked(fl_worker *w, uint64_t idx, const fl_record_info *info,
                        const uint8_t *data, size_t len, uint8_t *dst, fl_error *err)
{
    fl_loader *L = w->L;
    uint32_t crc = fl_crc32c_copy(dst, data, len);
    if (crc != info->crc32c)
        return fl_error_set(err, FL_E_CHECKSUM,
                            "%s: record %llu: CRC32C mismatch (index 0x%08x, data 0x%08x)",
                            where(L, info), (unsigned long long)idx, info->crc32c, crc);
    return 0;
}

/* The payload's first bytes are those of the format the index gives the record (the decoders
 * sniff the bytes themselves: without this a record stored under the wrong format would decode
 * as whatever it holds). */
static int format_matches(fl_encoding f, const uint8_t *p, size_t n)
{
    switch (f) {
    case FL_ENC_JPEG:
        return n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF;
    case FL_ENC_PNG:
        return n >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8);
    case FL_ENC_WEBP:
        return n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4);
    default:
        return 0;
    }
}

static const char *enc_name(fl_encoding f)
{
    return f == FL_ENC_JPEG ? "JPEG" : f == FL_ENC_PNG ? "PNG" : f == FL_ENC_WEBP ? "WebP" : "an unknown format";
}

/* Stored bytes of record idx → checked (CRC32C), decoded, augmented sample at dst. Each record
 * is handled in its own format (fl_record_info.format: a mixed dataset holds JPEG, PNG and WebP
 * records side by side). Errors name the shard file and record. */
static int load_sample(fl_worker *w, uint64_t idx, const fl_record_info *info,
                       const uint8_t *stored, size_t len, uint64_t epoch,
                       uint64_t pos, uint8_t *dst, fl_error *err)
{
    fl_loader *L = w->L;
    if (L->mapped && L->read_in_place && len == L->sample_bytes && len == info->stored_len)
        return copy_checked(w, idx, info, stored, len, dst, err);
    double t0 = fl_now_s();
    int rc;
    if ((rc = check_record(L, idx, info, stored, len, err)) < 0)
        return rc;
    const uint8_t *payload;
    size_t plen;
    rc = fl_dataset_payload(L->ds, idx, stored, len, w->payload, w->payload_cap, &payload, &plen,
                            err);
    if (rc < 0)
        return rc; /* the reader's message names the file and record */
    uint32_t W = info->width, H = info->height;
    if (info->format == FL_ENC_RAW) {
        if (!W || !H) {
            W = L->schema.width;
            H = L->schema.height;
        }
        uint32_t C = L->schema.channels;
        if (!W || !H || (uint64_t)W * H * C != plen)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: record %llu: raw payload of %zu bytes is not %u×%u×%u",
                                where(L, info), (unsigned long long)idx, plen, H, W, C);
        double t1 = fl_now_s();
        w->st.decode_s += t1 - t0;
        fl_aug_params ap;
        fl_augment_params(&L->aug, epoch, pos, W, H, &ap);
        rc = raw_sample(w, payload, W, C, &ap, dst, err);
        w->st.augment_s += fl_now_s() - t1;
        if (rc < 0)
            return fl_error_prefix(err, "%s: record %llu", where(L, info),
                                   (unsigned long long)idx);
        return 0;
    }
    if (!format_matches(info->format, payload, plen))
        return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: the index says %s (format %d) but "
                            "the payload is not one", where(L, info), (unsigned long long)idx,
                            enc_name(info->format), (int)info->format);
    if (!W || !H) {
        fl_image_info ii;
        if ((rc = fl_image_probe(payload, plen, &ii, err)) < 0)
            return fl_error_prefix(err, "%s: record %llu", where(L, info),
                                   (unsigned long long)idx);
        W = ii.width;
        H = ii.height;
    }
    fl_aug_params ap;
    fl_augment_params(&L->aug, epoch, pos, W, H, &ap);
    rc = fl_decode_crop_resize(w->dec, payload, plen, &ap.crop, L->out_w, L->out_h, L->out_c,
                               ap.flip, dst, err);
    w->st.decode_s += fl_now_s() - t0;
    if (rc < 0)
        return fl_error_prefix(err, "%s: record %llu", where(L, info), (unsigned long long)idx);
    return 0;
}

/* Stored bytes of record idx when records are in memory: the loader's copy (FL_IO_MEMORY) or
 * the dataset's mapping (LMDB, FL_IO_MMAP). */
static int mapped_record(const fl_loader *L, uint64_t idx, const fl_record_info *info,
                         const uint8_t **data, size_t *len, fl_error *err)
{
    if (L->mem) {
        *len = info->stored_len;
        return fl_memory_record(L, idx, info, data, err);
    }
    return fl_dataset_get(L->ds, idx, data, len, 0, err);
}

/* Read record idx on its own (replacement of a bad record). */
static int load_one(fl_worker *w, uint64_t idx, fl_record_info *info, uint64_t epoch,
                    uint64_t pos, uint8_t *dst, fl_error *err)
{
    fl_loader *L = w->L;
    int rc = fl_dataset_record_info(L->ds, idx, info, err);
    if (rc < 0)
        return rc;
    if (L->mapped) {
        const uint8_t *data;
        size_t len;
        if ((rc = mapped_record(L, idx, info, &data, &len, err)) < 0)
            return rc;
        w->st.bytes_read += len;
        return load_sample(w, idx, info, data, len, epoch, pos, dst, err);
    }
    fl_read_req req = {.fd = L->fds[info->shard], .offset = info->offset, .len = info->stored_len};
    double t0 = fl_now_s();
    rc = fl_pread_span(&req, w->sync_buf, L->direct, &w->st.bytes_read);
    w->st.io_wait_s += fl_now_s() - t0;
    if (rc < 0)
        return fl_error_set(err, rc, "%s: record %llu: read failed: %s", where(L, info),
                            (unsigned long long)idx,
                            rc == FL_E_TRUNCATED ? "file ends early" : fl_strerror(rc));
    return load_sample(w, idx, info, req.data, info->stored_len, epoch, pos, dst, err);
}

/* One claimed run of samples of a batch, with its reads. A worker has two, so the reads of the
 * next chunk are in flight while the current one is decoded. */
struct fl_chunk {
    fl_worker *w;
    fl_slot *slot;
    uint32_t k0, cnt;
    uint64_t epoch, batch;
    unsigned first_slot;     /* reader arena slots of this chunk */
    fl_read_req *reqs;
    fl_record_info *infos;   /* by chunk position */
    unsigned nreq;
    uint32_t err_k;          /* lowest failed sample (FL_NO_ERROR_K: none) and its error */
    fl_error err;
    uint32_t skipped;
};

/* Sample k of the chunk failed with err: with FL_CORRUPT_SKIP replace it by the next good record
 * in dataset order (deterministic whatever the workers), else remember the error. */
static void sample_failed(fl_chunk *c, uint32_t k, uint64_t idx, uint64_t pos, uint8_t *dst,
                          fl_error *err)
{
    fl_worker *w = c->w;
    fl_loader *L = w->L;
    fl_slot *s = c->slot;
    if (L->opt.on_corrupt == FL_CORRUPT_SKIP) {
        uint64_t n = L->plan.n;
        fl_error e2;
        for (uint64_t t = 1; t < n; t++) {
            uint64_t j = (idx + t) % n;
            fl_record_info info;
            if (load_one(w, j, &info, c->epoch, pos, dst, &e2) == 0) {
                s->b.indices[k] = j;
                s->b.labels[k] = info.label;
                c->skipped++;
                return;
            }
            if (e2.code == -ENOMEM)
                break;
        }
        fl_error_prefix(err, "no good record left to replace it");
    }
    if (k < c->err_k) {
        c->err_k = k;
        c->err = *err;
    }
}

static void on_read(void *user, fl_read_req *req)
{
    fl_chunk *c = user;
    fl_worker *w = c->w;
    fl_loader *L = w->L;
    fl_slot *s = c->slot;
    uint32_t k = req->tag;
    const fl_record_info *info = &c->infos[k - c->k0];
    uint64_t idx = s->b.indices[k];
    uint64_t pos = fl_order_pos(&L->plan, c->batch, k);
    uint8_t *dst = s->b.images + (size_t)k * L->sample_bytes;
    fl_error e;
    int rc;
    if (req->res < 0) {
        rc = fl_error_set(&e, req->res, "%s: record %llu: read failed: %s", where(L, info),
                          (unsigned long long)idx,
                          req->res == FL_E_TRUNCATED ? "file ends early" : fl_strerror(req->res));
    } else if (req->data == dst) {
        double t0 = fl_now_s();
        rc = check_record(L, idx, info, dst, req->len, &e);
        w->st.decode_s += fl_now_s() - t0;
    } else {
        rc = load_sample(w, idx, info, req->data, req->len, c->epoch, pos, dst, &e);
    }
    if (rc < 0)
        sample_failed(c, k, idx, pos, dst, &e);
    else
        s->b.labels[k] = info->label;
}

/* Records in memory (LMDB, FL_IO_MMAP, FL_IO_MEMORY): look the chunk's records up, then process
 * them. Small random records are bound by cache misses on the index and the data; prefetching a
 * few records ahead of use overlaps those misses (measured on 784-byte records: 2x the rate of no
 * prefetch, while prefetching the whole chunk up front floods the miss queue and gains nothing). */
#define INFO_AHEAD 16 /* index entries prefetched ahead of their lookup */
#define DATA_AHEAD 4  /* records whose bytes are prefetched ahead of their copy or decode */

/* Small records whole, large ones their start (the decoder streams the rest). A macro, not a
 * function: GCC judges a function made only of prefetches free of side effects and deletes its
 * calls. */
#define PREFETCH_RECORD(r)                                                                     \
    do {                                                                                       \
        const fl_read_req *r_ = (r);                                                           \
        if (r_->res == 0)                                                                      \
            for (size_t off_ = 0; off_ < r_->len && off_ < 2048; off_ += 64)                   \
                __builtin_prefetch(r_->data + off_);                                           \
    } while (0)

static void chunk_mapped(fl_chunk *c)
{
    fl_worker *w = c->w;
    fl_loader *L = w->L;
    fl_slot *s = c->slot;
    fl_error e;
    double t_look = fl_now_s();
    for (uint32_t i = 0; i < c->cnt && i < INFO_AHEAD; i++)
        fl_dataset_prefetch_info(L->ds, s->b.indices[c->k0 + i]);
    for (uint32_t i = 0; i < c->cnt; i++) {
        fl_read_req *r = &c->reqs[i];
        uint64_t idx = s->b.indices[c->k0 + i];
        size_t len = 0;
        if (i + INFO_AHEAD < c->cnt)
            fl_dataset_prefetch_info(L->ds, s->b.indices[c->k0 + i + INFO_AHEAD]);
        r->res = fl_dataset_record_info(L->ds, idx, &c->infos[i], &e);
        if (r->res == 0)
            r->res = mapped_record(L, idx, &c->infos[i], &r->data, &len, &e);
        r->len = (uint32_t)len;
        if (i < DATA_AHEAD)
            PREFETCH_RECORD(r);
    }
    double t0 = fl_now_s();
    w->st.io_wait_s += t0 - t_look; /* the mapping's "reads": index lookups and prefetches */
    for (uint32_t i = 0; i < c->cnt; i++) {
        fl_read_req *r = &c->reqs[i];
        uint32_t k = c->k0 + i;
        uint64_t idx = s->b.indices[k];
        uint64_t pos = fl_order_pos(&L->plan, c->batch, k);
        if (i + DATA_AHEAD < c->cnt)
            PREFETCH_RECORD(&c->reqs[i + DATA_AHEAD]);
        uint8_t *dst = s->b.images + (size_t)k * L->sample_bytes;
        int rc = r->res;
        if (rc < 0) {
            /* redo the failed step to get its message (rare) */
            fl_record_info info;
            const uint8_t *d;
            size_t n;
            if (fl_dataset_record_info(L->ds, idx, &info, &e) == 0)
                mapped_record(L, idx, &info, &d, &n, &e);
        } else {
            w->st.bytes_read += r->len;
            rc = load_sample(w, idx, &c->infos[i], r->data, r->len, c->epoch, pos, dst, &e);
        }
        if (rc < 0)
            sample_failed(c, k, idx, pos, dst, &e);
        else
            s->b.labels[k] = c->infos[i].label;
    }
    if (L->read_in_place) /* the copies timed as one (load_sample times the other paths) */
        w->st.decode_s += fl_now_s() - t0;
}

/* Look the chunk's records up; mapped records are processed right away, the others are queued
 * on the reader. */
static void chunk_start(fl_chunk *c)
{
    fl_worker *w = c->w;
    fl_loader *L = w->L;
    fl_slot *s = c->slot;
    c->nreq = 0;
    c->err_k = FL_NO_ERROR_K;
    c->skipped = 0;
    if (L->mapped) {
        chunk_mapped(c);
        return;
    }
    for (uint32_t i = 0; i < c->cnt; i++) {
        uint32_t k = c->k0 + i;
        uint64_t idx = s->b.indices[k];
        fl_record_info *info = &c->infos[i];
        fl_error e;
        uint64_t pos = fl_order_pos(&L->plan, c->batch, k);
        uint8_t *dst = s->b.images + (size_t)k * L->sample_bytes;
        if (fl_dataset_record_info(L->ds, idx, info, &e) < 0) {
            sample_failed(c, k, idx, pos, dst, &e);
            continue;
        }
        fl_read_req *r = &c->reqs[c->nreq++];
        memset(r, 0, sizeof *r);
        r->fd = L->fds[info->shard];
        r->offset = info->offset;
        r->len = info->stored_len;
        r->tag = k;
        /* Raw pixels that need no change are read straight into the batch (no copy at all);
         * the CRC is then checked where they landed. */
        if (L->read_in_place && info->stored_len == L->sample_bytes)
            r->dst = dst;
    }
    if (c->nreq > 0)
        w->reader->submit(w->reader, c->reqs, c->nreq, c->first_slot, &w->st.io_wait_s);
}

/* Process the chunk's reads as they complete. */
static void chunk_finish(fl_chunk *c)
{
    fl_worker *w = c->w;
    if (c->nreq > 0)
        w->reader->drain(w->reader, c->reqs, c->nreq, on_read, c, &w->st.io_wait_s,
                         &w->st.bytes_read);
}

/* Give the slot the next ticket: its place in the epoch order and its record indices. Called
 * with L->mu held; the epoch's sequence is computed once, when its first batch is assigned. */
static void assign(fl_loader *L, fl_slot *s, uint64_t ticket)
{
    uint64_t epoch = ticket / L->plan.batches, batch = ticket % L->plan.batches;
    if (L->perm_epoch != epoch) {
        fl_order_epoch(&L->plan, epoch, L->perm);
        L->perm_epoch = epoch;
    }
    s->ticket = ticket;
    s->state = SLOT_FILLING;
    s->claimed = s->done = 0;
    s->err_k = FL_NO_ERROR_K;
    s->b.epoch = epoch;
    s->b.batch = batch;
    s->b.last_in_epoch = batch + 1 == L->plan.batches;
    s->b.skipped = 0;
    for (uint32_t k = 0; k < L->opt.batch_size; k++)
        s->b.indices[k] = L->perm[fl_order_pos(&L->plan, batch, k) % L->plan.n];
}

static void merge_stats(fl_stage_stats *dst, fl_stage_stats *src)
{
    dst->bytes_read += src->bytes_read;
    dst->skipped += src->skipped;
    dst->io_wait_s += src->io_wait_s;
    dst->decode_s += src->decode_s;
    dst->augment_s += src->augment_s;
    dst->slot_wait_s += src->slot_wait_s;
    memset(src, 0, sizeof *src);
}

/* Claim the next run of samples (L->mu held). With `block`, wait for a free ring slot;
 * returns 0 when stopping or, without `block`, when no slot is free. */
static int claim(fl_worker *w, fl_chunk *c, int block)
{
    fl_loader *L = w->L;
    uint32_t B = L->opt.batch_size;
    while (!L->stop) {
        fl_slot *s = L->fill_slot;
        if (!s || s->claimed == B) {
            fl_slot *cand = &L->slots[L->fill_next % L->nslots];
            if (cand->state != SLOT_FREE) {
                if (!block)
                    return 0;
                double t0 = fl_now_s();
                pthread_cond_wait(&L->work_cv, &L->mu);
                w->st.slot_wait_s += fl_now_s() - t0;
                continue;
            }
            assign(L, cand, L->fill_next++);
            L->fill_slot = s = cand;
        }
        c->slot = s;
        c->k0 = s->claimed;
        c->cnt = B - c->k0 < L->chunk ? B - c->k0 : L->chunk;
        c->epoch = s->b.epoch;
        c->batch = s->b.batch;
        s->claimed += c->cnt;
        return 1;
    }
    return 0;
}

/* Account a finished chunk to its slot (L->mu held). */
static void complete(fl_loader *L, fl_worker *w, fl_chunk *c)
{
    fl_slot *s = c->slot;
    s->b.skipped += c->skipped;
    if (c->err_k < s->err_k) {
        s->err_k = c->err_k;
        s->err = c->err;
    }
    merge_stats(&L->st, &w->st);
    s->done += c->cnt;
    if (s->done == L->opt.batch_size) {
        s->state = SLOT_READY;
        pthread_cond_broadcast(&L->done_cv);
    }
}

void *fl_worker_main(void *arg)
{
    fl_worker *w = arg;
    fl_loader *L = w->L;
    fl_chunk ch[2];
    for (int i = 0; i < 2; i++) {
        memset(&ch[i], 0, sizeof ch[i]);
        ch[i].w = w;
        ch[i].first_slot = i ? L->chunk : 0;
        ch[i].reqs = w->reqs + (i ? L->chunk : 0);
        ch[i].infos = w->infos + (i ? L->chunk : 0);
    }
    fl_chunk *cur = NULL;
    int next_i = 0;
    pthread_mutex_lock(&L->mu);
    for (;;) {
        if (!cur) {
            if (!claim(w, &ch[next_i], 1))
                break;
            cur = &ch[next_i];
            next_i ^= 1;
            pthread_mutex_unlock(&L->mu);
            chunk_start(cur);
            pthread_mutex_lock(&L->mu);
        }
        if (L->mapped) {
            /* records in memory: chunk_start processed the whole chunk and nothing is in
             * flight, so hand it over now rather than after the next one */
            complete(L, w, cur);
            cur = NULL;
            continue;
        }
        /* Claim ahead so that the next chunk's reads are in flight while this one decodes;
         * never wait for a slot while holding a chunk. */
        fl_chunk *nxt = NULL;
        if (claim(w, &ch[next_i], 0)) {
            nxt = &ch[next_i];
            next_i ^= 1;
        }
        pthread_mutex_unlock(&L->mu);
        if (nxt)
            chunk_start(nxt);
        chunk_finish(cur);
        pthread_mutex_lock(&L->mu);
        complete(L, w, cur);
        cur = nxt;
        if (L->stop && cur) {
            /* its reads target buffers still alive until close has joined us: let them land */
            pthread_mutex_unlock(&L->mu);
            chunk_finish(cur);
            pthread_mutex_lock(&L->mu);
            complete(L, w, cur);
            cur = NULL;
        }
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}
