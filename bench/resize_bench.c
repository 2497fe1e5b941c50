/* resize_bench.c — fl_resize_bench: single-core cost of the loader's resample step
 * (fl_resize_window of a random-resized-crop window of a 400x350 RGB image to 224x224, flip on
 * half), at the best SIMD level this CPU has, at the AVX2 level where that is AVX-512, and at the
 * portable C level, measured in the same run. --cold writes each output to the next slot of a
 * 128 MiB ring, as the loader writes batch slots that are in no cache; without it one buffer is
 * reused and stays in L1/L2.
 *   fl_resize_bench [--json] [--cold] [--rounds R] [--seconds T] [--size S] [--channels C]
 *                   [--images N] */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image_internal.h"

#define SRC_W 400
#define SRC_H 350

typedef struct geom {
    double win[4];
    int flip;
} geom;

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static double next_unit(void) { return (next_u64() >> 11) * (1.0 / 9007199254740992.0); }

/* torchvision RandomResizedCrop's distribution (area 8%..100%, log-uniform aspect 3/4..4/3) with
 * fractional offsets, as the loader's DCT-scaled crop path hands them to the resampler. */
static void make_geoms(geom *g, int n)
{
    for (int i = 0; i < n; i++) {
        double area = SRC_W * SRC_H * (0.08 + 0.92 * next_unit());
        double ar = exp(log(0.75) + next_unit() * (log(4.0 / 3) - log(0.75)));
        double w = fmin(sqrt(area * ar), SRC_W), h = fmin(sqrt(area / ar), SRC_H);
        g[i].win[0] = next_unit() * (SRC_W - w);
        g[i].win[1] = next_unit() * (SRC_H - h);
        g[i].win[2] = w;
        g[i].win[3] = h;
        g[i].flip = i & 1;
    }
}

/* CPU time of this thread: other jobs on a shared machine preempt us without inflating it. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One timed pass over all geometries, repeated for about `seconds`; ns per image. Outputs go to
 * the slots of `ring` in turn (one slot: the same buffer every time). */
static double time_round(const uint8_t *src, uint32_t ch, const geom *g, int n, uint8_t *ring,
                         size_t slots, uint32_t size, void *scratch, size_t scratch_len,
                         double seconds, unsigned *sink)
{
    static size_t slot;
    long images = 0;
    double t0 = cpu_now(), t;
    do {
        for (int i = 0; i < n; i++) {
            fl_error err;
            uint8_t *dst = ring + (slot++ % slots) * size * size * ch;
            if (fl_resize_window(src, SRC_W, SRC_H, (size_t)SRC_W * ch, ch, g[i].win, dst, size,
                                 size, (size_t)size * ch, g[i].flip, scratch, scratch_len, &err)) {
                fprintf(stderr, "fl_resize_bench: %s\n", err.msg);
                exit(1);
            }
            *sink += dst[(size_t)(i % size) * size * ch];
        }
        images += n;
        t = cpu_now() - t0;
    } while (t < seconds);
    return t * 1e9 / images;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fl_resize_bench [--json] [--cold] [--rounds R] [--seconds T] [--size S] "
            "[--channels C] [--images N]\n"
            "  ns per fl_resize_window call (random-resized-crop of a 400x350 image to SxS, flip "
            "on half)\n"
            "  at the best SIMD level, at AVX2 (where the best is AVX-512) and at the portable C\n"
            "  level; each figure is the median of R rounds (default 7) of about T seconds\n"
            "  (default 0.2), the levels interleaved. --cold: outputs to a 128 MiB ring of slots\n"
            "  (in no cache, like the loader's batch slots) instead of one reused buffer.\n");
}

