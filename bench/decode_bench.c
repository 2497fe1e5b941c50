/* decode_bench.c — fl_decode_bench: single-core decode rates of JPEG files, measured in one run:
 * full-size decode (fl_decode and plain TurboJPEG tjDecompress2) against the loader's hot path,
 * random-resized-crop with DCT-scaled cropped decode + resample to S×S (fl_decode_crop_resize).
 *   fl_decode_bench [--json] [--seconds T] [--size S] [--reencode Q[:MAXSIDE]] [--fast] FILE...
 * --reencode decodes each input (JPEG or PNG) and re-encodes it in memory as a JPEG of quality Q
 * (longest side shrunk to MAXSIDE), so photographs shipped as PNG can be measured as JPEGs.
 * --restart N rewrites every input losslessly with restart markers every N MCUs (a divisor of the
 * MCU row; 0 = one interval per row) with fl_jpeg_add_restarts, which lets the crop path decode
 * only the intervals the crop touches; --no-skip keeps the crop path from using them
 * (FL_DECODE_NO_RESTART_SKIP), for comparison. --index keeps each file's JPEG entry-point index
 * (fl_decoder_set_jpeg_index) from pass to pass, as the loader keeps one per record.
 * The full-size figure (the naive limit) is stock libjpeg-turbo: fl_decode with libjpeg's own
 * Huffman decoder (FL_DECODE_LIBJPEG_HUFFMAN); fl_full_decode_per_sec is fl_decode as the loader
 * runs it (fastload's Huffman decoder). --libjpeg-huffman makes the crop path use libjpeg's too. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <turbojpeg.h>

#include "fl_image.h"

typedef struct blob {
    uint8_t *data;
    size_t len;
    uint32_t w, h;
    void *index; /* --index: the entry-point index learned by earlier crop decodes */
    size_t index_len;
} blob;

static int use_index; /* --index */
static int one_pass;  /* run_mode: stop after one pass over the files */

static double now(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int read_file(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n <= 0) {
        fclose(f);
        return -EINVAL;
    }
    *data = malloc((size_t)n);
    *len = fread(*data, 1, (size_t)n, f);
    fclose(f);
    return *len == (size_t)n ? 0 : -EIO;
}

/* Random-resized-crop parameters as torchvision draws them (area 8–100%, ratio 3/4–4/3),
 * from a small deterministic generator, falling back to the whole image. */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (rng >> 11) * (1.0 / 9007199254740992.0);
}
static fl_rect rrc(uint32_t w, uint32_t h)
{
    for (int t = 0; t < 10; t++) {
        double area = w * (double)h * (0.08 + 0.92 * urand());
        double ratio = exp(log(3.0 / 4) + urand() * (log(4.0 / 3) - log(3.0 / 4)));
        uint32_t cw = (uint32_t)lround(sqrt(area * ratio)),
                 ch = (uint32_t)lround(sqrt(area / ratio));
        if (cw >= 1 && ch >= 1 && cw <= w && ch <= h) {
            fl_rect r = {(uint32_t)(urand() * (w - cw + 1)), (uint32_t)(urand() * (h - ch + 1)), cw,
                         ch};
            if (r.x + cw > w)
                r.x = w - cw;
            if (r.y + ch > h)
                r.y = h - ch;
            return r;
        }
    }
    fl_rect r = {0, 0, w, h};
    return r;
}

typedef struct rate {
    double per_sec, per_cpu_sec;
    long count; /* images decoded */
} rate;

enum { MODE_FULL, MODE_TJ, MODE_CROP, MODE_SCALED, MODE_FLFULL };

