/* inspect.c — `packdata info`, `packdata verify` and `packdata extract`: read a packed dataset
 * through the reader API (formats/fl_dataset.h) and report on it. */
#include "packdata.h"

#include "inspect_fields.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_file.h"
#include "fl_cli_table.h"
#include "fl_clock.h"
#include "fl_image.h"
#include "fl_json.h"
#include "fl_text.h"

/* A record's source name (`n` bytes, not NUL-terminated) as printed: control characters shown
 * (fl_text.h), never obeyed by the terminal. */
static const char *shown_name(const char *name, size_t n, char *out, size_t cap)
{
    char raw[512];
    if (!name)
        return "?";
    if (n >= sizeof raw)
        n = sizeof raw - 1;
    memcpy(raw, name, n);
    raw[n] = 0;
    return fl_text_escape(raw, 0, out, cap);
}

static const char *enc_str(fl_encoding e)
{
    return e == FL_ENC_JPEG    ? "jpeg"
           : e == FL_ENC_PNG   ? "png"
           : e == FL_ENC_RAW   ? "raw"
           : e == FL_ENC_WEBP  ? "webp"
           : e == FL_ENC_MIXED ? "mixed"
           : e == FL_ENC_NONE  ? "none"
                               : "unknown";
}

/* The image format of a record encoding (FL_IMG_UNKNOWN for raw and unknown values). */
static fl_image_format img_format_of(fl_encoding e)
{
    return e == FL_ENC_JPEG   ? FL_IMG_JPEG
           : e == FL_ENC_PNG  ? FL_IMG_PNG
           : e == FL_ENC_WEBP ? FL_IMG_WEBP
                              : FL_IMG_UNKNOWN;
}

/* The source text of the manifest's top-level member `key` (a string's characters as stored,
 * escapes not decoded, without the quotes), cut to cap - 1 bytes. -1 when there is none. */
static int manifest_text(const fl_jdoc *doc, const char *json, const char *key, char *out,
                         size_t cap)
{
    const fl_jnode *v = doc ? fl_jget(fl_jroot(doc), key) : NULL;
    if (!v)
        return -1;
    size_t b = v->src_begin, e = v->src_end;
    if (v->type == FL_J_STRING)
        b++, e--;
    size_t n = e - b < cap ? e - b : cap - 1;
    memcpy(out, json + b, n);
    out[n] = 0;
    return 0;
}

/* The manifest's "part": {"index": I, "count": N}. Returns 0 and fills index/count when found. */
static int manifest_part(const fl_jdoc *doc, unsigned *index, unsigned *count)
{
    const fl_jnode *p = doc ? fl_jget(fl_jroot(doc), "part") : NULL;
    const fl_jnode *i = fl_jget(p, "index"), *c = fl_jget(p, "count");
    if (!i || !c || !i->is_int || !c->is_int)
        return -1;
    *index = (unsigned)i->ival;
    *count = (unsigned)c->ival;
    return 0;
}

/* Open the dataset at `path`; `summary`: without its index (fl_dataset_open_summary: the same
 * checks, memory that does not grow with the record count), for what reads no record. */
static int open_ds(const char *path, int summary, fl_dataset **ds)
{
    fl_error err;
    fl_error_clear(&err);
    int r = summary ? fl_dataset_open_summary(path, ds, &err) : fl_dataset_open(path, ds, &err);
    if (r) {
        fl_cli_error(PD_TOOL, "%s", err.msg[0] ? err.msg : fl_strerror(r));
        return FL_EXIT_DATA;
    }
    return 0;
}

/* ---- info ---------------------------------------------------------------------------------- */

typedef struct info_opts {
    int json;
} info_opts;

static const fl_cli_opt info_table[] = {
    {FL_CLI_FLAG, "json", .off = FL_CLI_FIELD(info_opts, json),
     .help = "one JSON object on stdout (records, classes, shards, bytes, encoding,\n"
             "compression, channels, height, width, backend, part (\"I/N\" or null),\n"
             "parts_combined (a directory of parts only), format_version, fields\n"
             "(name, type, dtype, shape, max_count, of, codec), manifest)"},
    {FL_CLI_END},
};

static int info_run(const fl_cli_tool *tool, int argc, char **argv);

const fl_cli_cmd pd_info_cmd = {
    .name = "info",
    .args = "DST [--json]",
    .summary = "records, classes, shards, bytes, schema, options of a dataset",
    .synopsis =
        "usage: packdata info DST [--json]\n"
        "\n"
        "Print what a packed dataset holds: records, classes (label order), shards, bytes, "
        "encoding,\n"
        "schema, compression, part, packdata version and the options it was packed with, and the\n"
        "record's fields (type, dtype, shape, largest count, which field a list or mask belongs\n"
        "to, mask codec) when it has more than an image and a label.\n"
        "DST may also be a directory holding the N datasets of a split job (`pack --part I/N`):\n"
        "they are shown as one dataset, the way the loader reads them.\n"
        "\n",
    .opts = info_table,
    .max_pos = 1,
    .run = info_run,
};

