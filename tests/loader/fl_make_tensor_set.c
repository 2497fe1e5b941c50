/* fl_make_tensor_set.c — writes DIR: a data set of 10 records without an image (encoding none,
 * format version 3): fields y (int), x (float_vector:5), t (ndarray float64 [4]), for the
 * command-line tests of tools that meet such a set (fastload bench, digest); the set is
 * fx_write_tensor_set's (fixture.c) with labels i % 2. Usage:
 * fl_make_tensor_set DIR; exit 0, or 1 naming what failed. */
#include <stdio.h>

#include "fixture.h"

static int32_t label_mod2(int i) { return i % 2; }

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fl_make_tensor_set DIR\n");
        return 2;
    }
    fl_error err;
    if (fx_write_tensor_set(argv[1], "fl_make_tensor_set", label_mod2, &err)) {
        fprintf(stderr, "fl_make_tensor_set: %s\n", err.msg);
        return 1;
    }
    return 0;
}
