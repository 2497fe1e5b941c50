/* run_options.c — command-line parsing for the loader runs of `fastload bench` / `fastload digest`.
 * Every option value is validated; a bad one is a usage error naming the option (exit 2). */
#include "run_options.h"

#include "fl_cli.h"
#include "fl_image.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage_common =
    "  --workers N        decode threads (default: online CPUs)\n"
    "  --batch B          samples per batch (default 256)\n"
    "  --size S|WxH       output size, e.g. 224 or 256x192 (default: the dataset's fixed size)\n"
    "  --augment LIST     rrc | center | none, optionally with ',flip' (default none)\n"
    "  --scale MIN,MAX    random-resized-crop area range (default 0.08,1)\n"
    "  --ratio MIN,MAX    random-resized-crop aspect range (default 0.75,1.3333)\n"
    "  --order O          seq | random | quasi (default random)\n"
    "  --seed S           seed of shuffling and augmentation (default 0)\n"
    "  --epochs E         epochs to run (default 1)\n"
    "  --start-epoch E    resume position: first epoch (default 0)\n"
    "  --start-batch B    resume position: first batch in that epoch (default 0)\n"
    "  --rank R --world W this process's share of each epoch (default 0 of 1)\n"
    "  --drop-last        drop the incomplete tail instead of padding by wrap-around\n"
    "  --io MODE          auto | uring | pread | memory | mmap (default auto: memory for\n"
    "                     raw-pixel datasets up to 256 MiB and 1/16 of RAM, else io_uring,\n"
    "                     else pread;\n"
    "                     memory reads the shards once into RAM; mmap is opt-in: as fast, but\n"
    "                     a file that shrinks under it kills the process with SIGBUS)\n"
    "  --direct           O_DIRECT reads (datasets larger than RAM)\n"
    "  --queue-depth N    io_uring reads in flight per worker (default 32)\n"
    "  --prefetch N       batches in the ring (default workers + 2)\n"
    "  --on-corrupt M     error | skip (default error)\n"
    "  --decode MODE      accurate | fast: JPEG IDCT and chroma upsampling (default accurate,\n"
    "                     libjpeg's defaults; fast is ~7% quicker, a few levels off at edges)\n"
    "  --device N         also copy each batch to CUDA device N\n"
    "  --no-pinned        plain page-aligned memory even when CUDA is present\n"
    "  --quiet            no per-epoch lines and no library notes\n"
    "  --help, --version\n";

void run_options_usage(run_kind kind, FILE *f)
{
    if (kind == RUN_BENCH) {
        fputs("usage: fastload bench DST [options]\n"
              "       fastload bench --memcpy [--memcpy-bytes SIZE] [--json]\n"
              "Run the loader over DST for E epochs and report images/s, MB/s (decoded batch bytes\n"
              "delivered), MB/s read from disk, the time split per stage (I/O wait, decode, augment,\n"
              "waiting for a free slot) and resident memory after each epoch.\n"
              "--memcpy measures single-thread memcpy bandwidth instead (the peer of raw-record runs).\n"
              "options:\n", f);
        fputs(usage_common, f);
        fputs("  --batches K        stop after K batches (default: run the epochs)\n"
              "  --json             print one JSON object on stdout\n"
              "  --memcpy-bytes S   buffer size for --memcpy, e.g. 256M (default 256M)\n"
              "exit status: 0 ok, 1 data or loader error (message names shard, record, reason), 2 usage\n",
              f);
    } else {
        fputs("usage: fastload digest DST [options]\n"
              "Print one line per batch: 'EPOCH BATCH SIZE SHA256' where the SHA-256 covers the batch's\n"
              "image bytes (NHWC uint8) followed by its labels (int32 little-endian), then\n"
              "'stream SHA256' over all those bytes. Equal digests = byte-identical streams: use it to\n"
              "check determinism across --workers, --io, --direct, backends and resume.\n"
              "options:\n", f);
        fputs(usage_common, f);
        fputs("  --batches K        digest only the first K batches\n"
              "exit status: 0 ok, 1 data or loader error, 2 usage\n", f);
    }
}

const char *run_order_name(fl_order o)
{
    switch (o) {
    case FL_ORDER_SEQUENTIAL: return "seq";
    case FL_ORDER_RANDOM: return "random";
    case FL_ORDER_QUASI: return "quasi";
    }
    return "?";
}

const char *run_io_name(fl_io_mode m)
{
    switch (m) {
    case FL_IO_AUTO: return "auto";
    case FL_IO_URING: return "uring";
    case FL_IO_PREAD: return "pread";
    case FL_IO_MMAP: return "mmap";
    case FL_IO_MEMORY: return "memory";
    }
    return "?";
}

void run_log_stderr(void *user, int level, const char *msg)
{
    const run_options *ro = user;
    if (ro && ro->quiet && level == 0)
        return;
    fprintf(stderr, "fastload: %s: %s\n", level ? "warning" : "note", msg);
}