static int info_run(const fl_cli_tool *tool, int argc, char **argv)
{
    info_opts io = {0};
    fl_cli_parsed cl;
    int pr = fl_cli_parse(tool, &pd_info_cmd, argc, argv, &io, &cl);
    if (pr != FL_CLI_RUN)
        return pr == FL_CLI_DONE ? FL_EXIT_OK : FL_EXIT_USAGE;
    const char *dst = cl.pos[0];
    const int json = io.json;
    if (!dst) {
        fl_cli_error(PD_TOOL, "info: needs DST (see packdata info --help)");
        return FL_EXIT_USAGE;
    }
    fl_dataset *ds;
    int r = open_ds(dst, 1, &ds);
    if (r)
        return r;
    const fl_schema *sc = fl_dataset_schema(ds);
    const char *manifest = fl_dataset_manifest_json(ds);
    fl_jdoc *mdoc = NULL; /* the manifest parsed (it parsed when the dataset opened) */
    fl_error jerr;
    if (manifest && fl_jparse(manifest, strlen(manifest), "manifest", &mdoc, &jerr))
        mdoc = NULL;
    uint32_t nc = fl_dataset_num_classes(ds);
    char version[64] = "?", part[64] = "", created[64] = "";
    manifest_text(mdoc, manifest, "packdata_version", version, sizeof version);
    unsigned part_i = 0, part_n = 0;
    if (!manifest_part(mdoc, &part_i, &part_n) && part_n)
        snprintf(part, sizeof part, "%u/%u", part_i, part_n);
    manifest_text(mdoc, manifest, "created", created, sizeof created);
    /* A directory of --part datasets opens as one: its synthesized manifest says part 0/N, but it
     * is all N parts, not the first. */
    const int combined = !strcmp(version, "combined parts") && part_n;
    if (combined)
        snprintf(part, sizeof part, "all %u parts (combined)", part_n);
    if (json) {
        fl_json j;
        fl_json_init(&j);
        fl_json_begin_object(&j);
        fl_json_key(&j, "path");
        fl_json_string(&j, dst);
        fl_json_key(&j, "records");
        fl_json_uint(&j, fl_dataset_count(ds));
        fl_json_key(&j, "classes");
        fl_json_begin_array(&j);
        for (uint32_t i = 0; i < nc; i++)
            fl_json_string(&j, fl_dataset_class_name(ds, i));
        fl_json_end_array(&j);
        fl_json_key(&j, "num_classes");
        fl_json_uint(&j, nc);
        fl_json_key(&j, "shards");
        fl_json_uint(&j, fl_dataset_num_shards(ds));
        fl_json_key(&j, "bytes");
        fl_json_uint(&j, fl_dataset_total_bytes(ds));
        fl_json_key(&j, "encoding");
        fl_json_string(&j, enc_str(sc->encoding));
        fl_json_key(&j, "compression");
        fl_json_string(&j, sc->compression == FL_COMP_ZSTD ? "zstd" : "none");
        fl_json_key(&j, "channels");
        fl_json_uint(&j, sc->channels);
        fl_json_key(&j, "height");
        fl_json_uint(&j, sc->height);
        fl_json_key(&j, "width");
        fl_json_uint(&j, sc->width);
        fl_json_key(&j, "backend");
        fl_json_string(&j, fl_dataset_backend(ds) == FL_BACKEND_LMDB ? "lmdb" : "shards");
        fl_json_key(&j, "version");
        fl_json_string(&j, version);
        fl_json_key(&j, "part");
        if (part[0] && !combined)
            fl_json_string(&j, part);
        else
            fl_json_null(&j);
        if (combined) {
            fl_json_key(&j, "parts_combined");
            fl_json_uint(&j, part_n);
        }
        fl_json_key(&j, "format_version");
        fl_json_uint(&j, fl_dataset_format_version(ds));
        fl_json_key(&j, "fields");
        pd_fields_json(&j, fl_dataset_fields(ds), fl_dataset_num_fields(ds));
        fl_json_key(&j, "manifest");
        if (manifest && (manifest[0] == '{' || manifest[strspn(manifest, " \n\t")] == '{'))
            fl_json_raw(&j, manifest);
        else
            fl_json_null(&j);
        fl_json_end_object(&j);
        printf("%s\n", fl_json_text(&j));
        fl_json_free(&j);
    } else {
        char b[32];
        printf("dataset:     %s\n", dst);
        printf("records:     %" PRIu64 "\n", fl_dataset_count(ds));
        printf("classes:     %u:", nc);
        /* names are the data set's: shown escaped, a long list summarised (--json has them all) */
        char shown[1024];
        for (uint32_t i = 0; i < nc && i < 50; i++)
            printf(" %s%s", fl_text_escape(fl_dataset_class_name(ds, i), 0, shown, sizeof shown),
                   i + 1 < nc ? "," : "");
        if (nc > 50)
            printf(" ... (%u more: info --json lists them all)", nc - 50);
        printf("\n");
        printf("backend:     %s\n", fl_dataset_backend(ds) == FL_BACKEND_LMDB ? "lmdb" : "shards");
        printf("shards:      %u\n", fl_dataset_num_shards(ds));
        printf("bytes:       %" PRIu64 " (%s)\n", fl_dataset_total_bytes(ds),
               fl_cli_human_bytes(fl_dataset_total_bytes(ds), b, sizeof b));
        printf("encoding:    %s\n", enc_str(sc->encoding));
        if (sc->encoding == FL_ENC_NONE)
            printf("schema:      no image: each record is its fields\n");
        else if (sc->width)
            printf("schema:      %ux%u, %u channel%s (fixed size)\n", sc->width, sc->height,
                   sc->channels, sc->channels == 1 ? "" : "s");
        else
            printf("schema:      variable size, %u channel%s\n", sc->channels,
                   sc->channels == 1 ? "" : "s");
        printf("compression: %s\n", sc->compression == FL_COMP_ZSTD ? "zstd" : "none");
        uint32_t nf = fl_dataset_num_fields(ds);
        const fl_field *fs = fl_dataset_fields(ds);
        if (!fl_fields_is_classic(fs, nf)) {
            printf("fields:      %u\n", nf);
            for (uint32_t i = 0; i < nf; i++) {
                char d[256];
                pd_field_describe(fs, nf, i, d, sizeof d);
                printf("  %-14s %s\n", fs[i].name, d);
            }
        }
        if (part[0])
            printf("part:        %s\n", part);
        /* the dataset's own format version (version 1 datasets still open), not the writer's */
        const fl_jnode *fv = mdoc ? fl_jget(fl_jroot(mdoc), "format_version") : NULL;
        unsigned fmt = fv && fv->is_int ? (unsigned)fv->ival : FL_FORMAT_VERSION;
        printf("version:     packdata %s (format %u)\n", version, fmt);
        if (created[0])
            printf("created:     %s\n", created);
        char opts[2048];
        if (!manifest_text(mdoc, manifest, "options", opts, sizeof opts))
            printf("options:     %s\n", opts);
    }
    fl_jfree(mdoc);
    fl_dataset_close(ds);
    return FL_EXIT_OK;
}

