/* test_order_perm.c — an epoch's sequence held in 32-bit indices (fl_perm, what the loader keeps
 * below 2^32 records) is the same sequence as in 64-bit ones, for every order, several sizes,
 * quasi blocks and windows, and epochs; fl_perm_alloc picks 32-bit indices unless told. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "order.h"

#include "fl_check.h"

static void same_sequence(uint64_t n, fl_order o, uint32_t block, uint32_t window)
{
    fl_order_plan p;
    fl_error err;
    CHECK_OK(fl_order_plan_init(&p, n, o, block, window, 42, 0, 1, 1, 0, &err), &err);
    uint64_t *ref = malloc(n * sizeof *ref);
    fl_perm narrow, wide;
    CHECK(ref && fl_perm_alloc(&narrow, n, 0) == 0 && fl_perm_alloc(&wide, n, 1) == 0);
    CHECK(narrow.p32 && !narrow.p64 && wide.p64 && !wide.p32);
    for (uint64_t epoch = 0; epoch < 3; epoch++) {
        fl_order_epoch(&p, epoch, ref);
        fl_order_epoch_perm(&p, epoch, &narrow);
        fl_order_epoch_perm(&p, epoch, &wide);
        uint8_t *seen = calloc(n, 1);
        CHECK(seen);
        for (uint64_t i = 0; i < n; i++) {
            EXPECTF(fl_perm_at(&narrow, i) == ref[i] && fl_perm_at(&wide, i) == ref[i],
                    "n %llu order %d epoch %llu position %llu: %llu / %llu, want %llu",
                    (unsigned long long)n, (int)o, (unsigned long long)epoch, (unsigned long long)i,
                    (unsigned long long)fl_perm_at(&narrow, i),
                    (unsigned long long)fl_perm_at(&wide, i), (unsigned long long)ref[i]);
            CHECK(ref[i] < n && !seen[ref[i]]);
            seen[ref[i]] = 1;
        }
        free(seen);
    }
    fl_perm_free(&narrow);
    fl_perm_free(&wide);
    CHECK(narrow.p32 == NULL && wide.p64 == NULL);
    free(ref);
}

int main(void)
{
    const uint64_t sizes[] = {1, 2, 7, 64, 65, 1000, 100003};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        same_sequence(sizes[k], FL_ORDER_SEQUENTIAL, 0, 0);
        same_sequence(sizes[k], FL_ORDER_RANDOM, 0, 0);
        same_sequence(sizes[k], FL_ORDER_QUASI, 64, 32);
        same_sequence(sizes[k], FL_ORDER_QUASI, 1, 3);
        same_sequence(sizes[k], FL_ORDER_QUASI, 7, 1);
    }
    return fl_check_status();
}
