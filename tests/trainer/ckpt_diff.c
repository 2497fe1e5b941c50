/* ckpt_diff.c — test helper for data-parallel runs: compares the fp32 master weights of two
 * trainfast checkpoints within a tolerance (runs that differ only in summation order are close,
 * not bit-identical). Prints the max absolute and the relative L2 difference and the counters.
 * usage: ckpt_diff A.tfc B.tfc REL_TOL   exit 0 when ||a - b|| / ||a|| <= REL_TOL and the
 * step counters agree, else 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "checkpoint.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ckpt_diff A B REL_TOL\n");
        return 2;
    }
    double tol = strtod(argv[3], NULL);
    tf_checkpoint a, b;
    fl_error err;
    if (tf_checkpoint_load(argv[1], &a, &err)) {
        fprintf(stderr, "ckpt_diff: %s\n", err.msg);
        return 1;
    }
    if (tf_checkpoint_load(argv[2], &b, &err)) {
        fprintf(stderr, "ckpt_diff: %s\n", err.msg);
        tf_checkpoint_free(&a);
        return 1;
    }
    int rc = 0;
    if (a.spec_id != b.spec_id || a.param_count != b.param_count) {
        printf("different models\n");
        rc = 1;
    } else {
        double d2 = 0, a2 = 0, maxd = 0;
        for (int64_t i = 0; i < a.param_count; i++) {
            double d = (double)a.st.params[i] - (double)b.st.params[i];
            d2 += d * d;
            a2 += (double)a.st.params[i] * a.st.params[i];
            if (fabs(d) > maxd)
                maxd = fabs(d);
        }
        double rel = a2 > 0 ? sqrt(d2 / a2) : sqrt(d2);
        printf("params: %lld, max |a-b| %.3g, relative L2 difference %.3g (tolerance %.3g); "
               "steps %llu vs %llu\n",
               (long long)a.param_count, maxd, rel, tol, (unsigned long long)a.st.step,
               (unsigned long long)b.st.step);
        if (!(rel <= tol) || a.st.step != b.st.step)
            rc = 1;
    }
    tf_checkpoint_free(&a);
    tf_checkpoint_free(&b);
    return rc;
}