/* ---- verify -------------------------------------------------------------------------------- */

typedef struct verify_ctx {
    const fl_dataset *ds;
    fl_json *j;
    uint64_t bad;
} verify_ctx;

static void report_bad(verify_ctx *v, uint64_t i, const char *why)
{
    fl_record_info ri;
    memset(&ri, 0, sizeof ri);
    fl_dataset_record_info(v->ds, i, &ri, NULL);
    size_t nl = 0;
    const char *name = fl_dataset_record_name(v->ds, i, &nl);
    v->bad++;
    char shown[1024], swhy[2048];
    fprintf(stderr, PD_TOOL ": bad record %" PRIu64 " (shard %u, source %s): %s\n", i, ri.shard,
            shown_name(name, nl, shown, sizeof shown), fl_text_escape(why, 0, swhy, sizeof swhy));
    if (v->j) {
        fl_json_begin_object(v->j);
        fl_json_key(v->j, "index");
        fl_json_uint(v->j, i);
        fl_json_key(v->j, "shard");
        fl_json_uint(v->j, ri.shard);
        fl_json_key(v->j, "name");
        fl_json_string_n(v->j, name ? name : "", name ? nl : 0);
        fl_json_key(v->j, "error");
        fl_json_string(v->j, why);
        fl_json_end_object(v->j);
    }
}

static int verify_cb(void *user, uint64_t index, const fl_error *err)
{
    report_bad(user, index, err->msg[0] ? err->msg : fl_strerror(err->code));
    return 0;
}

typedef struct verify_opts {
    int decode, json, quiet;
} verify_opts;

