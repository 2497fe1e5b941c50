/* plan.c — decide what every record becomes (schema, size, channels, compression), train the
 * zstd dictionary from evenly spaced records, build the options object kept in the manifest,
 * and print the final summary. */
#include "pack_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_source.h"
#include "fl_cli.h"

static const char *enc_name(pd_encode e)
{
    return e == PD_ENC_KEEP   ? "keep"
           : e == PD_ENC_JPEG ? "jpeg"
           : e == PD_ENC_RAW  ? "raw"
           : e == PD_ENC_NONE ? "none"
                              : "default";
}

/* First file input that reads and probes: its info. Returns 0 when found. */
static int probe_first(const pd_items *items, uint64_t max_pixels, fl_image_info *info)
{
    char *path = NULL;
    size_t pcap = 0;
    int found = -1;
    for (size_t i = 0; i < items->n && i < 1000 && found; i++) {
        uint8_t *d = NULL;
        size_t n, dcap = 0;
        fl_error e;
        char why[256];
        pd_item tmp;
        const pd_item *it = pd_items_get(items, i, &tmp, &path, &pcap);
        if (!it)
            break;
        if (it->member ? pd_member_read(it->member, &d, &dcap, &n, why, sizeof why) != 0
                       : !it->path || pd_read_file(it->path, 0, 1ull << 31, &d, &n, &e) != 0) {
            free(d);
            continue;
        }
        int r = fl_image_probe(d, n, info, &e);
        free(d);
        if (!r && info->width && info->height && (uint64_t)info->width * info->height <= max_pixels)
            found = 0;
    }
    free(path);
    return found;
}

fl_encoding pd_encoding_of(fl_image_format f)
{
    return f == FL_IMG_PNG ? FL_ENC_PNG : f == FL_IMG_WEBP ? FL_ENC_WEBP : FL_ENC_JPEG;
}

/* The format of a file from its first bytes (FL_IMG_UNKNOWN when it cannot be read or is not a
 * JPEG/PNG/WebP; such inputs are reported when they are processed). */
static fl_image_format sniff_file(const char *path)
{
    /* O_NONBLOCK: a FIFO among the inputs must not block the listing (it is rejected later) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return FL_IMG_UNKNOWN;
    struct stat st;
    uint8_t b[16];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, b, sizeof b, 0) : -1;
    close(fd);
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF)
        return FL_IMG_JPEG;
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8))
        return FL_IMG_PNG;
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4))
        return FL_IMG_WEBP;
    return FL_IMG_UNKNOWN;
}

typedef struct sniff_job {
    const pd_items *items;
    size_t lo, hi;
    uint64_t count[4];
} sniff_job;

static void *sniff_range(void *arg)
{
    sniff_job *j = arg;
    char *path = NULL;
    size_t pcap = 0;
    for (size_t i = j->lo; i < j->hi; i++) {
        pd_item tmp;
        const pd_item *it = pd_items_get(j->items, i, &tmp, &path, &pcap);
        if (!it)
            j->count[FL_IMG_UNKNOWN]++; /* out of memory: reported when processed */
        else if (it->member)
            j->count[it->member->format]++; /* sniffed when listed */
        else if (it->path)
            j->count[sniff_file(it->path)]++;
    }
    free(path);
    return NULL;
}

/* Count the inputs of each format, reading the first bytes of every file: under --encode keep
 * the schema depends on whether they all share one format, which a sample cannot tell. Threads
 * because the cost is one open + read per file (measured: see the commit adding it). */
