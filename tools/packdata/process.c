/* process.c — what a worker thread does to one input item: read the file (or take the in-memory
 * pixels), check it (probe, declared size, truncation), then keep the bytes, or decode at the
 * smallest sufficient DCT scale, resize and encode (JPEG) or store pixels (raw), and compress.
 * Everything goes into the caller's slot; buffers are grow-only and reused across items. */
#include "pack_internal.h"

#include "archive_source.h"
#include "fl_file.h"
#include "fl_grow.h"
#include "pd_coco.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pd_worker_init(pd_worker_ctx *c, const pd_plan *plan, const void *dict, size_t dict_len,
                   fl_error *err)
{
    memset(c, 0, sizeof *c);
    int r = fl_decoder_create(plan->max_pixels, &c->dec, err);
    if (!r)
        r = fl_encoder_create(&c->enc, err);
    if (!r && plan->jpeg_restart >= 0)
        r = fl_encoder_create(&c->renc, err);
    if (!r && plan->schema.compression == FL_COMP_ZSTD)
        r = fl_compressor_create(plan->level, dict, dict_len, &c->comp, err);
    return r;
}

void pd_worker_free(pd_worker_ctx *c)
{
    if (c->dec)
        fl_decoder_free(c->dec);
    if (c->enc)
        fl_encoder_free(c->enc);
    if (c->renc)
        fl_encoder_free(c->renc);
    if (c->comp)
        fl_compressor_free(c->comp);
    free(c->file);
    free(c->pix);
    free(c->scratch);
    free(c->ffile);
    free(c->fboxes);
    free(c->mask);
    free(c->mask2);
    for (int i = 0; i < FL_MAX_FIELDS; i++)
        free(c->fval[i]);
    memset(c, 0, sizeof *c);
}

/* Read a whole file into a grow-only buffer. Returns 0 or -errno (EISDIR for non-files). The
 * O_NONBLOCK open: opening a FIFO must not wait for a writer (it is refused as not a file). */
static int read_into(const char *path, uint8_t **buf, size_t *cap, size_t *len)
{
    return fl_read_file_at(AT_FDCWD, path, SIZE_MAX,
                           FL_READ_REGULAR | FL_READ_SHORT_OK | FL_READ_NONBLOCK, buf, cap, len,
                           NULL);
}

static void target_size(const pd_plan *p, uint32_t w, uint32_t h, uint32_t *tw, uint32_t *th)
{
    if (p->resize_w) {
        *tw = p->resize_w;
        *th = p->resize_h;
    } else if (p->max_side && (w > p->max_side || h > p->max_side)) {
        if (w >= h) {
            *tw = p->max_side;
            *th = (uint32_t)(((uint64_t)h * p->max_side + w / 2) / w);
        } else {
            *th = p->max_side;
            *tw = (uint32_t)(((uint64_t)w * p->max_side + h / 2) / h);
        }
        if (!*tw)
            *tw = 1;
        if (!*th)
            *th = 1;
    } else {
        *tw = w;
        *th = h;
    }
}

#define REJECT(...)                                                                                \
    do {                                                                                           \
        s->status = PD_SLOT_REJECT;                                                                \
        snprintf(s->msg, sizeof s->msg, __VA_ARGS__);                                              \
        return;                                                                                    \
    } while (0)
#define FATAL(...)                                                                                 \
    do {                                                                                           \
        s->status = PD_SLOT_FATAL;                                                                 \
        snprintf(s->msg, sizeof s->msg, __VA_ARGS__);                                              \
        return;                                                                                    \
    } while (0)

static const char *fmt_name(fl_image_format f)
{
    return f == FL_IMG_JPEG   ? "JPEG"
           : f == FL_IMG_PNG  ? "PNG"
           : f == FL_IMG_WEBP ? "WebP"
                              : "unknown";
}

/* Store `len` payload bytes into the slot, compressing when the schema says so. */
static void store(pd_worker_ctx *c, const pd_plan *plan, const uint8_t *payload, size_t len,
                  pd_slot *s)
{
    s->raw_len = len;
    if (plan->schema.compression == FL_COMP_ZSTD) {
        size_t bound = fl_compress_bound(len);
        if (fl_grow(&s->buf, &s->cap, bound))
            FATAL("out of memory");
        fl_error err;
        fl_error_clear(&err);
        if (fl_compressor_compress(c->comp, payload, len, s->buf, s->cap, &s->len, &err))
            FATAL("%s: zstd compression failed: %s", s->source, err.msg);
        return;
    }
    if (payload != s->buf) {
        if (fl_grow(&s->buf, &s->cap, len ? len : 1))
            FATAL("out of memory");
        memcpy(s->buf, payload, len);
    }
    s->len = len;
}