static const fl_cli_opt verify_table[] = {
    {FL_CLI_FLAG, "decode", .off = FL_CLI_FIELD(verify_opts, decode),
     .help = "also decode every image (JPEG/PNG/WebP, each in its record's format)\n"
             "or check every raw record's size, and decode every mask"},
    {FL_CLI_FLAG, "json", .off = FL_CLI_FIELD(verify_opts, json),
     .help = "one JSON object on stdout (bad_records, records, bad, ok, seconds)"},
    {FL_CLI_FLAG, "quiet", 'q', .off = FL_CLI_FIELD(verify_opts, quiet),
     .help = "no progress bar, no summary line unless a record is bad"},
    {FL_CLI_END},
};

static int verify_run(const fl_cli_tool *tool, int argc, char **argv);

const fl_cli_cmd pd_verify_cmd = {
    .name = "verify",
    .args = "DST [--decode]",
    .summary = "check every record's checksum (and that each image decodes)",
    .synopsis =
        "usage: packdata verify DST [--decode] [--json] [--quiet]\n"
        "\n"
        "Check every record's CRC32C (and that compressed records decompress) and, in a dataset\n"
        "with fields, every record's fields (lengths, counts, boxes inside the image, lists as "
        "long\n"
        "as their boxes, ndarrays decompress to their shape). With --decode, also decode every\n"
        "image or check every raw record's size, and decode every mask at its image's size. Each\n"
        "bad record is named (index, shard, source name). Exit status 1 when any record is bad.\n"
        "\n",
    .opts = verify_table,
    .max_pos = 1,
    .run = verify_run,
};

static int verify_run(const fl_cli_tool *tool, int argc, char **argv)
{
    verify_opts vo = {0};
    fl_cli_parsed cl;
    int pr = fl_cli_parse(tool, &pd_verify_cmd, argc, argv, &vo, &cl);
    if (pr != FL_CLI_RUN)
        return pr == FL_CLI_DONE ? FL_EXIT_OK : FL_EXIT_USAGE;
    const char *dst = cl.pos[0];
    const int decode = vo.decode, json = vo.json, quiet = vo.quiet;
    if (!dst) {
        fl_cli_error(PD_TOOL, "verify: needs DST (see packdata verify --help)");
        return FL_EXIT_USAGE;
    }
    fl_dataset *ds;
    int r = open_ds(dst, 0, &ds);
    if (r) {
        if (json)
            printf("{\"path\":\"%s\",\"ok\":false,\"error\":\"cannot open\"}\n", "");
        return r;
    }
    double t0 = fl_now_s();
    fl_json j;
    fl_json_init(&j);
    verify_ctx v = {ds, json ? &j : NULL, 0};
    if (json) {
        fl_json_begin_object(&j);
        fl_json_key(&j, "bad_records");
        fl_json_begin_array(&j);
    }
    uint64_t n = fl_dataset_count(ds);
    fl_error err;
    fl_error_clear(&err);
    int status = FL_EXIT_OK;
    if (!decode) {
        uint64_t nbad = 0;
        r = fl_dataset_verify(ds, verify_cb, &v, &nbad, &err);
        if (r && r != FL_E_CHECKSUM) {
            fl_cli_error(PD_TOOL, "%s", err.msg[0] ? err.msg : fl_strerror(r));
            status = FL_EXIT_DATA;
        }
    } else {
        const fl_schema *sc = fl_dataset_schema(ds);
        size_t cap = fl_dataset_max_raw_len(ds) + 1;
        uint8_t *buf = malloc(cap);
        fl_decoder *dec = NULL;
        if (!buf || fl_decoder_create(0, &dec, &err)) {
            fl_cli_error(PD_TOOL, "out of memory");
            free(buf);
            fl_dataset_close(ds);
            fl_json_free(&j);
            return FL_EXIT_DATA;
        }
        const int with_fields =
            !fl_fields_is_classic(fl_dataset_fields(ds), fl_dataset_num_fields(ds));
        pd_fields_scratch fsc = {0};
        fl_progress *p = fl_progress_start("verifying", n, "rec", quiet || json);
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *data, *pl;
            size_t len, pll;
            fl_record_info ri;
            fl_error_clear(&err);
            if ((r = fl_dataset_record_info(ds, i, &ri, &err)) ||
                (r = fl_dataset_get(ds, i, &data, &len, 1, &err)) ||
                (r = fl_dataset_payload(ds, i, data, len, buf, cap, &pl, &pll, &err))) {
                report_bad(&v, i, err.msg[0] ? err.msg : fl_strerror(r));
                continue;
            }
            fl_progress_update(p, i + 1);
            if (with_fields && (r = pd_fields_check(ds, i, data, len, &fsc, &err))) {
                report_bad(&v, i, err.msg[0] ? err.msg : fl_strerror(r));
                continue;
            }
            if (ri.format == FL_ENC_NONE)
                continue; /* a record without an image */
            /* each record in its own format (a mixed dataset holds JPEG, PNG and WebP) */
            fl_image_info pi;
            if (ri.format == FL_ENC_RAW) {
                uint64_t want = (uint64_t)ri.height * ri.width * sc->channels;
                if (pll != want) {
                    char why[160];
                    snprintf(why, sizeof why, "raw payload is %zu bytes, want %ux%ux%u = %" PRIu64,
                             pll, ri.width, ri.height, sc->channels, want);
                    report_bad(&v, i, why);
                }
            } else if (img_format_of(ri.format) == FL_IMG_UNKNOWN) {
                char why[80];
                snprintf(why, sizeof why, "unknown record format %d", (int)ri.format);
                report_bad(&v, i, why);
            } else if (fl_image_probe(pl, pll, &pi, NULL) == 0 &&
                       pi.format != img_format_of(ri.format)) {
                char why[160];
                snprintf(why, sizeof why, "the index says %s but the payload is %s",
                         enc_str(ri.format), fl_image_format_name(pi.format));
                report_bad(&v, i, why);
            } else {
                fl_image img;
                r = fl_decode(dec, pl, pll, sc->channels, 0, 0, &img, &err);
                if (r) {
                    report_bad(&v, i, err.msg[0] ? err.msg : fl_strerror(r));
                } else if (img.width != ri.width || img.height != ri.height) {
                    char why[160];
                    snprintf(why, sizeof why, "decodes to %ux%u but the index says %ux%u",
                             img.width, img.height, ri.width, ri.height);
                    report_bad(&v, i, why);
                }
            }
        }
        fl_progress_finish(p);
        pd_fields_scratch_free(&fsc);
        fl_decoder_free(dec);
        free(buf);
    }
    double el = fl_now_s() - t0;
    if (v.bad)
        status = FL_EXIT_DATA;
    if (json) {
        fl_json_end_array(&j);
        fl_json_key(&j, "path");
        fl_json_string(&j, dst);
        fl_json_key(&j, "records");
        fl_json_uint(&j, n);
        fl_json_key(&j, "bad");
        fl_json_uint(&j, v.bad);
        fl_json_key(&j, "decoded");
        fl_json_bool(&j, decode);
        fl_json_key(&j, "ok");
        fl_json_bool(&j, status == FL_EXIT_OK);
        fl_json_key(&j, "seconds");
        fl_json_double(&j, el);
        fl_json_end_object(&j);
        printf("%s\n", fl_json_text(&j));
    } else if (!quiet || v.bad) {
        char t[32];
        fprintf(stderr, PD_TOOL ": %s: %" PRIu64 " records checked%s, %" PRIu64 " bad (%s)\n", dst,
                n, decode ? " and decoded" : "", v.bad, fl_cli_human_duration(el, t, sizeof t));
    }
    fl_json_free(&j);
    fl_dataset_close(ds);
    return status;
}

