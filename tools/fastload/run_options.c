/* run_options.c — the command lines of `fastload bench` and `fastload digest`: their option
 * tables (the loader options they share, then each one's own; --help is generated from them,
 * fl_cli_table.h), the values with a syntax of their own (--size, --augment, --scale, --ratio),
 * and the warnings for options that do not apply to a run. */
#include "run_options.h"

#include "fastload_cli.h"
#include "fl_cli.h"
#include "fl_cli_table.h"
#include "fl_image.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
    return -1;
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
    if (fl_cli_parse_double(first, 0, hi, 1, &x) || fl_cli_parse_double(comma + 1, 0, hi, 1, &y) ||
        y < x) {
        char why[96];
        snprintf(why, sizeof why, "expected MIN,MAX with 0 < MIN <= MAX <= %g", hi);
        return bad(opt, s, why);
    }
    *a = (float)x;
    *b = (float)y;
    return 0;
}

static int opt_scale(void *opts, const char *name, const char *v, const char *tool)
{
    (void)tool;
    run_options *ro = opts;
    return parse_float_pair(name, v, 1.0, &ro->opt.scale_min, &ro->opt.scale_max);
}

static int opt_ratio(void *opts, const char *name, const char *v, const char *tool)
{
    (void)tool;
    run_options *ro = opts;
    return parse_float_pair(name, v, 100.0, &ro->opt.ratio_min, &ro->opt.ratio_max);
}

static int opt_augment(void *opts, const char *name, const char *s, const char *tool)
{
    (void)name;
    (void)tool;
    run_options *ro = opts;
    fl_loader_options *o = &ro->opt;
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return bad("--augment", s, "expected rrc, center, object or none, optionally with ',flip'");
    strcpy(buf, s);
    int base_set = 0;
    o->augment = FL_AUG_NONE;
    o->flip = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",+", &save); tok;
         tok = strtok_r(NULL, ",+", &save)) {
        if (!strcmp(tok, "flip")) {
            o->flip = 1;
            continue;
        }
        if (base_set)
            return bad("--augment", s, "give at most one of rrc, center, object, none");
        base_set = 1;
        if (!strcmp(tok, "rrc"))
            o->augment = FL_AUG_RRC;
        else if (!strcmp(tok, "object"))
            o->augment = FL_AUG_OBJECT_CROP;
        else if (!strcmp(tok, "center"))
            o->augment = FL_AUG_CENTER;
        else if (!strcmp(tok, "none"))
            o->augment = FL_AUG_NONE;
        else
            return bad("--augment", s, "unknown item; use rrc, center, object, none and flip");
    }
    if (!base_set && !o->flip)
        return bad("--augment", s, "expected rrc, center, object or none, optionally with ',flip'");
    ro->augment_text = s;
    return 0;
}

/* A memory size option that also takes one word meaning "no such memory" (stored as -1): s into
 * *out, or a usage error naming opt and the examples. */
static int size_or_word(const char *opt, const char *s, const char *word, const char *examples,
                        int64_t *out)
{
    uint64_t v;
    if (!strcmp(s, word)) {
        *out = -1;
        return 0;
    }
    if (fl_cli_parse_size(s, &v) || v > (1ull << 50)) {
        char why[128];
        snprintf(why, sizeof why, "expected a size such as %s, or '%s'", examples, word);
        return bad(opt, s, why);
    }
    *out = (int64_t)v;
    return 0;
}

/* --decode-memory: a size (0: the default) or "unlimited" */
static int opt_decode_memory(void *opts, const char *name, const char *s, const char *tool)
{
    (void)name;
    (void)tool;
    return size_or_word("--decode-memory", s, "unlimited", "512M or 2G",
                        &((run_options *)opts)->opt.decode_memory);
}

/* --jpeg-index-memory: a size (0: the default) or "off" */
static int opt_jpeg_index_memory(void *opts, const char *name, const char *s, const char *tool)
{
    (void)name;
    (void)tool;
    return size_or_word("--jpeg-index-memory", s, "off", "256M or 1G",
                        &((run_options *)opts)->opt.jpeg_index_memory);
}

