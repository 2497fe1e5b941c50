/* report_train.c — trainfast's side of the report (report_train.h): the per-N-steps points and
 * the "run" object that `train --log` lines carry, `train --report` at the end of a run, and the
 * `trainfast report` command. The page is drawn by report_html.c from logs read by
 * report_log.c, the same code for both ways in. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fl_cli.h"
#include "report_log.h"
#include "report_train.h"

uint64_t tf_points_every(uint32_t log_every, uint64_t bpe)
{
    if (log_every)
        return log_every;
    return bpe > 50 ? (bpe + 49) / 50 : 1;
}

static void points_reset(tf_points *p)
{
    fl_json_free(&p->j);
    fl_json_init(&p->j);
    fl_json_begin_array(&p->j);
    p->count = 0;
}

void tf_points_init(tf_points *p, uint64_t every)
{
    memset(p, 0, sizeof *p);
    p->every = every;
    fl_json_init(&p->j);
    points_reset(p);
}

void tf_points_free(tf_points *p) { fl_json_free(&p->j); }

static void jd(fl_json *j, const char *k, double v)
{
    fl_json_key(j, k);
    fl_json_double(j, v);
}

void tf_points_add(tf_points *p, double x, uint64_t step, double lr, double loss_sum,
                   double correct, double n, double wait, double compute, int world, int last)
{
    if (!p->every)
        return;
    if (p->j.depth == 0) /* taken: a new epoch */
        points_reset(p);
    p->n++;
    p->loss += loss_sum, p->correct += correct, p->seen += n;
    p->wait += wait, p->compute += compute;
    if (p->n < p->every && !last)
        return;
    const double busy = p->wait + p->compute;
    fl_json_begin_object(&p->j);
    jd(&p->j, "x", x);
    fl_json_key(&p->j, "step");
    fl_json_uint(&p->j, step);
    jd(&p->j, "lr", lr);
    jd(&p->j, "loss", p->seen > 0 ? p->loss / p->seen : 0);
    jd(&p->j, "acc", p->seen > 0 ? p->correct / p->seen : 0);
    jd(&p->j, "images_per_sec", busy > 0 ? p->seen * world / busy : 0);
    jd(&p->j, "data_wait_fraction", busy > 0 ? p->wait / busy : 0);
    fl_json_end_object(&p->j);
    p->count++;
    p->n = 0;
    p->loss = p->correct = p->seen = p->wait = p->compute = 0;
}

const char *tf_points_take(tf_points *p)
{
    if (p->j.depth == 0)
        points_reset(p); /* no step since the last take */
    fl_json_end_array(&p->j);
    return fl_json_failed(&p->j) ? NULL : fl_json_text(&p->j);
}

static void js(fl_json *j, const char *k, const char *v)
{
    fl_json_key(j, k);
    fl_json_string(j, v ? v : "");
}

static void ji(fl_json *j, const char *k, int64_t v)
{
    fl_json_key(j, k);
    fl_json_int(j, v);
}

void tf_report_run_json(const tf_run *r, int epochs, fl_json *j)
{
    const tf_options *o = r->o;
    char buf[64];
    time_t now = time(NULL);
    struct tm tm;
    fl_json_begin_object(j);
    js(j, "model", r->spec.name);
    ji(j, "parameters", r->spec.param_count);
    js(j, "device", r->ops->name);
    js(j, "backend", r->desc);
    js(j, "precision", tf_precision_name(r->prec));
    js(j, "data", o->data);
    js(j, "val", o->val);
    ji(j, "train_images", (int64_t)fl_dataset_count(fl_loader_dataset(r->L)));
    ji(j, "classes", r->num_classes);
    snprintf(buf, sizeof buf, "%dx%dx%d", r->in_h, r->in_w, r->in_c);
    js(j, "input", buf);
    ji(j, "batch", r->batch);
    ji(j, "processes", r->D->world);
    ji(j, "global_batch", (int64_t)r->batch * r->D->world);
    ji(j, "accum", o->accum);
    ji(j, "epochs", epochs);
    jd(j, "lr", o->lr);
    js(j, "schedule", o->cosine ? "cosine" : "linear");
    jd(j, "warmup_epochs", o->warmup_epochs);
    jd(j, "weight_decay", o->wd);
    jd(j, "momentum", o->momentum);
    fl_json_key(j, "nesterov");
    fl_json_bool(j, o->nesterov);
    jd(j, "label_smoothing", o->label_smoothing);
    jd(j, "ema", o->ema);
    ji(j, "crop_pad", o->crop_pad);
    fl_json_key(j, "flip");
    fl_json_bool(j, o->flip);
    ji(j, "cores", r->cores);
    ji(j, "threads", r->cfg.threads);
    if (r->workers_auto)
        js(j, "workers", "auto");
    else
        ji(j, "workers", r->workers);
    fl_json_key(j, "seed");
    fl_json_uint(j, o->seed);
    if (r->resumed)
        js(j, "resumed_from", r->rpath);
    js(j, "trainfast", fl_cli_version());
    if (gmtime_r(&now, &tm) && strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm))
        js(j, "started", buf);
    fl_json_end_object(j);
}