static int run_mode(int mode, blob *b, int n, double seconds, uint32_t size, fl_decoder *d,
                    tjhandle tj, uint8_t *buf, rate *out)
{
    fl_error err;
    long count = 0;
    double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID), t1;
    rng = 0x9E3779B97F4A7C15ull; /* same crops in every run */
    do {
        for (int i = 0; i < n; i++, count++) {
            fl_image img;
            int rc = 0;
            if (mode == MODE_FULL || mode == MODE_FLFULL) {
                rc = fl_decode(d, b[i].data, b[i].len, 3, 0, 0, &img, &err);
            } else if (mode == MODE_SCALED) {
                rc = fl_decode(d, b[i].data, b[i].len, 3, size, size, &img, &err);
            } else if (mode == MODE_TJ) {
                if (tjDecompress2(tj, b[i].data, (unsigned long)b[i].len, buf, (int)b[i].w, 0,
                                  (int)b[i].h, TJPF_RGB, 0) != 0 &&
                    tjGetErrorCode(tj) == TJERR_FATAL) {
                    fprintf(stderr, "tjDecompress2: %s\n", tjGetErrorStr2(tj));
                    return 1;
                }
            } else {
                fl_rect r = rrc(b[i].w, b[i].h);
                if (use_index)
                    fl_decoder_set_jpeg_index(d, b[i].index, b[i].index_len);
                rc = fl_decode_crop_resize(d, b[i].data, b[i].len, &r, size, size, 3,
                                           (int)(count & 1), buf, &err);
                const void *ix;
                size_t ixn = use_index && !rc ? fl_decoder_jpeg_index(d, &ix) : 0;
                if (ixn) { /* as the loader keeps it: the grown index replaces the old */
                    void *copy = malloc(ixn);
                    if (copy) {
                        memcpy(copy, ix, ixn);
                        free(b[i].index);
                        b[i].index = copy;
                        b[i].index_len = ixn;
                    }
                }
            }
            if (rc) {
                fprintf(stderr, "decode failed: %s\n", err.msg);
                return 1;
            }
            /* Many files: stop mid-pass once the time is up (checked every 16 images). */
            if (!one_pass && (count & 15) == 15 && now(CLOCK_MONOTONIC) - t0 >= seconds) {
                count++;
                goto done;
            }
        }
    } while (!one_pass && now(CLOCK_MONOTONIC) - t0 < seconds);
done:
    t1 = now(CLOCK_MONOTONIC);
    out->per_sec = count / (t1 - t0);
    out->per_cpu_sec = count / (now(CLOCK_PROCESS_CPUTIME_ID) - c0);
    out->count = count;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fl_decode_bench [--json] [--seconds T] [--size S] [--reencode Q[:MAXSIDE]] "
               "[--fast] [--restart N] [--no-skip] FILE...\n"
               "  single-core images/s: full-size decode vs random-resized-crop decode to SxS "
               "(default 224)\n"
               "  --fast: crop path with FL_DECODE_FAST (box chroma upsampling, fast IDCT)\n"
               "  --restart N: rewrite inputs with restart markers every N MCUs (0: per MCU row; "
               "lossless)\n"
               "  --no-skip: crop path does not start at restart markers\n"
               "  --index: crop path keeps each file's JPEG entry-point index from pass to pass\n"
               "           (as the loader does; learned in the warm-up pass)\n"
               "  --flags N: FL_DECODE_* bits for the crop path (1 box upsampling, 2 fast IDCT)\n"
               "  --libjpeg-huffman: crop path with libjpeg's own Huffman decoder\n"
               "  (the full-size figure always uses it: stock libjpeg-turbo, the naive limit)\n");
}

