/* pack_args.c — the `packdata pack` command line: its option table (the help is generated from
 * it, fl_cli_table.h), the parsers of the values with a syntax of their own (--resize, --part,
 * --compress, --classes, ...), the checks between options, and the warnings for options that do
 * not apply to a run. */
#include "pack_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_cli_table.h"

/* "AxB" with A and B decimal integers in [lo, hi] (strict: no sign, space or junk). */
static int parse_pair(const char *s, char sep, uint64_t lo_a, uint64_t lo_b, uint64_t hi,
                      unsigned *a, unsigned *b)
{
    const char *x = strchr(s, sep);
    char first[32];
    uint64_t va, vb;
    if (!x || (size_t)(x - s) >= sizeof first)
        return -1;
    memcpy(first, s, (size_t)(x - s));
    first[x - s] = 0;
    if (fl_cli_parse_u64(first, lo_a, hi, &va) || fl_cli_parse_u64(x + 1, lo_b, hi, &vb))
        return -1;
    *a = (unsigned)va;
    *b = (unsigned)vb;
    return 0;
}

/* ---- values with a syntax of their own (FL_CLI_CUSTOM) ----------------------------------- */

/* The one line for a refused value: "pack: --resize wants WxH, ... (got 'v') (see ...)";
 * `why` holds one %s for the value (its first 40 characters). Returns -1. */
static int bad_value(const char *tool, const char *why, const char *v)
{
    char m[512], q[96];
    snprintf(m, sizeof m, why, fl_cli_quote(v, q, sizeof q));
    fl_cli_error(tool, "pack: %s (see packdata pack --help)", m);
    return -1;
}

static int opt_jpeg_restart(void *opts, const char *name, const char *v, const char *tool)
{
    pd_pack_opts *po = opts;
    uint64_t u;
    if (!strcmp(v, "off"))
        po->jpeg_restart = -1;
    else if (!strcmp(v, "row"))
        po->jpeg_restart = 0;
    else if (fl_cli_parse_u64(v, 1, 65535, &u) == 0)
        po->jpeg_restart = (int)u;
    else
        return bad_value(
            tool, "--jpeg-restart wants a number of MCUs (1-65535), row or off (got '%s')", v);
    return 0;
}

static int opt_resize(void *opts, const char *name, const char *v, const char *tool)
{
    pd_pack_opts *po = opts;
    unsigned w, h;
    if (parse_pair(v, 'x', 1, 1, 65535, &w, &h))
        return bad_value(tool, "--resize wants WxH, each 1-65535, e.g. 224x224 (got '%s')", v);
    po->resize_w = w;
    po->resize_h = h;
    return 0;
}

static int opt_compress(void *opts, const char *name, const char *v, const char *tool)
{
    pd_pack_opts *po = opts;
    long l = 0;
    if (!strcmp(v, "none")) {
        po->compress = 0;
    } else if (!strncmp(v, "zstd", 4) && (v[4] == 0 || v[4] == ':')) {
        if (v[4] == ':' && fl_cli_parse_int(v + 5, 1, 22, &l))
            return bad_value(tool, "--compress: zstd level must be 1..22 (got '%s')", v);
        po->compress = 1;
    } else {
        return bad_value(tool, "--compress must be none or zstd[:LEVEL] (got '%s')", v);
    }
    po->level = (int)l;
    return 0;
}

static int opt_part(void *opts, const char *name, const char *v, const char *tool)
{
    pd_pack_opts *po = opts;
    unsigned i, n;
    if (parse_pair(v, '/', 0, 1, 1000000, &i, &n) || i >= n)
        return bad_value(tool, "--part wants I/N with 0 <= I < N, e.g. 0/4 (got '%s')", v);
    po->part_index = i;
    po->part_count = n;
    return 0;
}

static int opt_num_classes(void *opts, const char *name, const char *v, const char *tool)
{
    uint64_t u;
    if (fl_cli_opt_u64(tool, name, v, 1, PD_MAX_CLASSES, &u))
        return -1;
    ((pd_pack_opts *)opts)->so.num_classes = (long)u;
    return 0;
}