/* An image's pixels between the steps of process_image: rows of stride bytes, in a buffer the
 * worker or the item owns. */
typedef struct pd_pixels {
    const uint8_t *pix;
    uint32_t w, h;
    size_t stride;
} pd_pixels;

/* Reads the item's file or tar member into *buf (the slot's when direct). */
static void read_input(const pd_item *it, pd_slot *s, uint8_t **buf, size_t *cap, size_t *len)
{
    int r;
    if (it->member) {
        /* a tar member: its bytes straight from the archive */
        char why[600];
        r = pd_member_read(it->member, buf, cap, len, why, sizeof why);
        if (r == -ENOMEM)
            FATAL("%.190s: %s", s->source, why);
        if (r)
            REJECT("%s", why);
    } else {
        r = read_into(it->path, buf, cap, len);
    }
    if (r == -ENOMEM)
        FATAL("out of memory reading %s", s->source);
    if (r == -ENOENT)
        REJECT("missing file (No such file or directory)");
    if (r == -EISDIR)
        REJECT("not a regular file");
    if (r == -ELOOP)
        REJECT("cannot read: a symbolic link loop (%s)", strerror(-r));
    if (r)
        REJECT("cannot read: %s", strerror(-r));
    s->in_bytes = *len;
    if (*len == 0)
        REJECT("empty file");
}

/* Probes the input's header and rejects what cannot be packed: unknown or unsupported formats,
 * declared sizes over --max-pixels or empty, a size other than the annotations', truncation. */
static void check_input(const pd_plan *plan, const pd_item *it, pd_slot *s, const uint8_t *data,
                        size_t len, fl_image_info *info)
{
    fl_error err;
    fl_error_clear(&err);
    int r;
    if ((r = fl_image_probe(data, len, info, &err))) {
        if (r == FL_E_UNSUPPORTED)
            REJECT("%s", err.msg); /* names the format: GIF, BMP, ... */
        if (err.msg[0] && strstr(err.msg, "unknown magic"))
            REJECT("not a JPEG, PNG or WebP image (unknown magic bytes)");
        REJECT("not a valid image: %s", err.msg[0] ? err.msg : fl_strerror(r));
    }
    if (!fl_image_can_decode(info->format))
        REJECT("a %s image: this build of packdata has no %s support (install libwebp-dev and "
               "rebuild fastload)",
               fmt_name(info->format), fmt_name(info->format));
    uint64_t px = (uint64_t)info->width * info->height;
    if (px > plan->max_pixels)
        REJECT("declared size %ux%u (%llu pixels) is over --max-pixels %llu", info->width,
               info->height, (unsigned long long)px, (unsigned long long)plan->max_pixels);
    if (!info->width || !info->height)
        REJECT("declared size %ux%u is empty", info->width, info->height);
    s->src_width = info->width;
    s->src_height = info->height;
    if (it->src_width && (it->src_width != info->width || it->src_height != info->height))
        REJECT("image is %ux%u, but its annotations say %ux%u", info->width, info->height,
               it->src_width, it->src_height);
    if (!fl_image_looks_complete(info->format, data, len))
        REJECT("truncated %s (%s)", fmt_name(info->format),
               info->format == FL_IMG_JPEG  ? "no end-of-image marker"
               : info->format == FL_IMG_PNG ? "no IEND chunk"
                                            : "shorter than its RIFF size");
}

/* --encode keep: the input's own bytes (restart markers added to a JPEG when asked); direct: they
 * were read into the slot already. */
