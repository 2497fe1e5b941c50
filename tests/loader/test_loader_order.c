/* test_loader_order.c — epoch orders and augmentation parameters without any I/O: random and
 * quasi-random orders are permutations that depend only on (seed, epoch); quasi-random order
 * mixes classes of a class-sorted dataset inside a batch; rank shares are disjoint, equal and
 * cover the epoch; RRC/center/flip parameters follow torchvision's sampling rules; the backends'
 * crop-with-padding draw (fl_aug_rng.h) is pinned. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "fl_aug_rng.h"
#include "fl_dataset.h"
#include "order.h"
#include "rng.h"

#include "fl_check.h"

static void check_perm(const uint64_t *p, uint64_t n)
{
    uint8_t *seen = calloc(n, 1);
    for (uint64_t i = 0; i < n; i++) {
        CHECK(p[i] < n);
        CHECK(!seen[p[i]]);
        seen[p[i]] = 1;
    }
    free(seen);
}

static fl_order_plan plan(uint64_t n, fl_order o, uint32_t rank, uint32_t world, uint32_t batch,
                          int drop)
{
    fl_order_plan p;
    fl_error err;
    int rc = fl_order_plan_init(&p, n, o, 16, 8, 1234, rank, world, batch, drop, &err);
    if (rc) {
        fprintf(stderr, "plan: %s\n", err.msg);
        exit(1);
    }
    return p;
}

/* Mean number of distinct classes per batch of 64 for an 8-class sorted dataset. */
static double classes_per_batch(const uint64_t *perm, uint64_t n, uint32_t classes)
{
    double sum = 0;
    uint64_t nb = n / 64;
    for (uint64_t b = 0; b < nb; b++) {
        int seen[64] = {0};
        int d = 0;
        for (int k = 0; k < 64; k++) {
            int c = (int)(perm[b * 64 + k] * classes / n);
            if (!seen[c]++)
                d++;
        }
        sum += d;
    }
    return sum / nb;
}

static void test_orders(void)
{
    const uint64_t n = 4096;
    uint64_t *a = malloc(n * 8), *b = malloc(n * 8), *c = malloc(n * 8);
    fl_order_plan ps = plan(n, FL_ORDER_SEQUENTIAL, 0, 1, 64, 0);
    fl_order_epoch(&ps, 3, a);
    for (uint64_t i = 0; i < n; i++)
        CHECK(a[i] == i);

    fl_order_plan pr = plan(n, FL_ORDER_RANDOM, 0, 1, 64, 0);
    fl_order_epoch(&pr, 0, a);
    fl_order_epoch(&pr, 0, b);
    fl_order_epoch(&pr, 1, c);
    check_perm(a, n);
    check_perm(c, n);
    CHECK(memcmp(a, b, n * 8) == 0); /* same (seed, epoch) → same order */
    CHECK(memcmp(a, c, n * 8) != 0); /* another epoch → another order */
    uint64_t fixed = 0;
    for (uint64_t i = 0; i < n; i++)
        fixed += a[i] == i;
    CHECK(fixed < 20); /* ~1 expected for a uniform permutation */
    double rand_mix = classes_per_batch(a, n, 8);

    fl_order_plan pq = plan(n, FL_ORDER_QUASI, 0, 1, 64, 0);
    fl_order_epoch(&pq, 0, a);
    fl_order_epoch(&pq, 1, c);
    check_perm(a, n);
    check_perm(c, n);
    CHECK(memcmp(a, c, n * 8) != 0);
    double quasi_mix = classes_per_batch(a, n, 8);
    double seq_mix = 1.0 + 0; /* sequential batches of a sorted dataset hold 1 (rarely 2) class */
    printf(
        "distinct classes per batch of 64 (8 classes): sequential ~%.1f, quasi %.2f, random %.2f\n",
        seq_mix, quasi_mix, rand_mix);
    /* a window mixes 8 blocks of 16 → up to 8 distinct source runs per batch */
    CHECK(quasi_mix >= 4.0);
    CHECK(rand_mix >= 7.5);

    /* a dataset size that is not a multiple of the block */
    fl_order_plan pq2 = plan(1001, FL_ORDER_QUASI, 0, 1, 7, 0);
    fl_order_epoch(&pq2, 5, a);
    check_perm(a, 1001);
    free(a);
    free(b);
    free(c);
}

