/* bench.c — `fastload bench`: drive the loader over E epochs as fast as a consumer can take
 * batches and report throughput, the per-stage time split and resident memory per epoch; or,
 * with --memcpy, the single-thread memcpy bandwidth that raw-record runs are compared against. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fl_text.h"
#include "fastload.h"
#include "fastload_cli.h"
#include "fl_clock.h"
#include "fl_cli.h"
#include "run_options.h"

/* CPU seconds (user + system) this process has used, all threads together. */
static double cpu_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru))
        return 0;
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Resident and peak resident set size in MiB from /proc/self/status (0 when unreadable). */
void cli_rss_mib(double *rss, double *peak)
{
    *rss = *peak = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long kb;
        if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
            *rss = kb / 1024.0;
        else if (sscanf(line, "VmHWM: %lu kB", &kb) == 1)
            *peak = kb / 1024.0;
    }
    fclose(f);
}

/* Page cache in MiB: the machine's (Cached in /proc/meminfo) and this process's cgroup's
 * ("cache" in a v1 memory.stat, "file" in a v2 one; -1 when unreadable). */
static double meminfo_cached_mib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Cached: %lu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb / 1024.0;
}

static double cgroup_cached_mib(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[4096], path[4200] = "";
    int v2 = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        if (strstr(c1 + 1, "memory")) {
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.stat", c2 + 1);
            v2 = 0;
            break;
        }
        if (!strcmp(line, "0") && !c1[1]) {
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.stat", c2 + 1);
            v2 = 1;
        }
    }
    if (f)
        fclose(f);
    FILE *g = path[0] ? fopen(path, "r") : NULL;
    if (!g)
        return -1;
    double mib = -1;
    unsigned long long v;
    while (fgets(line, sizeof line, g))
        if (sscanf(line, v2 ? "file %llu" : "cache %llu", &v) == 1) {
            mib = v / 1048576.0;
            break;
        }
    fclose(g);
    return mib;
}

/* Stored bytes of the batch's records (the read amplification's denominator). */
static uint64_t stored_bytes(const fl_dataset *ds, const fl_batch *b)
{
    uint64_t sum = 0;
    for (uint32_t k = 0; k < b->size; k++) {
        fl_record_info r;
        if (fl_dataset_record_info(ds, b->indices[k], &r, NULL) == 0)
            sum += r.stored_len;
    }
    return sum;
}

static const char *encoding_name(const fl_dataset *ds)
{
    const fl_schema *s = ds ? fl_dataset_schema(ds) : NULL;
    if (!s)
        return "?";
    int z = s->compression == FL_COMP_ZSTD;
    switch (s->encoding) {
    case FL_ENC_JPEG: return z ? "jpeg+zstd" : "jpeg";
    case FL_ENC_PNG: return z ? "png+zstd" : "png";
    case FL_ENC_RAW: return z ? "raw+zstd" : "raw";
    case FL_ENC_WEBP: return z ? "webp+zstd" : "webp";
    case FL_ENC_MIXED: return z ? "mixed+zstd" : "mixed";
    case FL_ENC_NONE: return "none"; /* tensor-only records: no image (never compressed) */
    }
    return "?";
}

