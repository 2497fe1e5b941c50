/* worker.c — a decode worker: claims chunks of the batch being filled, reads their records
 * (io_uring / pread, or LMDB's mmap), checks CRC32C, decompresses into its own scratch, and
 * decodes + augments each sample straight into its place in the batch. No per-sample malloc. */
#include "worker.h"

#include "fl_crc32c.h"
#include "fl_mapped_guard.h"
#include "geometry.h"
#include "jpeg_index_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int fl_worker_init(fl_worker *w, const fl_work_ctx *X, uint32_t id, fl_error *err)
{
    memset(w, 0, sizeof *w);
    w->ctx = X;
    w->id = id;
    int rc = fl_decoder_create(0, &w->dec, err);
    if (rc < 0)
        return rc;
    fl_decoder_set_flags(w->dec, X->decode_flags);
    w->payload_cap = fl_dataset_max_raw_len(X->ds);
    if (w->payload_cap == 0)
        w->payload_cap = 1;
    w->payload = malloc(w->payload_cap);
    w->reqs = calloc(2 * (size_t)X->chunk, sizeof *w->reqs);
    w->infos = calloc(2 * (size_t)X->chunk, sizeof *w->infos);
    void *sb = NULL;
    size_t sb_len = fl_reader_slot_size(fl_dataset_max_stored_len(X->ds), X->direct);
    if (posix_memalign(&sb, FL_DIRECT_ALIGN, sb_len) != 0)
        sb = NULL;
    w->sync_buf = sb;
    if (!w->payload || !w->reqs || !w->infos || !w->sync_buf)
        return fl_error_set(err, -ENOMEM, "worker %u: out of memory for scratch buffers", id);
    if (!X->fields_on)
        return 0;
    uint32_t n = X->nfields;
    w->vals = calloc(n, sizeof *w->vals);
    w->keep = calloc(n, sizeof *w->keep);
    w->nkept = calloc(n, sizeof *w->nkept);
    w->xmap = malloc(((size_t)X->out_w + 1) * sizeof *w->xmap);
    w->ymap = malloc(((size_t)X->out_h + 1) * sizeof *w->ymap);
    if (!w->vals || !w->keep || !w->nkept || !w->xmap || !w->ymap)
        return fl_error_set(err, -ENOMEM, "worker %u: out of memory for field scratch", id);
    for (uint32_t i = 0; i < n; i++) {
        if (X->fields[i].type != FL_FIELD_BOXES)
            continue;
        uint32_t m = X->fout[i].rows;
        w->keep[i] = malloc((size_t)m * sizeof **w->keep);
        if (!w->keep[i])
            return fl_error_set(err, -ENOMEM, "worker %u: out of memory for field scratch", id);
        if ((int)i == X->object_boxes && !(w->boxes = malloc((size_t)m * 16)))
            return fl_error_set(err, -ENOMEM, "worker %u: out of memory for field scratch", id);
    }
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
    if (w->keep)
        for (uint32_t i = 0; i < w->ctx->nfields; i++)
            free(w->keep[i]);
    free(w->keep);
    free(w->vals);
    free(w->nkept);
    free(w->boxes);
    free(w->xmap);
    free(w->ymap);
    free(w->mask);
    free(w->jidx);
    fl_mask_decoder_free(w->maskdec);
    memset(w, 0, sizeof *w);
}

/* Raw pixels: crop (a pointer offset), channel conversion when asked, then a plain copy when
 * the crop already has the output size (the common no-augment case: one memcpy) or fl_resize. */
static int raw_sample(fl_worker *w, const uint8_t *pix, uint32_t W, uint32_t C,
                      const fl_aug_params *ap, uint8_t *dst, fl_error *err)
{
    const fl_work_ctx *X = w->ctx;
    uint32_t oc = X->out_c, ow = X->out_w, oh = X->out_h;
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

static const char *where(const fl_work_ctx *X, const fl_record_info *info)
{
    const char *p = fl_dataset_shard_path(X->ds, X->backend == FL_BACKEND_LMDB ? 0 : info->shard);
    return p ? p : "?";
}

/* Length and CRC32C of the stored bytes against the index entry already at hand (what
 * fl_dataset_check does, without looking the entry up again). */
static int check_record(const fl_work_ctx *X, uint64_t idx, const fl_record_info *info,
                        const uint8_t *data, size_t len, fl_error *err)
{
    if (len != info->stored_len)
        return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %zu bytes, index says %u",
                            where(X, info), (unsigned long long)idx, len, info->stored_len);
    uint32_t crc = fl_crc32c(0, data, len);
    if (crc != info->crc32c)
        return fl_error_set(err, FL_E_CHECKSUM,
                            "%s: record %llu: CRC32C mismatch (index 0x%08x, data 0x%08x)",
                            where(X, info), (unsigned long long)idx, info->crc32c, crc);
    return 0;
}

/* Raw, uncompressed, unchanged sample from the mapping: one pass copies it into the batch and
 * computes its CRC32C. Not timed here: a sample takes well under a microsecond, so the caller
 * times the whole chunk. */