/* ---- extract ------------------------------------------------------------------------------- */

typedef struct extract_opts {
    const char *output;
    int pnm;
    int force;
} extract_opts;

static const fl_cli_opt extract_table[] = {
    {FL_CLI_TEXT, "output", 'o', .off = FL_CLI_FIELD(extract_opts, output), .metavar = "FILE",
     .help = "where to write (- for stdout); in a dataset with fields, the PREFIX of\n"
             "every file written",
     .def = "the record's source name"},
    {FL_CLI_FLAG, "pnm", .off = FL_CLI_FIELD(extract_opts, pnm),
     .help = "raw records as PGM/PPM instead of PNG"},
    {FL_CLI_FLAG, "force", .off = FL_CLI_FIELD(extract_opts, force),
     .help = "replace files of the names extract chose itself (without -o, existing\n"
             "files are never replaced: run beside the sources, they are the originals)"},
    {FL_CLI_END},
};

static int extract_run(const fl_cli_tool *tool, int argc, char **argv);

const fl_cli_cmd pd_extract_cmd = {
    .name = "extract",
    .args = "DST INDEX [-o F]",
    .summary = "write one record's image (original bytes, or raw pixels as PNG) and fields",
    .synopsis =
        "usage: packdata extract DST INDEX [-o FILE|PREFIX] [--pnm]\n"
        "\n"
        "Write record INDEX's payload to FILE: the original bytes for kept JPEG/PNG/WebP records, "
        "the\n"
        "stored JPEG for re-encoded ones, raw pixels as PNG (or as PGM/PPM with --pnm). The "
        "default file\n"
        "name comes from the record's source name (in the current directory), with the extension "
        "of\n"
        "the record's format (a PNG kept from photo.JPEG is written as photo.png); -o - writes to "
        "stdout.\n"
        "Prints the label and source name on stderr. A file of a default name that exists is\n"
        "never replaced (exit 1; --force replaces it): run beside the sources, it would be the\n"
        "original, and a re-encoded pack's image is not. A file named with -o is replaced.\n"
        "\n"
        "In a dataset with fields (COCO, mask pairs, --field), the record becomes several files\n"
        "named from PREFIX (-o PREFIX; default: the source name without its extension, in the\n"
        "current directory):\n"
        "  PREFIX.jpg|.png|.webp   the image, as above\n"
        "  PREFIX.json             index, name, height, width and every number field: ints,\n"
        "                          floats, int lists, float vectors, boxes as [[x0,y0,x1,y1],...]\n"
        "                          (float32 pixels of the stored image, x1/y1 exclusive) with the\n"
        "                          per-box lists (labels, iscrowd) beside them; fields written\n"
        "                          apart appear as their file name\n"
        "  PREFIX.NAME.png         a mask field: 8/16-bit gray PNG of class ids\n"
        "  PREFIX.NAME.npy         an ndarray field (NumPy .npy)\n"
        "  PREFIX.NAME.txt / .bin  a text / bytes field, its bytes as stored\n"
        "A record without an image (pack --no-image) writes no image file, and its default "
        "PREFIX is\n"
        "its whole source name (FILE:LINE, e.g. meta.jsonl:3).\n"
        "\n",
    .opts = extract_table,
    .max_pos = 2,
    .run = extract_run,
};

