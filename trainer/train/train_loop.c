/* train_loop.c — the epochs of `trainfast train` (train_internal.h): libfastload batches ->
 * backend train_step with the LR schedule, per-epoch evaluation and report, checkpoints (every N
 * steps, at epoch ends, on SIGTERM/SIGINT/SIGHUP), divergence and signal stops, NVML sampling. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "fl_cli.h"
#include "fl_clock.h"
#include "epoch_budget.h"
#include "nvml.h"
#include "report_train.h"
#include "train_internal.h"

/* ---- signals: the handler only sets a flag; the loop stops at the next step boundary ------ */
static volatile sig_atomic_t g_stop_signal;

static void on_signal(int sig) { g_stop_signal = sig; }

/* SIGTERM, SIGINT and SIGHUP (the terminal or ssh session that started the run closed) stop the
 * run after a checkpoint; a signal the caller ignores (nohup ignores SIGHUP, a script's
 * background job SIGINT) stays ignored. */
static void install_signals(void)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    fl_cli_catch_signals(sigs, sizeof sigs / sizeof sigs[0], on_signal, 0);
}

/* this process's CPU seconds so far (user + system, every thread) */
static double cpu_now(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u))
        return 0;
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
           u.ru_stime.tv_usec * 1e-6;
}

/* ---- LR schedule over optimizer steps: linear warm-up, then linear or cosine decay to 0 ---- */
static float lr_at(const tf_options *o, uint64_t step, uint64_t total, uint64_t warmup)
{
    if (warmup > 0 && step < warmup)
        return o->lr * (float)(step + 1) / (float)warmup;
    if (total <= warmup)
        return o->lr;
    double t = (double)(step - warmup) / (double)(total - warmup);
    if (t > 1.0)
        t = 1.0;
    double f = o->cosine ? 0.5 * (1.0 + cos(M_PI * t)) : 1.0 - t;
    return (float)(o->lr * f);
}

/* what the loop keeps between steps */
typedef struct loop {
    tf_run *r;
    /* Optimizer steps: groups of --accum micro-batches within an epoch. An epoch's last group may
     * be shorter: it still steps, with the mean of the gradients it had (tf_batch.accum_group),
     * so every sample of the epoch is in the weights before the epoch's evaluation and
     * checkpoint, and a run shorter than one group still trains. The schedule counts these
     * steps; a batch's step index follows from its position (epoch, batch), so a resumed run
     * continues the schedule exactly. */
    uint64_t accum, steps_per_epoch, total_steps, warmup;
    /* a loss far above chance level (log K) is divergence, not a hard batch: with BatchNorm and
     * the usual learning rates a loss of 10^4 x log K is out of reach of a run that still learns */
    double diverge_loss;
    tf_live live;
    tf_nvml *nv; /* GPU utilisation and memory, sampled about once a second (GPU runs only) */
    double nv_last;
    double ep_wait, ep_compute, ep_t0;
    uint64_t ep_images;
    uint64_t epoch, bpos; /* position of the next batch */
    int warned_diverged;
    int log_failed; /* errno of a failed --log write */
    float lr;
    /* for the log's report fields (report_train.h): the epoch's points, the rest of its
     * step-time split, its GPU samples; the "run" object goes on this process's first line */
    tf_points pts;
    double ep_h2d, ep_ckpt, ep_nv_util;
    int ep_nv_n, run_logged;
    unsigned long long ep_nv_mem;
    double eval_cpu, eval_wall; /* the evaluations' CPU and wall seconds */
    /* at the epoch's start: process and loader CPU seconds, the decode choice's step sums */
    double ep_cpu0, ep_dcpu0, ep_dw_sum0;
    uint64_t ep_dw_steps0;
} loop;

/* the epoch's figures start now (its core split) */
static void epoch_start(loop *lp)
{
    const tf_run *r = lp->r;
    lp->ep_t0 = fl_now_s();
    lp->ep_cpu0 = cpu_now();
    lp->ep_dcpu0 = tf_tasks_cpu(&r->loader_tasks);
    lp->ep_dw_sum0 = r->dw.active_steps;
    lp->ep_dw_steps0 = r->dw.steps;
}

/* the epoch's core split so far into er (before its evaluation) */
static void epoch_cores(const loop *lp, tf_epoch_report *er)
{
    const tf_run *r = lp->r;
    er->cores = r->cores;
    er->compute_threads = r->cfg.threads;
    const uint64_t steps = r->dw.steps - lp->ep_dw_steps0;
    er->decode_workers = r->workers_auto && steps
                             ? (r->dw.active_steps - lp->ep_dw_sum0) / (double)steps
                             : (double)(r->workers ? r->workers : r->cores);
    er->decode_cpu_s = tf_tasks_cpu(&r->loader_tasks) - lp->ep_dcpu0;
    er->cpu_s = cpu_now() - lp->ep_cpu0;
    er->train_wall_s = fl_now_s() - lp->ep_t0;
}