static int copy_checked(fl_worker *w, uint64_t idx, const fl_record_info *info, const uint8_t *data,
                        size_t len, uint8_t *dst, fl_error *err)
{
    const fl_work_ctx *X = w->ctx;
    uint32_t crc = fl_crc32c_copy(dst, data, len);
    if (crc != info->crc32c)
        return fl_error_set(err, FL_E_CHECKSUM,
                            "%s: record %llu: CRC32C mismatch (index 0x%08x, data 0x%08x)",
                            where(X, info), (unsigned long long)idx, info->crc32c, crc);
    return 0;
}

/* The payload's first bytes are those of the format the index gives the record (the decoders
 * sniff the bytes themselves: without this a record stored under the wrong format would decode
 * as whatever it holds). */
static int format_matches(fl_encoding f, const uint8_t *p, size_t n)
{
    switch (f) {
    case FL_ENC_JPEG: return n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF;
    case FL_ENC_PNG: return n >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8);
    case FL_ENC_WEBP: return n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4);
    default: return 0;
    }
}

static const char *enc_name(fl_encoding f)
{
    return f == FL_ENC_JPEG   ? "JPEG"
           : f == FL_ENC_PNG  ? "PNG"
           : f == FL_ENC_WEBP ? "WebP"
                              : "an unknown format";
}

/* The source size of record idx's image: the index entry's, else the schema's (raw) or its
 * header's (encoded; the payload's first bytes checked against the format the index gives).
 * Errors name the shard file and record. */
static int image_size(const fl_work_ctx *X, uint64_t idx, const fl_record_info *info,
                      const uint8_t *payload, size_t plen, uint32_t *W, uint32_t *H, fl_error *err)
{
    *W = info->width;
    *H = info->height;
    if (info->format == FL_ENC_RAW) {
        if (!*W || !*H) {
            *W = X->schema.width;
            *H = X->schema.height;
        }
        uint32_t C = X->schema.channels;
        if (!*W || !*H || (uint64_t)*W * *H * C != plen)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: record %llu: raw payload of %zu bytes is not %u×%u×%u",
                                where(X, info), (unsigned long long)idx, plen, *H, *W, C);
        return 0;
    }
    if (!format_matches(info->format, payload, plen))
        return fl_error_set(err, FL_E_FORMAT,
                            "%s: record %llu: the index says %s (format %d) but "
                            "the payload is not one",
                            where(X, info), (unsigned long long)idx, enc_name(info->format),
                            (int)info->format);
    if (!*W || !*H) {
        fl_image_info ii;
        int rc = fl_image_probe(payload, plen, &ii, err);
        if (rc < 0)
            return fl_error_prefix(err, "%s: record %llu", where(X, info), (unsigned long long)idx);
        *W = ii.width;
        *H = ii.height;
    }
    return 0;
}

/* Decode memory (budget.h). What decoding the sample can use: the image through its crop (the
 * decoders' estimate; a raw crop's channel conversion and resize scratch as grow() sizes them)
 * and, with MASK fields, one mask at source size with its decoder's scratch (they decode one
 * after the other into the same buffers). */
static uint64_t decode_need(const fl_work_ctx *X, const fl_record_info *info,
                            const uint8_t *payload, size_t plen, uint32_t W, uint32_t H,
                            const fl_aug_params *ap)
{
    const fl_rect *r = &ap->crop;
    uint64_t n, es = 0;
    if (info->format != FL_ENC_RAW)
        n = fl_decode_crop_resize_bytes(payload, plen, r, X->out_w, X->out_h, X->out_c);
    else
        n = ((uint64_t)r->width * r->height * X->out_c +
             fl_resize_scratch_size(r->width, r->height, X->out_w, X->out_h, X->out_c)) *
            5 / 4;
    for (uint32_t i = 0; X->fields_on && i < X->nfields; i++)
        if (X->fields[i].type == FL_FIELD_MASK && fl_dtype_size(X->fields[i].dtype) > es)
            es = fl_dtype_size(X->fields[i].dtype);
    if (es) /* the mask (grown by a quarter), its decoder's rows to convert (up to 2 bytes a
               sample) and row pointers, libpng's allocations */
        n += (uint64_t)W * H * (es * 5 / 4 + 2 * es) + (uint64_t)H * 8 + (uint64_t)W * 16 + 65536;
    return n;
}

/* Reserve the memory decoding record idx can use (*held: what was taken, 0 for a decode of at
 * most FL_DECODE_SMALL bytes, which takes nothing; *t0 moves on by the time waited). A worker holds
 * one reservation at a time, only while it decodes, never while it waits for a read or a ring slot.
 * An image needing more than the whole budget fails (the same whatever the worker count). */
static int budget_take(fl_worker *w, uint64_t idx, const fl_record_info *info,
                       const uint8_t *payload, size_t plen, uint32_t W, uint32_t H,
                       const fl_aug_params *ap, uint64_t *held, double *t0, fl_error *err)
{
    const fl_work_ctx *X = w->ctx;
    fl_budget *B = X->budget;
    *held = 0;
    if (!B->limit)
        return 0;
    uint64_t need = decode_need(X, info, payload, plen, W, H, ap);
    if (need <= FL_DECODE_SMALL)
        return 0;
    if (need > B->limit)
        return fl_error_set(err, FL_E_TOO_LARGE,
                            "%s: record %llu: decoding its %ux%u %s image needs %.1f MiB, more "
                            "than the loader's decode memory budget (%.1f MiB: decode_memory)",
                            where(X, info), (unsigned long long)idx, W, H,
                            info->format == FL_ENC_RAW ? "raw" : enc_name(info->format),
                            need / 1048576.0, B->limit / 1048576.0);
    double waited;
    int rc = fl_budget_take(B, need, &waited);
    *t0 += waited; /* the wait is not decoding (fl_loader_stats.decode_memory_wait_s has it) */
    if (rc < 0)
        return fl_error_set(err, FL_BUDGET_STOPPED, "%s: record %llu: the loader is closing",
                            where(X, info), (unsigned long long)idx);
    *held = need;
    return 0;
}