static void sniff_all(const pd_items *items, uint32_t workers, uint64_t count[4])
{
    memset(count, 0, 4 * sizeof *count);
    uint32_t nt = workers ? workers : 1;
    if (nt > 16)
        nt = 16;
    if (items->n < 256 * (size_t)nt)
        nt = items->n >= 512 ? (uint32_t)(items->n / 256) : 1;
    sniff_job jobs[16];
    pthread_t th[16];
    uint32_t started = 0;
    for (uint32_t t = 0; t < nt; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].items = items;
        jobs[t].lo = items->n * t / nt;
        jobs[t].hi = items->n * (t + 1) / nt;
    }
    for (uint32_t t = 1; t < nt; t++) {
        if (pthread_create(&th[t], NULL, sniff_range, &jobs[t]))
            break;
        started = t;
    }
    sniff_range(&jobs[0]);
    for (uint32_t t = 1; t <= started; t++)
        pthread_join(th[t], NULL);
    for (uint32_t t = started + 1; t < nt; t++)
        sniff_range(&jobs[t]); /* threads refused */
    for (uint32_t t = 0; t < nt; t++)
        for (int f = 0; f < 4; f++)
            count[f] += jobs[t].count[f];
}

int pd_plan_make(const pd_pack_opts *po, pd_items *items, pd_reject_ctx *rc, pd_plan *plan,
                 fl_error *err)
{
    (void)rc;
    memset(plan, 0, sizeof *plan);
    if (po->so.no_image) {
        /* records of fields only: no payload (format none, size 0), nothing to compress but
         * the ndarray fields, each its own zstd frame at the default level */
        plan->encode = PD_ENC_NONE;
        plan->schema = (fl_schema){FL_ENC_NONE, FL_COMP_NONE, 0, 0, 0};
        plan->jpeg_restart = -1;
        plan->level = 3;
        plan->max_pixels = po->so.max_pixels;
        plan->fields = items->fields;
        plan->num_fields = items->num_fields;
        return 0;
    }
    pd_encode e = po->encode;
    if (e == PD_ENC_DEFAULT)
        e = items->in_memory ? PD_ENC_RAW : PD_ENC_KEEP;
    if (e == PD_ENC_KEEP && items->in_memory)
        return fl_error_set(
            err, FL_E_INVALID,
            "--encode keep needs JPEG/PNG/WebP files, but %s (%s) "
            "holds raw pixels: use --encode raw (the default here) or --encode jpeg",
            po->src ? po->src : "the input", items->form);
    if (e == PD_ENC_KEEP && (po->resize_w || po->max_side || po->gray))
        return fl_error_set(err, FL_E_INVALID,
                            "--encode keep stores the files unchanged: "
                            "--resize, --max-side and --gray need --encode jpeg or raw");
    plan->encode = e;
    /* masks: zstd unless --mask-codec png. On VOC-like and COCO-derived masks a zstd frame of the
     * raw elements is smaller than the PNG (351 vs 546 kB, 325 vs 350 kB over 300 and 600
     * masks) and decodes ~14x faster (28 vs 374 us a 500x375 mask), which lifts the loader from
     * 707 to 1,138 images per CPU-second on the VOC-like set (bench/mask_codec.sh) */
    for (uint32_t i = 0; i < items->num_fields; i++)
        if (items->fields[i].type == FL_FIELD_MASK)
            items->fields[i].codec = po->mask_codec ? (fl_mask_codec)po->mask_codec : FL_MASK_ZSTD;
    plan->fields = items->num_fields ? items->fields : NULL;
    plan->num_fields = items->num_fields;
    plan->quality = po->quality;
    /* default: restart markers for re-encoded JPEGs (cheaper crops in the loader), none for keep
     * (the bytes stay exact); raw records have no JPEG to rewrite */
    plan->jpeg_restart = po->jpeg_restart == -2 ? (e == PD_ENC_JPEG ? 4 : -1) : po->jpeg_restart;
    if (e == PD_ENC_RAW)
        plan->jpeg_restart = -1;
    plan->max_side = po->max_side;
    plan->resize_w = po->resize_w;
    plan->resize_h = po->resize_h;
    plan->max_pixels = po->so.max_pixels;
    plan->channels = po->gray ? 1 : items->in_memory ? items->v[0].channels : 3;
    int comp = po->compress;
    if (comp < 0)
        comp = e == PD_ENC_RAW ? 1 : 0;
    plan->level = po->level ? po->level : (e == PD_ENC_RAW ? 19 : 3);
    plan->schema.compression = comp ? FL_COMP_ZSTD : FL_COMP_NONE;
    plan->schema.channels = plan->channels;

    if (e == PD_ENC_KEEP) {
        /* the image format: pd_plan_formats, once the job is known to need packing */
        plan->keep_format = FL_IMG_JPEG;
        plan->schema.encoding = FL_ENC_JPEG;
        return 0;
    }
    plan->schema.encoding = e == PD_ENC_RAW ? FL_ENC_RAW : FL_ENC_JPEG;
    uint32_t w = 0, h = 0;
    if (po->resize_w) {
        w = po->resize_w;
        h = po->resize_h;
    } else if (items->in_memory) {
        /* IDX/CIFAR: one size for all; apply --max-side like the workers do */
        w = items->v[0].width;
        h = items->v[0].height;
        if (po->max_side && (w > po->max_side || h > po->max_side)) {
            uint32_t m = w > h ? w : h;
            uint32_t nw = (uint32_t)(((uint64_t)w * po->max_side + m / 2) / m);
            uint32_t nh = (uint32_t)(((uint64_t)h * po->max_side + m / 2) / m);
            w = nw ? nw : 1;
            h = nh ? nh : 1;
        }
    } else if (e == PD_ENC_RAW) {
        fl_image_info info;
        if (probe_first(items, plan->max_pixels, &info) == 0) {
            w = info.width;
            h = info.height;
            if (po->max_side && (w > po->max_side || h > po->max_side)) {
                if (w >= h) {
                    uint32_t nh = (uint32_t)(((uint64_t)h * po->max_side + w / 2) / w);
                    w = po->max_side;
                    h = nh ? nh : 1;
                } else {
                    uint32_t nw = (uint32_t)(((uint64_t)w * po->max_side + h / 2) / h);
                    h = po->max_side;
                    w = nw ? nw : 1;
                }
            }
        }
    }
    if (e == PD_ENC_RAW) {
        plan->fixed_w = w;
        plan->fixed_h = h;
    }
    if (e == PD_ENC_RAW || po->resize_w || items->in_memory) {
        plan->schema.width = w;
        plan->schema.height = h;
    }
    return 0;
}