/* The default output name: the last path component of the source name ('#', '\' and control
 * characters become '_'), or record_INDEX when that is empty. */
static void extract_default_base(const char *name, size_t nl, uint64_t index, char *base,
                                 size_t cap)
{
    size_t s = 0;
    for (size_t i = 0; i < nl; i++)
        if (name[i] == '/')
            s = i + 1;
    size_t k = 0;
    for (size_t i = s; i < nl && k < cap - 16; i++) {
        char c = name[i];
        base[k++] = (c == '#' || c == '\\' || (unsigned char)c < 0x20) ? '_' : c;
    }
    base[k] = 0;
    if (!k)
        snprintf(base, cap, "record_%" PRIu64, index);
}

/* The image file extract writes: bytes (the payload, pnmbuf or the encoder's output) and the
 * extension to give it (NULL: the source name's own fits). */
typedef struct extract_image {
    const uint8_t *out;
    size_t out_len;
    const char *ext;
    uint8_t *pnmbuf; /* owned */
    fl_encoder *enc; /* owned; holds out after PNG encoding */
} extract_image;

/* A raw record as PGM/PPM (--pnm) or PNG. Returns 0, 1 after printing the error, or -ENOMEM. */
static int extract_raw(const char *dst, uint64_t index, const fl_schema *sc,
                       const fl_record_info *ri, const uint8_t *pl, size_t pll, int pnm,
                       extract_image *im)
{
    uint64_t want = (uint64_t)ri->height * ri->width * sc->channels;
    if (pll != want || (sc->channels != 1 && sc->channels != 3)) {
        fl_cli_error(PD_TOOL, "%s: record %" PRIu64 ": raw payload is %zu bytes, want %ux%ux%u",
                     dst, index, pll, ri->width, ri->height, sc->channels);
        return 1;
    }
    if (pnm) {
        char hdr[64];
        int hl = snprintf(hdr, sizeof hdr, "P%c\n%u %u\n255\n", sc->channels == 1 ? '5' : '6',
                          ri->width, ri->height);
        if (!(im->pnmbuf = malloc((size_t)hl + pll)))
            return -ENOMEM;
        memcpy(im->pnmbuf, hdr, (size_t)hl);
        memcpy(im->pnmbuf + hl, pl, pll);
        im->out = im->pnmbuf;
        im->out_len = (size_t)hl + pll;
        im->ext = sc->channels == 1 ? ".pgm" : ".ppm";
        return 0;
    }
    fl_image img = {(uint8_t *)pl, ri->width, ri->height, sc->channels,
                    (size_t)ri->width * sc->channels};
    fl_error err;
    fl_error_clear(&err);
    if (fl_encoder_create(&im->enc, &err) ||
        fl_encode_png(im->enc, &img, &im->out, &im->out_len, &err)) {
        fl_cli_error(PD_TOOL, "%s: record %" PRIu64 ": PNG encoding failed: %s", dst, index,
                     err.msg);
        return 1;
    }
    im->ext = ".png";
    return 0;
}