/* Single-thread memcpy bandwidth: best of several passes over a buffer larger than the caches. */
static int bench_memcpy(const run_options *ro)
{
    size_t n = (size_t)ro->memcpy_bytes;
    uint8_t *a = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    uint8_t *b = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    if (!a || !b) {
        fprintf(stderr, "fastload bench --memcpy: cannot allocate 2 x %zu bytes\n", n);
        free(a);
        free(b);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (uint8_t)(i * 131u);
    memset(b, 0, n); /* fault the pages in before timing */
    double best = 1e30, total = 0;
    int passes = 0;
    while (passes < 5 || (total < 1.0 && passes < 200)) {
        double t0 = fl_now_s();
        memcpy(passes & 1 ? a : b, passes & 1 ? b : a, n);
        double dt = fl_now_s() - t0;
        total += dt;
        if (dt < best)
            best = dt;
        passes++;
    }
    volatile uint8_t sink = a[n / 2] ^ b[n / 3]; /* keep the copies observable */
    (void)sink;
    double mbs = n / best / 1e6;
    if (ro->json)
        printf("{\"memcpy_mb_per_sec\": %.1f, \"bytes\": %zu, \"passes\": %d, \"threads\": 1}\n",
               mbs, n, passes);
    else
        printf("memcpy (1 thread, %zu MiB buffers, best of %d): %.1f MB/s\n", n >> 20, passes, mbs);
    free(a);
    free(b);
    return 0;
}
/* Records repeated to fill an epoch's last batch, or dropped with --drop-last: every batch is
 * full, so "60,160 images" from 60,000 records needs saying or it looks like a bug. */
typedef struct {
    uint64_t share, samples, padded, dropped;
} bench_padding;

/* What one bench run measured: filled while consuming batches and when the clock stops, read by
 * the reports. */
typedef struct {
    double cached0, cg_cached0; /* page cache (machine, cgroup) before create, MiB */
    double t_create, t_start, cpu_start;
    uint64_t per_epoch;
    bench_padding pad;
    double *rss_epoch, *ips_epoch, *cpu_epoch; /* one entry per epoch (cpu: CPU seconds) */
    uint64_t images, out_bytes, batches, epochs_done;
    uint64_t stored; /* stored bytes of the records delivered */
    uint32_t h, w, c;
    fl_batch_field fields[FL_MAX_FIELDS]; /* as the first batch gave them (names, types, shapes) */
    uint32_t nfields;
    double wall, cpu, cache_growth, cg_growth;
    int cg_ok;
    fl_loader_stats st;
    double rss, peak, ips, mbs, rmbs;
    double
        amp; /* bytes read (aligned spans, extents, prefetched batches) per stored byte delivered */
    uint32_t workers;
    const char *backend;
} bench_result;

static void bench_print_error(const fl_error *err, const char *hint)
{
    char shown[4 * sizeof err->msg];
    fprintf(stderr, "fastload bench: error: %s%s\n",
            fl_text_escape(err->msg[0] ? err->msg : fl_strerror(err->code), 0, shown, sizeof shown),
            hint);
}

/* Starts the clocks and creates the loader; prints the error and returns 1 on failure. */
static int bench_create_loader(const run_options *ro, fl_loader **L, bench_result *r)
{
    fl_error err = {0};
    /* Timing starts before create: the workers begin filling the ring inside it, and that work
     * must be inside the measured interval (else prefetched batches would look free). */
    r->cached0 = meminfo_cached_mib(), r->cg_cached0 = cgroup_cached_mib();
    r->t_create = fl_now_s(), r->cpu_start = cpu_s();
    if (fl_loader_create(ro->path, &ro->opt, L, &err)) {
        /* The library names its option fields; tell a command-line user which flag sets them. */
        bench_print_error(&err, (!ro->opt.out_height && strstr(err.msg, "vary in size"))
                                    ? " (pass --size S or WxH)"
                                    : "");
        return 1;
    }
    r->t_start = fl_now_s();
    return 0;
}

static bench_padding bench_epoch_padding(const run_options *ro, fl_loader *L, const fl_dataset *ds)
{
    bench_padding pad;
    uint64_t n = ds ? fl_dataset_count(ds) : 0, world = ro->opt.world > 1 ? ro->opt.world : 1;
    pad.share = ro->opt.drop_last ? n / world : (n + world - 1) / world;
    pad.samples = fl_loader_samples_per_epoch(L);
    pad.padded = pad.samples > pad.share ? pad.samples - pad.share : 0;
    pad.dropped = pad.samples < pad.share ? pad.share - pad.samples : 0;
    return pad;
}

/* Adds one batch to the totals (images, output and stored bytes, the fields' layout). */
static void bench_count_batch(bench_result *r, const fl_dataset *ds, const fl_batch *b)
{
    r->h = b->height, r->w = b->width, r->c = b->channels;
    r->images += b->size;
    if (!r->nfields) {
        r->nfields = b->num_fields < FL_MAX_FIELDS ? b->num_fields : FL_MAX_FIELDS;
        memcpy(r->fields, b->fields, r->nfields * sizeof *r->fields);
    }
    if (b->num_fields == 2 && (void *)b->fields[0].data == (void *)b->images) {
        r->out_bytes += (uint64_t)b->size * b->height * b->width * b->channels + b->size * 4ull;
    } else {
        for (uint32_t i = 0; i < b->num_fields; i++)
            r->out_bytes += b->fields[i].bytes + (b->fields[i].counts ? b->size * 4ull : 0);
    }
    r->batches++;
    r->stored += stored_bytes(ds, b);
}

/* Takes batches until the epochs or --max-batches are done, recording RSS and rate per epoch;
 * returns 1 (error printed) when the loader fails. */
static int bench_consume(const run_options *ro, fl_loader *L, const fl_dataset *ds, bench_result *r)
{
    uint64_t epoch_images = 0;
    double t_epoch = r->t_create, c_epoch = r->cpu_start;
    fl_error err = {0};
    while (r->epochs_done < ro->epochs && (!ro->max_batches || r->batches < ro->max_batches)) {
        fl_batch *b;
        if (fl_loader_next(L, &b, &err)) {
            bench_print_error(&err, "");
            return 1;
        }
        epoch_images += b->size;
        bench_count_batch(r, ds, b);
        int last = b->last_in_epoch;
        fl_loader_release(L, b);
        if (last) {
            double t = fl_now_s(), peak;
            uint64_t e = r->epochs_done;
            cli_rss_mib(&r->rss_epoch[e], &peak);
            r->ips_epoch[e] = epoch_images / (t - t_epoch);
            double c = cpu_s();
            r->cpu_epoch[e] = c - c_epoch;
            c_epoch = c;
            if (!ro->json && !ro->quiet) {
                char rate[48];
                fl_cli_human_rate(r->ips_epoch[e], "images/s", rate, sizeof rate);
                fprintf(stderr, "epoch %llu: %llu images in %.2f s, %s, RSS %.1f MiB\n",
                        (unsigned long long)(ro->opt.start_epoch + e),
                        (unsigned long long)epoch_images, t - t_epoch, rate, r->rss_epoch[e]);
            }
            r->epochs_done++;
            epoch_images = 0;
            t_epoch = t;
        }
    }
    return 0;
}

/* Stops the wall, CPU and page-cache clocks. */
static void bench_stop_clocks(bench_result *r)
{
    r->wall = fl_now_s() - r->t_create;
    r->cpu = cpu_s() - r->cpu_start;
    r->cache_growth = meminfo_cached_mib() - r->cached0;
    double cg_cached1 = cgroup_cached_mib();
    r->cg_ok = r->cg_cached0 >= 0 && cg_cached1 >= 0;
    r->cg_growth = r->cg_ok ? cg_cached1 - r->cg_cached0 : 0;
}

/* Reads the loader's stage statistics and memory and derives the rates the reports show. */
static void bench_summarize(const run_options *ro, fl_loader *L, bench_result *r)
{
    memset(&r->st, 0, sizeof r->st);
    fl_loader_stats_get(L, &r->st);
    cli_rss_mib(&r->rss, &r->peak);
    r->ips = r->wall > 0 ? r->images / r->wall : 0;
    r->mbs = r->wall > 0 ? r->out_bytes / r->wall / 1e6 : 0;
    r->rmbs = r->wall > 0 ? r->st.bytes_read / r->wall / 1e6 : 0;
    r->amp = r->stored ? (double)r->st.bytes_read / r->stored : 0;
    /* 0 means "one per online CPU" to the loader: report the number it actually runs. */
    r->workers = ro->opt.workers ? ro->opt.workers : (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
    r->backend = r->st.io_backend ? r->st.io_backend : "?";
}

/* Bytes one batch carries for field f, its per-sample counts included. */
static uint64_t bench_field_bytes(const fl_batch_field *f)
{
    return f->bytes + (f->counts ? f->shape[0] * 4 : 0);
}

static void bench_json_per_epoch(fl_json *j, const char *key, const double *v, uint64_t n)
{
    fl_json_key(j, key);
    fl_json_begin_array(j);
    for (uint64_t e = 0; e < n; e++)
        fl_json_double(j, v[e]);
    fl_json_end_array(j);
}

static void bench_json_fields(fl_json *j, const bench_result *r)
{
    fl_json_key(j, "fields");
    fl_json_begin_array(j);
    for (uint32_t i = 0; i < r->nfields; i++) {
        const fl_batch_field *f = &r->fields[i];
        fl_json_begin_object(j);
        fl_json_key(j, "name");
        fl_json_string(j, f->name);
        fl_json_key(j, "type");
        fl_json_string(j, fl_field_type_name(f->type));
        fl_json_key(j, "dtype");
        fl_json_string(j, fl_dtype_name(f->dtype));
        fl_json_key(j, "shape");
        fl_json_begin_array(j);
        for (uint32_t d = 0; d < f->ndim; d++)
            fl_json_uint(j, f->shape[d]);
        fl_json_end_array(j);
        fl_json_key(j, "bytes_per_batch");
        fl_json_uint(j, bench_field_bytes(f));
        fl_json_key(j, "counts");
        fl_json_bool(j, f->counts != NULL);
        fl_json_end_object(j);
    }
    fl_json_end_array(j);
}

static void bench_report_json(const run_options *ro, fl_loader *L, const fl_dataset *ds,
                              const bench_result *r)
{
    const fl_loader_stats *st = &r->st;
    fl_json j;
    fl_json_init(&j);
    fl_json_begin_object(&j);
    fl_json_key(&j, "images_per_sec");
    fl_json_double(&j, r->ips);
    fl_json_key(&j, "mb_per_sec");
    fl_json_double(&j, r->mbs);
    fl_json_key(&j, "read_mb_per_sec");
    fl_json_double(&j, r->rmbs);
    fl_json_key(&j, "epochs");
    fl_json_uint(&j, r->epochs_done);
    fl_json_key(&j, "images");
    fl_json_uint(&j, r->images);
    fl_json_key(&j, "batches");
    fl_json_uint(&j, r->batches);
    fl_json_key(&j, "seconds");
    fl_json_double(&j, r->wall);
    fl_json_key(&j, "startup_seconds");
    fl_json_double(&j, r->t_start - r->t_create);
    /* CPU time of all threads: images per CPU-second is a figure that holds on a busy machine */
    fl_json_key(&j, "cpu_seconds");
    fl_json_double(&j, r->cpu);
    fl_json_key(&j, "images_per_cpu_sec");
    fl_json_double(&j, r->cpu > 0 ? r->images / r->cpu : 0);
    fl_json_key(&j, "workers");
    fl_json_uint(&j, r->workers);
    fl_json_key(&j, "batch_size");
    fl_json_uint(&j, ro->opt.batch_size);
    fl_json_key(&j, "height");
    fl_json_uint(&j, r->h);
    fl_json_key(&j, "width");
    fl_json_uint(&j, r->w);
    fl_json_key(&j, "channels");
    fl_json_uint(&j, r->c);
    fl_json_key(&j, "augment");
    fl_json_string(&j, ro->augment_text);
    fl_json_key(&j, "order");
    fl_json_string(&j, run_order_name(ro->opt.order));
    fl_json_key(&j, "seed");
    fl_json_uint(&j, ro->opt.seed);
    fl_json_key(&j, "rank");
    fl_json_uint(&j, ro->opt.rank);
    fl_json_key(&j, "world");
    fl_json_uint(&j, ro->opt.world ? ro->opt.world : 1);
    fl_json_key(&j, "io");
    fl_json_string(&j, run_io_name(ro->opt.io));
    fl_json_key(&j, "io_backend");
    fl_json_string(&j, r->backend);
    fl_json_key(&j, "direct");
    fl_json_bool(&j, fl_loader_direct(L)); /* effective */
    fl_json_key(&j, "direct_requested");
    fl_json_bool(&j, ro->opt.direct);
    fl_json_key(&j, "io_mode");
    fl_json_string(&j, fl_loader_io_describe(L));
    fl_json_key(&j, "decode");
    fl_json_string(&j, ro->opt.decode_flags ? "fast" : "accurate");
    fl_json_key(&j, "bytes_read");
    fl_json_uint(&j, st->bytes_read);
    fl_json_key(&j, "bytes_out");
    fl_json_uint(&j, r->out_bytes);
    fl_json_key(&j, "bytes_stored_delivered");
    fl_json_uint(&j, r->stored);
    fl_json_key(&j, "read_amplification");
    fl_json_double(&j, r->amp);
    fl_json_key(&j, "page_cache_growth_mib");
    fl_json_double(&j, r->cache_growth);
    fl_json_key(&j, "cgroup_page_cache_growth_mib");
    if (r->cg_ok)
        fl_json_double(&j, r->cg_growth);
    else
        fl_json_null(&j);
    fl_json_key(&j, "skipped");
    fl_json_uint(&j, st->skipped);
    fl_json_key(&j, "stages");
    fl_json_begin_object(&j);
    fl_json_key(&j, "io_wait_s");
    fl_json_double(&j, st->io_wait_s);
    fl_json_key(&j, "decode_s");
    fl_json_double(&j, st->decode_s);
    fl_json_key(&j, "augment_s");
    fl_json_double(&j, st->augment_s);
    fl_json_key(&j, "slot_wait_s");
    fl_json_double(&j, st->slot_wait_s);
    fl_json_key(&j, "consumer_wait_s");
    fl_json_double(&j, st->consumer_wait_s);
    fl_json_key(&j, "decode_memory_wait_s");
    fl_json_double(&j, st->decode_memory_wait_s);
    fl_json_end_object(&j);
    fl_json_key(&j, "decode_memory_budget");
    if (ro->opt.decode_memory < 0)
        fl_json_null(&j);
    else
        fl_json_uint(&j, ro->opt.decode_memory ? (uint64_t)ro->opt.decode_memory
                                               : (uint64_t)FL_DECODE_MEMORY_DEFAULT);
    fl_json_key(&j, "decode_memory_peak");
    fl_json_uint(&j, st->decode_memory_peak);
    fl_json_key(&j, "jpeg_index_bytes");
    fl_json_uint(&j, st->jpeg_index_bytes);
    fl_json_key(&j, "rss_mib");
    fl_json_double(&j, r->rss);
    fl_json_key(&j, "peak_rss_mib");
    fl_json_double(&j, r->peak);
    fl_json_key(&j, "pinned_bytes");
    fl_json_uint(&j, st->pinned_bytes);
    bench_json_per_epoch(&j, "rss_mib_per_epoch", r->rss_epoch, r->epochs_done);
    bench_json_per_epoch(&j, "images_per_sec_per_epoch", r->ips_epoch, r->epochs_done);
    bench_json_per_epoch(&j, "cpu_seconds_per_epoch", r->cpu_epoch, r->epochs_done);
    bench_json_fields(&j, r);
    fl_json_key(&j, "dataset");
    fl_json_begin_object(&j);
    fl_json_key(&j, "path");
    fl_json_string(&j, ro->path);
    fl_json_key(&j, "records");
    fl_json_uint(&j, ds ? fl_dataset_count(ds) : 0);
    fl_json_key(&j, "encoding");
    fl_json_string(&j, encoding_name(ds));
    fl_json_key(&j, "batches_per_epoch");
    fl_json_uint(&j, r->per_epoch);
    fl_json_key(&j, "samples_per_epoch");
    fl_json_uint(&j, r->pad.samples);
    fl_json_key(&j, "padded_per_epoch");
    fl_json_uint(&j, r->pad.padded);
    fl_json_key(&j, "dropped_per_epoch");
    fl_json_uint(&j, r->pad.dropped);
    fl_json_end_object(&j);
    fl_json_end_object(&j);
    puts(fl_json_text(&j));
    fl_json_free(&j);
}

static void bench_text_fields(const bench_result *r)
{
    printf("  fields:");
    for (uint32_t i = 0; i < r->nfields; i++) {
        const fl_batch_field *f = &r->fields[i];
        printf("%s %s (%s %s [", i ? "," : "", f->name, fl_field_type_name(f->type),
               fl_dtype_name(f->dtype));
        for (uint32_t d = 0; d < f->ndim; d++)
            printf("%s%llu", d ? "," : "", (unsigned long long)f->shape[d]);
        printf("]%s, %llu B/batch)", f->counts ? " + counts" : "",
               (unsigned long long)bench_field_bytes(f));
    }
    printf("\n");
}

static void bench_report_text(const run_options *ro, fl_loader *L, const fl_dataset *ds,
                              const bench_result *r)
{
    const fl_loader_stats *st = &r->st;
    const bench_padding *pad = &r->pad;
    printf("fastload bench %s: %llu records (%s), %llu batches/epoch\n", ro->path,
           ds ? (unsigned long long)fl_dataset_count(ds) : 0ull, encoding_name(ds),
           (unsigned long long)r->per_epoch);
    printf("  config: workers %u, batch %u, %ux%ux%u, augment %s, order %s, io %s (%s)%s%s\n",
           r->workers, ro->opt.batch_size, r->w, r->h, r->c, ro->augment_text,
           run_order_name(ro->opt.order), r->backend, run_io_name(ro->opt.io),
           ro->opt.direct ? ", O_DIRECT" : "", ro->opt.decode_flags ? ", fast decode" : "");
    char rate[48], cpu_rate[48];
    fl_cli_human_rate(r->ips, "images/s", rate, sizeof rate);
    fl_cli_human_count(r->cpu > 0 ? r->images / r->cpu : 0.0, cpu_rate, sizeof cpu_rate);
    printf("  result: %llu images in %llu batches over %llu epoch(s), %.3f s from create: "
           "%s, %.1f MB/s out, %.1f MB/s read (create %.3f s)\n",
           (unsigned long long)r->images, (unsigned long long)r->batches,
           (unsigned long long)r->epochs_done, r->wall, rate, r->mbs, r->rmbs,
           r->t_start - r->t_create);
    if (pad->padded)
        printf("  epoch: %llu records + %llu repeated to fill the last batch = %llu samples "
               "(every batch is full; --drop-last drops the tail instead)\n",
               (unsigned long long)pad->share, (unsigned long long)pad->padded,
               (unsigned long long)pad->samples);
    else if (pad->dropped)
        printf("  epoch: %llu samples of %llu records (--drop-last: %llu dropped)\n",
               (unsigned long long)pad->samples, (unsigned long long)pad->share,
               (unsigned long long)pad->dropped);
    printf("  cpu: %.3f s over all threads, %s images per CPU-second\n", r->cpu, cpu_rate);
    printf("  io: %s; read amplification %.3f (bytes read / stored bytes delivered), page cache "
           "%+.1f MiB (machine)",
           fl_loader_io_describe(L), r->amp, r->cache_growth);
    if (r->cg_ok)
        printf(", %+.1f MiB (cgroup)", r->cg_growth);
    printf("\n");
    printf("  stages (s, summed over workers): io wait %.3f, decode %.3f, augment %.3f, "
           "slot wait %.3f; consumer waited %.3f\n",
           st->io_wait_s, st->decode_s, st->augment_s, st->slot_wait_s, st->consumer_wait_s);
    bench_text_fields(r);
    printf("  memory: RSS %.1f MiB (peak %.1f MiB), ring %.1f MiB, decode memory reserved at "
           "most %.1f MiB",
           r->rss, r->peak, st->pinned_bytes / 1048576.0, st->decode_memory_peak / 1048576.0);
    if (ro->opt.decode_memory < 0)
        printf(" (no budget)\n");
    else
        printf(" of %.1f MiB (waited %.3f s)\n",
               (ro->opt.decode_memory ? ro->opt.decode_memory : FL_DECODE_MEMORY_DEFAULT) /
                   1048576.0,
               st->decode_memory_wait_s);
    if (st->jpeg_index_bytes)
        printf("  JPEG entry-point indexes: %.1f MiB\n", st->jpeg_index_bytes / 1048576.0);
    if (st->skipped)
        printf("  skipped corrupt records: %llu\n", (unsigned long long)st->skipped);
}

int cmd_bench(const fl_cli_tool *tool, int argc, char **argv)
{
    run_options ro;
    int rc = run_options_parse(tool, RUN_BENCH, argc, argv, &ro);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (ro.memcpy_mode)
        return bench_memcpy(&ro);

    bench_result res, *r = &res;
    memset(r, 0, sizeof *r);
    fl_loader *L = NULL;
    if (bench_create_loader(&ro, &L, r))
        return 1;
    int status = 0;
    const fl_dataset *ds = fl_loader_dataset(L);
    r->per_epoch = fl_loader_batches_per_epoch(L);
    run_bound_loader(L, &ro, r->per_epoch); /* nothing read past the last batch measured */
    r->pad = bench_epoch_padding(&ro, L, ds);
    if (r->per_epoch == 0) {
        fprintf(stderr,
                "fastload bench: error: %s: no batches per epoch for rank %u (%llu samples, "
                "batch %u%s)\n",
                ro.path, ro.opt.rank, (unsigned long long)fl_loader_samples_per_epoch(L),
                ro.opt.batch_size, ro.opt.drop_last ? ", --drop-last" : "");
        status = 1;
    }
    if (!status) {
        r->rss_epoch = calloc(ro.epochs, sizeof *r->rss_epoch);
        r->ips_epoch = calloc(ro.epochs, sizeof *r->ips_epoch);
        r->cpu_epoch = calloc(ro.epochs, sizeof *r->cpu_epoch);
        if (!r->rss_epoch || !r->ips_epoch || !r->cpu_epoch) {
            fprintf(stderr, "fastload bench: out of memory\n");
            status = 1;
        }
    }
    if (!status) {
        status = bench_consume(&ro, L, ds, r);
        bench_stop_clocks(r);
    }
    if (!status) {
        bench_summarize(&ro, L, r);
        if (ro.json)
            bench_report_json(&ro, L, ds, r);
        else
            bench_report_text(&ro, L, ds, r);
    }
    free(r->rss_epoch);
    free(r->ips_epoch);
    free(r->cpu_epoch);
    fl_loader_close(L);
    return status;
}