/* Give a reservation back; then a worker whose grow-only scratch holds more than
 * FL_DECODE_KEEP (after an unusually large image) frees it, so that between decodes a worker
 * keeps at most that much outside the budget. */
static void budget_give(fl_worker *w, uint64_t held)
{
    if (held)
        fl_budget_give(w->ctx->budget, held);
    size_t own = w->conv_cap + w->rs_cap + 3 * w->mask_cap; /* the mask decoder's rows too */
    if (fl_decoder_trim(w->dec, own < FL_DECODE_KEEP ? FL_DECODE_KEEP - own : 0) + own <=
        FL_DECODE_KEEP)
        return;
    free(w->conv);
    free(w->rs);
    free(w->mask);
    w->conv = w->rs = w->mask = NULL;
    w->conv_cap = w->rs_cap = w->mask_cap = 0;
    fl_mask_decoder_free(w->maskdec);
    w->maskdec = NULL;
}

/* The W × H image `payload` through the sample's geometry ap into dst. t0: when the record's
 * work began (raw records count their crop/resize as augmentation, encoded ones all as
 * decoding). */
static int render(fl_worker *w, uint64_t idx, const fl_record_info *info, const uint8_t *payload,
                  size_t plen, uint32_t W, const fl_aug_params *ap, uint8_t *dst, double t0,
                  fl_error *err)
{
    const fl_work_ctx *X = w->ctx;
    int rc;
    if (info->format == FL_ENC_RAW) {
        double t1 = fl_now_s();
        w->st.decode_s += t1 - t0;
        rc = raw_sample(w, payload, W, X->schema.channels, ap, dst, err);
        w->st.augment_s += fl_now_s() - t1;
    } else {
        /* the record's entry-point index from earlier epochs, and what this decode adds */
        size_t n = fl_jidx_cache_get(X->jidx, idx, &w->jidx, &w->jidx_cap);
        fl_decoder_set_jpeg_index(w->dec, n ? w->jidx : NULL, n);
        rc = fl_decode_crop_resize(w->dec, payload, plen, &ap->crop, X->out_w, X->out_h, X->out_c,
                                   ap->flip, dst, err);
        const void *grown;
        if (rc == 0 && (n = fl_decoder_jpeg_index(w->dec, &grown)) > 0)
            fl_jidx_cache_put(X->jidx, idx, grown, n);
        w->st.decode_s += fl_now_s() - t0;
    }
    if (rc < 0)
        return fl_error_prefix(err, "%s: record %llu", where(X, info), (unsigned long long)idx);
    return 0;
}

static int load_sample_fields(fl_worker *w, uint64_t idx, const fl_record_info *info,
                              const uint8_t *stored, size_t len, uint64_t epoch, uint64_t pos,
                              fl_batch *b, uint32_t k, fl_error *err);

/* Stored bytes of record idx → checked (CRC32C), decoded, augmented sample k of batch b. Each
 * record is handled in its own format (fl_record_info.format: a mixed dataset holds JPEG, PNG
 * and WebP records side by side). Errors name the shard file and record. */
/* A record copied into the batch as it is (raw, uncompressed, the output's size): one pass of
 * copy_checked, no decode. */
static inline int in_place(const fl_work_ctx *X, const fl_record_info *info, size_t len)
{
    return !X->fields_on && X->read_in_place && len == X->sample_bytes && len == info->stored_len;
}

static int load_sample(fl_worker *w, uint64_t idx, const fl_record_info *info,
                       const uint8_t *stored, size_t len, uint64_t epoch, uint64_t pos, fl_batch *b,
                       uint32_t k, fl_error *err)
{
    const fl_work_ctx *X = w->ctx;
    if (X->fields_on)
        return load_sample_fields(w, idx, info, stored, len, epoch, pos, b, k, err);
    uint8_t *dst = b->images + (size_t)k * X->sample_bytes;
    if (in_place(X, info, len)) {
        if (X->mapped) /* timed per chunk by the caller */
            return copy_checked(w, idx, info, stored, len, dst, err);
        /* read into a reader's buffer (O_DIRECT spans, coalesced extents): one pass copies
         * and checks */
        double t0 = fl_now_s();
        int rc = copy_checked(w, idx, info, stored, len, dst, err);
        w->st.decode_s += fl_now_s() - t0;
        return rc;
    }
    double t0 = fl_now_s();
    int rc;
    if ((rc = check_record(X, idx, info, stored, len, err)) < 0)
        return rc;
    const uint8_t *payload;
    size_t plen;
    rc = fl_dataset_payload(X->ds, idx, stored, len, w->payload, w->payload_cap, &payload, &plen,
                            err);
    if (rc < 0)
        return rc; /* the reader's message names the file and record */
    uint32_t W, H;
    if ((rc = image_size(X, idx, info, payload, plen, &W, &H, err)) < 0)
        return rc;
    fl_aug_params ap;
    fl_augment_params(X->aug, epoch, pos, W, H, &ap);
    uint64_t held;
    if ((rc = budget_take(w, idx, info, payload, plen, W, H, &ap, &held, &t0, err)) < 0)
        return rc;
    rc = render(w, idx, info, payload, plen, W, &ap, dst, t0, err);
    budget_give(w, held);
    return rc;
}

