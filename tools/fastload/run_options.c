/* run_options.c — command-line parsing for the loader runs of `fastload bench` / `fastload digest`.
 * Every option value is validated; a bad one is a usage error naming the option (exit 2). */
#include "run_options.h"

#include "fl_cli.h"
#include "fl_image.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage_common =
    "  --workers N        decode threads (default or 0: online CPUs)\n"
    "  --batch B          samples per batch (default 256)\n"
    "  --size S|WxH       output size, e.g. 224 or 256x192 (default or 0: the dataset's fixed size)\n"
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
    "  --help, --version\n"
    "An option given twice takes its last value; one that does not apply (--scale without\n"
    "--augment rrc, ...) is ignored with a warning.\n";

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

#define TOOL "fastload"

static int bad(const char *opt, const char *val, const char *why)
{
    fl_cli_opt_error(TOOL, opt, val ? val : "", "%s", why);
    return 2;
}

/* Unsigned integer in [lo, hi]. */
static int parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    return fl_cli_opt_u64(TOOL, opt, s, lo, hi, out) ? 2 : 0;
}

static int parse_u32(const char *opt, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    return fl_cli_opt_u32(TOOL, opt, s, lo, hi, out) ? 2 : 0;
}

static int parse_size(const char *opt, const char *s, uint64_t *out)
{
    return fl_cli_opt_size(TOOL, opt, s, 1, 1ull << 40, out) ? 2 : 0;
}

/* "MIN,MAX": two finite numbers with 0 < MIN <= MAX <= hi. */
static int parse_float_pair(const char *opt, const char *s, double hi, float *a, float *b)
{
    const char *comma = strchr(s, ',');
    char first[64];
    double x, y;
    if (!comma || (size_t)(comma - s) >= sizeof first)
        return bad(opt, s, "expected MIN,MAX");
    memcpy(first, s, (size_t)(comma - s));
    first[comma - s] = 0;
    if (fl_cli_parse_double(first, 0, hi, 1, &x) || fl_cli_parse_double(comma + 1, 0, hi, 1, &y) || y < x) {
        char why[96];
        snprintf(why, sizeof why, "expected MIN,MAX with 0 < MIN <= MAX <= %g", hi);
        return bad(opt, s, why);
    }
    *a = (float)x;
    *b = (float)y;
    return 0;
}

static int parse_augment(const char *s, fl_loader_options *o)
{
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return bad("--augment", s, "expected rrc, center or none, optionally with ',flip'");
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
    if (!base_set && !o->flip)
        return bad("--augment", s, "expected rrc, center or none, optionally with ',flip'");
    return 0;
}