static void test_ranks(int drop, fl_order order)
{
    const uint64_t n = 1000;
    const uint32_t world = 3, B = 32;
    uint64_t *perm = malloc(n * 8);
    uint32_t *count = calloc(n, sizeof *count);
    uint64_t per = 0, total = 0;
    for (uint32_t r = 0; r < world; r++) {
        fl_order_plan p = plan(n, order, r, world, B, drop);
        if (r == 0)
            per = p.per_rank;
        CHECK(p.per_rank == per); /* equal shares */
        CHECK(p.per_rank == p.batches * B);
        fl_order_epoch(&p, 7, perm);
        for (uint64_t bt = 0; bt < p.batches; bt++)
            for (uint32_t k = 0; k < B; k++) {
                uint64_t pos = fl_order_pos(&p, bt, k);
                count[perm[pos % n]]++;
                total++;
                /* quasi: each rank one contiguous run of the sequence (whole windows of
                 * blocks); otherwise dealt round-robin */
                if (order == FL_ORDER_QUASI)
                    CHECK(pos == r * per + bt * B + k);
                else
                    CHECK(pos == (bt * B + k) * world + r);
            }
    }
    uint64_t covered = 0, dup = 0;
    for (uint64_t i = 0; i < n; i++) {
        covered += count[i] > 0;
        dup += count[i] > 1 ? count[i] - 1 : 0;
    }
    if (drop) {
        CHECK(per == 320);
        CHECK(dup == 0);               /* disjoint */
        CHECK(covered == world * per); /* 960 of 1000: the uneven tail is dropped */
    } else {
        CHECK(per == 352);
        CHECK(covered == n);           /* covers the epoch */
        CHECK(dup == world * per - n); /* only the wrap-around padding repeats */
    }
    free(perm);
    free(count);
}

static void test_plan_errors(void)
{
    fl_order_plan p;
    fl_error err;
    CHECK(fl_order_plan_init(&p, 10, FL_ORDER_RANDOM, 0, 0, 1, 0, 4, 8, 1, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "no full batch"));
    CHECK(fl_order_plan_init(&p, 10, FL_ORDER_RANDOM, 0, 0, 1, 4, 4, 8, 0, &err) == FL_E_INVALID);
    CHECK(fl_order_plan_init(&p, 10, FL_ORDER_RANDOM, 0, 0, 1, 0, 4, 8, 0, &err) == 0);
    CHECK(p.batches == 1 && p.per_rank == 8);
}