/* The block fields of record idx (values parsed into w->vals) into sample k of batch b,
 * through the sample's geometry ap on its W × H image: boxes transformed and kept by the
 * minimum-visible rule (their aligned int lists following), masks decoded and resampled,
 * ndarrays decompressed, the rest copied; variable fields padded with zero rows and counted. */
static int write_fields(fl_worker *w, uint64_t idx, const fl_record_info *info, fl_batch *b,
                        uint32_t k, const fl_aug_params *ap, uint32_t W, uint32_t H, fl_error *err)
{
    const fl_work_ctx *X = w->ctx;
    /* boxes first: the int lists aligned to them keep the same rows */
    for (uint32_t i = 0; i < X->nfields; i++) {
        if (X->fields[i].type != FL_FIELD_BOXES)
            continue;
        const fl_field_value *v = &w->vals[i];
        const fl_field_out *o = &X->fout[i];
        if (v->count > o->rows)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: record %llu: field \"%s\": %u boxes, the "
                                "manifest's max_count is %u",
                                where(X, info), (unsigned long long)idx, X->fields[i].name,
                                v->count, o->rows);
        float *dst = (float *)((uint8_t *)b->fields[i].data + (size_t)k * o->sample_bytes);
        uint32_t kept = fl_boxes_transform(v->data, v->count, ap, X->out_w, X->out_h,
                                           X->box_min_visible, dst, w->keep[i]);
        memset(dst + 4 * (size_t)kept, 0, (size_t)(o->rows - kept) * 16);
        b->fields[i].counts[k] = (int32_t)kept;
        w->nkept[i] = kept;
    }
    int maps = 0;
    for (uint32_t i = 0; i < X->nfields; i++) {
        const fl_field *f = &X->fields[i];
        const fl_field_value *v = &w->vals[i];
        const fl_field_out *o = &X->fout[i];
        uint8_t *dst = (uint8_t *)b->fields[i].data + (size_t)k * o->sample_bytes;
        int rc;
        switch (f->type) {
        case FL_FIELD_IMAGE:
        case FL_FIELD_BOXES: break;
        case FL_FIELD_INT:
            if ((int)i != X->label_field)
                memcpy(dst, v->data, 4);
            break;
        case FL_FIELD_FLOAT:
        case FL_FIELD_FLOAT_VECTOR: memcpy(dst, v->data, o->sample_bytes); break;
        case FL_FIELD_INT_LIST:
        case FL_FIELD_BYTES:
        case FL_FIELD_TEXT: {
            uint32_t n = v->count;
            if (n > o->rows)
                return fl_error_set(err, FL_E_FORMAT,
                                    "%s: record %llu: field \"%s\": %u values, "
                                    "the manifest's max_count is %u",
                                    where(X, info), (unsigned long long)idx, f->name, n, o->rows);
            if (f->type == FL_FIELD_INT_LIST && f->of >= 0) {
                n = w->nkept[f->of];
                fl_rows_compact_i32(v->data, w->keep[f->of], n, (int32_t *)dst);
            } else {
                memcpy(dst, v->data, (size_t)n * o->row_bytes);
            }
            memset(dst + (size_t)n * o->row_bytes, 0, (size_t)(o->rows - n) * o->row_bytes);
            b->fields[i].counts[k] = (int32_t)n;
            break;
        }
        case FL_FIELD_MASK: {
            size_t es = fl_dtype_size(f->dtype), need = (size_t)W * H * es;
            if (grow(&w->mask, &w->mask_cap, need) < 0)
                return fl_error_set(err, -ENOMEM, "out of memory for a %ux%u mask", W, H);
            if (!w->maskdec && (rc = fl_mask_decoder_create(&w->maskdec, err)) < 0)
                return rc;
            char what[128];
            snprintf(what, sizeof what, "record %llu: field \"%s\"", (unsigned long long)idx,
                     f->name);
            if (!maps) {
                fl_geometry_maps(ap, X->out_w, X->out_h, w->xmap, w->ymap);
                maps = 1;
            }
            /* the record's CRC32C covered these bytes; rows below the crop's last (ymap grows
             * with v) are never read, so they are not decoded */
            double t0 = fl_now_s();
            rc = fl_mask_decode_rows(w->maskdec, v->data, v->len, f->codec, W, H, f->dtype,
                                     w->ymap[X->out_h - 1] + 1, FL_MASK_CHECKED, w->mask,
                                     w->mask_cap, what, err);
            double t1 = fl_now_s();
            w->st.decode_s += t1 - t0;
            if (rc < 0)
                return fl_error_prefix(err, "%s", where(X, info));
            fl_mask_resample(w->mask, (size_t)W * es, (uint32_t)es, w->xmap, w->ymap, X->out_w,
                             X->out_h, dst);
            w->st.augment_s += fl_now_s() - t1;
            break;
        }
        case FL_FIELD_NDARRAY:
            if ((rc = fl_dataset_ndarray(X->ds, i, v, dst, o->sample_bytes, err)) < 0)
                return rc; /* the reader's message names the record */
            break;
        }
    }
    return 0;
}