static void keep_input(pd_worker_ctx *c, const pd_plan *plan, pd_slot *s, const fl_image_info *info,
                       const uint8_t *data, size_t len, int direct)
{
    /* each input keeps its own format; a single-format schema means every input had
     * that format when the plan sniffed them, so another one here changed since */
    if (plan->keep_format != FL_IMG_UNKNOWN && info->format != plan->keep_format &&
        plan->keep_by_name)
        REJECT("is a %s image, but under --part the stored format is decided from the names of "
               "the whole job's inputs, and every one is named as %s: rename it to its format "
               "(the job then stores each input in its own format), or pack it with "
               "--encode jpeg",
               fmt_name(info->format), fmt_name(plan->keep_format));
    if (plan->keep_format != FL_IMG_UNKNOWN && info->format != plan->keep_format)
        REJECT("is a %s image, but when the inputs were listed every one was %s (did the "
               "file change during the pack?)",
               fmt_name(info->format), fmt_name(plan->keep_format));
    s->format = pd_encoding_of(info->format);
    s->height = info->height;
    s->width = info->width;
    if (info->format == FL_IMG_JPEG && plan->jpeg_restart >= 0) {
        const uint8_t *out;
        size_t out_len;
        fl_error err;
        fl_error_clear(&err);
        if (fl_jpeg_add_restarts(c->renc, data, len, (uint32_t)plan->jpeg_restart, &out, &out_len,
                                 &err))
            REJECT("cannot add restart markers: %s", err.msg[0] ? err.msg : fl_strerror(err.code));
        store(c, plan, out, out_len, s);
        return;
    }
    if (direct) {
        s->len = s->raw_len = len;
        return;
    }
    store(c, plan, data, len, s);
}

/* Decodes at the smallest DCT scale that still covers the target size. */
static void decode_input(pd_worker_ctx *c, const pd_plan *plan, pd_slot *s,
                         const fl_image_info *info, const uint8_t *data, size_t len, pd_pixels *px)
{
    uint32_t tw, th;
    target_size(plan, info->width, info->height, &tw, &th);
    fl_image img;
    fl_error err;
    fl_error_clear(&err);
    int r = fl_decode(c->dec, data, len, plan->channels, tw, th, &img, &err);
    if (r == -ENOMEM)
        FATAL("out of memory decoding %s", s->source);
    if (r)
        REJECT("cannot decode %s: %s", fmt_name(info->format),
               err.msg[0] ? err.msg : fl_strerror(r));
    *px = (pd_pixels){img.pixels, img.width, img.height, img.stride};
}

/* An in-memory source's pixels, converted gray <-> RGB (ITU-R BT.601 luma) when the plan's
 * channels differ. */
static void memory_pixels(pd_worker_ctx *c, const pd_plan *plan, const pd_item *it, pd_slot *s,
                          pd_pixels *px)
{
    const uint32_t ch = plan->channels, w = it->width, h = it->height;
    s->src_width = w;
    s->src_height = h;
    s->in_bytes = (uint64_t)w * h * it->channels;
    *px = (pd_pixels){it->pixels, w, h, (size_t)w * it->channels};
    if (it->channels == ch)
        return;
    const uint8_t *pix = it->pixels;
    if (fl_grow(&c->file, &c->file_cap, (size_t)w * h * ch))
        FATAL("out of memory");
    uint8_t *o = c->file;
    size_t np = (size_t)w * h;
    if (ch == 1 && it->channels == 3) {
        for (size_t i = 0; i < np; i++)
            o[i] = (uint8_t)((299u * pix[3 * i] + 587u * pix[3 * i + 1] + 114u * pix[3 * i + 2] +
                              500u) /
                             1000u);
    } else if (ch == 3 && it->channels == 1) {
        for (size_t i = 0; i < np; i++)
            o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = pix[i];
    } else {
        FATAL("%s: cannot convert %u channels to %u", it->name, it->channels, ch);
    }
    px->pix = o;
    px->stride = (size_t)w * ch;
}

/* Resizes to the plan's target size, when it differs, into the worker's pixel buffer. */
static void resize_pixels(pd_worker_ctx *c, const pd_plan *plan, pd_slot *s, pd_pixels *px)
{
    const uint32_t ch = plan->channels, w = px->w, h = px->h;
    uint32_t tw, th;
    target_size(plan, w, h, &tw, &th);
    if (tw == w && th == h)
        return;
    size_t need = fl_resize_scratch_size(w, h, tw, th, ch);
    if (fl_grow(&c->scratch, &c->scratch_cap, need ? need : 1) ||
        fl_grow(&c->pix, &c->pix_cap, (size_t)tw * th * ch))
        FATAL("out of memory");
    fl_error err;
    fl_error_clear(&err);
    int rr = fl_resize(px->pix, w, h, px->stride, ch, c->pix, tw, th, (size_t)tw * ch, 0,
                       c->scratch, c->scratch_cap, &err);
    if (rr == -ENOMEM)
        FATAL("%s: out of memory resizing", s->source);
    if (rr)
        REJECT("cannot resize %ux%u to %ux%u: %.500s", w, h, tw, th, err.msg);
    *px = (pd_pixels){c->pix, tw, th, (size_t)tw * ch};
}

