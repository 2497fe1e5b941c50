/* predict_out.c — where `trainfast predict` puts its predictions: one line per record on stdout
 * (text, or a JSON object per line), a CSV file, and the raw logits as a NumPy .npy file
 * (format 1.0: '<f4', C order, shape (N, classes), rows in record order). Files are durable
 * writes (fl_file_begin/commit): renamed into place once every row is there, or written in place
 * when PATH is a device or FIFO. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fl_text.h"
#include "fl_file.h"
#include "fl_json.h"
#include "predict.h"

/* fl_file_begin with the option's wording of a failure */
static int begin_output(const char *opt, const char *path, fl_file_writer *w, fl_error *err)
{
    fl_write_step step;
    int rc = fl_file_begin(path, 0666, w, &step);
    if (rc)
        return fl_error_set(err, rc, "%s %s: cannot %s: %s", opt, path,
                            step == FL_WRITE_NOT_FILE ? "write over a directory"
                                                      : fl_write_step_name(step),
                            strerror(-rc));
    return 0;
}

/* The .npy 1.0 header: magic, version, little-endian u16 length, then a Python dict literal
 * padded with spaces and a newline so that the data start at a multiple of 64 bytes. */
static int npy_header(int fd, uint64_t rows, uint32_t cols)
{
    char dict[160];
    int dl = snprintf(dict, sizeof dict,
                      "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu, %u), }",
                      (unsigned long long)rows, cols);
    size_t total = (10 + (size_t)dl + 1 + 63) / 64 * 64;
    uint8_t h[256];
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (uint8_t)((total - 10) & 0xff);
    h[9] = (uint8_t)((total - 10) >> 8);
    memset(h + 10, ' ', total - 10);
    memcpy(h + 10, dict, (size_t)dl);
    h[total - 1] = '\n';
    return fl_write_all(fd, h, total);
}

static int open_npy(tf_pred_out *o, const char *path, fl_error *err)
{
    o->npy_path = path;
    int rc = begin_output("--logits", path, &o->npy_w, err);
    if (rc)
        return rc;
    rc = npy_header(o->npy_w.fd, o->rows_expected, o->classes);
    return rc ? fl_error_set(err, rc, "--logits %s: cannot write: %s", path, strerror(-rc)) : 0;
}

/* a CSV field: quoted (RFC 4180) when it holds a comma, quote or line break; a leading
 * = + - @ neutralised (fl_csv_cell) */
static void csv_field(FILE *f, const char *s) { fl_csv_cell(f, s); }

static int open_csv(tf_pred_out *o, const char *path, int files, fl_error *err)
{
    o->csv_path = path;
    int rc = begin_output("--csv", path, &o->csv_w, err);
    if (rc)
        return rc;
    int fd = fcntl(o->csv_w.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0 || !(o->csv = fdopen(fd, "w"))) {
        rc = -errno;
        if (fd >= 0)
            close(fd);
        return fl_error_set(err, rc, "--csv %s: %s", path, strerror(-rc));
    }
    fputs(files ? "index,file" : "index", o->csv);
    if (o->labelled)
        fputs(",label", o->csv);
    for (uint32_t k = 1; k <= o->top; k++)
        fprintf(o->csv, ",class_%u,prob_%u", k, k);
    fputc('\n', o->csv);
    return 0;
}

int tf_pred_out_open(tf_pred_out *o, const tf_predict_opts *opt, uint64_t rows, uint32_t classes,
                     const char *const *names, int labelled, fl_error *err)
{
    memset(o, 0, sizeof *o);
    o->npy_w.fd = o->csv_w.fd = -1;
    o->classes = classes;
    o->top = opt->top < classes ? opt->top : classes;
    o->names = names;
    o->json = opt->json;
    o->labelled = labelled;
    o->rows_expected = rows;
    o->order = calloc(classes, sizeof *o->order);
    o->prob = calloc(classes, sizeof *o->prob);
    if (!o->order || !o->prob)
        return fl_error_set(err, -ENOMEM, "out of memory");
    int rc = opt->logits_path ? open_npy(o, opt->logits_path, err) : 0;
    if (!rc && opt->csv_path)
        rc = open_csv(o, opt->csv_path, !labelled, err);
    return rc;
}

/* softmax of one record (double, max subtracted) and its classes by falling logit, ties to the
 * lower class, as eval ranks them (cpu_softmax_xent) */
static void rank_record(tf_pred_out *o, const float *z)
{
    const uint32_t K = o->classes;
    float mx = z[0];
    for (uint32_t k = 1; k < K; k++)
        mx = z[k] > mx ? z[k] : mx;
    double se = 0;
    for (uint32_t k = 0; k < K; k++)
        se += (o->prob[k] = exp((double)(z[k] - mx)));
    for (uint32_t k = 0; k < K; k++)
        o->prob[k] /= se;
    /* partial selection sort: only the first `top` places are needed */
    for (uint32_t k = 0; k < K; k++)
        o->order[k] = k;
    for (uint32_t i = 0; i < o->top; i++) {
        uint32_t best = i;
        for (uint32_t j = i + 1; j < K; j++) {
            uint32_t a = o->order[j], b = o->order[best];
            if (z[a] > z[b] || (z[a] == z[b] && a < b))
                best = j;
        }
        uint32_t t = o->order[i];
        o->order[i] = o->order[best];
        o->order[best] = t;
    }
}