/* A record of a data set with fields: the CRC over all its stored bytes, its fields block parsed
 * (fl_dataset_record_fields), the image decoded through the sample's draw (FL_AUG_OBJECT_CROP
 * draws with the sample's boxes), then every block field through the same geometry. */
static int load_sample_fields(fl_worker *w, uint64_t idx, const fl_record_info *info,
                              const uint8_t *stored, size_t len, uint64_t epoch, uint64_t pos,
                              fl_batch *b, uint32_t k, fl_error *err)
{
    const fl_work_ctx *X = w->ctx;
    double t0 = fl_now_s();
    int rc;
    if ((rc = check_record(X, idx, info, stored, len, err)) < 0)
        return rc;
    if ((rc = fl_dataset_record_fields(X->ds, idx, stored, len, w->vals, err)) < 0)
        return rc; /* the reader's message names the file and record */
    fl_aug_params ap = {{0, 0, 0, 0}, 0};
    uint32_t W = 0, H = 0;
    uint64_t held = 0;
    if (X->has_image) {
        const uint8_t *payload;
        size_t plen;
        rc = fl_dataset_payload(X->ds, idx, stored, len, w->payload, w->payload_cap, &payload,
                                &plen, err);
        if (rc < 0)
            return rc;
        if ((rc = image_size(X, idx, info, payload, plen, &W, &H, err)) < 0)
            return rc;
        if (X->object_boxes >= 0) {
            const fl_field_value *v = &w->vals[X->object_boxes];
            uint32_t n =
                v->count < X->fout[X->object_boxes].rows ? v->count : X->fout[X->object_boxes].rows;
            memcpy(w->boxes, v->data, (size_t)n * 16);
            fl_augment_object_params(X->aug, epoch, pos, W, H, w->boxes, n, &ap);
        } else {
            fl_augment_params(X->aug, epoch, pos, W, H, &ap);
        }
        if ((rc = budget_take(w, idx, info, payload, plen, W, H, &ap, &held, &t0, err)) < 0)
            return rc;
        uint8_t *dst = b->images + (size_t)k * X->sample_bytes;
        rc = render(w, idx, info, payload, plen, W, &ap, dst, t0, err);
    } else {
        w->st.decode_s += fl_now_s() - t0;
    }
    if (rc == 0)
        rc = write_fields(w, idx, info, b, k, &ap, W, H, err);
    budget_give(w, held);
    return rc;
}

/* Stored bytes of record idx when records are in memory: the loader's copy (FL_IO_MEMORY) or
 * the dataset's mapping (LMDB, FL_IO_MMAP). */
static int mapped_record(const fl_work_ctx *X, uint64_t idx, const fl_record_info *info,
                         const uint8_t **data, size_t *len, fl_error *err)
{
    if (X->mem) {
        *len = info->stored_len;
        return fl_memory_record(X, idx, info, data, err);
    }
    return fl_dataset_get(X->ds, idx, data, len, 0, err);
}

/* copy_checked's arguments, for running it under the mapping guard */
typedef struct in_place_args {
    fl_worker *w;
    uint64_t idx;
    const fl_record_info *info;
    const uint8_t *data;
    size_t len;
    uint8_t *dst;
    fl_error *err;
    int rc;
} in_place_args;

static void in_place_fn(void *arg)
{
    in_place_args *a = arg;
    a->rc = copy_checked(a->w, a->idx, a->info, a->data, a->len, a->dst, a->err);
}

/* load_sample for stored bytes from mapped_record. A file mapping (LMDB, FL_IO_MMAP) faults
 * (SIGBUS) on its pages past the file's end when another process truncates or rewrites the file
 * under the loader, which would kill the process: so the mapping is read once, under
 * fl_mapped_run — a raw record straight into the batch with its CRC (copy_checked), any other
 * into the worker's sync_buf (unused by mapped loaders otherwise), which the sample is then made
 * from — and such a fault is this record's error. The loader's own copy (FL_IO_MEMORY) cannot
 * fault and is read in place. */
static int load_mapped(fl_worker *w, uint64_t idx, const fl_record_info *info, const uint8_t *data,
                       size_t len, uint64_t epoch, uint64_t pos, fl_batch *b, uint32_t k,
                       fl_error *err)
{
    const fl_work_ctx *X = w->ctx;
    if (X->mem)
        return load_sample(w, idx, info, data, len, epoch, pos, b, k, err);
    int rc;
    if (in_place(X, info, len)) {
        in_place_args a = {.w = w,
                           .idx = idx,
                           .info = info,
                           .data = data,
                           .len = len,
                           .dst = b->images + (size_t)k * X->sample_bytes,
                           .err = err};
        rc = fl_mapped_run(in_place_fn, &a);
        if (rc == 0)
            return a.rc;
    } else if (len > fl_dataset_max_stored_len(X->ds)) {
        return fl_error_set(err, FL_E_FORMAT, "%s: record %llu: %zu bytes, more than the largest",
                            where(X, info), (unsigned long long)idx, len);
    } else {
        rc = fl_mapped_copy(w->sync_buf, data, len);
        if (rc == 0)
            return load_sample(w, idx, info, w->sync_buf, len, epoch, pos, b, k, err);
    }
    return fl_dataset_mapping_error(X->ds, idx, rc, err);
}

