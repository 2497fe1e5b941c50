/* progress.c — the console output of a run: the banner, a live progress line on a terminal, one
 * line per epoch (and a JSONL record per epoch with --log, which the HTML report
 * reads: report_log.h, docs/REPORT.md), and the end-of-run summary (text on stderr, one JSON
 * object on stdout with --json). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_clock.h"
#include "report_train.h"
#include "train_internal.h"

void tf_live_start(tf_live *lv, int quiet)
{
    memset(lv, 0, sizeof *lv);
    lv->active = !quiet && isatty(STDERR_FILENO);
    lv->t_start = fl_now_s();
}

void tf_live_update(tf_live *lv, int epoch, int epochs, uint64_t done, uint64_t total, double loss,
                    double acc, double img_per_s)
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

/* the fields after the first ones: the step-time split, GPU figures, points, the run (report) */
static void epoch_extra(fl_json *j, const tf_epoch_report *r)
{
    static const char *const keys[] = {"compute_seconds", "h2d_seconds", "data_wait_seconds",
                                       "eval_seconds", "checkpoint_seconds"};
    const double v[] = {r->compute_s, r->h2d_s, r->data_wait_s, r->eval_s, r->ckpt_s};
    for (int k = 0; k < 5; k++) {
        fl_json_key(j, keys[k]);
        fl_json_double(j, v[k]);
    }
    if (r->gpu_util >= 0) {
        fl_json_key(j, "gpu_utilization");
        fl_json_double(j, r->gpu_util);
        fl_json_key(j, "gpu_memory_used_bytes");
        fl_json_uint(j, r->gpu_mem);
        fl_json_key(j, "gpu_memory_total_bytes");
        fl_json_uint(j, r->gpu_mem_total);
    }
    tf_report_epoch_cores(r, j);
    if (r->points_json) {
        fl_json_key(j, "points");
        fl_json_raw(j, r->points_json);
    }
    if (r->run_json) {
        fl_json_key(j, "run");
        fl_json_raw(j, r->run_json);
    }
}

int tf_report_epoch(const tf_epoch_report *r, int quiet, FILE *log, fl_tbuf *lines)
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
    if (log || lines) {
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
        epoch_extra(&j, r);
        fl_json_end_object(&j);
        errno = 0;
        if (fl_json_failed(&j))
            e = ENOMEM;
        else if (log &&
                 (fprintf(log, "%s\n", fl_json_text(&j)) < 0 || fflush(log) != 0 || ferror(log)))
            e = errno ? errno : EIO;
        if (lines && !fl_json_failed(&j))
            fl_tbuf_printf(lines, "%s\n", fl_json_text(&j));
        fl_json_free(&j);
    }
    return e;
}

const char *tf_precision_name(tf_precision p)
{
    return p == TF_BF16 ? "bf16" : p == TF_FP16 ? "fp16" : "fp32";
}

int tf_close_output(FILE *f)
{
    /* a log that cannot be written is an error, not a silent loss */
    int e = 0;
    if (fflush(f) != 0 || ferror(f))
        e = errno ? errno : EIO;
    struct stat sb;
    if (!e && fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && fsync(fileno(f)) != 0)
        e = errno;
    if (fclose(f) != 0 && !e)
        e = errno;
    return e;
}