static int bad(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, "fastload: error: option %s: invalid value '%s' (%s)\n", opt, val ? val : "", why);
    return 2;
}

/* Unsigned integer in [lo, hi]. */
static int parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return bad(opt, s, "expected a non-negative integer");
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return bad(opt, s, "expected a non-negative integer");
    if (v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "must be between %llu and %llu", (unsigned long long)lo,
                 (unsigned long long)hi);
        return bad(opt, s, why);
    }
    *out = v;
    return 0;
}

static int parse_u32(const char *opt, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v;
    int rc = parse_u64(opt, s, lo, hi, &v);
    if (!rc)
        *out = (uint32_t)v;
    return rc;
}

static int parse_size(const char *opt, const char *s, uint64_t *out)
{
    if (!s || fl_cli_parse_size(s, out) || *out == 0)
        return bad(opt, s, "expected a size such as 256M");
    return 0;
}

static int parse_float_pair(const char *opt, const char *s, float *a, float *b)
{
    char *end;
    if (!s)
        return bad(opt, s, "expected MIN,MAX");
    double x = strtod(s, &end);
    if (end == s || *end != ',')
        return bad(opt, s, "expected MIN,MAX");
    const char *t = end + 1;
    double y = strtod(t, &end);
    if (end == t || *end || !(x > 0) || !(y >= x))
        return bad(opt, s, "expected 0 < MIN <= MAX");
    *a = (float)x;
    *b = (float)y;
    return 0;
}

static int parse_augment(const char *s, fl_loader_options *o)
{
    if (!s || !*s)
        return bad("--augment", s, "expected rrc, center or none, optionally with ',flip'");
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return bad("--augment", s, "too long");
    strcpy(buf, s);
    int base_set = 0;
    o->augment = FL_AUG_NONE;
    o->flip = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",+", &save); tok; tok = strtok_r(NULL, ",+", &save)) {
        if (!strcmp(tok, "flip")) {
            o->flip = 1;
            continue;
        }
        if (base_set)
            return bad("--augment", s, "give at most one of rrc, center, none");
        base_set = 1;
        if (!strcmp(tok, "rrc")) o->augment = FL_AUG_RRC;
        else if (!strcmp(tok, "center")) o->augment = FL_AUG_CENTER;
        else if (!strcmp(tok, "none")) o->augment = FL_AUG_NONE;
        else return bad("--augment", s, "unknown item; use rrc, center, none and flip");
    }
    return 0;
}

static int parse_out_size(const char *s, fl_loader_options *o)
{
    uint64_t w, h;
    const char *x = s ? strchr(s, 'x') : NULL;
    if (!x) {
        if (parse_u64("--size", s, 0, 65535, &w))
            return 2;
        o->out_width = o->out_height = (uint32_t)w;
        return 0;
    }
    char a[32];
    size_t n = (size_t)(x - s);
    if (n == 0 || n >= sizeof a)
        return bad("--size", s, "expected S or WxH");
    memcpy(a, s, n);
    a[n] = 0;
    if (parse_u64("--size", a, 1, 65535, &w) || parse_u64("--size", x + 1, 1, 65535, &h))
        return 2;
    o->out_width = (uint32_t)w;
    o->out_height = (uint32_t)h;
    return 0;
}

int run_options_parse(run_kind kind, int argc, char **argv, run_options *ro)
{
    memset(ro, 0, sizeof *ro);
    fl_loader_options_init(&ro->opt);
    ro->epochs = 1;
    ro->augment_text = "none";
    ro->memcpy_bytes = 256ull << 20;
    fl_loader_options *o = &ro->opt;
    o->order = FL_ORDER_RANDOM; /* what training uses; the library's own default is sequential */
    o->log = run_log_stderr;
    o->log_user = ro;
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        /* Accept both "--opt value" and "--opt=value". */
        const char *val = NULL;
        char name[64];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
            a = name;
        }
#define NEXT()                                                                                    \
    (val ? val : (i + 1 < argc ? argv[++i] : (fprintf(stderr, "fastload: error: option %s needs a value\n", a), \
                                              (const char *)NULL)))
