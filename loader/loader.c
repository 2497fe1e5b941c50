/* loader.c — libfastload's life cycle and consumer side: create (dataset, order plan, ring of
 * `prefetch` batch slots in pinned memory, readers, workers), next (strictly in order, through
 * the ring: ring.h), release, position, stats and close (joins every thread, frees every
 * buffer, closes every fd). */
#define _GNU_SOURCE /* O_DIRECT */
#include "loader_internal.h"

#include "fl_mapped_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void logf_(const fl_loader *L, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void logf_(const fl_loader *L, int level, const char *fmt, ...)
{
    if (!L->opt.log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->opt.log(L->opt.log_user, level, msg);
}

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* The readers' descriptor for shard i: the dataset's own fd for it (the file fl_dataset_open
 * validated, never the path again: the dataset may have been replaced since; positioned reads
 * share it safely), or for O_DIRECT the same inode reopened through /proc/self/fd (owned by the
 * loader: see close_fds). Returns the fd or -errno. */
static int reader_fd(const fl_loader *L, uint32_t i, int direct)
{
    int dfd = fl_dataset_file_fd(L->ds, i);
    if (dfd < 0)
        return -EBADF;
    if (!direct)
        return dfd;
    char via[64];
    snprintf(via, sizeof via, "/proc/self/fd/%d", dfd);
    int fd = open(via, O_RDONLY | O_CLOEXEC | O_DIRECT);
    return fd < 0 ? -errno : fd;
}

static int open_shards(fl_loader *L, fl_error *err)
{
    uint32_t n = fl_dataset_num_shards(L->ds);
    L->fds = malloc((n ? n : 1) * sizeof *L->fds);
    if (!L->fds)
        return fl_error_set(err, -ENOMEM, "out of memory for %u shard descriptors", n);
    for (uint32_t i = 0; i < n; i++) {
        const char *p = fl_dataset_shard_path(L->ds, i);
        int fd = reader_fd(L, i, L->direct);
        if (fd < 0 && L->direct && (fd == -EINVAL || fd == -ENOENT)) {
            /* the filesystem (tmpfs, some overlays) refuses O_DIRECT, or there is no /proc to
             * reopen through: buffered gives the same bytes, so say so once and carry on */
            logf_(L, 1, "fastload: %s: %s; using buffered reads", p,
                  fd == -EINVAL ? "O_DIRECT not supported by this filesystem"
                                : "cannot reopen for O_DIRECT (no /proc/self/fd)");
            L->direct = 0;
            for (uint32_t j = 0; j < i; j++) {
                if (L->fds[j] != fl_dataset_file_fd(L->ds, j))
                    close(L->fds[j]);
                L->fds[j] = reader_fd(L, j, 0);
            }
            fd = reader_fd(L, i, 0);
        }
        if (fd < 0) {
            L->nfds = i;
            return fl_error_set(err, fd, "%s: cannot open shard: %s", p, strerror(-fd));
        }
        L->fds[i] = fd;
        L->nfds = i + 1;
    }
    return 0;
}

static int make_readers(fl_loader *L, fl_error *err)
{
    size_t max_len = fl_dataset_max_stored_len(L->ds);
    unsigned depth = 2 * L->chunk; /* two chunks in flight per worker */
    if (L->opt.io != FL_IO_PREAD) {
        fl_error e;
        int rc = 0;
        uint32_t i;
        for (i = 0; i < L->nworkers && rc == 0; i++)
            rc = fl_uring_reader_create(depth, max_len, L->direct, &L->workers[i].reader, &e);
        if (rc == 0) {
            L->io_backend = "io_uring";
            return 0;
        }
        for (uint32_t j = 0; j < L->nworkers; j++)
            if (L->workers[j].reader) {
                L->workers[j].reader->destroy(L->workers[j].reader);
                L->workers[j].reader = NULL;
            }
        if (L->opt.io == FL_IO_URING)
            return fl_error_set(err, FL_E_UNSUPPORTED, "io_uring requested but unavailable: %s",
                                e.msg);
        /* FL_IO_AUTO: seccomp'ed containers, old kernels, memlock limits on the rings */
        logf_(L, 1, "fastload: io_uring unavailable (%s); using pread workers", e.msg);
    }
    for (uint32_t i = 0; i < L->nworkers; i++) {
        int rc = fl_pread_reader_create(depth, max_len, L->direct, &L->workers[i].reader, err);
        if (rc < 0)
            return rc;
    }
    L->io_backend = "pread";
    return 0;
}

/* Quasi order on io_uring (each rank reads its own contiguous share: order.h): coalesced
 * extent reads (block_reader.h) when the window's extents fit the budget (at most
 * FL_BLOCK_BUDGET_MAX and a quarter of the page cache the run can expect, divided among the
 * node's loader processes: fl_local_ranks); otherwise each record is read on its own, and the
 * log says why. */
#define FL_BLOCK_BUDGET_MAX (256ull << 20)
static int make_block_reader(fl_loader *L, fl_error *err)
{
    if (L->plan.order != FL_ORDER_QUASI || strcmp(L->io_backend, "io_uring") != 0)
        return 0;
    uint64_t win = fl_block_window_bytes(L->ds, &L->plan, L->direct);
    /* each loader process on the node holds its own extents: a quarter of the node's expected
     * page cache is shared among them */
    uint32_t local = fl_local_ranks();
    uint64_t share = L->cache_expect / 4 / local;
    uint64_t cap = share < FL_BLOCK_BUDGET_MAX ? share : FL_BLOCK_BUDGET_MAX;
    if (win > cap) {
        logf_(L, 0,
              "fastload: quasi window of %.1f MiB (block %llu x window %llu records) is over "
              "the read-ahead budget of %.1f MiB%s: per-record reads (lower quasi_block)",
              win / 1048576.0, (unsigned long long)L->plan.block,
              (unsigned long long)L->plan.window, cap / 1048576.0,
              local > 1 ? " (a quarter of the page cache shared by the node's loader processes)"
                        : "");
        return 0;
    }
    uint32_t qd = L->opt.queue_depth ? L->opt.queue_depth : 32;
    fl_block_config cfg = {
        .ds = L->ds,
        .fds = L->fds,
        .plan = &L->plan,
        .first_ticket = L->opt.start_epoch * L->plan.batches + L->opt.start_batch,
        /* O_DIRECT: 16 reads of <= 1 MiB in flight (on this project's 2-core VM disk, 16 beat
         * 8 and 32 for both 12 KiB and 147 KiB records in interleaved runs; 16 MiB in flight is
         * also what NVMe drives need for their sequential rate). Buffered reads run in
         * io_uring's worker threads, each read copying through the page cache: more of them in
         * flight. */
        .direct = L->direct,
        .drop_behind = L->drop_behind,
        .depth = L->direct ? (qd < 16 ? qd : 16) : (qd < 64 ? qd : 64),
        /* the window's extents, the next window's (read while this one is used) and 16 MiB */
        .budget = 2 * win + (16u << 20) < cap ? 2 * win + (16u << 20) : cap};
    int rc = fl_block_reader_create(&cfg, &L->blocks, err);
    if (rc < 0)
        return rc;
    L->ctx.blocks = L->blocks;
    return 0;
}

static int cuda_check(fl_loader *L, int rc, const char *what, fl_error *err)
{
    if (rc == 0)
        return 0;
    return fl_error_set(err, FL_E_CUDA, "device %d: %s: %s", L->opt.device, what,
                        fl_cuda_strerror(&L->cuda, rc));
}

static int setup_cuda(fl_loader *L, fl_error *err)
{
    if (!L->opt.pinned && L->opt.device < 0)
        return 0;
    char why[256] = "";
    if (fl_cuda_load(&L->cuda, why, sizeof why) == 0) {
        int count = 0;
        if (L->cuda.GetDeviceCount(&count) == 0 && count > 0)
            L->cuda_ok = 1;
        else
            snprintf(why, sizeof why, "no CUDA device");
    }
    if (L->opt.device < 0)
        return 0;
    if (!L->cuda_ok)
        return fl_error_set(err, FL_E_UNSUPPORTED, "device mode (device %d) needs CUDA: %s",
                            L->opt.device, why);
    int rc = cuda_check(L, L->cuda.SetDevice(L->opt.device), "cudaSetDevice", err);
    if (rc == 0)
        rc = cuda_check(L, L->cuda.StreamCreateWithFlags(&L->stream, FL_CUDA_STREAM_NON_BLOCKING),
                        "cudaStreamCreate", err);
    if (rc == 0)
        L->dev_on = 1;
    return rc;
}

/* Bytes of a slot's host memory: images, labels, then each other field's data and counts, every
 * array 64-byte aligned (fl_batch_field); *fields_off: where the other fields begin. */
static size_t slot_bytes(const fl_loader *L, size_t *fields_off)
{
    uint32_t B = L->opt.batch_size;
    size_t n = align_up(L->sample_bytes * B, 64) + (size_t)B * sizeof(int32_t);
    if (L->fields_on)
        n = align_up(n, 64);
    *fields_off = n;
    for (uint32_t i = 0; L->fields_on && i < L->nfields; i++) {
        if ((int)i == L->image_field || (int)i == L->label_field)
            continue;
        n += align_up(L->fout[i].sample_bytes * B, 64);
        if (L->fout[i].rows)
            n += align_up((size_t)B * sizeof(int32_t), 64);
    }
    return n;
}

/* Slot s's fl_batch_field array over its host memory (and device copies, when on). */
static void slot_fields(fl_loader *L, fl_slot *s)
{
    uint32_t B = L->opt.batch_size;
    size_t off = s->fields_off;
    for (uint32_t i = 0; i < L->nfields; i++) {
        const fl_field *f = &L->fields[i];
        fl_batch_field *o = &s->fields[i];
        o->name = f->name;
        o->type = f->type;
        o->dtype = f->dtype ? f->dtype : fl_field_type_dtype(f->type);
        o->shape[0] = B;
        uint32_t nd = 1;
        switch (f->type) {
        case FL_FIELD_IMAGE:
            o->shape[1] = L->out_h;
            o->shape[2] = L->out_w;
            o->shape[3] = L->out_c;
            nd = 4;
            break;
        case FL_FIELD_MASK:
            o->shape[1] = L->out_h;
            o->shape[2] = L->out_w;
            nd = 3;
            break;
        case FL_FIELD_BOXES:
            o->shape[1] = L->fout[i].rows;
            o->shape[2] = 4;
            nd = 3;
            break;
        case FL_FIELD_INT_LIST:
        case FL_FIELD_BYTES:
        case FL_FIELD_TEXT:
            o->shape[1] = L->fout[i].rows;
            nd = 2;
            break;
        case FL_FIELD_FLOAT_VECTOR:
        case FL_FIELD_NDARRAY:
            for (uint32_t d = 0; d < f->ndim && d < FL_MAX_DIMS; d++)
                o->shape[1 + d] = f->shape[d];
            nd = 1 + f->ndim;
            break;
        default: break;
        }
        o->ndim = nd;
        if ((int)i == L->image_field) {
            o->data = s->b.images;
            o->bytes = L->sample_bytes * B;
            o->device_data = s->dev_images;
        } else if ((int)i == L->label_field) {
            o->data = s->b.labels;
            o->bytes = (uint64_t)B * sizeof(int32_t);
            o->device_data = s->dev_labels;
        } else {
            uint64_t bytes = L->fout[i].sample_bytes * B;
            o->data = s->host + off;
            o->bytes = bytes;
            if (s->dev_fields)
                o->device_data = (uint8_t *)s->dev_fields + (off - s->fields_off);
            off += align_up(bytes, 64);
            if (L->fout[i].rows) {
                o->counts = (int32_t *)(s->host + off);
                if (s->dev_fields)
                    o->device_counts =
                        (int32_t *)((uint8_t *)s->dev_fields + (off - s->fields_off));
                off += align_up((size_t)B * sizeof(int32_t), 64);
            }
        }
    }
    s->b.num_fields = L->nfields;
    s->b.fields = s->fields;
}

static int make_slots(fl_loader *L, fl_error *err)
{
    uint32_t B = L->opt.batch_size;
    size_t img = align_up(L->sample_bytes * B, 64);
    L->slots = calloc(L->nslots, sizeof *L->slots);
    L->batches = calloc(L->nslots, sizeof *L->batches);
    if (!L->slots || !L->batches)
        return fl_error_set(err, -ENOMEM, "out of memory for %u ring slots", L->nslots);
    for (uint32_t i = 0; i < L->nslots; i++) {
        fl_slot *s = &L->slots[i];
        L->batches[i] = &s->b;
        s->host_bytes = slot_bytes(L, &s->fields_off);
        s->host = fl_host_alloc(L->cuda_ok ? &L->cuda : NULL, s->host_bytes, &s->host_pinned);
        s->b.indices = calloc(B, sizeof *s->b.indices);
        s->fields = calloc(L->nfields ? L->nfields : 1, sizeof *s->fields);
        if (!s->host || !s->b.indices || !s->fields)
            return fl_error_set(err, -ENOMEM, "out of memory for a %zu-byte batch slot",
                                s->host_bytes);
        s->b.images = s->host;
        s->b.labels = (int32_t *)(s->host + img);
        s->b.size = B;
        s->b.height = L->out_h;
        s->b.width = L->out_w;
        s->b.channels = L->out_c;
        if (L->dev_on) {
            int rc = cuda_check(L, L->cuda.Malloc(&s->dev_images, L->sample_bytes * B),
                                "cudaMalloc", err);
            if (rc == 0)
                rc = cuda_check(L, L->cuda.Malloc(&s->dev_labels, (size_t)B * sizeof(int32_t)),
                                "cudaMalloc", err);
            if (rc == 0 && s->host_bytes > s->fields_off)
                rc = cuda_check(L, L->cuda.Malloc(&s->dev_fields, s->host_bytes - s->fields_off),
                                "cudaMalloc", err);
            if (rc == 0)
                rc = cuda_check(L, L->cuda.EventCreateWithFlags(&s->event, FL_CUDA_EVENT_NO_TIMING),
                                "cudaEventCreate", err);
            if (rc < 0)
                return rc;
            s->b.device_images = s->dev_images;
            s->b.device_labels = s->dev_labels;
            s->b.event = s->event;
            s->b.stream = L->stream;
        }
        slot_fields(L, s);
    }
    return 0;
}

/* The ring's assign callback (ring.h; under the ring's lock, in ticket order): batch `ticket`
 * goes into slot i; set its place in the epoch order and its record indices. The epoch's
 * sequence is computed once, when its first batch is assigned. */
static void assign_batch(void *user, uint32_t i, uint64_t ticket)
{
    fl_loader *L = user;
    fl_batch *b = &L->slots[i].b;
    uint64_t epoch = ticket / L->plan.batches, batch = ticket % L->plan.batches;
    if (L->perm_epoch != epoch) {
        fl_order_epoch_perm(&L->plan, epoch, &L->perm);
        L->perm_epoch = epoch;
    }
    b->epoch = epoch;
    b->batch = batch;
    b->last_in_epoch = batch + 1 == L->plan.batches;
    b->skipped = 0;
    for (uint32_t k = 0; k < L->opt.batch_size; k++)
        b->indices[k] = fl_perm_at(&L->perm, fl_order_pos(&L->plan, batch, k) % L->plan.n);
}

/* What the workers see (worker.h), once the readers' descriptors and the in-memory copy are
 * settled. */
static void make_work_ctx(fl_loader *L)
{
    L->ctx = (fl_work_ctx){.ds = L->ds,
                           .schema = L->schema,
                           .backend = L->backend,
                           .plan = &L->plan,
                           .aug = &L->aug,
                           .ring = &L->ring,
                           .batches = L->batches,
                           .out_h = L->out_h,
                           .out_w = L->out_w,
                           .out_c = L->out_c,
                           .sample_bytes = L->sample_bytes,
                           .batch_size = L->opt.batch_size,
                           .chunk = L->chunk,
                           .on_corrupt = L->opt.on_corrupt,
                           .decode_flags = L->opt.decode_flags,
                           .direct = L->direct,
                           .read_in_place = L->read_in_place,
                           .mapped = L->mapped,
                           .fds = L->fds,
                           .mem = L->mem,
                           .nmem = L->nmem,
                           .drop_behind = L->drop_behind,
                           .fields_on = L->fields_on,
                           .nfields = L->nfields,
                           .fields = L->fields,
                           .fout = L->fout,
                           .has_image = L->image_field >= 0,
                           .label_field = L->label_field,
                           .object_boxes = L->object_boxes,
                           .box_min_visible = L->opt.box_min_visible,
                           .budget = &L->budget,
                           .jidx = &L->jidx};
}

/* The schema's fields: which are the image and the label, where each goes in a batch, and
 * whether the records carry more than a classification pair (fields_on). */
static int plan_fields(fl_loader *L, const char *path, fl_error *err)
{
    L->nfields = fl_dataset_num_fields(L->ds);
    L->fields = fl_dataset_fields(L->ds);
    L->image_field = fl_fields_image_index(L->fields, L->nfields);
    L->label_field = fl_fields_label_index(L->fields, L->nfields);
    L->fields_on = !(L->nfields == 2 && L->image_field == 0 && L->label_field == 1);
    L->object_boxes = -1;
    L->fout = calloc(L->nfields ? L->nfields : 1, sizeof *L->fout);
    if (!L->fout)
        return fl_error_set(err, -ENOMEM, "out of memory");
    for (uint32_t i = 0; i < L->nfields; i++) {
        const fl_field *f = &L->fields[i];
        fl_field_out *o = &L->fout[i];
        if (fl_field_is_variable(f->type)) {
            o->rows = f->max_count ? f->max_count : 1;
            o->row_bytes = fl_field_row_bytes(f);
            o->sample_bytes = (size_t)o->rows * o->row_bytes;
        } else if (f->type == FL_FIELD_NDARRAY) {
            o->sample_bytes = fl_field_ndarray_bytes(f);
        } else if (f->type != FL_FIELD_IMAGE && f->type != FL_FIELD_MASK) {
            o->sample_bytes = (size_t)fl_field_elements(f) * 4; /* INT, FLOAT, FLOAT_VECTOR */
        }
        if (f->type == FL_FIELD_BOXES && L->object_boxes < 0)
            L->object_boxes = (int)i;
    }
    if (L->opt.augment == FL_AUG_OBJECT_CROP && L->object_boxes < 0)
        return fl_error_set(err, FL_E_INVALID,
                            "%s: the object crop keeps boxes, but the data set has no boxes field",
                            path);
    if (L->opt.augment != FL_AUG_OBJECT_CROP)
        L->object_boxes = -1;
    return 0;
}

/* Open the dataset and work out what a batch is: output geometry, the order plan, the
 * augmentation config and the buffer of an epoch's sequence. */
static int open_dataset(fl_loader *L, const char *path, fl_error *err)
{
    const fl_loader_options *opt = &L->opt;
    int rc = fl_dataset_open(path, &L->ds, err);
    if (rc < 0)
        return rc;
    L->schema = *fl_dataset_schema(L->ds);
    L->backend = fl_dataset_backend(L->ds);
    if ((rc = plan_fields(L, path, err)) < 0)
        return rc;
    if (L->image_field >= 0) {
        L->out_h = opt->out_height ? opt->out_height : L->schema.height;
        L->out_w = opt->out_width ? opt->out_width : L->schema.width;
        L->out_c = opt->channels ? opt->channels : L->schema.channels;
        if (!L->out_h || !L->out_w)
            return fl_error_set(err, FL_E_INVALID,
                                "%s: images vary in size: set out_height and out_width", path);
        if (L->out_c != 1 && L->out_c != 3)
            return fl_error_set(err, FL_E_UNSUPPORTED, "%s: %u channels not supported", path,
                                L->out_c);
    } else if (opt->augment != FL_AUG_NONE || opt->flip) {
        return fl_error_set(err, FL_E_INVALID,
                            "%s: the data set has no image field: no "
                            "augmentation or flip applies",
                            path);
    }
    L->sample_bytes = (size_t)L->out_h * L->out_w * L->out_c;
    for (uint32_t i = 0; i < L->nfields; i++) {
        const fl_field *f = &L->fields[i];
        if (f->type == FL_FIELD_IMAGE)
            L->fout[i].sample_bytes = L->sample_bytes;
        else if (f->type == FL_FIELD_MASK)
            L->fout[i].sample_bytes = (size_t)L->out_h * L->out_w * fl_dtype_size(f->dtype);
    }
    uint64_t nrec = fl_dataset_count(L->ds);
    uint32_t qblock = opt->quasi_block;
    if (!qblock && opt->order == FL_ORDER_QUASI && nrec)
        qblock = fl_order_quasi_block(fl_dataset_total_bytes(L->ds) / nrec);
    rc =
        fl_order_plan_init(&L->plan, fl_dataset_count(L->ds), opt->order, qblock, opt->quasi_window,
                           opt->seed, opt->rank, opt->world, opt->batch_size, opt->drop_last, err);
    if (rc < 0) {
        fl_error_prefix(err, "%s", path);
        return rc;
    }
    L->aug = (fl_aug_config){.augment = opt->augment,
                             .flip = opt->flip,
                             .scale_min = opt->scale_min,
                             .scale_max = opt->scale_max,
                             .ratio_min = opt->ratio_min,
                             .ratio_max = opt->ratio_max,
                             .center_ratio = opt->center_ratio,
                             .out_width = L->out_w,
                             .out_height = L->out_h,
                             .seed = opt->seed};
    if (fl_perm_alloc(&L->perm, L->plan.n, 0))
        return fl_error_set(err, -ENOMEM, "out of memory for the order of %llu records",
                            (unsigned long long)L->plan.n);
    return 0;
}

/* Workers, ring slots, samples per claim, and whether raw samples can be read in place. */
static void size_pipeline(fl_loader *L)
{
    const fl_loader_options *opt = &L->opt;
    L->nworkers = opt->workers;
    if (L->nworkers == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        L->nworkers = c > 0 ? (uint32_t)c : 1;
    }
    L->nslots = opt->prefetch ? opt->prefetch : L->nworkers + 2;
    if (!opt->prefetch) {
        /* Small batches fill in well under a millisecond: with a few slots the workers and the
         * consumer then keep handing slots to each other through the scheduler (Fashion-MNIST's
         * 200 KB batches: 1.3x the images/s with 16 slots). Up to FL_PREFETCH_SMALL_MAX slots
         * while the ring stays within FL_PREFETCH_SMALL_BYTES. */
        size_t off, sb = slot_bytes(L, &off);
        uint64_t fit = sb ? FL_PREFETCH_SMALL_BYTES / sb : 0;
        if (fit > FL_PREFETCH_SMALL_MAX)
            fit = FL_PREFETCH_SMALL_MAX;
        if (fit > L->nslots)
            L->nslots = (uint32_t)fit;
    }
    uint32_t qd = opt->queue_depth ? opt->queue_depth : 32;
    L->chunk = opt->batch_size < qd ? opt->batch_size : qd;
    L->read_in_place = !L->fields_on && L->schema.encoding == FL_ENC_RAW &&
                       L->schema.compression == FL_COMP_NONE && opt->augment == FL_AUG_NONE &&
                       !opt->flip && L->out_c == L->schema.channels &&
                       L->out_h == L->schema.height && L->out_w == L->schema.width;
}

/* FL_IO_AUTO on a data set larger than the page cache it can expect: O_DIRECT (one log line). */
static void auto_direct(fl_loader *L)
{
    const char *why = "";
    L->cache_expect = fl_page_cache_expect(fl_page_cache_root(), &why);
    uint64_t total = fl_dataset_total_bytes(L->ds);
    if (L->opt.io != FL_IO_AUTO || L->opt.direct || total <= L->cache_expect)
        return;
    L->direct = 1;
    snprintf(L->io_reason, sizeof L->io_reason,
             "io auto: the data set (%.1f MiB) is larger than the page cache it can expect "
             "(%.1f MiB, %s)",
             total / 1048576.0, L->cache_expect / 1048576.0, why);
    logf_(L, 0, "fastload: %s: O_DIRECT reads", L->io_reason);
}

/* Where records come from: memory (the dataset's mapping, or the shards read into memory) or
 * reads of the shard files (their descriptors opened here; the readers come with the workers). */
static int choose_io(fl_loader *L, fl_error *err)
{
    const fl_loader_options *opt = &L->opt;
    /* FL_IO_AUTO never maps, but reads small datasets into memory: see fl_io_mode in fastload.h. */
    int in_memory =
        L->backend != FL_BACKEND_LMDB &&
        (opt->io == FL_IO_MEMORY || fl_memory_auto(opt, &L->schema, fl_dataset_total_bytes(L->ds)));
    L->mapped = L->backend == FL_BACKEND_LMDB || opt->io == FL_IO_MMAP || in_memory;
    /* Raw records from memory cost ~0.1 µs each: claim whole batches (up to 1024 samples) so
     * the lock and the wake-ups are paid per batch, not per 32 samples. */
    if (L->mapped && L->schema.encoding == FL_ENC_RAW)
        L->chunk = opt->batch_size < 1024 ? opt->batch_size : 1024;
    int rc;
    if (in_memory && (rc = fl_memory_load(L, err)) < 0)
        return rc;
    /* the workers read a file mapping (load_mapped): its guard in place now, chained to the
     * SIGBUS handler of this process as it is (a forked DataLoader worker may have its own) */
    if (L->mapped && !in_memory && (rc = fl_mapped_guard_install()) < 0)
        return fl_error_set(err, rc, "cannot install the SIGBUS handler that guards reads of %s",
                            L->backend == FL_BACKEND_LMDB ? "LMDB's map" : "the shard mappings");
    if (!L->mapped) {
        auto_direct(L);
        if ((rc = open_shards(L, err)) < 0)
            return rc;
        /* buffered reads of more than the page cache can keep: drop what was read behind us,
         * so the run does not evict everyone else's cache (and its cgroup's memory) for nothing */
        L->drop_behind = !L->direct && fl_dataset_total_bytes(L->ds) > L->cache_expect;
        /* and read no more than asked: the kernel's read-ahead (up to the device's
         * read_ahead_kb, 8 MiB on some disks) would fill the cache with pages nobody drops */
        for (uint32_t i = 0; L->drop_behind && i < L->nfds; i++)
            posix_fadvise(L->fds[i], 0, 0, POSIX_FADV_RANDOM);
    }
    return 0;
}

/* The ring, the workers' context, the workers with their readers, and their threads. */
static int start_workers(fl_loader *L, fl_error *err)
{
    const fl_loader_options *opt = &L->opt;
    uint64_t first = opt->start_epoch * L->plan.batches + opt->start_batch;
    if (fl_ring_init(&L->ring, L->nslots, opt->batch_size, L->chunk, first, assign_batch, L) < 0)
        return fl_error_set(err, -ENOMEM, "out of memory for %u ring slots", L->nslots);
    /* max_batches: nothing is claimed (read, decoded) from ticket first + max_batches on */
    if (opt->max_batches && first <= UINT64_MAX - opt->max_batches)
        fl_ring_set_end(&L->ring, first + opt->max_batches);
    L->ring_init = 1;
    int64_t dm = opt->decode_memory;
    int rc = fl_budget_init(&L->budget, dm < 0 ? 0 : dm ? (uint64_t)dm : FL_DECODE_MEMORY_DEFAULT);
    if (rc < 0)
        return fl_error_set(err, rc, "cannot set up the decode memory budget: %s", strerror(-rc));
    L->budget_init = 1;
    int64_t jm = opt->jpeg_index_memory;
    if ((L->schema.encoding == FL_ENC_JPEG || L->schema.encoding == FL_ENC_MIXED) &&
        (rc = fl_jidx_cache_init(&L->jidx, fl_dataset_count(L->ds),
                                 jm < 0 ? 0
                                 : jm   ? (uint64_t)jm
                                        : fl_jidx_default_limit())) < 0)
        return fl_error_set(err, rc, "out of memory for the JPEG index cache of %llu records",
                            (unsigned long long)fl_dataset_count(L->ds));
    make_work_ctx(L);
    L->workers = calloc(L->nworkers, sizeof *L->workers);
    if (!L->workers)
        return fl_error_set(err, -ENOMEM, "out of memory for %u workers", L->nworkers);
    for (uint32_t i = 0; i < L->nworkers; i++)
        if ((rc = fl_worker_init(&L->workers[i], &L->ctx, i, err)) < 0)
            return rc;
    if (!L->mapped) {
        if ((rc = make_readers(L, err)) < 0 || (rc = make_block_reader(L, err)) < 0)
            return rc;
    } else {
        L->io_backend = L->mem ? "memory" : "mmap";
    }
    for (uint32_t i = 0; i < L->nworkers; i++) {
        if ((rc = pthread_create(&L->workers[i].thread, NULL, fl_worker_main, &L->workers[i])) != 0)
            return fl_error_set(err, -rc, "cannot start worker thread %u: %s", i, strerror(rc));
        L->nstarted = i + 1;
    }
    return 0;
}

/* L->io_reason: backend, O_DIRECT or buffered, and the choices made for this data set. */
static void describe_io(fl_loader *L)
{
    char why[sizeof L->io_reason];
    snprintf(why, sizeof why, "%s", L->io_reason);
    int n = snprintf(L->io_reason, sizeof L->io_reason, "%s, %s%s%s%s", L->io_backend,
                     L->mapped   ? "from memory"
                     : L->direct ? "O_DIRECT"
                                 : "buffered",
                     why[0] ? " (" : "", why, why[0] ? ")" : "");
    if (n > 0 && (size_t)n < sizeof L->io_reason && L->drop_behind)
        n += snprintf(L->io_reason + n, sizeof L->io_reason - n,
                      ", drop-behind (the data set is larger than the page cache it can expect)");
    if (n > 0 && (size_t)n < sizeof L->io_reason && L->blocks)
        snprintf(L->io_reason + n, sizeof L->io_reason - n,
                 ", quasi blocks read as coalesced extents (%llu records x %llu blocks a window)",
                 (unsigned long long)L->plan.block, (unsigned long long)L->plan.window);
}

int fl_loader_direct(const fl_loader *L) { return L->direct && !L->mapped; }

const char *fl_loader_io_describe(const fl_loader *L) { return L->io_reason; }

int fl_loader_create(const char *path, const fl_loader_options *opt, fl_loader **out, fl_error *err)
{
    *out = NULL;
    int rc = fl_loader_options_check(opt, err);
    if (rc < 0)
        return rc;
    fl_loader *L = calloc(1, sizeof *L);
    if (!L)
        return fl_error_set(err, -ENOMEM, "out of memory");
    L->opt = *opt;
    L->t_create = fl_now_s();
    L->perm_epoch = UINT64_MAX;
    L->direct = opt->direct;
    if ((rc = open_dataset(L, path, err)) < 0)
        goto fail;
    size_pipeline(L);
    if ((rc = setup_cuda(L, err)) < 0 || (rc = make_slots(L, err)) < 0 ||
        (rc = choose_io(L, err)) < 0 || (rc = start_workers(L, err)) < 0)
        goto fail;
    describe_io(L);
    *out = L;
    return 0;
fail:
    fl_loader_close(L); /* undoes whatever the steps did */
    return rc;
}

/* Start the host-to-device copy of slot s's batch on the loader's stream (device mode). */
static int copy_to_device(fl_loader *L, fl_slot *s, fl_error *err)
{
    /* uint8 images and labels travel on the loader's own stream; the caller orders its work
     * after b->event. */
    int rc = cuda_check(L, L->cuda.SetDevice(L->opt.device), "cudaSetDevice", err);
    if (rc == 0)
        rc = cuda_check(L,
                        L->cuda.MemcpyAsync(s->dev_images, s->b.images, L->sample_bytes * s->b.size,
                                            FL_CUDA_MEMCPY_H2D, L->stream),
                        "cudaMemcpyAsync", err);
    if (rc == 0)
        rc = cuda_check(L,
                        L->cuda.MemcpyAsync(s->dev_labels, s->b.labels, sizeof(int32_t) * s->b.size,
                                            FL_CUDA_MEMCPY_H2D, L->stream),
                        "cudaMemcpyAsync", err);
    /* the other fields' arrays lie side by side after the labels: one copy */
    if (rc == 0 && s->dev_fields)
        rc = cuda_check(L,
                        L->cuda.MemcpyAsync(s->dev_fields, s->host + s->fields_off,
                                            s->host_bytes - s->fields_off, FL_CUDA_MEMCPY_H2D,
                                            L->stream),
                        "cudaMemcpyAsync", err);
    if (rc == 0)
        rc = cuda_check(L, L->cuda.EventRecord(s->event, L->stream), "cudaEventRecord", err);
    return rc;
}

int fl_loader_next(fl_loader *L, fl_batch **out, fl_error *err)
{
    *out = NULL;
    uint32_t i, skipped;
    int rc = fl_ring_take(&L->ring, &i, &skipped, err);
    if (rc == FL_RING_ALL_HELD)
        return fl_error_set(err, FL_E_INVALID,
                            "all %u ring slots are held by the caller: release a batch before "
                            "asking for the next",
                            L->nslots);
    if (rc == FL_RING_END)
        return fl_error_set(err, FL_E_RANGE,
                            "the loader's last batch was delivered (max_batches %llu from epoch "
                            "%llu, batch %llu)",
                            (unsigned long long)L->opt.max_batches,
                            (unsigned long long)L->opt.start_epoch,
                            (unsigned long long)L->opt.start_batch);
    if (rc < 0)
        return rc;
    fl_slot *s = &L->slots[i];
    s->b.skipped = skipped;
    if (L->dev_on && (rc = copy_to_device(L, s, err)) < 0) {
        fl_error e;
        if (!err)
            fl_error_set(&e, rc, "device copy failed");
        fl_ring_fail(&L->ring, err ? err : &e);
        fl_ring_release(&L->ring, i);
        return rc;
    }
    *out = &s->b;
    return 0;
}

void fl_loader_release(fl_loader *L, fl_batch *b)
{
    if (!L || !b)
        return;
    fl_slot *s = (fl_slot *)b; /* b is the slot's first member */
    if (s < L->slots || s >= L->slots + L->nslots)
        return;
    if (L->dev_on)
        /* the host buffer is about to be refilled: its H2D copy must have finished */
        L->cuda.EventSynchronize(s->event);
    fl_ring_release(&L->ring, (uint32_t)(s - L->slots));
}

uint32_t fl_loader_workers(const fl_loader *L) { return L->nstarted; }

uint32_t fl_loader_prefetch(const fl_loader *L) { return L->nslots; }

void fl_loader_set_max_batches(fl_loader *L, uint64_t n)
{
    const fl_loader_options *opt = &L->opt;
    uint64_t first = opt->start_epoch * L->plan.batches + opt->start_batch;
    L->opt.max_batches = n;
    fl_ring_set_end(&L->ring, n && first <= UINT64_MAX - n ? first + n : UINT64_MAX);
}

int fl_loader_set_workers(fl_loader *L, uint32_t n, fl_error *err)
{
    if (n < 1 || n > L->nstarted)
        return fl_error_set(err, FL_E_INVALID, "%u decode workers asked for: the loader has %u", n,
                            L->nstarted);
    fl_ring_set_active(&L->ring, L->nstarted, n);
    return 0;
}

uint64_t fl_loader_batches_per_epoch(const fl_loader *L) { return L->plan.batches; }

uint64_t fl_loader_samples_per_epoch(const fl_loader *L) { return L->plan.per_rank; }

void fl_loader_position(const fl_loader *L, uint64_t *epoch, uint64_t *batch)
{
    fl_loader *M = (fl_loader *)L;
    uint64_t T;
    fl_ring_consumer_stats(&M->ring, &T, NULL, NULL, NULL);
    *epoch = T / L->plan.batches;
    *batch = T % L->plan.batches;
}

void fl_loader_stats_get(const fl_loader *L, fl_loader_stats *o)
{
    fl_loader *M = (fl_loader *)L;
    memset(o, 0, sizeof *o);
    fl_ring_consumer_stats(&M->ring, NULL, &o->batches, &o->skipped, &o->consumer_wait_s);
    o->images = o->batches * L->opt.batch_size; /* every batch is full */
    fl_stage_stats st = {0};
    for (uint32_t i = 0; i < L->nstarted; i++)
        fl_worker_stats(&L->workers[i], &st);
    o->bytes_read = st.bytes_read + fl_block_reader_bytes(L->blocks);
    o->io_wait_s = st.io_wait_s;
    o->decode_s = st.decode_s;
    o->augment_s = st.augment_s;
    o->slot_wait_s = st.slot_wait_s;
    o->wall_s = fl_now_s() - L->t_create;
    o->io_backend = L->io_backend;
    o->pinned_bytes = L->slots ? (uint64_t)L->nslots * L->slots[0].host_bytes : 0;
    if (L->budget_init)
        fl_budget_stats(&M->budget, &o->decode_memory_peak, &o->decode_memory_wait_s);
    o->jpeg_index_bytes = fl_jidx_cache_bytes(&M->jidx);
}

const fl_dataset *fl_loader_dataset(const fl_loader *L) { return L->ds; }

void fl_loader_close(fl_loader *L)
{
    if (!L)
        return;
    if (L->ring_init)
        fl_ring_stop(&L->ring);
    if (L->budget_init)
        fl_budget_stop(&L->budget);  /* wakes workers waiting for decode memory */
    fl_block_reader_stop(L->blocks); /* wakes workers waiting for an extent */
    for (uint32_t i = 0; i < L->nstarted; i++)
        pthread_join(L->workers[i].thread, NULL);
    fl_block_reader_destroy(L->blocks);
    if (L->workers)
        for (uint32_t i = 0; i < L->nworkers; i++)
            fl_worker_free(&L->workers[i]);
    free(L->workers);
    if (L->dev_on)
        L->cuda.StreamSynchronize(L->stream);
    if (L->slots) {
        for (uint32_t i = 0; i < L->nslots; i++) {
            fl_slot *s = &L->slots[i];
            fl_host_free(L->cuda_ok ? &L->cuda : NULL, s->host, s->host_bytes, s->host_pinned);
            free(s->b.indices);
            free(s->fields);
            if (s->dev_fields)
                L->cuda.Free(s->dev_fields);
            if (s->dev_images)
                L->cuda.Free(s->dev_images);
            if (s->dev_labels)
                L->cuda.Free(s->dev_labels);
            if (s->event)
                L->cuda.EventDestroy(s->event);
        }
        free(L->slots);
    }
    if (L->stream)
        L->cuda.StreamDestroy(L->stream);
    for (uint32_t i = 0; i < L->nfds; i++)
        if (L->fds[i] != fl_dataset_file_fd(L->ds, i)) /* the dataset closes its own */
            close(L->fds[i]);
    free(L->fds);
    fl_memory_free(L);
    fl_perm_free(&L->perm);
    free(L->fout);
    fl_dataset_close(L->ds);
    if (L->ring_init)
        fl_ring_destroy(&L->ring);
    if (L->budget_init)
        fl_budget_destroy(&L->budget);
    fl_jidx_cache_destroy(&L->jidx);
    free(L->batches);
    free(L);
}