static int opt_size(void *opts, const char *name, const char *s, const char *tool)
{
    (void)name;
    (void)tool;
    fl_loader_options *o = &((run_options *)opts)->opt;
    uint64_t w, h;
    const char *x = strchr(s, 'x');
    if (!x) {
        /* 0: the dataset's own (fixed) size */
        if (fl_cli_parse_u64(s, 0, 65535, &w))
            return bad("--size", s,
                       "expected S or WxH with S, W, H from 1 to 65535 (0: the dataset's size)");
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

/* ---- the tables ----------------------------------------------------------------------------- */

#define F(field) FL_CLI_FIELD(run_options, field)

static const fl_cli_choice orders[] = {{"seq", FL_ORDER_SEQUENTIAL, 0},
                                       {"random", FL_ORDER_RANDOM, 0},
                                       {"quasi", FL_ORDER_QUASI, 0},
                                       {"sequential", FL_ORDER_SEQUENTIAL, 1},
                                       {NULL, 0, 0}};
static const fl_cli_choice io_modes[] = {{"auto", FL_IO_AUTO, 0},
                                         {"uring", FL_IO_URING, 0},
                                         {"pread", FL_IO_PREAD, 0},
                                         {"mmap", FL_IO_MMAP, 0},
                                         {"memory", FL_IO_MEMORY, 0},
                                         {"io_uring", FL_IO_URING, 1},
                                         {NULL, 0, 0}};
static const fl_cli_choice on_corrupt[] = {
    {"error", FL_CORRUPT_ERROR, 0}, {"skip", FL_CORRUPT_SKIP, 0}, {NULL, 0, 0}};
static const fl_cli_choice decode_modes[] = {
    {"accurate", 0, 0}, {"fast", FL_DECODE_FAST, 0}, {NULL, 0, 0}};

/* The loader options both commands take (an FL_CLI_ENUM writes an int: the enums are ints). */
_Static_assert(sizeof(fl_order) == sizeof(int) && sizeof(fl_io_mode) == sizeof(int) &&
                   sizeof(fl_on_corrupt) == sizeof(int) && sizeof(uint32_t) == sizeof(int),
               "FL_CLI_ENUM fields are 4-byte ints");
#define LOADER_OPTIONS                                                                             \
    {FL_CLI_U32,                                                                                   \
     "workers",                                                                                    \
     .off = F(opt.workers),                                                                        \
     .umin = 0,                                                                                    \
     .umax = 1024,                                                                                 \
     .metavar = "N",                                                                               \
     .help = "decode threads (0: online CPUs)",                                                    \
     .def = "online CPUs"},                                                                        \
        {FL_CLI_U32,       "batch",        .off = F(opt.batch_size),    .umin = 1,                 \
         .umax = 1u << 20, .metavar = "B", .help = "samples per batch", .def = "256"},             \
        {FL_CLI_CUSTOM,                                                                            \
         "size",                                                                                   \
         .parse = opt_size,                                                                        \
         .metavar = "S|WxH",                                                                       \
         .help = "output size, e.g. 224 or 256x192 (0: the dataset's fixed size)",                 \
         .def = "the dataset's fixed size"},                                                       \
        {FL_CLI_CUSTOM,                                                                            \
         "augment",                                                                                \
         .parse = opt_augment,                                                                     \
         .metavar = "LIST",                                                                        \
         .help = "rrc | center | object | none, optionally with ',flip' (object: a\n"              \
                 "random crop that keeps at least one box centre; data sets with boxes)",          \
         .def = "none"},                                                                           \
        {FL_CLI_FLOAT,                                                                             \
         "box-min-visible",                                                                        \
         .off = F(opt.box_min_visible),                                                            \
         .dmin = 0,                                                                                \
         .dmax = 1,                                                                                \
         .metavar = "F",                                                                           \
         .help = "a box the crop cuts is kept when at least this fraction of\n"                    \
                 "it (and 1 output pixel each way) stays visible",                                 \
         .def = "0"},                                                                              \
        {FL_CLI_CUSTOM,                                                                            \
         "scale",                                                                                  \
         .parse = opt_scale,                                                                       \
         .metavar = "MIN,MAX",                                                                     \
         .help = "random-resized-crop area range",                                                 \
         .def = "0.08,1"},                                                                         \
        {FL_CLI_CUSTOM,                                                                            \
         "ratio",                                                                                  \
         .parse = opt_ratio,                                                                       \
         .metavar = "MIN,MAX",                                                                     \
         .help = "random-resized-crop aspect range",                                               \
         .def = "0.75,1.3333"},                                                                    \
        {FL_CLI_ENUM,       "order",        .off = F(opt.order),                                   \
         .choices = orders, .metavar = "O", .help = "seq | random | quasi",                        \
         .def = "random"},                                                                         \
        {FL_CLI_U32,                                                                               \
         "quasi-block",                                                                            \
         .off = F(opt.quasi_block),                                                                \
         .umin = 1,                                                                                \
         .umax = 1u << 20,                                                                         \
         .metavar = "N",                                                                           \
         .help = "--order quasi: records per block (read as one extent of <= 1 MiB\n"              \
                 "pieces when the window of blocks fits the read-ahead budget);\n"                 \
                 "auto: 64, fewer for records over 16 KiB (~1 MiB a block)",                       \
         .def = "auto"},                                                                           \
        {FL_CLI_U32,                                                                               \
         "quasi-window",                                                                           \
         .off = F(opt.quasi_window),                                                               \
         .umin = 1,                                                                                \
         .umax = 1u << 20,                                                                         \
         .metavar = "N",                                                                           \
         .help = "--order quasi: blocks shuffled together",                                        \
         .def = "32"},                                                                             \
        {FL_CLI_U64,                                                                               \
         "seed",                                                                                   \
         .off = F(opt.seed),                                                                       \
         .umin = 0,                                                                                \
         .umax = UINT64_MAX,                                                                       \
         .metavar = "S",                                                                           \
         .help = "seed of shuffling and augmentation",                                             \
         .def = "0"},                                                                              \
        {FL_CLI_U64,      "epochs",       .off = F(epochs),        .umin = 1,                      \
         .umax = 1000000, .metavar = "E", .help = "epochs to run", .def = "1"},                    \
        {FL_CLI_U64,                                                                               \
         "start-epoch",                                                                            \
         .off = F(opt.start_epoch),                                                                \
         .umin = 0,                                                                                \
         .umax = UINT64_MAX / 2,                                                                   \
         .metavar = "E",                                                                           \
         .help = "resume position: first epoch",                                                   \
         .def = "0"},                                                                              \
        {FL_CLI_U64,                                                                               \
         "start-batch",                                                                            \
         .off = F(opt.start_batch),                                                                \
         .umin = 0,                                                                                \
         .umax = UINT64_MAX / 2,                                                                   \
         .metavar = "B",                                                                           \
         .help = "resume position: first batch in that epoch",                                     \
         .def = "0"},                                                                              \
        {FL_CLI_U32,                                                                               \
         "rank",                                                                                   \
         .off = F(opt.rank),                                                                       \
         .umin = 0,                                                                                \
         .umax = 1u << 20,                                                                         \
         .metavar = "R",                                                                           \
         .help = "this process's share of each epoch: R of --world W",                             \
         .def = "0"},                                                                              \
        {FL_CLI_U32,                                                                               \
         "world",                                                                                  \
         .off = F(opt.world),                                                                      \
         .umin = 1,                                                                                \
         .umax = 1u << 20,                                                                         \
         .metavar = "W",                                                                           \
         .help = "processes sharing each epoch",                                                   \
         .def = "1"},                                                                              \
        {FL_CLI_FLAG, "drop-last", .off = F(opt.drop_last),                                        \
         .help = "drop the incomplete tail instead of padding by wrap-around"},                    \
        {FL_CLI_ENUM,                                                                              \
         "io",                                                                                     \
         .off = F(opt.io),                                                                         \
         .choices = io_modes,                                                                      \
         .metavar = "MODE",                                                                        \
         .help = "auto | uring | pread | memory | mmap (auto: memory for raw-pixel\n"              \
                 "datasets up to 256 MiB and 1/16 of RAM, else io_uring, else pread;\n"            \
                 "memory reads the shards once into RAM; mmap is opt-in: as fast\n"                \
                 "without the copy at start, a copy of each record then; auto reads\n"             \
                 "with O_DIRECT a dataset larger than the page cache it can expect:\n"             \
                 "MemAvailable, the cgroup memory limit)",                                         \
         .def = "auto"},                                                                           \
        {FL_CLI_FLAG, "direct", .off = F(opt.direct),                                              \
         .help = "O_DIRECT reads (datasets larger than RAM)"},                                     \
        {FL_CLI_U32,                                                                               \
         "queue-depth",                                                                            \
         .off = F(opt.queue_depth),                                                                \
         .umin = 1,                                                                                \
         .umax = 4096,                                                                             \
         .metavar = "N",                                                                           \
         .help = "io_uring reads in flight per worker",                                            \
         .def = "32"},                                                                             \
        {FL_CLI_U32,                                                                               \
         "prefetch",                                                                               \
         .off = F(opt.prefetch),                                                                   \
         .umin = 1,                                                                                \
         .umax = 1024,                                                                             \
         .metavar = "N",                                                                           \
         .help = "batches in the ring",                                                            \
         .def = "workers + 2; up to 16 small batches within 8M"},                                  \
        {FL_CLI_ENUM,           "on-corrupt",   .off = F(opt.on_corrupt),                          \
         .choices = on_corrupt, .metavar = "M", .help = "error | skip",                            \
         .def = "error"},                                                                          \
        {FL_CLI_ENUM,                                                                              \
         "decode",                                                                                 \
         .off = F(opt.decode_flags),                                                               \
         .choices = decode_modes,                                                                  \
         .metavar = "MODE",                                                                        \
         .help = "accurate | fast: JPEG IDCT and chroma upsampling (accurate: libjpeg's\n"         \
                 "defaults; fast is ~7% quicker, a few levels off at edges)",                      \
         .def = "accurate"},                                                                       \
        {FL_CLI_CUSTOM,                                                                            \
         "decode-memory",                                                                          \
         .parse = opt_decode_memory,                                                               \
         .metavar = "SIZE",                                                                        \
         .help = "decode memory all workers share (e.g. 512M; 'unlimited'): a worker\n"            \
                 "reserves what an image needs before decoding it and waits for room;\n"           \
                 "an image needing more than all of it fails naming the record",                   \
         .def = "1G"},                                                                             \
        {FL_CLI_CUSTOM,                                                                            \
         "jpeg-index-memory",                                                                      \
         .parse = opt_jpeg_index_memory,                                                           \
         .metavar = "SIZE",                                                                        \
         .help = "memory for JPEG entry-point indexes (~1.5 KiB a record; 'off'): learned\n"       \
                 "by a record's first decode, they let later crop decodes skip the data\n"         \
                 "above and beside the crop (same pixels)",                                        \
         .def = "RAM/32, at most 512M"},                                                           \
        {FL_CLI_INT,                                                                               \
         "device",                                                                                 \
         .off = F(opt.device),                                                                     \
         .umin = 0,                                                                                \
         .umax = 255,                                                                              \
         .metavar = "N",                                                                           \
         .help = "also copy each batch to CUDA device N"},                                         \
        {FL_CLI_FLAG_OFF, "no-pinned", .off = F(opt.pinned),                                       \
         .help = "plain page-aligned memory even when CUDA is present"},                           \
    {                                                                                              \
        FL_CLI_FLAG, "quiet", 'q', .off = F(quiet),                                                \
                                   .help = "no per-epoch lines and no library notes"               \
    }

static const fl_cli_opt bench_opts[] = {
    LOADER_OPTIONS,
    {FL_CLI_U64, "batches", .off = F(max_batches), .umin = 1, .umax = UINT64_MAX, .metavar = "K",
     .help = "stop after K batches", .def = "run the epochs"},
    {FL_CLI_FLAG, "json", .off = F(json), .help = "print one JSON object on stdout"},
    {FL_CLI_FLAG, "memcpy", .off = F(memcpy_mode),
     .help = "measure single-thread memcpy bandwidth instead (no DST)"},
    {FL_CLI_SIZE, "memcpy-bytes", .off = F(memcpy_bytes), .umin = 1, .umax = 1ull << 40,
     .metavar = "S", .help = "buffer size for --memcpy, e.g. 256M", .def = "256M"},
    {FL_CLI_END},
};

static const fl_cli_opt digest_opts[] = {
    LOADER_OPTIONS,
    {FL_CLI_U64, "batches", .off = F(max_batches), .umin = 1, .umax = UINT64_MAX, .metavar = "K",
     .help = "digest only the first K batches", .def = "all of the epochs"},
    {FL_CLI_END},
};
#undef F

/* said after the options of both commands */
#define APPLIES_NOTE                                                                               \
    "An option given twice takes its last value; one that does not apply (--scale without\n"       \
    "--augment rrc, ...) is ignored with a warning.\n"

static int bench_run(const fl_cli_tool *tool, int argc, char **argv)
{
    return cmd_bench(tool, argc, argv);
}
static int digest_run(const fl_cli_tool *tool, int argc, char **argv)
{
    return cmd_digest(tool, argc, argv);
}

const fl_cli_cmd fastload_bench_cmd = {
    .name = "bench",
    .args = "DST",
    .summary = "run the loader over a packed dataset and report images/s, MB/s, the\n"
               "per-stage time split and memory (--json for one JSON object);\n"
               "bench --memcpy: single-thread memcpy bandwidth (peer of raw-record runs)",
    .synopsis =
        "usage: fastload bench DST [options]\n"
        "       fastload bench --memcpy [--memcpy-bytes SIZE] [--json]\n"
        "Run the loader over DST for E epochs and report images/s, MB/s (decoded batch bytes\n"
        "delivered), MB/s read from disk, the time split per stage (I/O wait, decode, augment,\n"
        "waiting for a free slot) and resident memory after each epoch.\n"
        "--memcpy measures single-thread memcpy bandwidth instead (the peer of raw-record runs).\n"
        "options:\n",
    .opts = bench_opts,
    .epilog = APPLIES_NOTE
    "exit status: 0 ok, 1 data or loader error (message names shard, record, reason), 2 usage\n",
    .max_pos = 1,
    .run = bench_run,
};

const fl_cli_cmd fastload_digest_cmd = {
    .name = "digest",
    .args = "DST",
    .summary = "SHA-256 of every batch and of the stream (determinism checks)",
    .synopsis =
        "usage: fastload digest DST [options]\n"
        "Print one line per batch: 'EPOCH BATCH SIZE SHA256' where the SHA-256 covers the batch's\n"
        "image bytes (NHWC uint8) followed by its labels (int32 little-endian), then\n"
        "'stream SHA256' over all those bytes. Equal digests = byte-identical streams: use it to\n"
        "check determinism across --workers, --io, --direct, backends and resume.\n"
        "options:\n",
    .opts = digest_opts,
    .epilog = APPLIES_NOTE "exit status: 0 ok, 1 data or loader error, 2 usage\n",
    .max_pos = 1,
    .run = digest_run,
};

/* Options that do not apply to this run: say so. */
static void warn_not_applying(const run_options *ro, const fl_cli_parsed *cl)
{
    const fl_loader_options *o = &ro->opt;
    int scale_given = fl_cli_given(cl, "scale"), ratio_given = fl_cli_given(cl, "ratio");
    if ((scale_given || ratio_given) && o->augment != FL_AUG_RRC &&
        o->augment != FL_AUG_OBJECT_CROP && !ro->memcpy_mode)
        fl_cli_warn(TOOL, "%s applies only to --augment rrc or object: ignored",
                    scale_given ? "--scale" : "--ratio");
    if ((fl_cli_given(cl, "quasi-block") || fl_cli_given(cl, "quasi-window")) &&
        o->order != FL_ORDER_QUASI)
        fl_cli_warn(TOOL, "%s applies only to --order quasi: ignored",
                    fl_cli_given(cl, "quasi-block") ? "--quasi-block" : "--quasi-window");
    if (fl_cli_given(cl, "queue-depth") &&
        (o->io == FL_IO_PREAD || o->io == FL_IO_MMAP || o->io == FL_IO_MEMORY))
        fl_cli_warn(TOOL, "--queue-depth applies only to io_uring reads (--io %s): ignored",
                    run_io_name(o->io));
    if (fl_cli_given(cl, "memcpy-bytes") && !ro->memcpy_mode)
        fl_cli_warn(TOOL, "--memcpy-bytes applies only to --memcpy: ignored");
    if (ro->memcpy_mode && ro->path)
        fl_cli_warn(TOOL,
                    "--memcpy measures memcpy only: DST %s and the loader options are ignored",
                    ro->path);
}

int run_options_parse(const fl_cli_tool *tool, run_kind kind, int argc, char **argv,
                      run_options *ro)
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
    fl_cli_parsed cl;
    int r = fl_cli_parse(tool, kind == RUN_BENCH ? &fastload_bench_cmd : &fastload_digest_cmd, argc,
                         argv, ro, &cl);
    if (r != FL_CLI_RUN)
        return r == FL_CLI_DONE ? 1 : 2;
    ro->path = cl.npos ? cl.pos[0] : NULL;
    warn_not_applying(ro, &cl);
    if (!ro->path && !ro->memcpy_mode) {
        fprintf(stderr,
                "fastload %s: error: missing DST (a dataset written by packdata); see --help\n",
                argv[0]);
        return 2;
    }
    uint32_t world = o->world ? o->world : 1;
    if (o->rank >= world) {
        fprintf(stderr, "fastload %s: error: --rank %u must be below --world %u\n", argv[0],
                o->rank, world);
        return 2;
    }
    return 0;
}

void run_bound_loader(fl_loader *L, const run_options *ro, uint64_t batches_per_epoch)
{
    if (ro->opt.start_batch || !batches_per_epoch || ro->epochs > UINT64_MAX / batches_per_epoch)
        return;
    uint64_t n = ro->epochs * batches_per_epoch;
    fl_loader_set_max_batches(L, ro->max_batches && ro->max_batches < n ? ro->max_batches : n);
}
