/* pack_args.c — the `packdata pack` command line: its help text and option parsing/validation. */
#include "pack_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_cli.h"

static const char pack_help[] =
"usage: packdata pack SRC DST [options]\n"
"       packdata pack --csv FILE DST [options]\n"
"       packdata pack --idx IMAGES LABELS DST [options]\n"
"\n"
"Pack images and labels into a fastload dataset at DST (a directory of checksummed shards and a\n"
"manifest, or an LMDB environment with --backend lmdb). Everything is written to DST.partial and\n"
"renamed to DST once complete; a killed run can be finished with --resume. While a run writes DST\n"
"it holds a lock (DST.lock beside DST): a second run for the same DST fails at once.\n"
"\n"
"How SRC is read (first rule that applies):\n"
"  --idx IMAGES LABELS    MNIST-style IDX files (idx3-ubyte images, idx1-ubyte labels), gzip'ed or not\n"
"  --csv FILE             CSV with a header row; image paths in --path-column (default \"path\"),\n"
"                         labels in --label-column (default \"label\"), relative to --root\n"
"  SRC is a directory holding *-images-idx3-ubyte[.gz] + *-labels-idx1-ubyte[.gz]   → IDX\n"
"                         (several pairs, e.g. train and t10k: choose with --split train|t10k)\n"
"  SRC is a directory holding CIFAR binary batches (data_batch_*.bin, test_batch.bin: CIFAR-10;\n"
"                         train.bin, test.bin: CIFAR-100) → CIFAR; --split train|test chooses the\n"
"                         batches (required when both are there). SRC may also be one .bin batch.\n"
"  SRC is another directory → ImageFolder: each sub-folder is a class (sorted by name = label\n"
"                         order, or as --classes lists them); its image files (.jpg .jpeg .png\n"
"                         .webp, any depth) are the inputs; a folder without any is skipped\n"
"                         with a warning (with --classes it stays a class)\n"
"  SRC is a file ending in .csv → CSV (as --csv)\n"
"  SRC is any other file → list file: lines \"relative/path label\" (Caffe convert_imageset style;\n"
"                         the path may contain spaces: the label is the last field), relative to\n"
"                         --root (default: the list file's directory); '#' lines are comments\n"
"Labels are integers 0..N-1, or class names when --classes/--class-names gives them.\n"
"\n"
"Source options:\n"
"  --root DIR             base directory for list/CSV paths\n"
"  --path-column NAME     CSV column with the image path (default: path)\n"
"  --label-column NAME    CSV column with the label (default: label)\n"
"  --split PREFIX         IDX/CIFAR directory: which files (train, t10k, test)\n"
"  --cifar100-labels fine|coarse  CIFAR-100 label to keep (default: fine)\n"
"  --num-classes N        labels must be < N (default: from class names, else max label + 1)\n"
"  --classes FILE         class names, one per line, in label order\n"
"  --class-names A,B,...  class names in label order (or a FILE as for --classes)\n"
"\n"
"Encoding:\n"
"  --encode keep|jpeg|raw keep: store each JPEG/PNG/WebP file byte for byte in its own format\n"
"                         (default for image files; a folder of several formats is \"mixed\");\n"
"                         jpeg: decode (at the smallest DCT scale that suffices), resize, re-encode;\n"
"                         raw: uint8 HWC pixels (default for IDX/CIFAR); all records one size\n"
"  --quality Q            JPEG quality for --encode jpeg (1-100, default 90)\n"
"  --jpeg-restart N|row|off  rewrite JPEG records losslessly (same pixels) with a restart marker\n"
"                         every N MCUs (row: one per MCU row) so the loader's crop decode skips\n"
"                         what lies outside a crop (default 4 for --encode jpeg; off for keep,\n"
"                         which then stores the file bytes exactly)\n"
"  --max-side N           shrink so the longer side is at most N (jpeg/raw)\n"
"  --resize WxH           resize every image to exactly W x H (needed for raw of varying sizes)\n"
"  --gray                 store one channel (luma)\n"
"  --compress none|zstd[:LEVEL]  per-record zstd (default: zstd:19 with a trained dictionary for\n"
"                         raw, none for jpeg/keep)\n"
"  --no-dictionary        do not train a zstd dictionary\n"
"\n"
"Output:\n"
"  --backend shards|lmdb  (default: shards)\n"
"  --shard-size SIZE      target shard size, e.g. 256M, 1G (default 256M); every shard carries the\n"
"                         zstd dictionary, which is kept to 1/16 of it (none below 16K)\n"
"  --shuffle              permute the inputs before packing (deterministic from --seed)\n"
"  --seed S               shuffle seed (default 0), stored in the manifest\n"
"  --part I/N             pack only slice I of N (0 <= I < N) of the (shuffled) input list\n"
"  --workers N            worker threads (default: all cores); the output does not depend on it\n"
"  --resume               finish an interrupted run from DST.partial, only if SRC's inputs (names,\n"
"                         labels, sizes, modification times) and the options are those it started\n"
"                         with (else exit 2 naming what changed); on a finished DST of the same job:\n"
"                         exit 0, nothing to do (of another job: exit 2 naming the difference)\n"
"  --force                replace an existing DST (after the new one is complete) or a stale DST.partial,\n"
"                         only if it is a dataset packdata wrote (else exit 2, nothing touched);\n"
"                         with --resume: finish an interrupted replacement\n"
"\n"
"Bad inputs:\n"
"  --on-error fail|skip   fail (default): stop at the first bad input, exit 1, nothing at DST;\n"
"                         skip: report it, pack the rest, exit 0\n"
"  --report FILE          write every bad input as \"source<TAB>reason\"\n"
"  --max-pixels N         refuse images declaring more pixels (default 100000000), before decoding\n"
"\n"
"  --quiet                errors only (no progress bar, no summary)\n"
"  --json                 print the summary as one JSON object on stdout\n"
"  -h, --help             this help            -V, --version\n"
"\n"
"An option given twice takes its last value. Options that do not apply to SRC or to the\n"
"encoding (--root on an ImageFolder, --quality with --encode raw, ...) are ignored with a warning.\n"
"Exit status: 0 ok, 1 bad input or data error, 2 usage error.\n";