void pd_plan_formats(const pd_pack_opts *po, const pd_items *items, pd_plan *plan)
{
    if (plan->encode != PD_ENC_KEEP)
        return;
    /* one format among the inputs this build can keep: the schema is that format (as datasets
     * always were); several: FL_ENC_MIXED, each record in its own format. Inputs of other
     * formats are rejected one by one when processed (--on-error skip skips them). */
    int unsure = 0;
    if (po->part_count && items->name_formats_set) {
        /* every part must reach the same schema: decided from the whole job's names, which
         * every part lists, rather than from the bytes of files the other parts read */
        for (int f = 0; f < 4; f++)
            plan->keep_count[f] = items->name_formats[f];
        plan->keep_by_name = 1;
        unsure = items->name_formats[FL_IMG_UNKNOWN] > 0;
    } else {
        sniff_all(items, po->workers, plan->keep_count);
    }
    int kinds = 0;
    fl_image_format one = FL_IMG_JPEG;
    for (int f = FL_IMG_JPEG; f <= FL_IMG_WEBP; f++) {
        if (plan->keep_count[f] && fl_image_can_decode((fl_image_format)f)) {
            kinds++;
            one = (fl_image_format)f;
        }
    }
    const int mixed = kinds > 1 || unsure;
    plan->keep_format = mixed ? FL_IMG_UNKNOWN : one;
    plan->schema.encoding = mixed ? FL_ENC_MIXED : pd_encoding_of(one);
}

void pd_plan_free(pd_plan *plan) { (void)plan; }

