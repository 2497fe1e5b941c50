/* test_cpu_input.c — the options of the CPU input stage (cpu_input_run) that only the GPU input
 * kernel's tests use, checked here without a GPU: NHWC output is the NCHW output transposed; c_out
 * adds zero channels; hflip_all mirrors every sample; reflect padding mirrors the image (no
 * repeated edge) where zero padding puts the normalised 0 pixel, and is the same without padding;
 * every option off gives cpu_input_u8's output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_layers.h"
#include "fl_check.h"

enum { N = 4, H = 5, W = 7, C = 3, CO = 5 };

static uint8_t img[N * H * W * C];
static const float mean[C] = {0.49f, 0.48f, 0.45f}, sd[C] = {0.25f, 0.24f, 0.26f};
static const uint64_t idx[N] = {3, 99, 1000, 12345678901ull};

static float *run(cpu_input_params p)
{
    int co = p.c_out > C ? p.c_out : C;
    float *x = malloc(sizeof(float) * N * co * H * W);
    cpu_input_run(NULL, &p, img, x);
    return x;
}

/* normalised value of pixel (n, y, x, c) */
static float pix(int n, int y, int x, int c)
{
    return ((float)img[((n * H + y) * W + x) * C + c] / 255.0f - mean[c]) / sd[c];
}

int main(void)
{
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (uint8_t)(i * 37 + (i >> 3) * 11 + 1); /* never 0: a padded 0 pixel stands out */
    cpu_input_params base = {.N = N,
                             .H = H,
                             .W = W,
                             .C = C,
                             .mean = mean,
                             .std = sd,
                             .pad = 2,
                             .flip = 1,
                             .seed = 5,
                             .epoch = 7,
                             .indices = idx};
    float *nchw = run(base);

    /* every option off: cpu_input_u8 */
    float *u8 = malloc(sizeof(float) * N * C * H * W);
    cpu_input_u8(NULL, N, H, W, C, img, mean, sd, 2, 1, 5, 7, idx, 0, u8);
    EXPECT(memcmp(u8, nchw, sizeof(float) * N * C * H * W) == 0);

    /* NHWC and channel padding, in both layouts */
    cpu_input_params p = base;
    p.nhwc = 1;
    float *nhwc = run(p);
    p.c_out = CO;
    float *nhwc5 = run(p);
    p.nhwc = 0;
    float *nchw5 = run(p);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < CO; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    float want = c < C ? nchw[((n * C + c) * H + y) * W + x] : 0.0f;
                    if (c < C)
                        EXPECTF(nhwc[((n * H + y) * W + x) * C + c] == want, "nhwc (%d,%d,%d,%d)",
                                n, c, y, x);
                    EXPECTF(nhwc5[((n * H + y) * W + x) * CO + c] == want,
                            "nhwc c_out (%d,%d,%d,%d)", n, c, y, x);
                    EXPECTF(nchw5[((n * CO + c) * H + y) * W + x] == want,
                            "nchw c_out (%d,%d,%d,%d)", n, c, y, x);
                }

    /* no crop: hflip_all mirrors; reflect changes nothing without padding */
    p = base;
    p.pad = 0;
    p.flip = 0;
    float *plain = run(p);
    p.hflip_all = 1;
    float *mirror = run(p);
    p.hflip_all = 0;
    p.reflect = 1;
    float *refl0 = run(p);
    EXPECT(memcmp(plain, refl0, sizeof(float) * N * C * H * W) == 0);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    EXPECTF(plain[((n * C + c) * H + y) * W + x] == pix(n, y, x, c),
                            "plain (%d,%d,%d,%d)", n, c, y, x);
                    EXPECTF(mirror[((n * C + c) * H + y) * W + x] == pix(n, y, W - 1 - x, c),
                            "mirror (%d,%d,%d,%d)", n, c, y, x);
                }

    /* crop with reflect padding: the source of output (y, x) is y + dy - pad mirrored into the
     * image (-1 -> 1, H -> H - 2); zero padding puts the normalised 0 pixel there instead */
    p = base;
    p.reflect = 1;
    float *refl = run(p);
    int padded = 0;
    for (int n = 0; n < N; n++) {
        int dy, dx, fl;
        fl_aug_crop_flip(5, 7, idx[n], 2, 1, &dy, &dx, &fl);
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    int sy = y + dy - 2, sx = (fl ? W - 1 - x : x) + dx - 2;
                    int outside = sy < 0 || sy >= H || sx < 0 || sx >= W;
                    padded += outside;
                    int ry = sy < 0 ? -sy : sy >= H ? 2 * (H - 1) - sy : sy;
                    int rx = sx < 0 ? -sx : sx >= W ? 2 * (W - 1) - sx : sx;
                    size_t o = ((size_t)(n * C + c) * H + y) * W + x;
                    EXPECTF(refl[o] == pix(n, ry, rx, c), "reflect (%d,%d,%d,%d)", n, c, y, x);
                    float zero = (0.0f - mean[c]) / sd[c];
                    EXPECTF(nchw[o] == (outside ? zero : pix(n, sy, sx, c)),
                            "zero pad (%d,%d,%d,%d)", n, c, y, x);
                }
    }
    EXPECTF(padded > 0, "no sample's crop reached the padding: the reflect case is untested");
    printf("cpu_input_run options: %d padded positions checked\n", padded);
    free(nchw);
    free(u8);
    free(nhwc);
    free(nhwc5);
    free(nchw5);
    free(plain);
    free(mirror);
    free(refl0);
    free(refl);
    return fl_check_status();
}