void tf_report_banner(const tf_run *r)
{
    const tf_options *o = r->o;
    const tf_dist *D = r->D;
    const tf_model_spec *spec = &r->spec;
    if (r->quiet)
        return;
    const uint64_t count = fl_dataset_count(fl_loader_dataset(r->L));
    fprintf(stderr,
            "%s: %s (%.2f M params, %.1f MFLOP/img) on %s | %s: %llu train images, %u "
            "classes, %dx%dx%d | batch %u x %d accum, %d epoch%s, lr %g %s, %s\n",
            TOOL, spec->name, spec->param_count / 1e6, 2 * tf_model_flops(spec) / 1e6,
            r->desc[0] ? r->desc : r->ops->name, o->data, (unsigned long long)count, r->num_classes,
            r->in_h, r->in_w, r->in_c, r->batch, o->accum, (int)r->epochs,
            r->epochs == 1 ? "" : "s", o->lr, o->cosine ? "cosine" : "linear",
            tf_precision_name(r->prec));
    if (D->world > 1)
        fprintf(stderr,
                "%s: data parallel: %d processes (%s), batch %u per rank = global batch "
                "%llu, %llu steps per epoch on every rank%s; BatchNorm statistics %s\n",
                TOOL, D->world, D->launcher, r->batch, (unsigned long long)r->batch * D->world,
                (unsigned long long)r->bpe,
                r->pad_tail && r->bpe * r->batch * (uint64_t)D->world > count
                    ? " (tail padded by wrap-around)"
                    : "",
                o->sync_bn ? "synchronized (--sync-bn)" : "per process");
    if (r->resumed)
        fprintf(stderr, "%s: resumed from %s at epoch %llu batch %llu (step %llu)\n", TOOL,
                r->rpath, (unsigned long long)r->start_epoch + 1,
                (unsigned long long)r->start_batch, (unsigned long long)r->t.micro);
}

/* the summary's lines on stderr */
static void summary_text(const tf_run *r, double wall, double busy, double ips, double dwf)
{
    const tf_run_totals *t = &r->t;
    char rate[32];
    fl_cli_human_rate(ips, "img/s", rate, sizeof rate);
    fprintf(stderr,
            "%s: done: val top1 %.2f%% loss %.4f after %d epoch%s | %s | wall %.1f s "
            "(train %.1f s, eval %.1f s, checkpoints %.1f s)\n",
            TOOL, 100.0 * t->ev.top1, t->ev.loss, (int)r->epochs, r->epochs == 1 ? "" : "s", rate,
            wall, busy, t->eval_s, t->ckpt_s);
    fprintf(stderr,
            "%s: step time split: compute %.1f%% (%.2f s)%s, waiting for data %.1f%% (%.2f s)"
            " | loader: %s, %u worker%s, decode %.2f s, io wait %.2f s%s\n",
            TOOL, busy > 0 ? 100.0 * (t->compute - t->h2d) / busy : 0, t->compute - t->h2d, "",
            100.0 * dwf, t->data_wait, t->ls.io_backend ? t->ls.io_backend : "?",
            (unsigned)r->workers, r->workers == 1 ? "" : "s", t->ls.decode_s, t->ls.io_wait_s,
            dwf > 0.1 && !r->workers_auto
                ? " -> the input pipeline is the bottleneck: raise --workers"
                : "");
    tf_report_cores_text(r);
    if (!r->on_cpu)
        fprintf(stderr, "%s: host-to-device copies %.2f s (%.1f%%)%s\n", TOOL, t->h2d,
                busy > 0 ? 100.0 * t->h2d / busy : 0,
                t->skipped_steps ? " (fp16 steps skipped for inf/nan: see JSON)" : "");
    if (t->nv_samples) {
        char m1[32], m2[32];
        fl_cli_human_bytes(t->nv_mem_max, m1, sizeof m1);
        fl_cli_human_bytes(t->nv_mem_total, m2, sizeof m2);
        fprintf(stderr,
                "%s: GPU utilisation %.0f%% on average (%d samples), memory used up to "
                "%s of %s (NVML)\n",
                TOOL, t->nv_util_sum / t->nv_samples, t->nv_samples, m1, m2);
    } else if (!r->on_cpu) {
        fprintf(stderr, "%s: GPU utilisation: not available (no NVML or run too short)\n", TOOL);
    }
}

static void jd(fl_json *j, const char *k, double v)
{
    fl_json_key(j, k);
    fl_json_double(j, v);
}

static void ju(fl_json *j, const char *k, uint64_t v)
{
    fl_json_key(j, k);
    fl_json_uint(j, v);
}

static void js(fl_json *j, const char *k, const char *v)
{
    fl_json_key(j, k);
    fl_json_string(j, v);
}