/* the step's loss is far above chance level or not finite: say so (training on would only write
 * diverged checkpoints over good ones) */
static void report_divergence(const loop *lp, const tf_step_result *s, uint64_t b_epoch)
{
    const tf_run *r = lp->r;
    char what[64];
    if (isfinite(s->loss))
        snprintf(what, sizeof what, "%.3g (chance level %.2f)", s->loss,
                 (double)logf((float)r->num_classes));
    else
        snprintf(what, sizeof what, "%s", isnan(s->loss) ? "nan" : "inf");
    char mb[48] = "";
    if (lp->accum > 1)
        snprintf(mb, sizeof mb, ", micro-batch %llu", (unsigned long long)r->t.micro);
    fl_cli_error(TOOL,
                 "loss became %s at step %llu (epoch %llu%s): training diverged; lower --lr "
                 "(now %g) and start again%s%s",
                 what, (unsigned long long)(s->stepped ? r->t.opt_steps : r->t.opt_steps + 1),
                 (unsigned long long)b_epoch + 1, mb, r->o->lr,
                 r->last_ckpt[0] || r->resumed ? "; last checkpoint kept: " : "",
                 r->last_ckpt[0] ? r->last_ckpt
                 : r->resumed    ? r->rpath
                                 : "");
}

static void sample_nvml(loop *lp, double now)
{
    tf_run_totals *t = &lp->r->t;
    if (!lp->nv || now - lp->nv_last < 1.0)
        return;
    int u;
    unsigned long long used, tot;
    lp->nv_last = now;
    if (tf_nvml_sample(lp->nv, (unsigned)lp->r->cfg.device, &u, &used, &tot) == 0 && u >= 0) {
        t->nv_util_sum += u;
        t->nv_samples++;
        t->nv_mem_max = used > t->nv_mem_max ? used : t->nv_mem_max;
        t->nv_mem_total = tot;
        lp->ep_nv_util += u;
        lp->ep_nv_n++;
        lp->ep_nv_mem = used > lp->ep_nv_mem ? used : lp->ep_nv_mem;
    }
}

/* CPU without --workers: after each step, as many decode workers at work as the steps need
 * (decode_workers.h). The batches do not depend on it. */
static void choose_workers(tf_run *r, double wait_s, double compute_s, uint32_t n)
{
    fl_loader_stats st;
    fl_error err;
    fl_loader_stats_get(r->L, &st);
    const uint32_t was = r->dw.active;
    uint32_t now = tf_decode_auto_step(&r->dw, n, wait_s, compute_s,
                                       st.io_wait_s + st.decode_s + st.augment_s, st.images);
    if (now != was && fl_loader_set_workers(r->L, now, &err))
        r->dw.active = was; /* cannot happen: now is within [1, started] */
}