static int opt_root(void *opts, const char *name, const char *v, const char *tool)
{
    struct stat st;
    errno = 0;
    if (stat(v, &st) || !S_ISDIR(st.st_mode)) {
        fl_cli_opt_error(tool, name, v, "not a directory%s%s", errno ? ": " : "",
                         errno ? strerror(errno) : "");
        return -1;
    }
    ((pd_pack_opts *)opts)->so.root = v;
    return 0;
}

static int split_class_names(pd_pack_opts *po, char *buf, char sep)
{
    uint32_t n = 0, cap = 16;
    char **v = malloc(cap * sizeof *v);
    if (!v)
        return -1;
    char *p = buf;
    while (*p) {
        char *e = strchr(p, sep);
        if (e)
            *e = 0;
        size_t l = strlen(p);
        while (l && (p[l - 1] == '\r' || p[l - 1] == ' '))
            p[--l] = 0;
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
        if (!e)
            break;
        p = e + 1;
    }
    po->so.class_names = v;
    po->so.n_class_names = n;
    po->class_list_buf = buf;
    return 0;
}

void pd_pack_opts_free(pd_pack_opts *po)
{
    free(po->so.class_names);
    free(po->class_list_buf);
    memset(po, 0, sizeof *po);
}

/* --classes FILE (one name per line) or --class-names A,B,C (or a FILE as for --classes); the
 * last one given replaces the names of an earlier one. */
static int opt_classes(void *opts, const char *name, const char *v, const char *tool)
{
    pd_pack_opts *po = opts;
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
            fl_cli_error(tool, "%s: %s", name, e.msg);
            return -1;
        }
        char *s = realloc(d, n + 1);
        if (!s) {
            free(d);
            return -1;
        }
        s[n] = 0;
        /* a UTF-8 byte order mark is not part of the first class name */
        if (n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
            memmove(s, s + 3, n - 2);
        if (split_class_names(po, s, '\n')) {
            free(s);
            return -1;
        }
    } else if (!strcmp(name, "--classes")) {
        fl_cli_opt_error(tool, name, v, "cannot read the file%s%s", errno ? ": " : "",
                         errno ? strerror(errno) : "");
        return -1;
    } else {
        char *s = strdup(v);
        if (!s || split_class_names(po, s, ',')) {
            free(s);
            return -1;
        }
    }
    if (!po->so.n_class_names)
        return bad_value(tool, "%s gives no class names", name);
    return 0;
}

/* --field NAME:TYPE[:SHAPE], repeatable: the specs are checked when the source builds its
 * schema (pd_field_spec_add), where the error can name the spec. */
static int opt_field(void *opts, const char *name, const char *v, const char *tool)
{
    pd_pack_opts *po = opts;
    if (po->so.n_field_specs == FL_MAX_FIELDS - 2)
        return bad_value(tool, "--field: at most 30 fields (got '%s' past that)", v);
    po->so.field_specs[po->so.n_field_specs++] = v;
    (void)name;
    return 0;
}

/* ---- the table ---------------------------------------------------------------------------- */

#define F(field) FL_CLI_FIELD(pd_pack_opts, field)

static const fl_cli_choice encodings[] = {
    {"keep", PD_ENC_KEEP, 0}, {"jpeg", PD_ENC_JPEG, 0}, {"raw", PD_ENC_RAW, 0}, {NULL, 0, 0}};
static const fl_cli_choice backends[] = {
    {"shards", FL_BACKEND_SHARDS, 0}, {"lmdb", FL_BACKEND_LMDB, 0}, {NULL, 0, 0}};
static const fl_cli_choice mask_codecs[] = {
    {"png", FL_MASK_PNG, 0}, {"zstd", FL_MASK_ZSTD, 0}, {NULL, 0, 0}};
static const fl_cli_choice on_error[] = {{"fail", 0, 0}, {"skip", 1, 0}, {NULL, 0, 0}};
static const fl_cli_choice cifar100_labels[] = {{"fine", 0, 0}, {"coarse", 1, 0}, {NULL, 0, 0}};

