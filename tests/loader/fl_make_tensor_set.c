/* fl_make_tensor_set.c — writes DIR: a data set of 10 records without an image (encoding none,
 * format version 3): fields y (int), x (float_vector:5), t (ndarray float64 [4]), for the
 * command-line tests of tools that meet such a set (fastload bench, digest). Usage:
 * fl_make_tensor_set DIR; exit 0, or 1 naming what failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_fields.h"
#include "fl_writer.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fl_make_tensor_set DIR\n");
        return 2;
    }
    fl_field f[3];
    memset(f, 0, sizeof f);
    snprintf(f[0].name, sizeof f[0].name, "y");
    f[0].type = FL_FIELD_INT, f[0].dtype = FL_DTYPE_I32, f[0].of = -1;
    snprintf(f[1].name, sizeof f[1].name, "x");
    f[1].type = FL_FIELD_FLOAT_VECTOR, f[1].dtype = FL_DTYPE_F32, f[1].of = -1;
    f[1].ndim = 1, f[1].shape[0] = 5;
    snprintf(f[2].name, sizeof f[2].name, "t");
    f[2].type = FL_FIELD_NDARRAY, f[2].dtype = FL_DTYPE_F64, f[2].of = -1;
    f[2].ndim = 1, f[2].shape[0] = 4;
    fl_writer_options wo;
    memset(&wo, 0, sizeof wo);
    wo.backend = FL_BACKEND_SHARDS;
    wo.schema.encoding = FL_ENC_NONE;
    wo.schema.compression = FL_COMP_NONE;
    wo.tool_version = "fl_make_tensor_set";
    wo.fields = f;
    wo.num_fields = 3;
    fl_writer *w;
    fl_error err;
    uint8_t *blk = NULL;
    size_t cap = 0, len = 0;
    if (fl_writer_open(argv[1], &wo, &w, &err))
        goto fail;
    for (int i = 0; i < 10; i++) {
        float x[5];
        double t[4];
        for (int k = 0; k < 5; k++)
            x[k] = (float)(i * 5 + k);
        for (int k = 0; k < 4; k++)
            t[k] = i + k * 0.5;
        fl_field_value v[3] = {{0}, {x, sizeof x, 5, 0, 0}, {t, sizeof t, 1, 0, 0}};
        fl_record_in in = {.format = FL_ENC_NONE, .stored = "", .label = i % 2};
        if (fl_fields_encode(f, 3, v, 0, 0, 3, &blk, &cap, &len, &err))
            goto fail;
        in.fields_block = blk;
        in.fields_len = len;
        if (fl_writer_add_record(w, &in, &err)) {
            fl_writer_abort(w);
            goto fail;
        }
    }
    free(blk);
    if (fl_writer_finish(w, NULL, 0, &err))
        goto fail_nofree;
    return 0;
fail:
    free(blk);
fail_nofree:
    fprintf(stderr, "fl_make_tensor_set: %s\n", err.msg);
    return 1;
}
