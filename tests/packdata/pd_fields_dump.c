/* pd_fields_dump.c — what libfastload delivers for every field of a data set, for the packdata
 * tests to compare with the rows they packed: one epoch in dataset order, batches of one, no
 * augmentation; one JSON object a sample on stdout:
 *   {"index": I, "name": "...", "fields": {"NAME": VALUE, ...}}
 * numbers as JSON numbers (floats with 9 significant digits: float32 exactly), a variable field
 * as its `count` values (text and bytes as hex), an image as its height, width and channels.
 *   pd_fields_dump DST
 * Exit 0 ok, 1 on any loader error (printed). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastload.h"

/* Element k of an array of dtype t, printed as a JSON number. */
static void put_elem(const void *data, fl_dtype t, uint64_t k)
{
    switch (t) {
    case FL_DTYPE_U8: printf("%u", ((const uint8_t *)data)[k]); break;
    case FL_DTYPE_I8: printf("%d", ((const int8_t *)data)[k]); break;
    case FL_DTYPE_U16: printf("%u", ((const uint16_t *)data)[k]); break;
    case FL_DTYPE_I16: printf("%d", ((const int16_t *)data)[k]); break;
    case FL_DTYPE_I32: printf("%" PRId32, ((const int32_t *)data)[k]); break;
    case FL_DTYPE_I64: printf("%" PRId64, ((const int64_t *)data)[k]); break;
    case FL_DTYPE_F32: printf("%.9g", ((const float *)data)[k]); break;
    case FL_DTYPE_F64: printf("%.17g", ((const double *)data)[k]); break;
    default: printf("null"); break; /* float16: not written by these tests */
    }
}

static void put_field(const fl_batch_field *f, const fl_batch *b)
{
    printf("\"%s\": ", f->name);
    if (f->type == FL_FIELD_IMAGE) {
        printf("[%u, %u, %u]", b->height, b->width, b->channels);
        return;
    }
    /* elements of one sample: the shape past the batch dimension; a variable field's count */
    uint64_t per = 1;
    for (uint32_t d = 1; d < f->ndim; d++)
        per *= f->shape[d];
    if (f->counts) {
        uint64_t unit = f->type == FL_FIELD_BOXES ? 4 : 1;
        per = (uint64_t)f->counts[0] * unit;
    }
    if (f->type == FL_FIELD_TEXT || f->type == FL_FIELD_BYTES) {
        printf("\"");
        for (uint64_t k = 0; k < per; k++)
            printf("%02x", ((const uint8_t *)f->data)[k]);
        printf("\"");
        return;
    }
    int scalar = f->type == FL_FIELD_INT || f->type == FL_FIELD_FLOAT;
    if (!scalar)
        printf("[");
    for (uint64_t k = 0; k < per; k++) {
        if (k)
            printf(", ");
        put_elem(f->data, f->dtype, k);
    }
    if (!scalar)
        printf("]");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pd_fields_dump DST\n");
        return 2;
    }
    fl_loader_options o;
    fl_loader_options_init(&o);
    o.batch_size = 1;
    o.workers = 2;
    o.augment = FL_AUG_NONE;
    o.order = FL_ORDER_SEQUENTIAL;
    o.pinned = 0;
    o.drop_last = 1;
    fl_loader *L;
    fl_error err;
    if (fl_loader_create(argv[1], &o, &L, &err)) {
        fprintf(stderr, "pd_fields_dump: %s\n", err.msg);
        return 1;
    }
    const fl_dataset *ds = fl_loader_dataset(L);
    uint64_t n = fl_loader_batches_per_epoch(L);
    int rc = 0;
    for (uint64_t i = 0; i < n; i++) {
        fl_batch *b;
        if (fl_loader_next(L, &b, &err)) {
            fprintf(stderr, "pd_fields_dump: batch %" PRIu64 ": %s\n", i, err.msg);
            rc = 1;
            break;
        }
        size_t nl;
        const char *nm = fl_dataset_record_name(ds, b->indices[0], &nl);
        /* names here are FILE:LINE of the tests' own files: no character needs escaping */
        printf("{\"index\": %" PRIu64 ", \"name\": \"%.*s\", \"fields\": {", b->indices[0], (int)nl,
               nm ? nm : "");
        for (uint32_t k = 0; k < b->num_fields; k++) {
            if (k)
                printf(", ");
            put_field(&b->fields[k], b);
        }
        printf("}}\n");
        fl_loader_release(L, b);
    }
    fl_loader_close(L);
    if (fflush(stdout))
        rc = 1;
    return rc;
}