static int parse_out_size(const char *s, fl_loader_options *o)
{
    uint64_t w, h;
    const char *x = strchr(s, 'x');
    if (!x) {
        /* 0: the dataset's own (fixed) size */
        if (fl_cli_parse_u64(s, 0, 65535, &w))
            return bad("--size", s, "expected S or WxH with S, W, H from 1 to 65535 (0: the dataset's size)");
        o->out_width = o->out_height = (uint32_t)w;
        return 0;
    }
    char a[32];
    size_t n = (size_t)(x - s);
    if (n == 0 || n >= sizeof a)
        return bad("--size", s, "expected S or WxH with S, W, H from 1 to 65535");
    memcpy(a, s, n);
    a[n] = 0;
    if (fl_cli_parse_u64(a, 1, 65535, &w) || fl_cli_parse_u64(x + 1, 1, 65535, &h))
        return bad("--size", s, "expected S or WxH with S, W, H from 1 to 65535");
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
    /* given on the command line: for the warnings about options that do not apply */
    int scale_given = 0, ratio_given = 0, qd_given = 0, memcpy_bytes_given = 0;
    /* An option given twice takes its last value; every value given is checked. */
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        int m = 0;
        /* "--opt value" and "--opt=value"; a missing or empty value is refused (one line) */
#define OPT(name) ((m = fl_cli_opt_value(argc, argv, &i, name, &v, TOOL)) != 0)
#define FLAG(name) ((m = fl_cli_flag(a, name, TOOL)) != 0)
#define NEED() if (m < 0) return 2
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_options_usage(kind, stdout);
            return 1;
        } else if (!strcmp(a, "--version")) {
            printf("fastload %s (libfastload %s)\n", FASTLOAD_VERSION, fl_version());
            return 1;
        } else if (OPT("--workers")) {
            NEED();
            rc = parse_u32(a, v, 0, 1024, &o->workers);
        } else if (OPT("--batch")) {
            NEED();
            rc = parse_u32("--batch", v, 1, 1u << 20, &o->batch_size);
        } else if (OPT("--size")) {
            NEED();
            rc = parse_out_size(v, o);
        } else if (OPT("--augment")) {
            NEED();
            rc = parse_augment(v, o);
            ro->augment_text = v;
        } else if (OPT("--scale")) {
            NEED();
            rc = parse_float_pair("--scale", v, 1.0, &o->scale_min, &o->scale_max);
            scale_given = 1;
        } else if (OPT("--ratio")) {
            NEED();
            rc = parse_float_pair("--ratio", v, 100.0, &o->ratio_min, &o->ratio_max);
            ratio_given = 1;
        } else if (OPT("--order")) {
            NEED();
            if (!strcmp(v, "seq") || !strcmp(v, "sequential")) o->order = FL_ORDER_SEQUENTIAL;
            else if (!strcmp(v, "random")) o->order = FL_ORDER_RANDOM;
            else if (!strcmp(v, "quasi")) o->order = FL_ORDER_QUASI;
            else rc = bad("--order", v, "expected seq, random or quasi");
        } else if (OPT("--seed")) {
            NEED();
            rc = parse_u64("--seed", v, 0, UINT64_MAX, &o->seed);
        } else if (OPT("--epochs")) {
            NEED();
            rc = parse_u64("--epochs", v, 1, 1000000, &ro->epochs);
        } else if (OPT("--batches")) {
            NEED();
            rc = parse_u64("--batches", v, 1, UINT64_MAX, &ro->max_batches);
        } else if (OPT("--start-epoch")) {
            NEED();
            rc = parse_u64("--start-epoch", v, 0, UINT64_MAX / 2, &o->start_epoch);
        } else if (OPT("--start-batch")) {
            NEED();
            rc = parse_u64("--start-batch", v, 0, UINT64_MAX / 2, &o->start_batch);
        } else if (OPT("--rank")) {
            NEED();
            rc = parse_u32("--rank", v, 0, 1u << 20, &o->rank);
        } else if (OPT("--world")) {
            NEED();
            rc = parse_u32("--world", v, 1, 1u << 20, &o->world);
        } else if (FLAG("--drop-last")) {
            NEED();
            o->drop_last = 1;
        } else if (OPT("--io")) {
            NEED();
            if (!strcmp(v, "auto")) o->io = FL_IO_AUTO;
            else if (!strcmp(v, "uring") || !strcmp(v, "io_uring")) o->io = FL_IO_URING;
            else if (!strcmp(v, "pread")) o->io = FL_IO_PREAD;
            else if (!strcmp(v, "mmap")) o->io = FL_IO_MMAP;
            else if (!strcmp(v, "memory")) o->io = FL_IO_MEMORY;
            else rc = bad("--io", v, "expected auto, uring, pread, mmap or memory");
        } else if (FLAG("--direct")) {
            NEED();
            o->direct = 1;
        } else if (OPT("--queue-depth")) {
            NEED();
            rc = parse_u32("--queue-depth", v, 1, 4096, &o->queue_depth);
            qd_given = 1;
        } else if (OPT("--prefetch")) {
            NEED();
            rc = parse_u32("--prefetch", v, 1, 1024, &o->prefetch);
        } else if (OPT("--on-corrupt")) {
            NEED();
            if (!strcmp(v, "error")) o->on_corrupt = FL_CORRUPT_ERROR;
            else if (!strcmp(v, "skip")) o->on_corrupt = FL_CORRUPT_SKIP;
            else rc = bad("--on-corrupt", v, "expected error or skip");
        } else if (OPT("--decode")) {
            NEED();
            if (!strcmp(v, "accurate")) o->decode_flags = 0;
            else if (!strcmp(v, "fast")) o->decode_flags = FL_DECODE_FAST;
            else rc = bad("--decode", v, "expected accurate or fast");
        } else if (OPT("--device")) {
            NEED();
            uint32_t d = 0;
            rc = parse_u32("--device", v, 0, 255, &d);
            if (!rc)
                o->device = (int)d;
        } else if (FLAG("--no-pinned")) {
            NEED();
            o->pinned = 0;
        } else if (FLAG("--quiet") || FLAG("-q")) {
            NEED();
            ro->quiet = 1;
        } else if (kind == RUN_BENCH && FLAG("--json")) {
            NEED();
            ro->json = 1;
        } else if (kind == RUN_BENCH && FLAG("--memcpy")) {
            NEED();
            ro->memcpy_mode = 1;
        } else if (kind == RUN_BENCH && OPT("--memcpy-bytes")) {
            NEED();
            rc = parse_size("--memcpy-bytes", v, &ro->memcpy_bytes);
            memcpy_bytes_given = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "fastload %s: error: unknown option '%s' (see --help)\n", argv[0], a);
            return 2;
        } else if (!ro->path) {
            ro->path = a;
        } else {
            fprintf(stderr, "fastload %s: error: unexpected argument '%s' (one DST only)\n", argv[0], a);
            return 2;
        }
#undef OPT
#undef FLAG
#undef NEED
    }
    if (!rc) {
        /* options that do not apply to this run: say so (issue 10, finding 11) */
        if ((scale_given || ratio_given) && o->augment != FL_AUG_RRC && !ro->memcpy_mode)
            fl_cli_warn(TOOL, "%s applies only to --augment rrc: ignored",
                        scale_given ? "--scale" : "--ratio");
        if (qd_given && (o->io == FL_IO_PREAD || o->io == FL_IO_MMAP || o->io == FL_IO_MEMORY))
            fl_cli_warn(TOOL, "--queue-depth applies only to io_uring reads (--io %s): ignored",
                        run_io_name(o->io));
        if (memcpy_bytes_given && !ro->memcpy_mode)
            fl_cli_warn(TOOL, "--memcpy-bytes applies only to --memcpy: ignored");
        if (ro->memcpy_mode && ro->path)
            fl_cli_warn(TOOL, "--memcpy measures memcpy only: DST %s and the loader options are ignored",
                        ro->path);
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