static const fl_cli_opt pack_opts[] = {
    {FL_CLI_SECTION, .help = "Source options:"},
    {FL_CLI_TEXT2, "idx", .off = F(so.idx_images), .off2 = F(so.idx_labels),
     .metavar = "IMAGES LABELS",
     .help = "MNIST-style IDX files (idx3-ubyte images, idx1-ubyte labels), gzip'ed or not"},
    {FL_CLI_TEXT, "csv", .off = F(so.csv), .metavar = "FILE",
     .help = "CSV with a header row (see --path-column, --label-column, --root, --field)"},
    {FL_CLI_TEXT, "jsonl", .off = F(so.jsonl), .metavar = "FILE",
     .help = "JSON Lines: one object per line with \"path\", \"label\" and --field keys"},
    {FL_CLI_CUSTOM, "field", .parse = opt_field, .metavar = "NAME:TYPE[:SHAPE]",
     .help = "CSV column / JSONL key / --wds extension NAME packed as a field\n"
             "(repeatable); TYPE: int, int_list (\"3 7 9\" or [3,7,9]; int_list:of=B:\n"
             "one value per box of the boxes field B given before it, e.g. the boxes'\n"
             "classes, dropped with its box by a crop), float, float_vector:N, boxes\n"
             "([[x0,y0,x1,y1],...] pixels), ndarray:DTYPE:SHAPE (a .npy path or a\n"
             "nested list; e.g. ndarray:float32:3x4), mask[:uint16] (a PNG path),\n"
             "bytes (a file path), text (the string). With --field the label\n"
             "column is optional"},
    {FL_CLI_FLAG, "no-image", .off = F(so.no_image),
     .help = "CSV/JSONL rows without an image (embeddings, audio features, tabular\n"
             "rows): each record is the row's --field values and its label (when the\n"
             "label column/key is there); a path column/key is not read (--field\n"
             "path:text keeps it); records are named by the file's name and line\n"
             "(meta.jsonl:3). Needs --field; boxes and masks need an image"},
    {FL_CLI_TEXT, "coco", .off = F(so.coco), .metavar = "INSTANCES.json",
     .help = "COCO instances file; images under --root. Fields: image, boxes (xyxy\n"
             "float32 pixels), labels (per box: index of its category in the classes,\n"
             "the categories in id order), iscrowd"},
    {FL_CLI_FLAG, "masks", .off = F(so.masks),
     .help = "with --coco: also a semantic \"mask\" field (0 background, class index + 1)\n"
             "rasterised from the polygons and RLE as pycocotools draws them"},
    {FL_CLI_TEXT, "mask-dir", .off = F(so.mask_dir), .metavar = "DIR",
     .help = "SRC is a folder of images, DIR the folder of their masks (same relative\n"
             "paths): fields image, mask. One record per mask"},
    {FL_CLI_TEXT, "mask-suffix", .off = F(so.mask_suffix), .metavar = "SUFFIX",
     .help = "end of a mask's file name, replaced to find its image", .def = ".png"},
    {FL_CLI_TEXT, "image-suffix", .off = F(so.image_suffix), .metavar = "SUFFIX",
     .help = "end of an image's file name",
     .def = "the first of .jpg .jpeg .png .webp that exists"},
    {FL_CLI_TEXT, "wds", .off = F(so.wds), .metavar = "SHARDS",
     .help = "WebDataset tar shards, read in place: a brace pattern\n"
             "('train-{000000..000009}.tar'), a folder of tars, a tar, or a file listing\n"
             "tar paths (see below)"},
    {FL_CLI_CUSTOM, "root", .parse = opt_root, .metavar = "DIR",
     .help = "base directory for list/CSV paths", .def = "the list file's directory"},
    {FL_CLI_FLAG, "allow-outside-root", .off = F(so.allow_outside_root),
     .help = "pack list/CSV/JSONL/COCO paths outside --root (absolute, or climbing\n"
             "with ..) and ImageFolder links leading out of SRC (refused by default:\n"
             "a list from elsewhere could pack any file of this machine)"},
    {FL_CLI_TEXT, "path-column", .off = F(so.path_column), .metavar = "NAME",
     .help = "CSV column with the image path", .def = "path"},
    {FL_CLI_TEXT, "label-column", .off = F(so.label_column), .metavar = "NAME",
     .help = "CSV column with the label", .def = "label"},
    {FL_CLI_TEXT, "split", .off = F(so.split), .metavar = "PREFIX",
     .help = "IDX/CIFAR directory: which files (train, t10k, test)"},
    {FL_CLI_ENUM, "cifar100-labels", .off = F(so.cifar100_coarse), .choices = cifar100_labels,
     .help = "CIFAR-100 label to keep", .def = "fine"},
    {FL_CLI_CUSTOM, "num-classes", .parse = opt_num_classes, .metavar = "N",
     .help = "labels must be < N", .def = "from class names, else max label + 1"},
    {FL_CLI_CUSTOM, "classes", .parse = opt_classes, .metavar = "FILE",
     .help = "class names, one per line, in label order"},
    {FL_CLI_CUSTOM, "class-names", .parse = opt_classes, .metavar = "A,B,...",
     .help = "class names in label order (or a FILE as for --classes)"},

    {FL_CLI_SECTION, .help = "Encoding:"},
    {FL_CLI_ENUM, "encode", .off = F(encode), .choices = encodings,
     .help = "keep: store each JPEG/PNG/WebP file byte for byte in its own format\n"
             "(a folder of several formats is \"mixed\");\n"
             "jpeg: decode (at the smallest DCT scale that suffices), resize, re-encode;\n"
             "raw: uint8 HWC pixels; all records one size",
     .def = "keep for image files, raw for IDX/CIFAR"},
    {FL_CLI_INT, "quality", .off = F(quality), .umin = 1, .umax = 100, .metavar = "Q",
     .help = "JPEG quality for --encode jpeg (1-100)", .def = "90"},
    {FL_CLI_CUSTOM, "jpeg-restart", .parse = opt_jpeg_restart, .metavar = "N|row|off",
     .help = "rewrite JPEG records losslessly (same pixels) with a restart marker\n"
             "every N MCUs (row: one per MCU row) so the loader's crop decode skips\n"
             "what lies outside a crop",
     .def = "4 for --encode jpeg; off for keep, which then stores the file bytes exactly"},
    {FL_CLI_ENUM, "mask-codec", .off = F(mask_codec), .choices = mask_codecs,
     .help = "how mask fields are stored (both lossless): the raw elements in one\n"
             "zstd frame (smaller and ~14x faster to decode on VOC-like masks;\n"
             "bench/mask_codec.sh), or an 8/16-bit gray PNG",
     .def = "zstd"},
    {FL_CLI_U32, "max-side", .off = F(max_side), .umin = 1, .umax = 65535, .metavar = "N",
     .help = "shrink so the longer side is at most N (jpeg/raw)"},
    {FL_CLI_CUSTOM, "resize", .parse = opt_resize, .metavar = "WxH",
     .help = "resize every image to exactly W x H (needed for raw of varying sizes)"},
    {FL_CLI_FLAG, "gray", .off = F(gray), .help = "store one channel (luma)"},
    {FL_CLI_FLAG, "grey", .off = F(gray), .hidden = 1},
    {FL_CLI_CUSTOM, "compress", .parse = opt_compress, .metavar = "none|zstd[:LEVEL]",
     .help = "per-record zstd",
     .def = "zstd:19 with a trained dictionary for raw, none for jpeg/keep"},
    {FL_CLI_FLAG_OFF, "no-dictionary", .off = F(dict), .help = "do not train a zstd dictionary"},

    {FL_CLI_SECTION, .help = "Output:"},
    {FL_CLI_ENUM, "backend", .off = F(backend), .choices = backends, .def = "shards",
     .help = "a directory of shards, or one LMDB environment"},
    {FL_CLI_SIZE, "shard-size", .off = F(shard_size), .umin = 4096, .umax = 1ull << 40,
     .metavar = "SIZE",
     .help = "target shard size, e.g. 256M, 1G; every shard carries the zstd\n"
             "dictionary, which is kept to 1/16 of it (none below 16K)",
     .def = "256M"},
    {FL_CLI_FLAG, "shuffle", .off = F(shuffle),
     .help = "permute the inputs before packing (deterministic from --seed)"},
    {FL_CLI_U64, "seed", .off = F(seed), .umin = 0, .umax = UINT64_MAX, .metavar = "S",
     .help = "shuffle seed, stored in the manifest", .def = "0"},
    {FL_CLI_CUSTOM, "part", .parse = opt_part, .metavar = "I/N",
     .help = "pack only slice I of N (0 <= I < N) of the (shuffled) input list; under\n"
             "--encode keep the parts store the format the whole job's file names say\n"
             "(one extension: that format, and a file of another is refused; several: mixed)"},
    {FL_CLI_U32, "workers", .off = F(workers), .umin = 1, .umax = 1024, .metavar = "N",
     .help = "worker threads; the output does not depend on it", .def = "all cores"},
    {FL_CLI_FLAG, "resume", .off = F(resume),
     .help = "finish an interrupted run from DST.partial, only if SRC's inputs (names,\n"
             "labels, sizes, modification times) and the options are those it started\n"
             "with (else exit 2 naming what changed); on a finished DST of the same job:\n"
             "exit 0, nothing to do (of another job: exit 2 naming the difference)"},
    {FL_CLI_FLAG, "force", .off = F(force),
     .help = "replace an existing DST (after the new one is complete) or a stale\n"
             "DST.partial, only if it is a dataset packdata wrote (else exit 2, nothing\n"
             "touched); with --resume: finish an interrupted replacement"},

    {FL_CLI_SECTION, .help = "Bad inputs:"},
    {FL_CLI_ENUM, "on-error", .off = F(on_error_skip), .choices = on_error, .def = "fail",
     .help = "fail: stop at the first bad input, exit 1, nothing at DST;\n"
             "skip: report it, pack the rest, exit 0"},
    {FL_CLI_TEXT, "report", .off = F(report), .metavar = "FILE",
     .help = "write every bad input as \"source<TAB>reason\""},
    {FL_CLI_U64, "max-pixels", .off = F(so.max_pixels), .umin = 1, .umax = UINT64_MAX,
     .metavar = "N", .help = "refuse images declaring more pixels, before decoding",
     .def = "100000000"},

    {FL_CLI_SECTION, .help = "Messages:"},
    {FL_CLI_FLAG, "quiet", 'q', .off = F(quiet),
     .help = "errors only (no progress bar, no summary)"},
    {FL_CLI_FLAG, "json", .off = F(json), .help = "print the summary as one JSON object on stdout"},
    {FL_CLI_END},
};
#undef F