/* The extension for stored bytes of format f: NULL when base's own extension fits that format;
 * otherwise the format's, with an image extension that lies (a PNG named .JPEG) cut from base. */
static const char *stored_ext(char *base, fl_image_format f)
{
    static const char *const exts[4][4] = {
        {NULL}, {".jpg", ".jpeg", ".jpe", NULL}, {".png", NULL}, {".webp", NULL}};
    char *dot = strrchr(base, '.');
    int fits = 0, lies = 0;
    for (int k = 1; k < 4 && dot; k++)
        for (int e = 0; exts[k][e]; e++)
            if (!strcasecmp(dot, exts[k][e])) {
                if (k == (int)f)
                    fits = 1;
                else
                    lies = 1;
            }
    if (fits)
        return NULL;
    if (lies)
        *dot = 0;
    return exts[f][0];
}

/* Fills im with the record's image as extract writes it (nothing for a record without one).
 * Returns 0, 1 after printing the error, or -ENOMEM. */
static int extract_image_of(const char *dst, uint64_t index, const fl_schema *sc,
                            const fl_record_info *ri, const uint8_t *pl, size_t pll, int pnm,
                            char *base, extract_image *im)
{
    im->out = pl;
    im->out_len = pll;
    if (ri->format == FL_ENC_NONE)
        return 0; /* a record without an image: only its fields */
    if (ri->format == FL_ENC_RAW)
        return extract_raw(dst, index, sc, ri, pl, pll, pnm, im);
    /* the stored bytes as they are, named for the record's own format */
    fl_image_format f = img_format_of(ri->format);
    if (f == FL_IMG_UNKNOWN) {
        fl_cli_error(PD_TOOL, "%s: record %" PRIu64 ": unknown record format %d", dst, index,
                     (int)ri->format);
        return 1;
    }
    im->ext = stored_ext(base, f);
    return 0;
}

/* The image's output path (*outp; NULL: no image to write) and, with fields, the PREFIX of the
 * other files (*prefix: -o, else the source name without its extension). *fname and *prefix are
 * the caller's to free. Returns 0 or -ENOMEM. */
static int extract_names(const char *base, const char *ext, int with_fields, int has_image,
                         const char **outp, char **fname, char **prefix)
{
    if (with_fields) {
        char *dot = strrchr(base, '.');
        const char *img_ext = ext ? ext : dot ? dot : ""; /* no ext: the source's own fits */
        if (!(*prefix = strdup(*outp ? *outp : base)))
            return -ENOMEM;
        /* the extension of an image's name; a record without one is named FILE:LINE, whose
         * dot is the list file's ("meta.jsonl:3"), so its whole name is the prefix */
        if (!*outp && dot && dot != base && has_image)
            (*prefix)[dot - base] = 0;
        if (has_image && asprintf(fname, "%s%s", *prefix, img_ext) < 0) {
            *fname = NULL;
            return -ENOMEM;
        }
        *outp = *fname;
    } else if (!*outp) {
        if (asprintf(fname, "%s%s", base, ext ? ext : "") < 0) {
            *fname = NULL;
            return -ENOMEM;
        }
        *outp = *fname;
    }
    return 0;
}

/* Writes the record's fields as files named from prefix and says where each went. */
static int extract_fields(fl_dataset *ds, uint64_t index, const fl_record_info *ri,
                          const char *name, size_t nl, const uint8_t *data, size_t len,
                          const char *prefix, const char *outp, int replace)
{
    char shown[1024], size[48] = "no image";
    if (ri->format != FL_ENC_NONE)
        snprintf(size, sizeof size, "%ux%u", ri->width, ri->height);
    fprintf(stderr, PD_TOOL ": record %" PRIu64 " (%s, source %s):\n", index, size,
            shown_name(name, nl, shown, sizeof shown));
    if (outp)
        fprintf(stderr, PD_TOOL ":   image -> %s\n", outp);
    fl_error err;
    fl_error_clear(&err);
    pd_fields_scratch fsc = {0};
    int r = pd_fields_extract(ds, index, data, len, prefix, outp, replace, &fsc, stderr, &err);
    pd_fields_scratch_free(&fsc);
    if (r) {
        fl_cli_error(PD_TOOL, "%s", err.msg[0] ? err.msg : fl_strerror(r));
        return FL_EXIT_DATA;
    }
    return FL_EXIT_OK;
}