/* --encode raw: the pixels' rows packed without padding. */
static void store_raw(pd_worker_ctx *c, const pd_plan *plan, pd_slot *s, const pd_pixels *px)
{
    const uint32_t w = px->w, h = px->h;
    const uint8_t *pix = px->pix;
    if (plan->fixed_w && (w != plan->fixed_w || h != plan->fixed_h))
        REJECT("image is %ux%u but this raw dataset's records are %ux%u: pass --resize WxH to "
               "give every record one size",
               w, h, plan->fixed_w, plan->fixed_h);
    size_t row = (size_t)w * plan->channels;
    if (px->stride != row) {
        if (fl_grow(&c->pix, &c->pix_cap, row * h))
            FATAL("out of memory");
        for (uint32_t y = 0; y < h; y++)
            memmove(c->pix + y * row, pix + y * px->stride, row);
        pix = c->pix;
    }
    store(c, plan, pix, row * h, s);
}

/* --encode jpeg: the pixels re-encoded at the plan's quality (with restart markers if asked). */
static void store_jpeg(pd_worker_ctx *c, const pd_plan *plan, pd_slot *s, const pd_pixels *px)
{
    fl_image img = {(uint8_t *)px->pix, px->w, px->h, plan->channels, px->stride};
    const uint8_t *out;
    size_t out_len;
    fl_error err;
    fl_error_clear(&err);
    int er = plan->jpeg_restart >= 0
                 ? fl_encode_jpeg_restart(c->enc, &img, plan->quality, (uint32_t)plan->jpeg_restart,
                                          &out, &out_len, &err)
                 : fl_encode_jpeg(c->enc, &img, plan->quality, &out, &out_len, &err);
    if (er == -ENOMEM)
        FATAL("%.200s: out of memory encoding JPEG", s->source);
    /* a problem with this image (a side over JPEG's 65500 limit): a bad input, never a reason
     * to stop a --on-error skip run */
    if (er)
        REJECT("cannot encode as JPEG: %.500s", err.msg);
    store(c, plan, out, out_len, s);
}

/* One image item into its slot: read and check, then keep its bytes, or decode (or take the
 * in-memory pixels), resize and store raw or as JPEG. A helper that rejects or fails sets
 * s->status, which ends the item. */
static void process_image(pd_worker_ctx *c, const pd_plan *plan, const pd_item *it, pd_slot *s)
{
    s->status = PD_SLOT_OK;
    s->msg[0] = 0;
    s->len = s->raw_len = 0;
    s->in_bytes = 0;
    s->format = plan->schema.encoding; /* KEEP: set below from the file */
    s->source = it->member ? it->member->source : it->path ? it->path : it->name;
    pd_pixels px;
    if (it->path || it->member) {
        /* keep without compression: read straight into the slot, no copy */
        int direct = plan->encode == PD_ENC_KEEP && plan->schema.compression == FL_COMP_NONE;
        uint8_t **buf = direct ? &s->buf : &c->file;
        size_t len = 0;
        read_input(it, s, buf, direct ? &s->cap : &c->file_cap, &len);
        if (s->status != PD_SLOT_OK)
            return;
        fl_image_info info;
        check_input(plan, it, s, *buf, len, &info);
        if (s->status != PD_SLOT_OK)
            return;
        if (plan->encode == PD_ENC_KEEP) {
            keep_input(c, plan, s, &info, *buf, len, direct);
            return;
        }
        decode_input(c, plan, s, &info, *buf, len, &px);
    } else {
        memory_pixels(c, plan, it, s, &px);
    }
    if (s->status != PD_SLOT_OK)
        return;
    resize_pixels(c, plan, s, &px);
    if (s->status != PD_SLOT_OK)
        return;
    s->width = px.w;
    s->height = px.h;
    if (plan->encode == PD_ENC_RAW)
        store_raw(c, plan, s, &px);
    else
        store_jpeg(c, plan, s, &px);
}

/* ---- fields ------------------------------------------------------------------------------- */