static const char pack_synopsis[] =
    "usage: packdata pack SRC DST [options]\n"
    "       packdata pack --csv FILE DST [options]\n"
    "       packdata pack --idx IMAGES LABELS DST [options]\n"
    "       packdata pack --coco INSTANCES.json --root IMAGE_DIR DST [--masks] [options]\n"
    "       packdata pack IMAGES_DIR DST --mask-dir MASKS_DIR [options]\n"
    "       packdata pack --jsonl FILE DST --field NAME:TYPE[:SHAPE] ... [options]\n"
    "       packdata pack --jsonl|--csv FILE DST --no-image --field NAME:TYPE[:SHAPE] ... "
    "[options]\n"
    "       packdata pack --wds SHARDS DST [options]\n"
    "\n"
    "Pack images and labels into a fastload dataset at DST (a directory of checksummed shards and "
    "a\n"
    "manifest, or an LMDB environment with --backend lmdb). Everything is written to DST.partial "
    "and\n"
    "renamed to DST once complete; a killed run can be finished with --resume. While a run writes "
    "DST\n"
    "it holds a lock (DST.lock beside DST): a second run for the same DST fails at once.\n"
    "\n"
    "How SRC is read (first rule that applies):\n"
    "  --idx IMAGES LABELS    MNIST-style IDX files\n"
    "  --coco FILE            COCO instances JSON, images under --root: one record per image "
    "(those\n"
    "                         without annotations too, with 0 boxes); fields image, boxes, "
    "labels,\n"
    "                         iscrowd, and with --masks mask. Boxes are [x,y,w,h] -> x0,y0,x1,y1 "
    "in\n"
    "                         pixels; a box up to 1 px outside its image is clipped to it, "
    "further\n"
    "                         out is a bad input. The mask: 0 background, class index + 1 (uint8\n"
    "                         up to 254 classes, else uint16), objects painted in file order (a\n"
    "                         later one wins where they overlap), each as pycocotools' annToMask\n"
    "                         draws it (polygons, RLE lists and compressed RLE strings)\n"
    "  --csv FILE             CSV with a header row; image paths in --path-column, labels in\n"
    "                         --label-column, relative to --root; --field maps more columns\n"
    "  --jsonl FILE           JSON Lines, one object per line (keys as the CSV's columns)\n"
    "  --no-image             with --csv/--jsonl: records without an image (embeddings, "
    "features,\n"
    "                         tabular rows): each is its row's --field values (and label); "
    "the\n"
    "                         path column/key is not read; records are named FILE:LINE\n"
    "                         (meta.jsonl:3, the file's name without its folder)\n"
    "  SRC + --mask-dir DIR   segmentation pairs: one record per mask under DIR (name ending in\n"
    "                         --mask-suffix), its image at the same relative path under SRC with\n"
    "                         the suffix replaced. VOC: SRC JPEGImages, DIR SegmentationClass\n"
    "                         (palette PNGs: their indices are the classes); ADE20K: SRC\n"
    "                         images, DIR annotations; Cityscapes: SRC leftImg8bit, DIR gtFine,\n"
    "                         --image-suffix _leftImg8bit.png --mask-suffix _gtFine_labelIds.png.\n"
    "                         A mask must have its image's size\n"
    "  --wds SHARDS           WebDataset shards, read in place: members grouped into samples by "
    "key\n"
    "                         (the path up to the first dot of the file name), one field per\n"
    "                         extension: jpg jpeg png webp the image, cls the int label, txt json\n"
    "                         text, npy ndarray (one dtype and shape for all), others bytes.\n"
    "                         --field EXT:TYPE[:SHAPE] parses extension EXT's members as TYPE.\n"
    "                         Every sample needs every field; records are named SHARD/KEY\n"
    "  SRC is a directory holding *-images-idx3-ubyte[.gz] + *-labels-idx1-ubyte[.gz]   → IDX\n"
    "                         (several pairs, e.g. train and t10k: choose with --split "
    "train|t10k)\n"
    "  SRC is a directory holding CIFAR binary batches (data_batch_*.bin, test_batch.bin: "
    "CIFAR-10;\n"
    "                         train.bin, test.bin: CIFAR-100) → CIFAR; --split train|test chooses "
    "the\n"
    "                         batches (required when both are there). SRC may also be one .bin "
    "batch.\n"
    "  SRC is another directory → ImageFolder: each sub-folder is a class (sorted by name = label\n"
    "                         order, or as --classes lists them); its image files (.jpg .jpeg "
    ".png\n"
    "                         .webp, any depth) are the inputs; a folder without any is skipped\n"
    "                         with a warning (with --classes it stays a class)\n"
    "  SRC is a tar file (.tar .tar.gz .tgz .tar.bz2 .tar.xz .tar.zst) → an ImageFolder read in\n"
    "                         place, never extracted: ImageNet's train tar (per-class tars\n"
    "                         <class>.tar) or a tar of class folders (one top folder is looked\n"
    "                         through); the records are those of packing the extracted folder.\n"
    "                         Absolute or '..' member paths and link members are bad inputs. A\n"
    "                         plain .tar is read at random, a compressed one in order (no "
    "--shuffle)\n"
    "  SRC is a file ending in .csv → CSV (as --csv)\n"
    "  SRC is any other file → list file: lines \"relative/path label\" (Caffe convert_imageset "
    "style;\n"
    "                         the path may contain spaces: the label is the last field), relative "
    "to\n"
    "                         --root (default: the list file's directory); '#' lines are comments\n"
    "Labels are integers 0..N-1, or class names when --classes/--class-names gives them.\n"
    "With --max-side/--resize (--encode jpeg or raw) boxes are scaled with their image and masks\n"
    "resized by nearest neighbour (no new class ids).\n";