/* One micro-batch: fetch, train_step, figures. *last: it ended an epoch. Returns the status. */
static int train_one(loop *lp, int *last)
{
    tf_run *r = lp->r;
    fl_error err;
    double t0 = fl_now_s();
    fl_batch *fb;
    if (fl_loader_next(r->L, &fb, &err)) {
        tf_live_clear(&lp->live);
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    double t1 = fl_now_s();
    tf_batch x = tf_batch_of(fb, fb->size);
    const uint64_t group = fb->batch / lp->accum, b_epoch = fb->epoch;
    const uint64_t left = r->bpe > group * lp->accum ? r->bpe - group * lp->accum : lp->accum;
    x.accum_group = (uint32_t)(left < lp->accum ? left : lp->accum);
    lp->lr = lr_at(r->o, fb->epoch * lp->steps_per_epoch + group, lp->total_steps, lp->warmup);
    tf_step_result s;
    int rc = r->ops->train_step(r->b, &x, lp->lr, &s, &err);
    double t2 = fl_now_s();
    *last = fb->last_in_epoch;
    lp->epoch = fb->epoch;
    lp->bpos = fb->batch;
    fl_loader_release(r->L, fb);
    if (rc) {
        tf_live_clear(&lp->live);
        fl_cli_error(TOOL, "step %llu: %s", (unsigned long long)r->t.micro, err.msg);
        return FL_EXIT_DATA;
    }
    r->t.micro++;
    if (r->workers_auto)
        choose_workers(r, t1 - t0, t2 - t1, s.n);
    if (s.stepped)
        r->t.opt_steps++;
    if (!isfinite(s.loss) || s.loss > lp->diverge_loss) {
        tf_live_clear(&lp->live);
        report_divergence(lp, &s, b_epoch);
        return FL_EXIT_DATA;
    }
    sample_nvml(lp, t2);
    r->t.data_wait += t1 - t0;
    r->t.compute += t2 - t1;
    r->t.h2d += s.h2d_s;
    lp->ep_wait += t1 - t0;
    lp->ep_compute += t2 - t1;
    r->t.images += s.n;
    lp->ep_images += s.n;
    r->epoch_loss += s.loss * s.n;
    r->epoch_correct += s.correct;
    r->epoch_seen += s.n;
    lp->ep_h2d += s.h2d_s;
    tf_points_add(
        &lp->pts, (double)b_epoch + (double)(lp->bpos + 1) / (double)(r->bpe ? r->bpe : 1),
        r->t.opt_steps, lp->lr, s.loss * s.n, s.correct, s.n, t1 - t0, t2 - t1, r->D->world, *last);
    return 0;
}

/* The end of an epoch: its figures over all ranks, evaluation, the epoch's report line. */
static int end_epoch(loop *lp)
{
    tf_run *r = lp->r;
    const tf_options *o = r->o;
    const tf_dist *D = r->D;
    fl_error err;
    tf_live_clear(&lp->live);
    tf_epoch_report ec = {0};
    epoch_cores(lp, &ec);
    double em[3] = {r->epoch_loss, (double)r->epoch_correct, (double)r->epoch_seen};
    if (tf_dist_allreduce_f64(D, em, 3, 0, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    /* flip TTA doubles the cost: only for the final evaluation. Data parallel: rank 0 evaluates
     * (with its own BN running statistics); the others go on to the next collective and wait
     * there. */
    const double c0 = cpu_now(), w0 = fl_now_s();
    const int eval_workers = r->workers_auto ? (int)r->dw.active : o->workers > 0 ? o->workers : 1;
    int rc = D->rank != 0 ? 0
                          : tf_evaluate(r->ops, r->b, o->val, r->batch, r->size,
                                        o->tta && lp->epoch == (uint64_t)r->epochs, o->ema > 0,
                                        eval_workers, &r->quiet, &r->t.ev, &err);
    lp->eval_cpu += cpu_now() - c0; /* not training: out of the core split */
    lp->eval_wall += fl_now_s() - w0;
    if (rc) {
        fl_cli_error(TOOL, "evaluation: %s", err.msg);
        return FL_EXIT_DATA;
    }
    r->t.have_eval = 1;
    r->t.eval_s += r->t.ev.seconds;
    const double busy = lp->ep_wait + lp->ep_compute + 1e-9, chance = logf((float)r->num_classes);
    tf_epoch_report er = {.epoch = (int)lp->epoch,
                          .epochs = (int)r->epochs,
                          .train_loss = em[2] > 0 ? em[0] / em[2] : 0,
                          .train_acc = em[2] > 0 ? em[1] / em[2] : 0,
                          .val_loss = r->t.ev.loss,
                          .val_top1 = r->t.ev.top1,
                          .val_top5 = r->num_classes > 5 ? r->t.ev.top5 : -1,
                          .lr = lp->lr, /* as eval shows */
                          .images_per_sec = lp->ep_images * (double)D->world / busy,
                          .data_wait_fraction = lp->ep_wait / busy,
                          .epoch_seconds = fl_now_s() - lp->ep_t0,
                          .wall_seconds = r->wall_before + fl_now_s() - r->t_start,
                          .steps = r->t.opt_steps,
                          .compute_s = lp->ep_compute - lp->ep_h2d,
                          .h2d_s = lp->ep_h2d,
                          .data_wait_s = lp->ep_wait,
                          .eval_s = r->t.ev.seconds,
                          .ckpt_s = lp->ep_ckpt,
                          .gpu_util = lp->ep_nv_n ? lp->ep_nv_util / lp->ep_nv_n / 100.0 : -1,
                          .gpu_mem = lp->ep_nv_mem,
                          .gpu_mem_total = r->t.nv_mem_total,
                          .cores = ec.cores,
                          .compute_threads = ec.compute_threads,
                          .decode_workers = ec.decode_workers,
                          .decode_cpu_s = ec.decode_cpu_s,
                          .cpu_s = ec.cpu_s,
                          .train_wall_s = ec.train_wall_s};
    fl_json run;
    fl_json_init(&run);
    if (lp->pts.every) {
        er.points_json = tf_points_take(&lp->pts);
        if (!lp->run_logged) {
            tf_report_run_json(r, er.epochs, &run);
            er.run_json = fl_json_failed(&run) ? NULL : fl_json_text(&run);
            lp->run_logged = 1;
        }
    }
    int lerr = tf_report_epoch(&er, r->quiet, r->log,
                               o->report_path && D->rank == 0 ? &r->log_lines : NULL);
    fl_json_free(&run);
    if (lerr && !lp->log_failed)
        lp->log_failed = lerr; /* finish this step (its checkpoint), then stop */
    /* chance level is log(classes): far above it the run has diverged; say so once instead of
     * training on silently */
    if (!lp->warned_diverged && D->rank == 0 &&
        (!isfinite(er.train_loss) || er.train_loss > 10.0 * chance + 10.0)) {
        fl_cli_warn(TOOL,
                    "training diverged at epoch %d (train loss %g, chance level %.2f): "
                    "lower --lr (now %g)",
                    er.epoch, er.train_loss, chance, o->lr);
        lp->warned_diverged = 1;
    }
    r->epoch_loss = 0;
    r->epoch_correct = r->epoch_seen = 0;
    lp->ep_wait = lp->ep_compute = 0;
    lp->ep_images = 0;
    lp->ep_h2d = lp->ep_ckpt = lp->ep_nv_util = 0;
    lp->ep_nv_n = 0;
    lp->ep_nv_mem = 0;
    epoch_start(lp);
    return 0;
}

/* A signal seen by any rank stops every rank after this step (mpirun forwards SIGTERM/SIGINT to
 * all, but they arrive at different steps). Returns the status; *stop: the signal, or 0. */
static int agree_stop(loop *lp, int *stop)
{
    const tf_dist *D = lp->r->D;
    fl_error err;
    *stop = g_stop_signal;
    if (D->world <= 1)
        return 0;
    double sv = (double)*stop;
    if (tf_dist_allreduce_f64(D, &sv, 1, 1, &err)) {
        tf_live_clear(&lp->live);
        fl_cli_error(TOOL, "step %llu: %s", (unsigned long long)lp->r->t.micro, err.msg);
        return FL_EXIT_DATA;
    }
    *stop = (int)sv;
    return 0;
}

/* After a step: checkpoint when due, stop on a failed --log or a signal. Returns the status. */
static int after_step(loop *lp, int last)
{
    tf_run *r = lp->r;
    const tf_options *o = r->o;
    fl_error err;
    int stop, status = agree_stop(lp, &stop);
    if (status)
        return status;
    if (o->ckpt_dir && (last || stop || (o->ckpt_every && r->t.micro % o->ckpt_every == 0))) {
        double c0 = fl_now_s();
        if (tf_save_checkpoint(r, lp->epoch, lp->bpos, r->epoch_loss, r->epoch_correct,
                               r->epoch_seen, &err)) {
            tf_live_clear(&lp->live);
            fl_cli_error(TOOL, "checkpoint: %s", err.msg);
            return FL_EXIT_DATA;
        }
        r->t.ckpt_s += fl_now_s() - c0;
        lp->ep_ckpt += fl_now_s() - c0;
    }
    if (lp->log_failed) {
        tf_live_clear(&lp->live);
        fl_cli_error(TOOL, "--log %s: cannot write: %s%s%s", o->log_path, strerror(lp->log_failed),
                     o->ckpt_dir ? "; stopped after checkpoint " : "",
                     o->ckpt_dir ? r->last_ckpt : "");
        return FL_EXIT_DATA;
    }
    if (!stop)
        return 0;
    tf_live_clear(&lp->live);
    if (r->D->rank == 0)
        fprintf(stderr, "%s: stopped by %s at epoch %llu batch %llu (step %llu)%s%s%s\n", TOOL,
                stop == SIGTERM  ? "SIGTERM"
                : stop == SIGINT ? "SIGINT"
                : stop == SIGHUP ? "SIGHUP"
                                 : "a signal",
                (unsigned long long)lp->epoch + 1, (unsigned long long)lp->bpos,
                (unsigned long long)r->t.micro,
                o->ckpt_dir ? "; checkpoint " : "; no --checkpoint DIR, progress lost",
                o->ckpt_dir ? r->last_ckpt : "", o->ckpt_dir ? "; continue with --resume" : "");
    return 128 + stop;
}

int tf_run_epochs(tf_run *r)
{
    const tf_options *o = r->o;
    loop lp = {.r = r, .accum = (uint64_t)o->accum};
    lp.steps_per_epoch = (r->bpe + lp.accum - 1) / lp.accum;
    lp.total_steps = lp.steps_per_epoch * (uint64_t)r->epochs;
    lp.warmup = tf_warmup_steps(o->warmup_epochs, lp.steps_per_epoch, lp.total_steps);
    lp.diverge_loss = 1e4 * logf((float)r->num_classes);
    lp.epoch = r->lo.start_epoch;
    lp.bpos = r->lo.start_batch;
    install_signals();
    lp.nv = r->on_cpu ? NULL : tf_nvml_open();
    /* the log's points (and the report's) only where a log or report is written: rank 0 */
    tf_points_init(&lp.pts, (r->log || o->report_path) && r->D->rank == 0
                                ? tf_points_every(o->log_every, r->bpe)
                                : 0);
    tf_live_start(&lp.live, r->quiet);
    epoch_start(&lp);
    const double cpu0 = lp.ep_cpu0, wall0 = lp.ep_t0, dcpu0 = lp.ep_dcpu0;
    int status = FL_EXIT_OK;
    while (!status && lp.epoch < (uint64_t)r->epochs) {
        int last = 0;
        if ((status = train_one(&lp, &last)))
            break;
        /* position of the next batch */
        if (last) {
            lp.epoch++;
            lp.bpos = 0;
        } else {
            lp.bpos++;
        }
        tf_live_update(&lp.live, (int)(last ? lp.epoch : lp.epoch + 1), (int)r->epochs,
                       last ? r->spe : lp.bpos * r->batch, r->spe,
                       r->epoch_seen ? r->epoch_loss / r->epoch_seen : 0,
                       r->epoch_seen ? (double)r->epoch_correct / r->epoch_seen : 0,
                       lp.ep_images / (lp.ep_wait + lp.ep_compute + 1e-9));
        if (last && (status = end_epoch(&lp)))
            break;
        status = after_step(&lp, last);
    }
    r->t.cpu_s = cpu_now() - cpu0 - lp.eval_cpu;
    r->t.decode_cpu_s = tf_tasks_cpu(&r->loader_tasks) - dcpu0;
    r->t.cpu_wall_s = fl_now_s() - wall0 - lp.eval_wall;
    tf_nvml_close(lp.nv);
    tf_points_free(&lp.pts);
    return status;
}

int tf_save_checkpoint(tf_run *r, uint64_t epoch, uint64_t batch, double loss_sum, uint64_t correct,
                       uint64_t seen, fl_error *err)
{
    tf_checkpoint *ck = &r->ck;
    const tf_dist *D = r->D;
    const int64_t P = r->spec.param_count;
    int rc = r->ops->get_state(r->b, &ck->st, err);
    if (rc)
        return rc;
    /* never write diverged weights: a checkpoint of them would rotate a good one out */
    for (int64_t j = 0; j < P; j++)
        if (!isfinite(ck->st.params[j]) || !isfinite(ck->st.momentum[j]))
            return fl_error_set(err, FL_E_INVALID,
                                "the weights are not finite (inf/nan) after step %llu: training "
                                "diverged; no checkpoint written (lower --lr, now %g, and start "
                                "again)%s%s",
                                (unsigned long long)ck->st.step, r->o->lr,
                                r->last_ckpt[0] ? "; last checkpoint kept: " : "", r->last_ckpt);
    if (D->world > 1) {
        /* the epoch's running figures of all ranks, so a resumed run (on any world size)
         * reports the same epoch totals; rank 0 alone restores them */
        double m[3] = {loss_sum, (double)correct, (double)seen};
        if ((rc = tf_dist_allreduce_f64(D, m, 3, 0, err)))
            return rc;
        loss_sum = m[0];
        correct = (uint64_t)m[1];
        seen = (uint64_t)m[2];
        if (ck->st.accum_count) {
            /* mid accumulation group: each rank holds its own partial gradient sum; store their
             * mean, which resume hands to every rank scaled by old/new world (docs) */
            if ((rc = tf_dist_allreduce_f32(D, ck->st.grad_accum, (size_t)P, 0, err)))
                return rc;
            const float inv = 1.0f / (float)D->world;
            for (int64_t j = 0; j < P; j++)
                ck->st.grad_accum[j] *= inv;
        }
        if (D->rank != 0)
            return 0;
    }
    ck->epoch = epoch;
    ck->batch = batch;
    ck->epoch_loss_sum = loss_sum;
    ck->epoch_correct = correct;
    ck->epoch_seen = seen;
    ck->wall_s = r->wall_before + fl_now_s() - r->t_start;
    return tf_checkpoint_save(r->o->ckpt_dir, ck, r->last_ckpt, sizeof r->last_ckpt, err);
}