static int usage(const char *fmt, const char *arg) {
    char m[512], q[96];
    /* a 10,000-character value must not flood the terminal: quote its start only */
    size_t n = strlen(arg);
    if (n > 40) snprintf(q, sizeof q, "%.40s... (%zu characters)", arg, n);
    else snprintf(q, sizeof q, "%s", arg);
    snprintf(m, sizeof m, fmt, q);
    fl_cli_error(PD_TOOL, "pack: %s (see packdata pack --help)", m);
    return FL_EXIT_USAGE;
}

/* "AxB" with A and B decimal integers in [lo, hi] (strict: no sign, space or junk). */
static int parse_pair(const char *s, char sep, uint64_t lo_a, uint64_t lo_b, uint64_t hi,
                      unsigned *a, unsigned *b) {
    const char *x = strchr(s, sep);
    char first[32];
    uint64_t va, vb;
    if (!x || (size_t)(x - s) >= sizeof first) return -1;
    memcpy(first, s, (size_t)(x - s));
    first[x - s] = 0;
    if (fl_cli_parse_u64(first, lo_a, hi, &va) || fl_cli_parse_u64(x + 1, lo_b, hi, &vb)) return -1;
    *a = (unsigned)va;
    *b = (unsigned)vb;
    return 0;
}

static int split_class_names(pd_pack_opts *po, char *buf, char sep) {
    uint32_t n = 0, cap = 16;
    char **v = malloc(cap * sizeof *v);
    if (!v) return -1;
    char *p = buf;
    while (*p) {
        char *e = strchr(p, sep);
        if (e) *e = 0;
        size_t l = strlen(p);
        while (l && (p[l - 1] == '\r' || p[l - 1] == ' ')) p[--l] = 0;
        if (l || sep == ',') {
            if (n == cap) {
                cap *= 2;
                char **nv = realloc(v, cap * sizeof *v);
                if (!nv) {
                    free(v);
                    return -1;
                }
                v = nv;
            }
            v[n++] = p;
        }
        if (!e) break;
        p = e + 1;
    }
    po->so.class_names = v;
    po->so.n_class_names = n;
    po->class_list_buf = buf;
    return 0;
}

void pd_pack_opts_free(pd_pack_opts *po) {
    free(po->so.class_names);
    free(po->class_list_buf);
    memset(po, 0, sizeof *po);
}