/* eval's rank of the label: classes with a higher logit, or an equal one and a lower index */
static uint32_t label_rank(const float *z, uint32_t K, int32_t y)
{
    uint32_t r = 0;
    for (uint32_t k = 0; k < K; k++)
        r += z[k] > z[y] || (z[k] == z[y] && (int32_t)k < y);
    return r;
}

static void print_json(const tf_pred_out *o, uint64_t index, const char *file, const int32_t *y)
{
    printf("{\"index\":%llu", (unsigned long long)index);
    if (file) {
        printf(",\"file\":");
        fl_json_fputs(stdout, file, strlen(file));
    }
    if (y) {
        printf(",\"label\":%d,\"label_name\":", *y);
        fl_json_fputs(stdout, o->names[*y], strlen(o->names[*y]));
    }
    printf(",\"top\":[");
    for (uint32_t i = 0; i < o->top; i++) {
        uint32_t k = o->order[i];
        printf("%s{\"class\":%u,\"name\":", i ? "," : "", k);
        fl_json_fputs(stdout, o->names[k], strlen(o->names[k]));
        printf(",\"prob\":%.6g}", o->prob[k]);
    }
    printf("]}\n");
}

static void print_text(const tf_pred_out *o, uint64_t index, const char *file, const int32_t *y)
{
    char shown[1024]; /* names from the checkpoint and file names: control characters shown */
    if (file)
        printf("%s:", fl_text_escape(file, 0, shown, sizeof shown));
    else
        printf("%llu:", (unsigned long long)index);
    for (uint32_t i = 0; i < o->top; i++)
        printf("%s %s %.2f%%", i ? "," : "",
               fl_text_escape(o->names[o->order[i]], 0, shown, sizeof shown),
               100 * o->prob[o->order[i]]);
    if (y)
        printf("  (label %s)", fl_text_escape(o->names[*y], 0, shown, sizeof shown));
    putchar('\n');
}

static void csv_row(const tf_pred_out *o, uint64_t index, const char *file, const int32_t *y)
{
    fprintf(o->csv, "%llu", (unsigned long long)index);
    if (file) {
        fputc(',', o->csv);
        csv_field(o->csv, file);
    }
    if (y) {
        fputc(',', o->csv);
        csv_field(o->csv, o->names[*y]);
    }
    for (uint32_t i = 0; i < o->top; i++) {
        fputc(',', o->csv);
        csv_field(o->csv, o->names[o->order[i]]);
        fprintf(o->csv, ",%.6g", o->prob[o->order[i]]);
    }
    fputc('\n', o->csv);
}

int tf_pred_out_rows(tf_pred_out *o, uint64_t first, uint32_t n, const float *logits,
                     const int32_t *labels, char *const *files, fl_error *err)
{
    const uint32_t K = o->classes;
    for (uint32_t i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * K;
        const int32_t *y = o->labelled ? &labels[i] : NULL;
        const char *file = files ? files[i] : NULL;
        rank_record(o, z);
        if (y) {
            uint32_t r = label_rank(z, K, *y);
            o->correct1 += r < 1;
            o->correct5 += r < 5;
        }
        if (o->json)
            print_json(o, first + i, file, y);
        else
            print_text(o, first + i, file, y);
        if (o->csv)
            csv_row(o, first + i, file, y);
    }
    if (o->csv && ferror(o->csv))
        return fl_error_set(err, -EIO, "--csv %s: cannot write %s", o->csv_path,
                            o->csv_w.tmp ? o->csv_w.tmp : o->csv_path);
    if (o->npy_w.fd >= 0) {
        int rc = fl_write_all(o->npy_w.fd, logits, sizeof(float) * (size_t)n * K);
        if (rc)
            return fl_error_set(err, rc, "--logits %s: cannot write %s: %s", o->npy_path,
                                o->npy_w.tmp ? o->npy_w.tmp : o->npy_path, strerror(-rc));
    }
    o->rows += n;
    return 0;
}

int tf_pred_out_commit(tf_pred_out *o, fl_error *err)
{
    if (o->rows != o->rows_expected)
        return fl_error_set(err, FL_E_INVALID, "%llu records predicted, %llu expected",
                            (unsigned long long)o->rows, (unsigned long long)o->rows_expected);
    fl_write_step step;
    int rc;
    if (o->npy_w.fd >= 0 && (rc = fl_file_commit(&o->npy_w, &step)))
        return fl_error_set(err, rc, "--logits %s: cannot %s: %s", o->npy_path,
                            fl_write_step_name(step), strerror(-rc));
    if (o->csv) {
        int bad = fflush(o->csv) || ferror(o->csv) ? (errno ? errno : EIO) : 0;
        if (fclose(o->csv) && !bad)
            bad = errno ? errno : EIO;
        o->csv = NULL;
        if (bad)
            return fl_error_set(err, -bad, "--csv %s: cannot write: %s", o->csv_path,
                                strerror(bad));
        if ((rc = fl_file_commit(&o->csv_w, &step)))
            return fl_error_set(err, rc, "--csv %s: cannot %s: %s", o->csv_path,
                                fl_write_step_name(step), strerror(-rc));
    }
    return 0;
}

void tf_pred_out_close(tf_pred_out *o)
{
    if (o->csv)
        fclose(o->csv);
    if (o->npy_w.fd >= 0)
        fl_file_abort(&o->npy_w);
    if (o->csv_w.fd >= 0)
        fl_file_abort(&o->csv_w);
    free(o->order);
    free(o->prob);
    memset(o, 0, sizeof *o);
    o->npy_w.fd = o->csv_w.fd = -1;
}