static int extract_run(const fl_cli_tool *tool, int argc, char **argv)
{
    extract_opts eo = {0};
    fl_cli_parsed cl;
    int pr = fl_cli_parse(tool, &pd_extract_cmd, argc, argv, &eo, &cl);
    if (pr != FL_CLI_RUN)
        return pr == FL_CLI_DONE ? FL_EXIT_OK : FL_EXIT_USAGE;
    const char *dst = cl.pos[0], *idx = cl.pos[1], *outp = eo.output;
    uint64_t index;
    if (!dst || !idx) {
        fl_cli_error(PD_TOOL, "extract: needs DST and INDEX (see packdata extract --help)");
        return FL_EXIT_USAGE;
    }
    if (fl_cli_parse_u64(idx, 0, UINT64_MAX, &index)) {
        fl_cli_error(PD_TOOL, "extract: INDEX must be a record number (got '%s')", idx);
        return FL_EXIT_USAGE;
    }
    if (outp && strcmp(outp, "-") && fl_file_clobbers(outp, dst)) {
        fl_cli_error(PD_TOOL,
                     "extract: -o %s is in the folder of the dataset %s: it would replace or add "
                     "to the dataset's files; write it elsewhere (nothing was written)",
                     outp, dst);
        return FL_EXIT_USAGE;
    }
    fl_dataset *ds;
    int r = open_ds(dst, 0, &ds);
    if (r)
        return r;
    int status = FL_EXIT_DATA;
    uint64_t n = fl_dataset_count(ds);
    uint8_t *buf = NULL;
    extract_image im = {0};
    char *fname = NULL, *prefix = NULL;
    fl_error err;
    fl_error_clear(&err);
    if (index >= n) {
        fl_cli_error(PD_TOOL,
                     "%s: record %" PRIu64 " does not exist (%" PRIu64 " records: 0..%" PRIu64 ")",
                     dst, index, n, n ? n - 1 : 0);
        goto out;
    }
    fl_record_info ri;
    const uint8_t *data, *pl;
    size_t len, pll;
    size_t cap = fl_dataset_max_raw_len(ds) + 1;
    if (!(buf = malloc(cap)))
        goto oom;
    if ((r = fl_dataset_record_info(ds, index, &ri, &err)) ||
        (r = fl_dataset_get(ds, index, &data, &len, 1, &err)) ||
        (r = fl_dataset_payload(ds, index, data, len, buf, cap, &pl, &pll, &err))) {
        fl_cli_error(PD_TOOL, "%s", err.msg[0] ? err.msg : fl_strerror(r));
        goto out;
    }
    size_t nl;
    const char *name = fl_dataset_record_name(ds, index, &nl);
    const int with_fields = !fl_fields_is_classic(fl_dataset_fields(ds), fl_dataset_num_fields(ds));
    if (with_fields && outp && !strcmp(outp, "-")) {
        fl_cli_error(PD_TOOL,
                     "extract: a record with fields is written as several files: -o takes a "
                     "PREFIX for their names, not - (see packdata extract --help)");
        status = FL_EXIT_USAGE;
        goto out;
    }
    char base[512];
    extract_default_base(name, nl, index, base, sizeof base);
    r = extract_image_of(dst, index, fl_dataset_schema(ds), &ri, pl, pll, eo.pnm, base, &im);
    if (r == -ENOMEM)
        goto oom;
    if (r)
        goto out;
    if (extract_names(base, im.ext, with_fields, ri.format != FL_ENC_NONE, &outp, &fname, &prefix))
        goto oom;
    const int replace = eo.output || eo.force; /* a name the user gave is theirs to replace */
    r = outp ? pd_write_output(outp, im.out, im.out_len, replace) : 0;
    if (r) {
        fl_cli_error(PD_TOOL, "%s: cannot write: %s", outp, pd_write_why(r));
        goto out;
    }
    if (with_fields) {
        status = extract_fields(ds, index, &ri, name, nl, data, len, prefix, outp, replace);
        goto out;
    }
    char shown[1024], scls[1024], sout[4096];
    const char *cls = fl_dataset_class_name(ds, (uint32_t)ri.label);
    fprintf(stderr, PD_TOOL ": record %" PRIu64 " (label %d %s, %ux%u, source %s) -> %s\n", index,
            ri.label, fl_text_escape(cls ? cls : "?", 0, scls, sizeof scls), ri.width, ri.height,
            shown_name(name, nl, shown, sizeof shown), fl_text_escape(outp, 0, sout, sizeof sout));
    status = FL_EXIT_OK;
    goto out;
oom:
    fl_cli_error(PD_TOOL, "out of memory");
out:
    free(fname);
    free(prefix);
    free(im.pnmbuf);
    if (im.enc)
        fl_encoder_free(im.enc);
    free(buf);
    fl_dataset_close(ds);
    return status;
}
