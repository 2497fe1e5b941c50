/* report.c — what trainfast shows while it trains: a live progress line on a terminal, one line
 * per epoch (and a JSONL record per epoch with --log). The end-of-run summary is in train.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_clock.h"
#include "train.h"

void tf_live_start(tf_live *lv, int quiet)
{
    memset(lv, 0, sizeof *lv);
    lv->active = !quiet && isatty(STDERR_FILENO);
    lv->t_start = fl_now_s();
}

void tf_live_update(tf_live *lv, int epoch, int epochs, uint64_t done, uint64_t total,
                    double loss, double acc, double img_per_s)
{
    if (!lv->active)
        return;
    double now = fl_now_s();
    if (now - lv->last_draw < 0.125 && done < total)
        return;
    lv->last_draw = now;
    char bar[24];
    int width = 20, fill = total ? (int)((double)done / (double)total * width) : 0;
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = 0;
    char rate[32];
    fl_cli_human_rate(img_per_s, "img/s", rate, sizeof rate);
    fprintf(stderr, "\r\033[Kepoch %d/%d [%s] %llu/%llu  loss %.4f  acc %.2f%%  %s", epoch, epochs,
            bar, (unsigned long long)done, (unsigned long long)total, loss, 100.0 * acc, rate);
    fflush(stderr);
}

void tf_live_clear(tf_live *lv)
{
    if (lv->active) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

int tf_report_epoch(const tf_epoch_report *r, int quiet, FILE *log)
{
    int e = 0;
    if (!quiet) {
        char rate[32], top5[32] = "";
        fl_cli_human_rate(r->images_per_sec, "img/s", rate, sizeof rate);
        if (r->val_top5 >= 0)
            snprintf(top5, sizeof top5, " top5 %.2f%%", 100.0 * r->val_top5);
        fprintf(stderr,
                "epoch %d/%d  train loss %.4f acc %.2f%%  val loss %.4f top1 %.2f%%%s  "
                "%s  data wait %.1f%%  %.1f s\n",
                r->epoch, r->epochs, r->train_loss, 100.0 * r->train_acc, r->val_loss,
                100.0 * r->val_top1, top5, rate, 100.0 * r->data_wait_fraction, r->epoch_seconds);
    }
    if (log) {
        fl_json j;
        fl_json_init(&j);
        fl_json_begin_object(&j);
        fl_json_key(&j, "epoch");
        fl_json_int(&j, r->epoch);
        fl_json_key(&j, "epochs");
        fl_json_int(&j, r->epochs);
        fl_json_key(&j, "steps");
        fl_json_uint(&j, r->steps);
        fl_json_key(&j, "lr");
        fl_json_double(&j, r->lr);
        fl_json_key(&j, "train_loss");
        fl_json_double(&j, r->train_loss);
        fl_json_key(&j, "train_acc");
        fl_json_double(&j, r->train_acc);
        fl_json_key(&j, "val_loss");
        fl_json_double(&j, r->val_loss);
        fl_json_key(&j, "val_top1");
        fl_json_double(&j, r->val_top1);
        if (r->val_top5 >= 0) {
            fl_json_key(&j, "val_top5");
            fl_json_double(&j, r->val_top5);
        }
        fl_json_key(&j, "images_per_sec");
        fl_json_double(&j, r->images_per_sec);
        fl_json_key(&j, "data_wait_fraction");
        fl_json_double(&j, r->data_wait_fraction);
        fl_json_key(&j, "epoch_seconds");
        fl_json_double(&j, r->epoch_seconds);
        fl_json_key(&j, "wall_seconds");
        fl_json_double(&j, r->wall_seconds);
        fl_json_end_object(&j);
        errno = 0;
        if (fl_json_failed(&j))
            e = ENOMEM;
        else if (fprintf(log, "%s\n", fl_json_text(&j)) < 0 || fflush(log) != 0 || ferror(log))
            e = errno ? errno : EIO;
        fl_json_free(&j);
    }
    return e;
}