/* Read record idx on its own (replacement of a bad record). */
static int load_one(fl_worker *w, uint64_t idx, fl_record_info *info, uint64_t epoch, uint64_t pos,
                    fl_batch *b, uint32_t k, fl_error *err)
{
    const fl_work_ctx *X = w->ctx;
    int rc = fl_dataset_record_info(X->ds, idx, info, err);
    if (rc < 0)
        return rc;
    if (X->mapped) {
        const uint8_t *data;
        size_t len;
        if ((rc = mapped_record(X, idx, info, &data, &len, err)) < 0)
            return rc;
        w->st.bytes_read += len;
        return load_mapped(w, idx, info, data, len, epoch, pos, b, k, err);
    }
    fl_read_req req = {.fd = X->fds[info->shard], .offset = info->offset, .len = info->stored_len};
    double t0 = fl_now_s();
    rc = fl_pread_span(&req, w->sync_buf, X->direct, &w->st.bytes_read);
    w->st.io_wait_s += fl_now_s() - t0;
    if (rc < 0)
        return fl_error_set(err, rc, "%s: record %llu: read failed: %s", where(X, info),
                            (unsigned long long)idx,
                            rc == FL_E_TRUNCATED ? "file ends early" : fl_strerror(rc));
    return load_sample(w, idx, info, req.data, info->stored_len, epoch, pos, b, k, err);
}

/* One claimed run of samples of a batch, with its reads. A worker has two, so the reads of the
 * next chunk are in flight while the current one is decoded. */
typedef struct fl_chunk {
    fl_worker *w;
    fl_ring_run run; /* the samples claimed: [k0, k0 + cnt) of the batch in run.slot */
    fl_batch *b;     /* that batch */
    uint32_t k0, cnt;
    uint64_t epoch, batch;
    unsigned first_slot; /* reader arena slots of this chunk */
    fl_read_req *reqs;
    fl_record_info *infos; /* by chunk position */
    unsigned nreq;
    uint32_t err_k; /* lowest failed sample (FL_RING_NO_ERROR: none) and its error */
    fl_error err;
    uint32_t skipped;
} fl_chunk;

/* Sample k of the chunk failed with err: with FL_CORRUPT_SKIP replace it by the next good record
 * in dataset order (deterministic whatever the workers), else remember the error. */