int main(int argc, char **argv)
{
    int json = 0, quality = 0, fast = 0, restart = 0, noskip = 0, libjpeg_huff = 0;
    uint32_t restart_mcus = 0;
    unsigned flags = 0; /* --flags N: raw FL_DECODE_* bits for the crop path */
    double orig_bytes = 0;
    const char *only = NULL; /* profiling aid: run one mode only */
    uint32_t size = 224, maxside = 0;
    double seconds = 1.0;
    int nfiles = 0;
    char **files = calloc((size_t)argc, sizeof *files);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--fast"))
            fast = 1;
        else if (!strcmp(argv[i], "--restart") && i + 1 < argc)
            restart = 1, restart_mcus = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--index"))
            use_index = 1;
        else if (!strcmp(argv[i], "--no-skip"))
            noskip = 1;
        else if (!strcmp(argv[i], "--libjpeg-huffman"))
            libjpeg_huff = 1;
        else if (!strcmp(argv[i], "--flags") && i + 1 < argc)
            flags = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reencode") && i + 1 < argc) {
            char *colon;
            quality = (int)strtol(argv[++i], &colon, 10);
            if (*colon == ':')
                maxside = (uint32_t)atoi(colon + 1);
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            usage(stderr);
            return 2;
        } else
            files[nfiles++] = argv[i];
    }
    if (nfiles == 0 || size == 0 || seconds <= 0 || (quality && (quality < 1 || quality > 100))) {
        usage(stderr);
        return 2;
    }
    fl_error err;
    fl_decoder *d;
    fl_encoder *e;
    if (fl_decoder_create(0, &d, &err) || fl_encoder_create(&e, &err)) {
        fprintf(stderr, "fl_decode_bench: %s\n", err.msg);
        return 1;
    }
    blob *b = calloc((size_t)nfiles, sizeof *b);
    int n = 0;
    double pixels = 0, bytes = 0;
    size_t maxpix = 0;
    for (int i = 0; i < nfiles; i++) {
        uint8_t *data = NULL;
        size_t len = 0;
        int rc = read_file(files[i], &data, &len);
        if (rc) {
            fprintf(stderr, "fl_decode_bench: %s: %s\n", files[i], fl_strerror(rc));
            return 1;
        }
        if (quality) {
            fl_image img;
            if (fl_decode(d, data, len, 3, 0, 0, &img, &err)) {
                fprintf(stderr, "fl_decode_bench: %s: %s\n", files[i], err.msg);
                return 1;
            }
            uint32_t w = img.width, h = img.height;
            if (maxside && (w > maxside || h > maxside)) {
                double s = (double)maxside / (w > h ? w : h);
                w = (uint32_t)lround(w * s), h = (uint32_t)lround(h * s);
                if (!w)
                    w = 1;
                if (!h)
                    h = 1;
            }
            uint8_t *px = malloc((size_t)w * h * 3);
            fl_resize(img.pixels, img.width, img.height, img.stride, 3, px, w, h, (size_t)w * 3, 0,
                      NULL, 0, NULL);
            fl_image small = {px, w, h, 3, (size_t)w * 3};
            const uint8_t *out;
            size_t out_len;
            if (fl_encode_jpeg(e, &small, quality, &out, &out_len, &err)) {
                fprintf(stderr, "fl_decode_bench: %s: %s\n", files[i], err.msg);
                return 1;
            }
            free(data);
            free(px);
            data = malloc(out_len);
            memcpy(data, out, out_len);
            len = out_len;
        }
        orig_bytes += (double)len;
        if (restart) {
            const uint8_t *out;
            size_t out_len;
            if (fl_jpeg_add_restarts(e, data, len, restart_mcus, &out, &out_len, &err)) {
                fprintf(stderr, "fl_decode_bench: %s: %s\n", files[i], err.msg);
                return 1;
            }
            free(data);
            data = malloc(out_len);
            memcpy(data, out, out_len);
            len = out_len;
        }
        fl_image_info info;
        if (fl_image_probe(data, len, &info, &err) || info.format != FL_IMG_JPEG) {
            fprintf(stderr, "fl_decode_bench: %s: not a JPEG (use --reencode Q for PNG inputs)\n",
                    files[i]);
            return 1;
        }
        b[n].data = data;
        b[n].len = len;
        b[n].w = info.width;
        b[n].h = info.height;
        pixels += (double)info.width * info.height;
        bytes += (double)len;
        if ((size_t)info.width * info.height > maxpix)
            maxpix = (size_t)info.width * info.height;
        n++;
    }
    /* The full-size figure is stock libjpeg-turbo (its own Huffman decoder, libjpeg's
     * defaults); --fast and the other flags apply to the crop path only. */
    fl_decoder *dcrop, *dfl;
    if (fl_decoder_create(0, &dcrop, &err) || fl_decoder_create(0, &dfl, &err))
        return 1;
    fl_decoder_set_flags(d, FL_DECODE_LIBJPEG_HUFFMAN);
    fl_decoder_set_flags(dcrop, flags | (fast ? FL_DECODE_FAST : 0) |
                                    (noskip ? FL_DECODE_NO_RESTART_SKIP : 0) |
                                    (libjpeg_huff ? FL_DECODE_LIBJPEG_HUFFMAN : 0));
    uint8_t *buf =
        malloc(maxpix * 3 > (size_t)size * size * 3 ? maxpix * 3 : (size_t)size * size * 3);
    tjhandle tj = tjInitDecompress();
    rate full, tjr, crop, scaled, flfull;
    if (only) {
        int mode = !strcmp(only, "full")     ? MODE_FULL
                   : !strcmp(only, "tj")     ? MODE_TJ
                   : !strcmp(only, "scaled") ? MODE_SCALED
                   : !strcmp(only, "flfull") ? MODE_FLFULL
                                             : MODE_CROP;
        fl_decoder *dm = mode == MODE_CROP ? dcrop : mode == MODE_FLFULL ? dfl : d;
        if (run_mode(mode, b, n, seconds, size, dm, tj, buf, &full))
            return 1;
        printf("%s: %.1f images/s, %.1f per CPU second (%ld images)\n", only, full.per_sec,
               full.per_cpu_sec, full.count);
        return 0;
    }
    /* Warm up the decoder's scratch and the caches (with --index: one whole pass, which
     * learns every file's index, as a loader's first epoch does), then measure. */
    one_pass = use_index;
    run_mode(MODE_CROP, b, n, 0.05, size, dcrop, tj, buf, &crop);
    one_pass = 0;
    if (run_mode(MODE_FULL, b, n, seconds, size, d, tj, buf, &full) ||
        run_mode(MODE_TJ, b, n, seconds, size, d, tj, buf, &tjr) ||
        run_mode(MODE_CROP, b, n, seconds, size, dcrop, tj, buf, &crop) ||
        run_mode(MODE_SCALED, b, n, seconds, size, d, tj, buf, &scaled) ||
        run_mode(MODE_FLFULL, b, n, seconds, size, dfl, tj, buf, &flfull))
        return 1;
    if (json) {
        printf(
            "{\"files\": %d, \"avg_megapixels\": %.4f, \"avg_bytes\": %.0f, \"size\": %u, "
            "\"full_decode_per_sec\": %.1f, \"tj_full_decode_per_sec\": %.1f, "
            "\"scaled_crop_per_sec\": %.1f, \"scaled_decode_per_sec\": %.1f, "
            "\"full_decode_per_cpu_sec\": %.1f, \"scaled_crop_per_cpu_sec\": %.1f, \"fast\": %s, "
            "\"restart\": %s, \"restart_skip\": %s, \"input_avg_bytes\": %.0f, "
            "\"fl_full_decode_per_sec\": %.1f, \"fl_full_decode_per_cpu_sec\": %.1f, "
            "\"crop_libjpeg_huffman\": %s}\n",
            n, pixels / n / 1e6, bytes / n, size, full.per_sec, tjr.per_sec, crop.per_sec,
            scaled.per_sec, full.per_cpu_sec, crop.per_cpu_sec, fast ? "true" : "false",
            restart ? "true" : "false", noskip ? "false" : "true", orig_bytes / n, flfull.per_sec,
            flfull.per_cpu_sec, libjpeg_huff ? "true" : "false");
    } else {
        printf("%d JPEG files, %.3f megapixels and %.0f bytes on average; one thread, %.1f s per "
               "mode\n",
               n, pixels / n / 1e6, bytes / n, seconds);
        printf("full-size decode (fl_decode, libjpeg API)   %9.1f images/s\n", full.per_sec);
        printf("  same, fastload's Huffman decoder          %9.1f images/s\n", flfull.per_sec);
        printf("full-size decode (TurboJPEG tjDecompress2)  %9.1f images/s\n", tjr.per_sec);
        printf("random-resized-crop decode -> %ux%u        %9.1f images/s  (%.2fx full-size)\n",
               size, size, crop.per_sec, crop.per_sec / full.per_sec);
        printf("DCT-scaled decode, side >= %u               %9.1f images/s  (%.2fx full-size)\n",
               size, scaled.per_sec, scaled.per_sec / full.per_sec);
    }
    tjDestroy(tj);
    for (int i = 0; i < n; i++) {
        free(b[i].data);
        free(b[i].index);
    }
    free(b);
    free(buf);
    free(files);
    fl_encoder_free(e);
    fl_decoder_free(dcrop);
    fl_decoder_free(dfl);
    fl_decoder_free(d);
    return 0;
}