/* The mask of field f at the source image's size into c->mask, then at the stored size. */
static int field_mask(pd_worker_ctx *c, const pd_plan *plan, const fl_field *f, const pd_value *v,
                      pd_slot *s, const uint8_t **px)
{
    uint32_t sw = s->src_width, sh = s->src_height, w = s->width, h = s->height;
    uint32_t elem = f->dtype == FL_DTYPE_U16 ? 2 : 1;
    size_t need = (size_t)sw * sh * elem;
    if (fl_grow(&c->mask, &c->mask_cap, need ? need : 1)) {
        s->status = PD_SLOT_FATAL;
        snprintf(s->msg, sizeof s->msg, "out of memory");
        return -1;
    }
    fl_error err;
    fl_error_clear(&err);
    if (v->kind == PD_VAL_FILE) {
        size_t len = 0;
        int r = read_into(v->path, &c->ffile, &c->ffile_cap, &len);
        if (r) {
            s->status = PD_SLOT_REJECT;
            snprintf(s->msg, sizeof s->msg, "field %s: cannot read %.300s: %s", f->name, v->path,
                     strerror(-r));
            return -1;
        }
        if (fl_mask_decode(c->ffile, len, FL_MASK_PNG, sw, sh, f->dtype, c->mask, c->mask_cap,
                           v->path, &err)) {
            s->status = PD_SLOT_REJECT;
            snprintf(s->msg, sizeof s->msg, "field %s: %.600s", f->name, err.msg);
            return -1;
        }
    } else if (v->kind == PD_VAL_SEGMENTS) {
        memset(c->mask, 0, need);
        char why[300];
        int r = pd_coco_paint(v->data, v->len, sw, sh, c->mask, elem, why, sizeof why);
        if (r) {
            s->status = r == -ENOMEM ? PD_SLOT_FATAL : PD_SLOT_REJECT;
            snprintf(s->msg, sizeof s->msg, "field %s: %s", f->name,
                     r == -ENOMEM ? "out of memory" : why);
            return -1;
        }
    } else {
        memset(c->mask, 0, need); /* no value: all background */
    }
    const uint8_t *m = c->mask;
    if (w != sw || h != sh) {
        if (fl_grow(&c->mask2, &c->mask2_cap, (size_t)w * h * elem)) {
            s->status = PD_SLOT_FATAL;
            snprintf(s->msg, sizeof s->msg, "out of memory");
            return -1;
        }
        fl_mask_resize_nearest(c->mask, sw, sh, c->mask2, w, h, elem);
        m = c->mask2;
    }
    (void)plan;
    *px = m;
    return 0;
}