int pd_train_dictionary(const pd_plan *plan, const pd_items *items, void **dict, size_t *len,
                        fl_error *err)
{
    *dict = NULL;
    *len = 0;
    /* 2000 samples: measured on Fashion-MNIST, 10000 samples or COVER-optimised training gain
     * under 0.3% while costing seconds to a minute */
    size_t k = items->n < 2000 ? items->n : 2000;
    if (k < 16)
        return 0; /* too little data for a useful dictionary */
    pd_plan p = *plan;
    p.schema.compression = FL_COMP_NONE;
    pd_worker_ctx c;
    int r = pd_worker_init(&c, &p, NULL, 0, err);
    if (r)
        return r;
    pd_slot s;
    memset(&s, 0, sizeof s);
    uint8_t *samples = NULL;
    size_t used = 0, cap = 0;
    size_t *sizes = calloc(k, sizeof *sizes);
    unsigned ns = 0;
    if (!sizes)
        goto oom;
    for (size_t i = 0; i < k; i++) {
        pd_item tmp;
        const pd_item *it = pd_items_get(items, i * items->n / k, &tmp, &s.path, &s.path_cap);
        if (!it)
            goto oom;
        pd_process_item(&c, &p, it, &s);
        if (s.status != PD_SLOT_OK)
            continue; /* bad inputs are reported by the real pass */
        if (used + s.len > cap) {
            size_t nc = cap ? cap * 2 : 1 << 20;
            while (nc < used + s.len)
                nc *= 2;
            uint8_t *b = realloc(samples, nc);
            if (!b)
                goto oom;
            samples = b;
            cap = nc;
        }
        memcpy(samples + used, s.buf, s.len);
        used += s.len;
        sizes[ns++] = s.len;
    }
    size_t dcap = plan->dict_cap ? plan->dict_cap : 110 * 1024;
    if (used / 10 < dcap)
        dcap = used / 10; /* keep the dictionary well under the sample size */
    if (ns >= 16 && dcap >= 1024) {
        void *d = malloc(dcap);
        if (!d)
            goto oom;
        fl_error e2;
        if (fl_zstd_train_dictionary(samples, sizes, ns, d, dcap, len, &e2) == 0 && *len) {
            *dict = d;
        } else {
            free(d); /* too little or too uniform data: compress without a dictionary */
            *len = 0;
        }
    }
    free(samples);
    free(sizes);
    free(s.buf);
    free(s.path);
    pd_worker_free(&c);
    return 0;
oom:
    free(samples);
    free(sizes);
    free(s.buf);
    free(s.path);
    pd_worker_free(&c);
    return fl_error_set(err, -ENOMEM, "out of memory while training the zstd dictionary");
}