/* the figures of tf_report_cores_*: the core time while training, and the shares of it the
 * loader's threads (decoding) and the rest of the process (compute threads, the main thread)
 * used, from their CPU seconds; the workers' busy time (wall, summed) beside */
typedef struct cores_split {
    int cores, threads;
    uint32_t started, at_end, lo, hi;
    double mean, busy, cpu, decode_cpu, compute_cpu, wall, core_s, decode_frac, compute_frac;
} cores_split;

static cores_split cores_of(const tf_run *r)
{
    const tf_run_totals *t = &r->t;
    cores_split c = {.cores = r->cores, .threads = r->cfg.threads};
    c.started = r->workers_started;
    c.at_end = r->workers_auto ? r->dw.active : c.started;
    c.lo = r->workers_auto ? r->dw.lo : c.started;
    c.hi = r->workers_auto ? r->dw.hi : c.started;
    c.mean = r->workers_auto && r->dw.steps ? r->dw.active_steps / (double)r->dw.steps : c.started;
    c.busy = t->ls.io_wait_s + t->ls.decode_s + t->ls.augment_s;
    c.cpu = t->cpu_s;
    c.decode_cpu = t->decode_cpu_s;
    c.compute_cpu = c.cpu > c.decode_cpu ? c.cpu - c.decode_cpu : 0;
    c.wall = t->cpu_wall_s;
    c.core_s = c.wall * (c.cores > 0 ? c.cores : 1);
    if (c.core_s > 0) {
        c.decode_frac = c.decode_cpu / c.core_s;
        c.compute_frac = c.compute_cpu / c.core_s;
    }
    return c;
}

void tf_report_cores_text(const tf_run *r)
{
    const cores_split c = cores_of(r);
    char chosen[160] = "";
    if (r->workers_auto)
        snprintf(chosen, sizeof chosen,
                 " (chosen as it trained: %u-%u, %.1f on average; last measured %.2f ms of "
                 "decode per image per worker, %.0f ms of compute per step)",
                 c.lo, c.hi, c.mean, 1e3 * r->dw.busy_per_image, 1e3 * r->dw.step_s);
    char threads[48];
    if (c.threads > 0)
        snprintf(threads, sizeof threads, "%d compute thread%s", c.threads,
                 c.threads == 1 ? "" : "s");
    else
        snprintf(threads, sizeof threads, "compute on the GPU");
    fprintf(stderr,
            "%s: cores: %d for this process: decode %u of %u worker%s at work at the end%s, %s "
            "| while training (%.1f s x %d cores): decode %.1f CPU-s = %.0f%% (workers busy "
            "%.1f s), compute %.1f CPU-s = %.0f%%, not used by this process %.0f%%\n",
            TOOL, c.cores, c.at_end, c.started, c.started == 1 ? "" : "s", chosen, threads, c.wall,
            c.cores, c.decode_cpu, 100 * c.decode_frac, c.busy, c.compute_cpu, 100 * c.compute_frac,
            c.decode_frac + c.compute_frac < 1 ? 100 * (1 - c.decode_frac - c.compute_frac) : 0);
}

void tf_report_cores_json(const tf_run *r, fl_json *j)
{
    const cores_split c = cores_of(r);
    ji(j, "cores", c.cores);
    ji(j, "compute_threads", c.threads);
    ji(j, "decode_workers", c.at_end);
    ji(j, "decode_workers_started", c.started);
    fl_json_key(j, "decode_workers_auto");
    fl_json_bool(j, r->workers_auto);
    ji(j, "decode_workers_min", c.lo);
    ji(j, "decode_workers_max", c.hi);
    jd(j, "decode_workers_mean", c.mean);
    jd(j, "decode_busy_seconds", c.busy);
    jd(j, "cpu_seconds", c.cpu);
    jd(j, "decode_cpu_seconds", c.decode_cpu);
    jd(j, "compute_cpu_seconds", c.compute_cpu);
    jd(j, "train_wall_seconds", c.wall);
    jd(j, "decode_core_fraction", c.decode_frac);
    jd(j, "compute_core_fraction", c.compute_frac);
}