/* Encode the item's fields block into s->fields_buf (status set on failure). */
static void encode_fields(pd_worker_ctx *c, const pd_plan *plan, const pd_item *it, pd_slot *s)
{
    fl_field_value vals[FL_MAX_FIELDS];
    memset(vals, 0, sizeof vals);
    fl_error err;
    fl_error_clear(&err);
    s->fields_len = 0;
    if (!it->values)
        FATAL("%s: the item has no field values", s->source);
    /* scratch for the boxes of every BOXES field (usually one) */
    size_t box_bytes = 0;
    for (uint32_t i = 0; i < plan->num_fields; i++)
        if (plan->fields[i].type == FL_FIELD_BOXES && it->values[i].kind == PD_VAL_DATA)
            box_bytes += it->values[i].len;
    if (fl_grow(&c->fboxes, &c->fboxes_cap, box_bytes ? box_bytes : 1))
        FATAL("out of memory");
    size_t box_off = 0;
    for (uint32_t i = 0; i < plan->num_fields; i++) {
        const fl_field *f = &plan->fields[i];
        const pd_value *v = &it->values[i];
        fl_field_value *o = &vals[i];
        if (!fl_field_in_block(plan->fields, plan->num_fields, i))
            continue;
        switch (f->type) {
        case FL_FIELD_MASK: {
            const uint8_t *m;
            if (field_mask(c, plan, f, v, s, &m))
                return;
            size_t len = 0;
            if (fl_mask_encode(m, s->width, s->height, f->dtype, f->codec ? f->codec : FL_MASK_PNG,
                               0, &c->fval[i], &c->fval_cap[i], &len, &err))
                FATAL("%.300s: field %s: %.300s", s->source, f->name, err.msg);
            o->data = c->fval[i];
            o->len = len;
            o->height = s->height;
            o->width = s->width;
            o->count = 1;
            break;
        }
        case FL_FIELD_BOXES:
            if (v->kind != PD_VAL_DATA)
                break;
            o->count = v->count;
            o->len = v->len;
            if (s->width == s->src_width && s->height == s->src_height) {
                o->data = v->data;
            } else {
                /* the stored image was resized: boxes follow it, clipped to the new size */
                const float *b = v->data;
                float *d = (float *)(void *)(c->fboxes + box_off);
                double sx = (double)s->width / s->src_width, sy = (double)s->height / s->src_height;
                for (uint32_t k = 0; k < v->count * 4; k++) {
                    double x = b[k] * (k % 2 ? sy : sx), lim = k % 2 ? s->height : s->width;
                    d[k] = (float)(x < 0 ? 0 : x > lim ? lim : x);
                }
                o->data = d;
                box_off += v->len;
            }
            break;
        case FL_FIELD_NDARRAY:
        case FL_FIELD_BYTES:
            if (v->kind == PD_VAL_FILE) {
                size_t len = 0;
                int r = read_into(v->path, &c->fval[i], &c->fval_cap[i], &len);
                if (r == -ENOMEM)
                    FATAL("out of memory reading %.300s", v->path);
                if (r)
                    REJECT("field %s: cannot read %.300s: %s", f->name, v->path, strerror(-r));
                if (plan->encode == PD_ENC_NONE)
                    s->in_bytes += len; /* the record's input is its values */
                if (f->type == FL_FIELD_BYTES) {
                    if (len > UINT32_MAX)
                        REJECT("field %s: %.300s is over 4 GiB", f->name, v->path);
                    o->data = c->fval[i];
                    o->len = o->count = (uint32_t)len;
                    break;
                }
                fl_dtype dt;
                uint32_t nd;
                uint64_t shape[FL_MAX_DIMS];
                const uint8_t *data;
                size_t dl;
                char why[200];
                if (pd_npy_parse(c->fval[i], len, &dt, &nd, shape, &data, &dl, why, sizeof why))
                    REJECT("field %s: %.200s: %s", f->name, v->path, why);
                int same = dt == f->dtype && nd == f->ndim;
                for (uint32_t d = 0; same && d < nd; d++)
                    same = shape[d] == f->shape[d];
                if (!same) {
                    char got[96], want[96];
                    int n = snprintf(got, sizeof got, "%s (", fl_dtype_name(dt));
                    for (uint32_t d = 0; d < nd; d++)
                        n += snprintf(got + n, sizeof got - (size_t)n, "%s%llu", d ? "," : "",
                                      (unsigned long long)shape[d]);
                    snprintf(got + n, sizeof got - (size_t)n, ")");
                    n = snprintf(want, sizeof want, "%s (", fl_dtype_name(f->dtype));
                    for (uint32_t d = 0; d < f->ndim; d++)
                        n += snprintf(want + n, sizeof want - (size_t)n, "%s%u", d ? "," : "",
                                      f->shape[d]);
                    snprintf(want + n, sizeof want - (size_t)n, ")");
                    REJECT("field %s: %.300s is %s, the field is %s", f->name, v->path, got, want);
                }
                o->data = data;
                o->len = dl;
                o->count = 1;
                break;
            }
            __attribute__((fallthrough)); /* BYTES / NDARRAY held in memory */
        default:
            if (v->kind == PD_VAL_DATA) {
                o->data = v->data;
                o->len = v->len;
                o->count = v->count;
            }
            break;
        }
    }
    int r = fl_fields_encode(plan->fields, plan->num_fields, vals, s->width, s->height, plan->level,
                             &s->fields_buf, &s->fields_cap, &s->fields_len, &err);
    if (r == -ENOMEM)
        FATAL("%s: out of memory encoding its fields", s->source);
    if (r)
        REJECT("%.700s", err.msg);
}

/* A record without an image (--no-image): an empty payload of format none; its fields follow.
 * in_bytes counts the values (encode_fields adds the files it reads). */
static void process_no_image(const pd_plan *plan, const pd_item *it, pd_slot *s)
{
    s->status = PD_SLOT_OK;
    s->msg[0] = 0;
    s->len = s->raw_len = 0;
    s->height = s->width = 0;
    s->format = FL_ENC_NONE;
    s->source = it->name;
    s->in_bytes = 0;
    for (uint32_t i = 0; it->values && i < plan->num_fields; i++)
        if (it->values[i].kind == PD_VAL_DATA)
            s->in_bytes += it->values[i].len;
}

void pd_process_item(pd_worker_ctx *c, const pd_plan *plan, const pd_item *it, pd_slot *s)
{
    s->fields_len = 0;
    s->src_width = s->src_height = 0;
    if (plan->encode == PD_ENC_NONE)
        process_no_image(plan, it, s);
    else
        process_image(c, plan, it, s);
    if (s->status == PD_SLOT_OK && plan->num_fields)
        encode_fields(c, plan, it, s);
}