char *pd_options_json(const pd_pack_opts *po, const pd_plan *plan, const pd_items *items,
                      size_t dict_len, uint64_t input_count, const char *inputs_sha256)
{
    fl_json j;
    fl_json_init(&j);
    char b[64];
    fl_json_begin_object(&j);
    fl_json_key(&j, "source");
    fl_json_string(&j, po->src        ? po->src
                       : po->so.csv   ? po->so.csv
                       : po->so.coco  ? po->so.coco
                       : po->so.jsonl ? po->so.jsonl
                       : po->so.wds   ? po->so.wds
                                      : po->so.idx_images);
    fl_json_key(&j, "source_form");
    fl_json_string(&j, items->form);
    if (items->num_fields) {
        /* the schema as --field would spell it (a --resume with another one is another job) */
        fl_json_key(&j, "fields");
        fl_json_begin_array(&j);
        for (uint32_t i = 0; i < items->num_fields; i++) {
            const fl_field *f = &items->fields[i];
            char d[160];
            int n = snprintf(d, sizeof d, "%s:%s", f->name, fl_field_type_name(f->type));
            if (f->type == FL_FIELD_MASK || f->type == FL_FIELD_NDARRAY)
                n += snprintf(d + n, sizeof d - (size_t)n, ":%s", fl_dtype_name(f->dtype));
            for (uint32_t k = 0; k < f->ndim && n < (int)sizeof d; k++)
                n += snprintf(d + n, sizeof d - (size_t)n, "%c%u", k ? 'x' : ':', f->shape[k]);
            if (f->of >= 0 && (uint32_t)f->of < items->num_fields && n < (int)sizeof d)
                snprintf(d + n, sizeof d - (size_t)n, ":of=%s", items->fields[f->of].name);
            fl_json_string(&j, d);
        }
        fl_json_end_array(&j);
        /* the stored form of the masks (a --resume with another codec is another job); named
         * only when not PNG, so the options of PNG-mask jobs packed before stay the same */
        for (uint32_t i = 0; i < items->num_fields; i++)
            if (items->fields[i].type == FL_FIELD_MASK && items->fields[i].codec == FL_MASK_ZSTD) {
                fl_json_key(&j, "mask_codec");
                fl_json_string(&j, "zstd");
                break;
            }
    }
    fl_json_key(&j, "encode");
    fl_json_string(&j, enc_name(plan->encode));
    if (plan->encode == PD_ENC_JPEG) {
        fl_json_key(&j, "quality");
        fl_json_int(&j, plan->quality);
    }
    fl_json_key(&j, "jpeg_restart");
    if (plan->jpeg_restart < 0)
        fl_json_null(&j);
    else
        fl_json_int(&j, plan->jpeg_restart);
    fl_json_key(&j, "max_side");
    fl_json_uint(&j, plan->max_side);
    fl_json_key(&j, "resize");
    if (plan->resize_w) {
        snprintf(b, sizeof b, "%ux%u", plan->resize_w, plan->resize_h);
        fl_json_string(&j, b);
    } else {
        fl_json_null(&j);
    }
    fl_json_key(&j, "gray");
    fl_json_bool(&j, po->gray);
    fl_json_key(&j, "compress");
    if (plan->schema.compression == FL_COMP_ZSTD) {
        snprintf(b, sizeof b, "zstd:%d", plan->level);
        fl_json_string(&j, b);
    } else {
        fl_json_string(&j, "none");
    }
    fl_json_key(&j, "dictionary_bytes");
    fl_json_uint(&j, dict_len);
    fl_json_key(&j, "shuffle");
    fl_json_bool(&j, po->shuffle);
    fl_json_key(&j, "seed");
    fl_json_uint(&j, po->seed);
    fl_json_key(&j, "part");
    if (po->part_count) {
        snprintf(b, sizeof b, "%u/%u", po->part_index, po->part_count);
        fl_json_string(&j, b);
    } else {
        fl_json_null(&j);
    }
    fl_json_key(&j, "on_error");
    fl_json_string(&j, po->on_error_skip ? "skip" : "fail");
    fl_json_key(&j, "max_pixels");
    fl_json_uint(&j, po->so.max_pixels);
    fl_json_key(&j, "backend");
    fl_json_string(&j, po->backend == FL_BACKEND_LMDB ? "lmdb" : "shards");
    fl_json_key(&j, "shard_size");
    fl_json_uint(&j, po->shard_size);
    if (inputs_sha256) {
        fl_json_key(&j, "inputs");
        fl_json_begin_object(&j);
        fl_json_key(&j, "count");
        fl_json_uint(&j, input_count);
        fl_json_key(&j, "sha256");
        fl_json_string(&j, inputs_sha256);
        fl_json_end_object(&j);
    }
    fl_json_end_object(&j);
    char *s = fl_json_failed(&j) ? NULL : strdup(fl_json_text(&j));
    fl_json_free(&j);
    return s;
}