#define NEED(v)                                                                                   \
    if (!(v)) return 2
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_options_usage(kind, stdout);
            return 1;
        } else if (!strcmp(a, "--version")) {
            printf("fastload %s (libfastload %s)\n", FASTLOAD_VERSION, fl_version());
            return 1;
        } else if (!strcmp(a, "--workers")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u32(a, v, 0, 1024, &o->workers);
        } else if (!strcmp(a, "--batch")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u32(a, v, 1, 1u << 20, &o->batch_size);
        } else if (!strcmp(a, "--size")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_out_size(v, o);
        } else if (!strcmp(a, "--augment")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_augment(v, o);
            ro->augment_text = v;
        } else if (!strcmp(a, "--scale")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_float_pair(a, v, &o->scale_min, &o->scale_max);
            if (!rc && o->scale_max > 1.0f)
                rc = bad(a, v, "MAX must be at most 1");
        } else if (!strcmp(a, "--ratio")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_float_pair(a, v, &o->ratio_min, &o->ratio_max);
        } else if (!strcmp(a, "--order")) {
            const char *v = NEXT(); NEED(v);
            if (!strcmp(v, "seq") || !strcmp(v, "sequential")) o->order = FL_ORDER_SEQUENTIAL;
            else if (!strcmp(v, "random")) o->order = FL_ORDER_RANDOM;
            else if (!strcmp(v, "quasi")) o->order = FL_ORDER_QUASI;
            else rc = bad(a, v, "expected seq, random or quasi");
        } else if (!strcmp(a, "--seed")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u64(a, v, 0, UINT64_MAX, &o->seed);
        } else if (!strcmp(a, "--epochs")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u64(a, v, 1, 1000000, &ro->epochs);
        } else if (!strcmp(a, "--batches")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u64(a, v, 1, UINT64_MAX, &ro->max_batches);
        } else if (!strcmp(a, "--start-epoch")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u64(a, v, 0, UINT64_MAX / 2, &o->start_epoch);
        } else if (!strcmp(a, "--start-batch")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u64(a, v, 0, UINT64_MAX / 2, &o->start_batch);
        } else if (!strcmp(a, "--rank")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u32(a, v, 0, 1u << 20, &o->rank);
        } else if (!strcmp(a, "--world")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u32(a, v, 1, 1u << 20, &o->world);
        } else if (!strcmp(a, "--drop-last")) {
            o->drop_last = 1;
        } else if (!strcmp(a, "--io")) {
            const char *v = NEXT(); NEED(v);
            if (!strcmp(v, "auto")) o->io = FL_IO_AUTO;
            else if (!strcmp(v, "uring") || !strcmp(v, "io_uring")) o->io = FL_IO_URING;
            else if (!strcmp(v, "pread")) o->io = FL_IO_PREAD;
            else if (!strcmp(v, "mmap")) o->io = FL_IO_MMAP;
            else if (!strcmp(v, "memory")) o->io = FL_IO_MEMORY;
            else rc = bad(a, v, "expected auto, uring, pread, mmap or memory");
        } else if (!strcmp(a, "--direct")) {
            o->direct = 1;
        } else if (!strcmp(a, "--queue-depth")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u32(a, v, 1, 4096, &o->queue_depth);
        } else if (!strcmp(a, "--prefetch")) {
            const char *v = NEXT(); NEED(v);
            rc = parse_u32(a, v, 1, 1024, &o->prefetch);
        } else if (!strcmp(a, "--on-corrupt")) {
            const char *v = NEXT(); NEED(v);
            if (!strcmp(v, "error")) o->on_corrupt = FL_CORRUPT_ERROR;
            else if (!strcmp(v, "skip")) o->on_corrupt = FL_CORRUPT_SKIP;
            else rc = bad(a, v, "expected error or skip");
        } else if (!strcmp(a, "--decode")) {
            const char *v = NEXT(); NEED(v);
            if (!strcmp(v, "accurate")) o->decode_flags = 0;
            else if (!strcmp(v, "fast")) o->decode_flags = FL_DECODE_FAST;
            else rc = bad(a, v, "expected accurate or fast");
        } else if (!strcmp(a, "--device")) {
            const char *v = NEXT(); NEED(v);
            uint32_t d = 0;
            rc = parse_u32(a, v, 0, 255, &d);
            if (!rc)
                o->device = (int)d;
        } else if (!strcmp(a, "--no-pinned")) {
            o->pinned = 0;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            ro->quiet = 1;
        } else if (!strcmp(a, "--json") && kind == RUN_BENCH) {
            ro->json = 1;
        } else if (!strcmp(a, "--memcpy") && kind == RUN_BENCH) {
            ro->memcpy_mode = 1;
        } else if (!strcmp(a, "--memcpy-bytes") && kind == RUN_BENCH) {
            const char *v = NEXT(); NEED(v);
            rc = parse_size(a, v, &ro->memcpy_bytes);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "fastload %s: error: unknown option '%s' (see --help)\n", argv[0], argv[i]);
            return 2;
        } else if (!ro->path) {
            ro->path = a;
        } else {
            fprintf(stderr, "fastload %s: error: unexpected argument '%s' (one DST only)\n", argv[0], a);
            return 2;
        }
#undef NEXT
#undef NEED
    }
    if (rc)
        return 2;
    if (!ro->path && !ro->memcpy_mode) {
        fprintf(stderr, "fastload %s: error: missing DST (a dataset written by packdata); see --help\n",
                argv[0]);
        return 2;
    }
    uint32_t world = o->world ? o->world : 1;
    if (o->rank >= world) {
        fprintf(stderr, "fastload %s: error: --rank %u must be below --world %u\n", argv[0], o->rank, world);
        return 2;
    }
    return 0;
}