/* the summary's JSON object on stdout (--json) */
static int summary_json(const tf_run *r, double wall, double busy, double ips, double dwf)
{
    const tf_run_totals *t = &r->t;
    const tf_dist *D = r->D;
    fl_json j;
    fl_json_init(&j);
    fl_json_begin_object(&j);
    jd(&j, "val_top1", t->ev.top1);
    if (r->num_classes > 10)
        jd(&j, "val_top5", t->ev.top5);
    jd(&j, "val_loss", t->ev.loss);
    fl_json_key(&j, "epochs");
    fl_json_int(&j, (int)r->epochs);
    fl_json_key(&j, "epochs_auto");
    fl_json_bool(&j, r->epochs_auto);
    jd(&j, "images_per_sec", ips);
    jd(&j, "data_wait_fraction", dwf);
    js(&j, "device", r->ops->name);
    js(&j, "precision", tf_precision_name(r->prec));
    jd(&j, "wall_seconds", wall);
    jd(&j, "train_seconds", busy);
    jd(&j, "compute_seconds", t->compute - t->h2d);
    jd(&j, "data_wait_seconds", t->data_wait);
    jd(&j, "h2d_seconds", t->h2d);
    jd(&j, "eval_seconds", t->eval_s);
    js(&j, "model", r->spec.name);
    ju(&j, "batch", r->batch);
    ju(&j, "steps", t->opt_steps); /* optimizer steps */
    ju(&j, "micro_steps", t->micro);
    ju(&j, "images", (uint64_t)t->samples_run); /* all ranks */
    ju(&j, "skipped_steps", t->skipped_steps);
    fl_json_key(&j, "resumed");
    fl_json_bool(&j, r->resumed);
    fl_json_key(&j, "world");
    fl_json_int(&j, D->world);
    ju(&j, "global_batch", (uint64_t)r->batch * (uint64_t)D->world);
    ju(&j, "steps_min", (uint64_t)t->steps_min);
    ju(&j, "steps_max", (uint64_t)t->steps_max);
    ju(&j, "samples_run", (uint64_t)t->samples_run);
    ju(&j, "start_epoch", r->start_epoch);
    ju(&j, "start_sample", r->start_batch * r->batch * (uint64_t)D->world);
    js(&j, "backend", r->desc);
    tf_report_cores_json(r, &j);
    fl_json_key(&j, "gpu_utilization");
    if (t->nv_samples)
        fl_json_double(&j, t->nv_util_sum / t->nv_samples / 100.0);
    else
        fl_json_null(&j);
    fl_json_key(&j, "gpu_memory_used_bytes");
    if (t->nv_samples)
        fl_json_uint(&j, t->nv_mem_max);
    else
        fl_json_null(&j);
    fl_json_end_object(&j);
    printf("%s\n", fl_json_text(&j));
    fl_json_free(&j);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fl_cli_error(TOOL, "--json: cannot write the summary to stdout: %s", strerror(errno));
        return FL_EXIT_DATA;
    }
    return 0;
}

int tf_report_summary(tf_run *r, int status)
{
    const tf_dist *D = r->D;
    const tf_run_totals *t = &r->t;
    const uint64_t start_sample = r->start_batch * r->batch * (uint64_t)D->world;
    if (status == FL_EXIT_OK && !r->quiet && (D->world > 1 || r->resumed))
        fprintf(stderr,
                "%s: %d process(es): %.0f..%.0f steps per rank; %.0f samples trained in this run "
                "(all ranks), starting at epoch %llu sample %llu\n",
                TOOL, D->world, t->steps_min, t->steps_max, t->samples_run,
                (unsigned long long)r->start_epoch + 1, (unsigned long long)start_sample);
    const double wall = fl_now_s() - r->t_start, busy = t->data_wait + t->compute;
    const double ips = busy > 0 ? t->images * (double)D->world / busy : 0,
                 dwf = busy > 0 ? t->data_wait / busy : 0;
    if (status == FL_EXIT_OK && !r->quiet)
        summary_text(r, wall, busy, ips, dwf);
    if (r->o->json && status == FL_EXIT_OK && D->rank == 0)
        status = summary_json(r, wall, busy, ips, dwf);
    return status;
}