static int parse_args(int argc, char **argv, pd_pack_opts *po) {
    memset(po, 0, sizeof *po);
    po->quality = 90;
    po->jpeg_restart = -2;
    po->compress = -1;
    po->dict = 1;
    po->backend = FL_BACKEND_SHARDS;
    po->shard_size = 256ull << 20;
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    po->workers = nc > 0 ? (uint32_t)nc : 1;
    po->so.num_classes = -1;
    po->so.max_pixels = 100000000ull;
    const char *pos[3];
    int npos = 0;
    /* An option given twice takes its last value; every value given is checked. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int m = 0;
        uint64_t u;
#define OPT(name) ((m = fl_cli_opt_value(argc, argv, &i, name, &v, PD_TOOL)) != 0)
#define FLAG(name) ((m = fl_cli_flag(a, name, PD_TOOL)) != 0)
        if (fl_cli_is_help(a)) {
            fputs(pack_help, stdout);
            return FL_EXIT_OK;
        } else if (fl_cli_is_version(a)) {
            fl_cli_print_version(stdout, PD_TOOL);
            return FL_EXIT_OK;
        } else if (a[0] != '-' || !strcmp(a, "-")) {
            if (npos == 3) return usage("unexpected argument '%s'", a);
            pos[npos++] = a;
        } else if (!strcmp(a, "--idx")) {
            if (i + 2 >= argc || !argv[i + 1][0] || !argv[i + 2][0] || !strncmp(argv[i + 1], "--", 2) ||
                !strncmp(argv[i + 2], "--", 2))
                return usage("--idx needs two files: IMAGES LABELS%s", "");
            po->so.idx_images = argv[++i];
            po->so.idx_labels = argv[++i];
        } else if (OPT("--encode")) {
            if (m < 0) return FL_EXIT_USAGE;
            if (!strcmp(v, "keep")) po->encode = PD_ENC_KEEP;
            else if (!strcmp(v, "jpeg")) po->encode = PD_ENC_JPEG;
            else if (!strcmp(v, "raw")) po->encode = PD_ENC_RAW;
            else return usage("--encode must be keep, jpeg or raw (got '%s')", v);
        } else if (OPT("--jpeg-restart")) {
            if (m < 0) return FL_EXIT_USAGE;
            if (!strcmp(v, "off")) po->jpeg_restart = -1;
            else if (!strcmp(v, "row")) po->jpeg_restart = 0;
            else if (fl_cli_parse_u64(v, 1, 65535, &u) == 0) po->jpeg_restart = (int)u;
            else return usage("--jpeg-restart wants a number of MCUs (1-65535), row or off (got '%s')", v);
        } else if (OPT("--quality")) {
            if (m < 0 || fl_cli_opt_u64(PD_TOOL, "--quality", v, 1, 100, &u)) return FL_EXIT_USAGE;
            po->quality = (int)u;
            po->quality_given = 1;
        } else if (OPT("--max-side")) {
            if (m < 0 || fl_cli_opt_u64(PD_TOOL, "--max-side", v, 1, 65535, &u)) return FL_EXIT_USAGE;
            po->max_side = (uint32_t)u;
        } else if (OPT("--resize")) {
            if (m < 0) return FL_EXIT_USAGE;
            unsigned rw, rh;
            if (parse_pair(v, 'x', 1, 1, 65535, &rw, &rh))
                return usage("--resize wants WxH, each 1-65535, e.g. 224x224 (got '%s')", v);
            po->resize_w = rw;
            po->resize_h = rh;
        } else if (FLAG("--gray") || FLAG("--grey")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->gray = 1;
        } else if (OPT("--compress")) {
            if (m < 0) return FL_EXIT_USAGE;
            if (!strcmp(v, "none")) {
                po->compress = 0;
                po->level = 0;
            } else if (!strncmp(v, "zstd", 4) && (v[4] == 0 || v[4] == ':')) {
                po->compress = 1;
                po->level = 0;
                if (v[4] == ':') {
                    long l;
                    if (fl_cli_parse_int(v + 5, 1, 22, &l)) return usage("--compress: zstd level must be 1..22 (got '%s')", v);
                    po->level = (int)l;
                }
            } else {
                return usage("--compress must be none or zstd[:LEVEL] (got '%s')", v);
            }
        } else if (FLAG("--no-dictionary")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->dict = 0;
        } else if (OPT("--backend")) {
            if (m < 0) return FL_EXIT_USAGE;
            if (!strcmp(v, "shards")) po->backend = FL_BACKEND_SHARDS;
            else if (!strcmp(v, "lmdb")) po->backend = FL_BACKEND_LMDB;
            else return usage("--backend must be shards or lmdb (got '%s')", v);
        } else if (OPT("--shard-size")) {
            if (m < 0 || fl_cli_opt_size(PD_TOOL, "--shard-size", v, 4096, 1ull << 40, &po->shard_size))
                return FL_EXIT_USAGE;
            po->shard_size_given = 1;
        } else if (FLAG("--shuffle")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->shuffle = 1;
        } else if (OPT("--seed")) {
            if (m < 0 || fl_cli_opt_u64(PD_TOOL, "--seed", v, 0, UINT64_MAX, &po->seed)) return FL_EXIT_USAGE;
            po->seed_given = 1;
        } else if (OPT("--workers")) {
            if (m < 0 || fl_cli_opt_u64(PD_TOOL, "--workers", v, 1, 1024, &u)) return FL_EXIT_USAGE;
            po->workers = (uint32_t)u;
        } else if (OPT("--part")) {
            if (m < 0) return FL_EXIT_USAGE;
            unsigned pi, pn;
            if (parse_pair(v, '/', 0, 1, 1000000, &pi, &pn) || pi >= pn)
                return usage("--part wants I/N with 0 <= I < N, e.g. 0/4 (got '%s')", v);
            po->part_index = pi;
            po->part_count = pn;
        } else if (OPT("--on-error")) {
            if (m < 0) return FL_EXIT_USAGE;
            if (!strcmp(v, "skip")) po->on_error_skip = 1;
            else if (!strcmp(v, "fail")) po->on_error_skip = 0;
            else return usage("--on-error must be skip or fail (got '%s')", v);
        } else if (OPT("--report")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->report = v;
        } else if (OPT("--max-pixels")) {
            if (m < 0 || fl_cli_opt_u64(PD_TOOL, "--max-pixels", v, 1, UINT64_MAX, &po->so.max_pixels))
                return FL_EXIT_USAGE;
        } else if (FLAG("--resume")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->resume = 1;
        } else if (FLAG("--force")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->force = 1;
        } else if (FLAG("--quiet") || FLAG("-q")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->quiet = 1;
        } else if (FLAG("--json")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->json = 1;
        } else if (OPT("--root")) {
            if (m < 0) return FL_EXIT_USAGE;
            struct stat st;
            errno = 0;
            if (stat(v, &st) || !S_ISDIR(st.st_mode)) {
                fl_cli_opt_error(PD_TOOL, "--root", v, "not a directory%s%s", errno ? ": " : "",
                                 errno ? strerror(errno) : "");
                return FL_EXIT_USAGE;
            }
            po->so.root = v;
        } else if (OPT("--csv")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->so.csv = v;
        } else if (OPT("--path-column")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->so.path_column = v;
        } else if (OPT("--label-column")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->so.label_column = v;
        } else if (OPT("--split")) {
            if (m < 0) return FL_EXIT_USAGE;
            po->so.split = v;
        } else if (OPT("--cifar100-labels")) {
            if (m < 0) return FL_EXIT_USAGE;
            if (!strcmp(v, "coarse")) po->so.cifar100_coarse = 1;
            else if (!strcmp(v, "fine")) po->so.cifar100_coarse = 0;
            else return usage("--cifar100-labels must be fine or coarse (got '%s')", v);
            po->cifar100_given = 1;
        } else if (OPT("--num-classes")) {
            if (m < 0 || fl_cli_opt_u64(PD_TOOL, "--num-classes", v, 1, PD_MAX_CLASSES, &u)) return FL_EXIT_USAGE;
            po->so.num_classes = (long)u;
        } else if (OPT("--classes") || OPT("--class-names")) {
            /* either a file with one name per line, or "A,B,C" */
            if (m < 0) return FL_EXIT_USAGE;
            const char *opt = !strncmp(a, "--classes", 9) ? "--classes" : "--class-names";
            struct stat st;
            free(po->so.class_names);
            free(po->class_list_buf);
            po->so.class_names = NULL;
            po->class_list_buf = NULL;
            po->so.n_class_names = 0;
            errno = 0;
            if (stat(v, &st) == 0 && S_ISREG(st.st_mode)) {
                uint8_t *d;
                size_t n;
                fl_error e;
                if (pd_read_file(v, 0, 64u << 20, &d, &n, &e)) {
                    fl_cli_error(PD_TOOL, "%s: %s", opt, e.msg);
                    return FL_EXIT_USAGE;
                }
                char *s = realloc(d, n + 1);
                if (!s) {
                    free(d);
                    return FL_EXIT_USAGE;
                }
                s[n] = 0;
                /* a UTF-8 byte order mark is not part of the first class name */
                if (n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) memmove(s, s + 3, n - 2);
                if (split_class_names(po, s, '\n')) {
                    free(s);
                    return FL_EXIT_USAGE;
                }
            } else if (!strcmp(opt, "--classes")) {
                fl_cli_opt_error(PD_TOOL, opt, v, "cannot read the file%s%s", errno ? ": " : "",
                                 errno ? strerror(errno) : "");
                return FL_EXIT_USAGE;
            } else {
                char *s = strdup(v);
                if (!s || split_class_names(po, s, ',')) {
                    free(s);
                    return FL_EXIT_USAGE;
                }
            }
            if (!po->so.n_class_names) return usage("%s gives no class names", opt);
        } else {
            return usage("unknown option '%s'", a);
        }