void pd_print_summary(const pd_pack_opts *po, const pd_plan *plan, const pd_items *items,
                      uint64_t records, uint64_t skipped, uint64_t parse_skipped, uint64_t bytes_in,
                      uint64_t bytes_out, double seconds)
{
    double ratio = bytes_in ? (double)bytes_out / (double)bytes_in : 0;
    double rate = seconds > 0 ? (double)records / seconds : 0;
    const fl_encoding se = plan->schema.encoding;
    const char *enc = se == FL_ENC_RAW     ? "raw"
                      : se == FL_ENC_PNG   ? "png"
                      : se == FL_ENC_WEBP  ? "webp"
                      : se == FL_ENC_MIXED ? "mixed"
                      : se == FL_ENC_NONE  ? "none"
                                           : "jpeg";
    if (po->json) {
        fl_json j;
        fl_json_init(&j);
        fl_json_begin_object(&j);
        fl_json_key(&j, "dst");
        fl_json_string(&j, po->dst);
        fl_json_key(&j, "records");
        fl_json_uint(&j, records);
        fl_json_key(&j, "classes");
        fl_json_begin_array(&j);
        for (uint32_t i = 0; i < items->num_classes; i++)
            fl_json_string(&j, items->class_names[i]);
        fl_json_end_array(&j);
        fl_json_key(&j, "encoding");
        fl_json_string(&j, enc);
        if (plan->encode == PD_ENC_KEEP) {
            /* inputs per format as planned (before any was rejected) */
            fl_json_key(&j, "input_formats");
            fl_json_begin_object(&j);
            for (int f = FL_IMG_JPEG; f <= FL_IMG_WEBP; f++) {
                fl_json_key(&j, fl_image_format_name((fl_image_format)f));
                fl_json_uint(&j, plan->keep_count[f]);
            }
            fl_json_end_object(&j);
        }
        fl_json_key(&j, "mode");
        fl_json_string(&j, enc_name(plan->encode));
        fl_json_key(&j, "compression");
        fl_json_string(&j, plan->schema.compression == FL_COMP_ZSTD ? "zstd" : "none");
        fl_json_key(&j, "bytes_in");
        fl_json_uint(&j, bytes_in);
        fl_json_key(&j, "bytes_out");
        fl_json_uint(&j, bytes_out);
        fl_json_key(&j, "ratio");
        fl_json_double(&j, ratio);
        fl_json_key(&j, "seconds");
        fl_json_double(&j, seconds);
        fl_json_key(&j, "images_per_second");
        fl_json_double(&j, rate);
        fl_json_key(&j, "skipped");
        fl_json_uint(&j, skipped);
        fl_json_key(&j, "skipped_while_listing");
        fl_json_uint(&j, parse_skipped);
        fl_json_key(&j, "workers");
        fl_json_uint(&j, po->workers);
        fl_json_end_object(&j);
        printf("%s\n", fl_json_text(&j));
        fflush(stdout);
        fl_json_free(&j);
        return;
    }
    if (po->quiet)
        return; /* --quiet: errors only (skipped inputs still go to --report) */
    char bi[32], bo[32], t[32], r[48];
    fl_cli_human_bytes(bytes_in, bi, sizeof bi);
    fl_cli_human_bytes(bytes_out, bo, sizeof bo);
    fl_cli_human_duration(seconds, t, sizeof t);
    fl_cli_human_rate(rate, se == FL_ENC_NONE ? "rec/s" : "img/s", r, sizeof r);
    fprintf(stderr, PD_TOOL ": packed %llu record%s, %u class%s into %s (%s",
            (unsigned long long)records, records == 1 ? "" : "s", items->num_classes,
            items->num_classes == 1 ? "" : "es", po->dst,
            se == FL_ENC_NONE ? "no image, fields only" : enc);
    if (plan->schema.width)
        fprintf(stderr, " %ux%ux%u", plan->schema.width, plan->schema.height, plan->channels);
    if (se == FL_ENC_MIXED) {
        const char *sep = ": ";
        for (int f = FL_IMG_JPEG; f <= FL_IMG_WEBP; f++) {
            if (!plan->keep_count[f] || !fl_image_can_decode((fl_image_format)f))
                continue;
            fprintf(stderr, "%s%llu %s", sep, (unsigned long long)plan->keep_count[f],
                    fl_image_format_name((fl_image_format)f));
            sep = ", ";
        }
        fprintf(stderr, " inputs, each kept in its format");
    }
    if (plan->schema.compression == FL_COMP_ZSTD)
        fprintf(stderr, ", zstd:%d", plan->level);
    fprintf(stderr,
            ")\n" PD_TOOL ": bytes in %s, out %s (ratio %.3f); %s, %s, %u worker%s; skipped %llu\n",
            bi, bo, ratio, t, r, po->workers, po->workers == 1 ? "" : "s",
            (unsigned long long)skipped);
}
