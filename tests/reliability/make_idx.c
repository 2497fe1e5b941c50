/* make_idx.c — writes a synthetic Fashion-MNIST-like IDX pair (DIR/train-images-idx3-ubyte,
 * DIR/train-labels-idx1-ubyte) for the reliability tests: N gray HxW images, 10 classes, each a
 * class-specific bar pattern plus deterministic noise (learnable, and compressible like photos).
 * usage: rel_make_idx DIR N [H W] [SEED] [PREFIX]       (PREFIX default "train") */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int put_be32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: rel_make_idx DIR N [H W] [SEED] [PREFIX]\n");
        return 2;
    }
    const char *dir = argv[1];
    long n = atol(argv[2]);
    int h = argc > 4 ? atoi(argv[3]) : 28, w = argc > 4 ? atoi(argv[4]) : 28;
    uint64_t seed = argc > 5 ? strtoull(argv[5], NULL, 0) : 1;
    const char *prefix = argc > 6 ? argv[6] : "train";
    if (n <= 0 || h <= 0 || w <= 0 || h > 4096 || w > 4096) {
        fprintf(stderr, "rel_make_idx: bad sizes\n");
        return 2;
    }
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "rel_make_idx: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char pi[4096], pl[4096];
    snprintf(pi, sizeof pi, "%s/%s-images-idx3-ubyte", dir, prefix);
    snprintf(pl, sizeof pl, "%s/%s-labels-idx1-ubyte", dir, prefix);
    FILE *fi = fopen(pi, "wb"), *fl = fopen(pl, "wb");
    if (!fi || !fl) {
        fprintf(stderr, "rel_make_idx: cannot create files in %s\n", dir);
        return 1;
    }
    int bad = put_be32(fi, 0x803) | put_be32(fi, (uint32_t)n) | put_be32(fi, (uint32_t)h) |
              put_be32(fi, (uint32_t)w) | put_be32(fl, 0x801) | put_be32(fl, (uint32_t)n);
    unsigned char *img = malloc((size_t)h * w);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (long i = 0; i < n && !bad && img; i++) {
        unsigned label = (unsigned)(rng_next(&s) % 10);
        /* class c: bars of period 3 + c/2, vertical for even c, horizontal for odd c */
        int period = 3 + (int)label / 2, vertical = !(label & 1);
        int shift = (int)(rng_next(&s) % (uint64_t)period);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int t = ((vertical ? x : y) + shift) % period;
                int v = t == 0 ? 200 : 30;
                v += (int)(rng_next(&s) % 9) - 4;
                img[(size_t)y * w + x] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        unsigned char lb = (unsigned char)label;
        if (fwrite(img, 1, (size_t)h * w, fi) != (size_t)h * w || fwrite(&lb, 1, 1, fl) != 1)
            bad = 1;
    }
    free(img);
    if (fclose(fi) | fclose(fl) || bad) {
        fprintf(stderr, "rel_make_idx: write failed in %s\n", dir);
        return 1;
    }
    return 0;
}