static void test_augment(void)
{
    fl_aug_config c = {.augment = FL_AUG_RRC,
                       .flip = 1,
                       .scale_min = 0.08,
                       .scale_max = 1.0,
                       .ratio_min = 3.0 / 4,
                       .ratio_max = 4.0 / 3,
                       .center_ratio = 0.875,
                       .out_width = 64,
                       .out_height = 64,
                       .seed = 42};
    int flips = 0;
    double area_sum = 0;
    for (uint64_t pos = 0; pos < 2000; pos++) {
        fl_aug_params a, b;
        fl_augment_params(&c, 3, pos, 400, 300, &a);
        fl_augment_params(&c, 3, pos, 400, 300, &b);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
        CHECK(a.crop.width >= 1 && a.crop.height >= 1);
        CHECK(a.crop.x + a.crop.width <= 400 && a.crop.y + a.crop.height <= 300);
        double frac = (double)a.crop.width * a.crop.height / (400.0 * 300.0);
        double ratio = (double)a.crop.width / a.crop.height;
        CHECK(frac > 0.07 && frac <= 1.0);
        CHECK(ratio > 0.70 && ratio < 1.40);
        area_sum += frac;
        flips += a.flip;
    }
    printf("RRC mean area fraction %.3f (uniform 0.08..1 minus rejections), flips %d/2000\n",
           area_sum / 2000, flips);
    CHECK(flips > 900 && flips < 1100);
    CHECK(area_sum / 2000 > 0.35 && area_sum / 2000 < 0.6);

    /* 10 failed tries → torchvision's fallback: whole height, width = round(h * max ratio) */
    fl_aug_config f = c;
    f.scale_min = 0.95;
    fl_aug_params a;
    fl_augment_params(&f, 0, 0, 1000, 10, &a);
    CHECK(a.crop.height == 10 && a.crop.width == 13 && a.crop.x == (1000 - 13) / 2 &&
          a.crop.y == 0);

    /* center: shorter side resized to floor(64 / 0.875) = 73, crop 64 → 64 * 100 / 73 ≈ 88 */
    fl_aug_config e = c;
    e.augment = FL_AUG_CENTER;
    e.flip = 0;
    fl_augment_params(&e, 0, 0, 200, 100, &a);
    CHECK(a.crop.width == 88 && a.crop.height == 88 && a.crop.x == 56 && a.crop.y == 6);
    CHECK(a.flip == 0);

    fl_aug_config none = c;
    none.augment = FL_AUG_NONE;
    none.flip = 0;
    fl_augment_params(&none, 0, 0, 50, 40, &a);
    CHECK(a.crop.x == 0 && a.crop.y == 0 && a.crop.width == 50 && a.crop.height == 40);

    /* bounded integers cover the range evenly */
    fl_rng r = fl_rng_init(1, 2, 3, 4);
    int hist[7] = {0};
    for (int i = 0; i < 70000; i++)
        hist[fl_rng_below(&r, 7)]++;
    for (int i = 0; i < 7; i++)
        CHECK(hist[i] > 9500 && hist[i] < 10500);
}

/* fl_aug_crop_flip, the crop-with-padding and flip draw of the CPU and GPU input stages: ranges,
 * and 20,000 draws pinned to the value the trainer's golden losses were made with (the CPU
 * backend's former copy of this function gave the same 0x89afe896e4bff67b). */
static void test_crop_flip_draws(void)
{
    uint64_t h = 0;
    for (uint64_t i = 0; i < 20000; i++) {
        int dy, dx, f, pad = (int)(i % 5), flip = (int)(i & 1);
        fl_aug_crop_flip(i * 7919u, i % 13, i * 31 + 5, pad, flip, &dy, &dx, &f);
        CHECK(dy >= 0 && dy <= 2 * pad && dx >= 0 && dx <= 2 * pad);
        CHECK(f == 0 || (f == 1 && flip));
        h = fl_mix64(h ^ (uint64_t)(dy | dx << 8 | f << 16));
    }
    CHECK(h == 0x89afe896e4bff67bull);
}

int main(void)
{
    test_orders();
    test_ranks(1, FL_ORDER_RANDOM);
    test_ranks(0, FL_ORDER_RANDOM);
    test_ranks(1, FL_ORDER_QUASI);
    test_ranks(0, FL_ORDER_QUASI);
    /* quasi blocks by record size: 64 up to 16 KiB records, ~1 MiB blocks above, at least 1 */
    CHECK(fl_order_quasi_block(784) == 64 && fl_order_quasi_block(12288) == 64);
    CHECK(fl_order_quasi_block(16384) == 64 && fl_order_quasi_block(16385) == 63);
    CHECK(fl_order_quasi_block(150528) == 6 && fl_order_quasi_block(4u << 20) == 1);
    CHECK(fl_order_quasi_block(0) == 64);
    test_plan_errors();
    test_augment();
    test_crop_flip_draws();
    printf("ok\n");
    return 0;
}