static const char pack_epilog[] =
    "\n"
    "An option given twice takes its last value. Options that do not apply to SRC or to the\n"
    "encoding (--root on an ImageFolder, --quality with --encode raw, ...) are ignored with a "
    "warning.\n"
    "Exit status: 0 ok, 1 bad input or data error, 2 usage error.\n";

static int pack_run(const fl_cli_tool *tool, int argc, char **argv)
{
    (void)tool;
    return pd_cmd_pack(argc, argv);
}

const fl_cli_cmd pd_pack_cmd = {
    .name = "pack",
    .args = "SRC DST [options]",
    .summary = "pack an ImageFolder, list file, CSV, IDX or CIFAR source",
    .synopsis = pack_synopsis,
    .opts = pack_opts,
    .epilog = pack_epilog,
    .max_pos = 2,
    .run = pack_run,
};

static void usage(const char *what)
{
    fl_cli_error(PD_TOOL, "pack: %s (see packdata pack --help)", what);
}

static int parse_args(int argc, char **argv, pd_pack_opts *po)
{
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
    fl_cli_parsed p;
    int r = fl_cli_parse(&pd_tool, &pd_pack_cmd, argc, argv, po, &p);
    if (r == FL_CLI_DONE)
        return FL_EXIT_OK;
    if (r != FL_CLI_RUN)
        return FL_EXIT_USAGE;
    po->quality_given = fl_cli_given(&p, "quality");
    po->seed_given = fl_cli_given(&p, "seed");
    po->shard_size_given = fl_cli_given(&p, "shard-size");
    po->cifar100_given = fl_cli_given(&p, "cifar100-labels");
    po->encode_given = fl_cli_given(&p, "encode");
    po->compress_given = fl_cli_given(&p, "compress");
    po->max_pixels_given = fl_cli_given(&p, "max-pixels");
    int need_src = !(po->so.idx_images || po->so.csv || po->so.coco || po->so.jsonl || po->so.wds);
    if (p.npos == (need_src ? 2 : 1)) {
        po->src = need_src ? p.pos[0] : NULL;
        po->dst = p.pos[p.npos - 1];
    } else if (!need_src && p.npos == 2) {
        return usage("give either SRC or --csv/--jsonl/--coco/--idx/--wds, not both"),
               FL_EXIT_USAGE;
    } else {
        return usage(need_src ? "needs SRC and DST" : "needs DST"), FL_EXIT_USAGE;
    }
    if (po->so.num_classes > 0 && po->so.n_class_names &&
        (long)po->so.n_class_names != po->so.num_classes)
        return usage("--num-classes does not match the number of class names given"), FL_EXIT_USAGE;
    if (po->so.masks && !po->so.coco)
        return usage("--masks goes with --coco (mask folders: --mask-dir)"), FL_EXIT_USAGE;
    if (po->so.coco && !po->so.root)
        return usage("--coco needs --root IMAGE_DIR, the folder its file_name values are in"),
               FL_EXIT_USAGE;
    if (po->so.n_field_specs && !po->so.csv && !po->so.jsonl && !po->so.wds &&
        !(po->src && (strstr(po->src, ".csv") || strstr(po->src, ".jsonl"))))
        return usage("--field goes with a CSV, JSON Lines or --wds source"), FL_EXIT_USAGE;
    if (po->so.no_image && (po->so.wds || po->so.idx_images || po->so.coco ||
                            (!po->so.csv && !po->so.jsonl &&
                             !(po->src && (strstr(po->src, ".csv") || strstr(po->src, ".jsonl"))))))
        return usage("--no-image goes with a CSV or JSON Lines source (--csv, --jsonl)"),
               FL_EXIT_USAGE;
    if (po->so.no_image && !po->so.n_field_specs)
        return usage("--no-image needs --field NAME:TYPE[:SHAPE]: the fields are the record"),
               FL_EXIT_USAGE;
    size_t dl = strlen(po->dst);
    while (dl > 1 && po->dst[dl - 1] == '/')
        ((char *)po->dst)[--dl] = 0;
    return -1;
}