void tf_report_epoch_cores(const tf_epoch_report *r, fl_json *j)
{
    if (r->cores <= 0)
        return;
    ji(j, "cores", r->cores);
    ji(j, "compute_threads", r->compute_threads);
    jd(j, "decode_workers", r->decode_workers);
    jd(j, "decode_cpu_seconds", r->decode_cpu_s);
    jd(j, "cpu_seconds", r->cpu_s);
    jd(j, "train_wall_seconds", r->train_wall_s);
}

/* the name and title of a run's page when trainfast writes it at the end of training */
static void end_names(const tf_run *r, char *name, size_t ncap, char *title, size_t tcap)
{
    const char *p = r->o->log_path ? r->o->log_path : r->o->report_path;
    const char *base = strrchr(p, '/');
    snprintf(name, ncap, "%s", base && base[1] ? base + 1 : p);
    char *dot = strrchr(name, '.');
    if (dot && dot != name)
        *dot = 0;
    snprintf(title, tcap, "trainfast: %s on %s", r->spec.name, r->o->data);
}

int tf_report_at_end(tf_run *r, int status)
{
    const tf_options *o = r->o;
    if (!o->report_path || r->D->rank != 0)
        return status;
    char name[256], title[4200];
    end_names(r, name, sizeof name, title, sizeof title);
    tf_log g;
    fl_error err;
    int rc = -1;
    if (r->resumed && o->log_path) { /* the epochs before the resume are in the file */
        if ((rc = tf_log_load(o->log_path, &g, &err)) != 0)
            fl_cli_warn(TOOL, "--report: %s; the report shows this run's epochs only", err.msg);
        else {
            free(g.name);
            g.name = strdup(name);
        }
    }
    if (rc && (rc = tf_log_parse(r->log_lines.data ? r->log_lines.data : "", r->log_lines.len,
                                 "this run's log", name, &g, &err)) != 0) {
        fl_cli_error(TOOL, "--report %s: %s", o->report_path, err.msg);
        return status ? status : FL_EXIT_DATA;
    }
    if (!g.n_ep || !g.name) {
        fl_cli_warn(TOOL, "--report %s: no epoch finished: no report written", o->report_path);
        tf_log_free(&g);
        return status;
    }
    rc = tf_report_write(&g, 1, title, o->report_path, &err);
    tf_log_free(&g);
    if (rc) {
        fl_cli_error(TOOL, "--report %s", err.msg);
        return status ? status : FL_EXIT_DATA;
    }
    if (!r->quiet)
        fprintf(stderr, "%s: report: %s\n", TOOL, o->report_path);
    return status;
}

int tf_report_main(const char *const *paths, int n, const char *out, const char *title)
{
    tf_log *logs = calloc((size_t)n, sizeof *logs);
    fl_error err;
    int status = FL_EXIT_OK, got = 0;
    if (!logs)
        return FL_EXIT_DATA;
    for (; got < n; got++) {
        if (tf_log_load(paths[got], &logs[got], &err)) {
            fl_cli_error(TOOL, "report: %s", err.msg);
            status = FL_EXIT_DATA;
            break;
        }
        if (logs[got].skipped_lines)
            fl_cli_warn(TOOL,
                        "report: %s: its last line is cut short (a run stopped while "
                        "writing it?): skipped",
                        paths[got]);
        if (!logs[got].n_ep)
            fl_cli_warn(TOOL, "report: %s: no epoch in the log", paths[got]);
        for (int k = 0; k < got; k++) /* two runs of the same name: tell them apart */
            if (!strcmp(logs[k].name, logs[got].name)) {
                free(logs[got].name);
                logs[got].name = strdup(paths[got]);
                break;
            }
        if (!logs[got].name) {
            status = FL_EXIT_DATA;
            got++;
            break;
        }
    }
    if (!status && tf_report_write(logs, (size_t)n, title, out, &err)) {
        fl_cli_error(TOOL, "report: %s", err.msg);
        status = FL_EXIT_DATA;
    }
    if (!status && strcmp(out, "-"))
        fprintf(stderr, "%s: report: %s (%d run%s)\n", TOOL, out, n, n == 1 ? "" : "s");
    for (int k = 0; k < got; k++)
        tf_log_free(&logs[k]);
    free(logs);
    return status;
}
