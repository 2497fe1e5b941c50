/* ckpt_compare.c — test helper: exit 0 when two trainfast checkpoints hold bit-identical training
 * state (params, momentum, gradient accumulator, BN stats, EMA, counters, position), else 1 with
 * the first difference. usage: ckpt_compare A.tfc B.tfc */
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: ckpt_compare A B\n");
        return 2;
    }
    tf_checkpoint a, b;
    fl_error err;
    if (tf_checkpoint_load(argv[1], &a, &err) || tf_checkpoint_load(argv[2], &b, &err)) {
        fprintf(stderr, "ckpt_compare: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (a.spec_id != b.spec_id || a.param_count != b.param_count || a.stat_count != b.stat_count ||
        a.has_ema != b.has_ema) {
        printf("different models\n");
        rc = 1;
    } else {
        size_t n = (size_t)(3 * a.param_count + a.stat_count +
                            (a.has_ema ? a.param_count + a.stat_count : 0));
        for (size_t i = 0; i < n; i++)
            if (memcmp(&a.storage[i], &b.storage[i], sizeof(float)) != 0) {
                printf("state differs at float %zu of %zu: %.9g vs %.9g\n", i, n, a.storage[i],
                       b.storage[i]);
                rc = 1;
                break;
            }
        if (a.st.micro_step != b.st.micro_step || a.st.step != b.st.step || a.epoch != b.epoch ||
            a.batch != b.batch) {
            printf("counters differ: steps %llu/%llu position %llu:%llu vs %llu:%llu\n",
                   (unsigned long long)a.st.micro_step, (unsigned long long)b.st.micro_step,
                   (unsigned long long)a.epoch, (unsigned long long)a.batch,
                   (unsigned long long)b.epoch, (unsigned long long)b.batch);
            rc = 1;
        }
    }
    if (!rc)
        printf("identical: %lld params, step %llu\n", (long long)a.param_count,
               (unsigned long long)a.st.micro_step);
    tf_checkpoint_free(&a);
    tf_checkpoint_free(&b);
    return rc;
}