#undef OPT
#undef FLAG
    }
    int need_src = !(po->so.idx_images || po->so.csv);
    if (npos == (need_src ? 2 : 1)) {
        po->src = need_src ? pos[0] : NULL;
        po->dst = pos[npos - 1];
    } else if (!need_src && npos == 2) {
        return usage("%s", "give either SRC or --csv/--idx, not both");
    } else {
        return usage("%s", need_src ? "needs SRC and DST" : "needs DST");
    }
    if (po->so.num_classes > 0 && po->so.n_class_names && (long)po->so.n_class_names != po->so.num_classes)
        return usage("%s", "--num-classes does not match the number of class names given");
    /* --resume --force together: finish an interrupted replacement of an existing DST. */
    size_t dl = strlen(po->dst);
    while (dl > 1 && po->dst[dl - 1] == '/') ((char *)po->dst)[--dl] = 0;
    return -1;
}

int pd_pack_parse_args(int argc, char **argv, pd_pack_opts *po) {
    int r = parse_args(argc, argv, po);
    if (r >= 0) pd_pack_opts_free(po); /* not running: free the class names of a usage error */
    return r;
}

static const char *form_name(const char *form) {
    if (!form) return "this source";
    if (!strcmp(form, "imagefolder")) return "an ImageFolder source";
    if (!strcmp(form, "list")) return "a list file source";
    if (!strcmp(form, "csv")) return "a CSV source";
    if (!strcmp(form, "idx")) return "an IDX source";
    if (!strcmp(form, "cifar10")) return "a CIFAR-10 source";
    if (!strcmp(form, "cifar100")) return "a CIFAR-100 source";
    return form;
}