static void sample_failed(fl_chunk *c, uint32_t k, uint64_t idx, uint64_t pos, fl_error *err)
{
    fl_worker *w = c->w;
    const fl_work_ctx *X = w->ctx;
    fl_batch *b = c->b;
    if (X->on_corrupt == FL_CORRUPT_SKIP) {
        uint64_t n = X->plan->n;
        fl_error e2;
        for (uint64_t t = 1; t < n; t++) {
            uint64_t j = (idx + t) % n;
            fl_record_info info;
            if (load_one(w, j, &info, c->epoch, pos, b, k, &e2) == 0) {
                b->indices[k] = j;
                b->labels[k] = info.label;
                c->skipped++;
                return;
            }
            if (e2.code == -ENOMEM || e2.code == FL_BUDGET_STOPPED)
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
    const fl_work_ctx *X = w->ctx;
    fl_batch *b = c->b;
    uint32_t k = req->tag;
    const fl_record_info *info = &c->infos[k - c->k0];
    uint64_t idx = b->indices[k];
    uint64_t pos = fl_order_pos(X->plan, c->batch, k);
    uint8_t *dst = b->images + (size_t)k * X->sample_bytes;
    fl_error e;
    int rc;
    if (req->res < 0) {
        rc = fl_error_set(&e, req->res, "%s: record %llu: read failed: %s", where(X, info),
                          (unsigned long long)idx,
                          req->res == FL_E_TRUNCATED ? "file ends early" : fl_strerror(req->res));
    } else if (req->data == dst) {
        double t0 = fl_now_s();
        rc = check_record(X, idx, info, dst, req->len, &e);
        w->st.decode_s += fl_now_s() - t0;
    } else {
        rc = load_sample(w, idx, info, req->data, req->len, c->epoch, pos, b, k, &e);
    }
    if (X->drop_behind && req->fd > 0) {
        /* every page the record touches: the kernel drops only whole pages inside the range, and
         * small records (JPEG, ~17 KB) would leave their two edge pages — half their bytes —
         * cached; a neighbour read later re-reads a shared page at worst */
        uint64_t a = req->offset / FL_DIRECT_ALIGN * FL_DIRECT_ALIGN;
        uint64_t z =
            (req->offset + req->len + FL_DIRECT_ALIGN - 1) / FL_DIRECT_ALIGN * FL_DIRECT_ALIGN;
        posix_fadvise(req->fd, (off_t)a, (off_t)(z - a), POSIX_FADV_DONTNEED);
    }
    if (rc < 0)
        sample_failed(c, k, idx, pos, &e);
    else
        b->labels[k] = info->label;
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
#define PREFETCH_RECORD(r)                                                                         \
    do {                                                                                           \
        const fl_read_req *r_ = (r);                                                               \
        if (r_->res == 0)                                                                          \
            for (size_t off_ = 0; off_ < r_->len && off_ < 2048; off_ += 64)                       \
                __builtin_prefetch(r_->data + off_);                                               \
    } while (0)

static void chunk_mapped(fl_chunk *c)
{
    fl_worker *w = c->w;
    const fl_work_ctx *X = w->ctx;
    fl_batch *b = c->b;
    fl_error e;
    double t_look = fl_now_s();
    for (uint32_t i = 0; i < c->cnt && i < INFO_AHEAD; i++)
        fl_dataset_prefetch_info(X->ds, b->indices[c->k0 + i]);
    for (uint32_t i = 0; i < c->cnt; i++) {
        fl_read_req *r = &c->reqs[i];
        uint64_t idx = b->indices[c->k0 + i];
        size_t len = 0;
        if (i + INFO_AHEAD < c->cnt)
            fl_dataset_prefetch_info(X->ds, b->indices[c->k0 + i + INFO_AHEAD]);
        r->res = fl_dataset_record_info(X->ds, idx, &c->infos[i], &e);
        if (r->res == 0)
            r->res = mapped_record(X, idx, &c->infos[i], &r->data, &len, &e);
        r->len = (uint32_t)len;
        if (i < DATA_AHEAD)
            PREFETCH_RECORD(r);
    }
    double t0 = fl_now_s();
    w->st.io_wait_s += t0 - t_look; /* the mapping's "reads": index lookups and prefetches */
    for (uint32_t i = 0; i < c->cnt; i++) {
        fl_read_req *r = &c->reqs[i];
        uint32_t k = c->k0 + i;
        uint64_t idx = b->indices[k];
        uint64_t pos = fl_order_pos(X->plan, c->batch, k);
        if (i + DATA_AHEAD < c->cnt)
            PREFETCH_RECORD(&c->reqs[i + DATA_AHEAD]);
        int rc = r->res;
        if (rc < 0) {
            /* redo the failed step to get its message (rare) */
            fl_record_info info;
            const uint8_t *d;
            size_t n;
            if (fl_dataset_record_info(X->ds, idx, &info, &e) == 0)
                mapped_record(X, idx, &info, &d, &n, &e);
        } else {
            w->st.bytes_read += r->len;
            rc = load_mapped(w, idx, &c->infos[i], r->data, r->len, c->epoch, pos, b, k, &e);
        }
        if (rc < 0)
            sample_failed(c, k, idx, pos, &e);
        else
            b->labels[k] = c->infos[i].label;
    }
    if (X->read_in_place) /* the copies timed as one (load_sample times the other paths) */
        w->st.decode_s += fl_now_s() - t0;
}

/* Coalesced quasi reads (block_reader.h): the chunk's records are only looked up here (the
 * I/O thread reads their extents ahead); reqs[i].res says whether the lookup failed. */
static void chunk_blocks_start(fl_chunk *c)
{
    const fl_work_ctx *X = c->w->ctx;
    for (uint32_t i = 0; i < c->cnt; i++) {
        uint32_t k = c->k0 + i;
        uint64_t idx = c->b->indices[k];
        fl_error e;
        c->reqs[i].res = fl_dataset_record_info(X->ds, idx, &c->infos[i], &e);
        if (c->reqs[i].res < 0)
            sample_failed(c, k, idx, fl_order_pos(X->plan, c->batch, k), &e);
    }
}

/* Each record's bytes from its extent (waiting for the read when it has not landed yet), then
 * processed as a completed read would be; every sample puts its extent back, failed or not. */
static void chunk_blocks_finish(fl_chunk *c)
{
    fl_worker *w = c->w;
    const fl_work_ctx *X = w->ctx;
    for (uint32_t i = 0; i < c->cnt; i++) {
        uint32_t k = c->k0 + i;
        uint64_t idx = c->b->indices[k];
        if (c->reqs[i].res == 0) {
            fl_read_req r = {.len = c->infos[i].stored_len, .tag = k};
            double t0 = fl_now_s();
            r.res = fl_block_reader_get(X->blocks, c->epoch, c->run.ticket * X->batch_size + k, idx,
                                        &c->infos[i], &r.data);
            w->st.io_wait_s += fl_now_s() - t0;
            on_read(c, &r);
        }
        fl_block_reader_put(X->blocks, c->epoch, idx);
    }
}

/* Look the chunk's records up; mapped records are processed right away, the others are queued
 * on the reader. */
static void chunk_start(fl_chunk *c)
{
    fl_worker *w = c->w;
    const fl_work_ctx *X = w->ctx;
    fl_batch *b = c->b;
    c->nreq = 0;
    c->err_k = FL_RING_NO_ERROR;
    c->skipped = 0;
    if (X->mapped) {
        chunk_mapped(c);
        return;
    }
    if (X->blocks) {
        chunk_blocks_start(c);
        return;
    }
    for (uint32_t i = 0; i < c->cnt; i++) {
        uint32_t k = c->k0 + i;
        uint64_t idx = b->indices[k];
        fl_record_info *info = &c->infos[i];
        fl_error e;
        uint64_t pos = fl_order_pos(X->plan, c->batch, k);
        if (fl_dataset_record_info(X->ds, idx, info, &e) < 0) {
            sample_failed(c, k, idx, pos, &e);
            continue;
        }
        fl_read_req *r = &c->reqs[c->nreq++];
        memset(r, 0, sizeof *r);
        r->fd = X->fds[info->shard];
        r->offset = info->offset;
        r->len = info->stored_len;
        r->tag = k;
        /* Raw pixels that need no change are read straight into the batch (no copy at all);
         * the CRC is then checked where they landed. */
        if (X->read_in_place && info->stored_len == X->sample_bytes)
            r->dst = b->images + (size_t)k * X->sample_bytes;
    }
    if (c->nreq > 0)
        w->reader->submit(w->reader, c->reqs, c->nreq, c->first_slot, &w->st.io_wait_s);
}

/* Process the chunk's reads as they complete. */
static void chunk_finish(fl_chunk *c)
{
    fl_worker *w = c->w;
    if (w->ctx->blocks) {
        chunk_blocks_finish(c);
        return;
    }
    if (c->nreq > 0)
        w->reader->drain(w->reader, c->reqs, c->nreq, on_read, c, &w->st.io_wait_s,
                         &w->st.bytes_read);
}

/* Take over a run the ring handed out: its batch, epoch and batch number. */
static fl_chunk *chunk_claimed(fl_chunk *c)
{
    const fl_work_ctx *X = c->w->ctx;
    c->b = X->batches[c->run.slot];
    c->k0 = c->run.k0;
    c->cnt = c->run.cnt;
    c->epoch = c->run.ticket / X->plan->batches;
    c->batch = c->run.ticket % X->plan->batches;
    return c;
}

/* Publish the running totals for fl_worker_stats: single writer, relaxed atomic stores. */
static void publish_stats(fl_worker *w)
{
    __atomic_store_n(&w->pub.bytes_read, w->st.bytes_read, __ATOMIC_RELAXED);
    __atomic_store(&w->pub.io_wait_s, &w->st.io_wait_s, __ATOMIC_RELAXED);
    __atomic_store(&w->pub.decode_s, &w->st.decode_s, __ATOMIC_RELAXED);
    __atomic_store(&w->pub.augment_s, &w->st.augment_s, __ATOMIC_RELAXED);
    __atomic_store(&w->pub.slot_wait_s, &w->st.slot_wait_s, __ATOMIC_RELAXED);
}

void fl_worker_stats(const fl_worker *w, fl_stage_stats *sum)
{
    double v;
    sum->bytes_read += __atomic_load_n(&w->pub.bytes_read, __ATOMIC_RELAXED);
    __atomic_load(&w->pub.io_wait_s, &v, __ATOMIC_RELAXED);
    sum->io_wait_s += v;
    __atomic_load(&w->pub.decode_s, &v, __ATOMIC_RELAXED);
    sum->decode_s += v;
    __atomic_load(&w->pub.augment_s, &v, __ATOMIC_RELAXED);
    sum->augment_s += v;
    __atomic_load(&w->pub.slot_wait_s, &v, __ATOMIC_RELAXED);
    sum->slot_wait_s += v;
}

/* Hand the finished chunk c to the ring and, when `next` is not NULL, claim the next run into it
 * in the same lock hold (waiting for a free slot with `block`). Returns next, or NULL when no run
 * was claimed (the ring is stopping, or without block no slot is free). */
static fl_chunk *chunk_done(fl_chunk *c, fl_chunk *next, int block)
{
    fl_worker *w = c->w;
    publish_stats(w);
    int got = fl_ring_fill_done(w->ctx->ring, &c->run, c->err_k, &c->err, c->skipped,
                                next ? &next->run : NULL, block, &w->st.slot_wait_s);
    return got ? chunk_claimed(next) : NULL;
}

void *fl_worker_main(void *arg)
{
    fl_worker *w = arg;
    const fl_work_ctx *X = w->ctx;
    fl_chunk ch[2];
    for (int i = 0; i < 2; i++) {
        memset(&ch[i], 0, sizeof ch[i]);
        ch[i].w = w;
        ch[i].first_slot = i ? X->chunk : 0;
        ch[i].reqs = w->reqs + (i ? X->chunk : 0);
        ch[i].infos = w->infos + (i ? X->chunk : 0);
    }
    /* cur: the chunk being worked on; nxt: the one claimed ahead so that its reads are in
     * flight while cur decodes. A worker never waits for a slot while holding a chunk, and pays
     * one ring lock round per chunk: handing one in claims the next. */
    fl_chunk *cur = NULL;
    if (fl_ring_claim(X->ring, 1, &ch[0].run, &w->st.slot_wait_s))
        cur = chunk_claimed(&ch[0]);
    while (cur) {
        fl_chunk *other = cur == &ch[0] ? &ch[1] : &ch[0];
        chunk_start(cur);
        if (X->mapped) {
            /* records in memory: chunk_start processed the whole chunk and nothing is in flight,
             * so hand it over now rather than after the next one */
            cur = chunk_done(cur, other, 1);
            continue;
        }
        fl_chunk *nxt = NULL;
        if (fl_ring_claim(X->ring, 0, &other->run, &w->st.slot_wait_s))
            nxt = chunk_claimed(other);
        for (;;) {
            if (nxt)
                chunk_start(nxt);
            chunk_finish(cur);
            if (!nxt) {
                cur = chunk_done(cur, cur, 1);
                break;
            }
            /* cur's buffers are free again: claim ahead into them */
            fl_chunk *after = chunk_done(cur, cur, 0);
            cur = nxt;
            nxt = after;
        }
    }
    publish_stats(w);
    return NULL;
}