int pd_pack_parse_args(int argc, char **argv, pd_pack_opts *po)
{
    int r = parse_args(argc, argv, po);
    if (r >= 0)
        pd_pack_opts_free(po); /* not running: free the class names of a usage error */
    return r;
}

static const char *form_name(const char *form)
{
    if (!form)
        return "this source";
    if (!strcmp(form, "imagefolder"))
        return "an ImageFolder source";
    if (!strcmp(form, "list"))
        return "a list file source";
    if (!strcmp(form, "csv"))
        return "a CSV source";
    if (!strcmp(form, "idx"))
        return "an IDX source";
    if (!strcmp(form, "cifar10"))
        return "a CIFAR-10 source";
    if (!strcmp(form, "cifar100"))
        return "a CIFAR-100 source";
    if (!strcmp(form, "coco"))
        return "a COCO source";
    if (!strcmp(form, "maskpairs"))
        return "an image/mask folder source";
    if (!strcmp(form, "jsonl"))
        return "a JSON Lines source";
    return form;
}

void pd_pack_warn_unused(const pd_pack_opts *po, const pd_items *items, const pd_plan *plan)
{
    const char *form = items->form ? items->form : "";
    const char *what = form_name(items->form);
    int list_or_csv = !strcmp(form, "list") || !strcmp(form, "csv") || !strcmp(form, "jsonl") ||
                      !strcmp(form, "coco");
    if (po->so.root && !list_or_csv)
        fl_cli_warn(PD_TOOL,
                    "--root does not apply to %s (only list file and CSV paths are relative "
                    "to it): ignored",
                    what);
    if (po->so.path_column && strcmp(form, "csv") && strcmp(form, "jsonl"))
        fl_cli_warn(PD_TOOL, "--path-column does not apply to %s (only to CSV): ignored", what);
    if (po->so.label_column && strcmp(form, "csv") && strcmp(form, "jsonl"))
        fl_cli_warn(PD_TOOL, "--label-column does not apply to %s (only to CSV): ignored", what);
    if (po->so.split &&
        (po->so.idx_images || po->so.csv ||
         (strcmp(form, "idx") && strcmp(form, "cifar10") && strcmp(form, "cifar100"))))
        fl_cli_warn(PD_TOOL,
                    "--split does not apply to %s (only to an IDX or CIFAR directory): "
                    "ignored",
                    po->so.idx_images ? "--idx IMAGES LABELS" : what);
    if (po->cifar100_given && strcmp(form, "cifar100"))
        fl_cli_warn(PD_TOOL, "--cifar100-labels does not apply to %s (only to CIFAR-100): ignored",
                    what);
    const char *enc = plan->encode == PD_ENC_KEEP  ? "keep"
                      : plan->encode == PD_ENC_RAW ? "raw"
                                                   : "jpeg";
    if (plan->encode == PD_ENC_NONE) {
        /* --no-image: what shapes, encodes or limits an image has nothing to act on */
        const char *img_opts[9];
        int n = 0;
        if (po->encode_given)
            img_opts[n++] = "--encode";
        if (po->quality_given)
            img_opts[n++] = "--quality";
        if (po->jpeg_restart != -2)
            img_opts[n++] = "--jpeg-restart";
        if (po->max_side)
            img_opts[n++] = "--max-side";
        if (po->resize_w)
            img_opts[n++] = "--resize";
        if (po->gray)
            img_opts[n++] = "--gray";
        if (po->compress_given)
            img_opts[n++] = "--compress";
        if (po->max_pixels_given)
            img_opts[n++] = "--max-pixels";
        if (po->so.path_column)
            img_opts[n++] = "--path-column";
        for (int i = 0; i < n; i++)
            fl_cli_warn(PD_TOOL,
                        "%s does not apply to --no-image records (they have no image): "
                        "ignored%s",
                        img_opts[i],
                        !strcmp(img_opts[i], "--compress") ? " (ndarray fields are zstd frames "
                                                             "of their own)"
                                                           : "");
        const char *pc = po->so.path_column ? po->so.path_column : "path";
        if (items->unread_paths)
            fl_cli_warn(PD_TOOL,
                        "--no-image: %llu row%s a '%s' %s, which is not read (the records "
                        "have no image; --field %s:text packs it as text)",
                        (unsigned long long)items->unread_paths,
                        items->unread_paths == 1 ? " has" : "s have", pc,
                        !strcmp(form, "csv") ? "column" : "key", pc);
    }
    if (po->quality_given && plan->encode != PD_ENC_JPEG && plan->encode != PD_ENC_NONE)
        fl_cli_warn(PD_TOOL,
                    "--quality applies only to --encode jpeg (this run stores %s records): "
                    "ignored",
                    enc);
    if (po->jpeg_restart >= 0 && plan->encode == PD_ENC_RAW)
        fl_cli_warn(PD_TOOL, "--jpeg-restart does not apply to raw records: ignored");
    if (!po->dict && plan->schema.compression != FL_COMP_ZSTD)
        fl_cli_warn(PD_TOOL,
                    "--no-dictionary: this run does not compress records with zstd: ignored");
    if (po->seed_given && !po->shuffle)
        fl_cli_warn(PD_TOOL, "--seed only seeds --shuffle, which is not given: the input order is "
                             "not shuffled");
    if (po->shard_size_given && po->backend == FL_BACKEND_LMDB)
        fl_cli_warn(PD_TOOL,
                    "--shard-size does not apply to --backend lmdb (one environment): ignored");
}