void pd_pack_warn_unused(const pd_pack_opts *po, const pd_items *items, const pd_plan *plan) {
    const char *form = items->form ? items->form : "";
    const char *what = form_name(items->form);
    int list_or_csv = !strcmp(form, "list") || !strcmp(form, "csv");
    if (po->so.root && !list_or_csv)
        fl_cli_warn(PD_TOOL, "--root does not apply to %s (only list file and CSV paths are relative "
                    "to it): ignored", what);
    if (po->so.path_column && strcmp(form, "csv"))
        fl_cli_warn(PD_TOOL, "--path-column does not apply to %s (only to CSV): ignored", what);
    if (po->so.label_column && strcmp(form, "csv"))
        fl_cli_warn(PD_TOOL, "--label-column does not apply to %s (only to CSV): ignored", what);
    if (po->so.split && (po->so.idx_images || po->so.csv ||
                         (strcmp(form, "idx") && strcmp(form, "cifar10") && strcmp(form, "cifar100"))))
        fl_cli_warn(PD_TOOL, "--split does not apply to %s (only to an IDX or CIFAR directory): "
                    "ignored", po->so.idx_images ? "--idx IMAGES LABELS" : what);
    if (po->cifar100_given && strcmp(form, "cifar100"))
        fl_cli_warn(PD_TOOL, "--cifar100-labels does not apply to %s (only to CIFAR-100): ignored", what);
    const char *enc = plan->encode == PD_ENC_KEEP ? "keep" : plan->encode == PD_ENC_RAW ? "raw" : "jpeg";
    if (po->quality_given && plan->encode != PD_ENC_JPEG)
        fl_cli_warn(PD_TOOL, "--quality applies only to --encode jpeg (this run stores %s records): "
                    "ignored", enc);
    if (po->jpeg_restart >= 0 && plan->encode == PD_ENC_RAW)
        fl_cli_warn(PD_TOOL, "--jpeg-restart does not apply to raw records: ignored");
    if (!po->dict && plan->schema.compression != FL_COMP_ZSTD)
        fl_cli_warn(PD_TOOL, "--no-dictionary: this run does not compress records with zstd: ignored");
    if (po->seed_given && !po->shuffle)
        fl_cli_warn(PD_TOOL, "--seed only seeds --shuffle, which is not given: the input order is "
                    "not shuffled");
    if (po->shard_size_given && po->backend == FL_BACKEND_LMDB)
        fl_cli_warn(PD_TOOL, "--shard-size does not apply to --backend lmdb (one environment): ignored");
}