int main(int argc, char **argv)
{
    int json = 0, cold = 0, rounds = 7, nimg = 256;
    uint32_t size = 224, ch = 3;
    double seconds = 0.2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--cold"))
            cold = 1;
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--channels") && i + 1 < argc)
            ch = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--images") && i + 1 < argc)
            nimg = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 1000 || nimg < 1 || nimg > 100000 || size < 1 || size > 4096 ||
        ch < 1 || ch > 4 || !(seconds > 0)) {
        usage(stderr);
        return 2;
    }
    /* A smooth picture with some texture, so no path sees only zeros. */
    uint8_t *src = malloc((size_t)SRC_W * SRC_H * ch);
    for (uint32_t y = 0; y < SRC_H; y++)
        for (uint32_t x = 0; x < SRC_W; x++)
            for (uint32_t c = 0; c < ch; c++)
                src[((size_t)y * SRC_W + x) * ch + c] =
                    (uint8_t)(x * (c + 1) / 2 + y / (c + 1) + (next_u64() & 15));
    geom *g = malloc(sizeof(geom) * (size_t)nimg);
    make_geoms(g, nimg);
    /* One scratch buffer big enough for every geometry, as the decoder's grow-only buffer is. */
    size_t scratch_len = 0;
    for (int i = 0; i < nimg; i++) {
        size_t need = fl_resize_window_scratch_size(SRC_W, SRC_H, g[i].win, size, size, ch);
        if (need > scratch_len)
            scratch_len = need;
    }
    void *scratch = malloc(scratch_len);
    size_t out_bytes = (size_t)size * size * ch;
    size_t slots = cold ? ((size_t)128 << 20) / out_bytes + 1 : 1;
    uint8_t *dst = malloc(slots * out_bytes);
    memset(dst, 0, slots * out_bytes); /* page faults before the timing */
    double *best = malloc(sizeof(double) * (size_t)rounds),
           *avx2 = malloc(sizeof(double) * (size_t)rounds),
           *port = malloc(sizeof(double) * (size_t)rounds);
    /* The resampler's level 3 needs these (see simd_level in imaging/resize.c). */
    int has512 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
    unsigned sink = 0;
    /* Warm-up (caches, page faults, frequency). */
    time_round(src, ch, g, nimg, dst, slots, size, scratch, scratch_len, seconds / 4, &sink);
    for (int r = 0; r < rounds; r++) {
        fl_resize_set_simd_limit(3);
        best[r] =
            time_round(src, ch, g, nimg, dst, slots, size, scratch, scratch_len, seconds, &sink);
        avx2[r] = best[r];
        if (has512) {
            fl_resize_set_simd_limit(2);
            avx2[r] = time_round(src, ch, g, nimg, dst, slots, size, scratch, scratch_len, seconds,
                                 &sink);
        }
        fl_resize_set_simd_limit(0);
        port[r] =
            time_round(src, ch, g, nimg, dst, slots, size, scratch, scratch_len, seconds, &sink);
    }
    fl_resize_set_simd_limit(3);
    qsort(best, (size_t)rounds, sizeof(double), cmp_double);
    qsort(avx2, (size_t)rounds, sizeof(double), cmp_double);
    qsort(port, (size_t)rounds, sizeof(double), cmp_double);
    double mb = best[rounds / 2], ma = avx2[rounds / 2], mp = port[rounds / 2];
    const char *simd = has512                            ? "avx512"
                       : __builtin_cpu_supports("avx2")  ? "avx2"
                       : __builtin_cpu_supports("ssse3") ? "ssse3"
                                                         : "none";
    if (json) {
        printf("{\"images\": %d, \"src\": [%d, %d], \"size\": %u, \"channels\": %u, \"cold\": %s, "
               "\"rounds\": %d, "
               "\"simd\": \"%s\", \"simd_ns_per_image\": %.0f, \"simd_ns_min\": %.0f, "
               "\"avx2_ns_per_image\": %.0f, \"avx2_ns_min\": %.0f, "
               "\"portable_ns_per_image\": %.0f, \"portable_ns_min\": %.0f, \"speedup\": %.3f, "
               "\"sink\": %u}\n",
               nimg, SRC_W, SRC_H, size, ch, cold ? "true" : "false", rounds, simd, mb, best[0], ma,
               avx2[0], mp, port[0], mp / mb, sink & 1);
    } else {
        printf("fl_resize_window: %d random-resized-crop windows of a %dx%d image -> %ux%u, %u "
               "channels, "
               "flip on half, output to %s; thread CPU time, median of %d rounds\n",
               nimg, SRC_W, SRC_H, size, size, ch,
               cold ? "a 128 MiB ring (not cached)" : "one reused buffer", rounds);
        printf("SIMD (%s) %9.0f ns/image  (min %.0f)\n", simd, mb, best[0]);
        if (has512)
            printf("AVX2        %9.0f ns/image  (min %.0f)  %.2fx the SIMD time\n", ma, avx2[0],
                   ma / mb);
        printf("portable C  %9.0f ns/image  (min %.0f)  %.2fx the SIMD time\n", mp, port[0],
               mp / mb);
    }
    free(best);
    free(avx2);
    free(port);
    free(dst);
    free(scratch);
    free(g);
    free(src);
    return 0;
}
