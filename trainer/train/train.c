/* train.c — `trainfast train` as a driver over named phases (train_internal.h): prepare (options,
 * datasets, model, backend, loader), restore (--resume), the epochs, the last evaluation and the
 * report. Each phase lives in the file of its concern; this file only orders them and frees what
 * they made. `trainfast eval` is train_eval.c. */
#include <string.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_clock.h"
#include "report_train.h"
#include "train_internal.h"

void tf_options_init(tf_options *o)
{
    memset(o, 0, sizeof *o);
    /* the optimizer's defaults (momentum, Nesterov, weight decay, precision, accumulation) are the
     * backend config's, written once in tf_train_config_init */
    tf_train_config d;
    tf_train_config_init(&d);
    o->model = "fastcnn";
    o->epochs = 0; /* auto */
    o->batch = 0;
    o->lr = 0.2f;
    o->wd = d.weight_decay;
    o->momentum = d.momentum;
    o->label_smoothing = 0.1f;
    o->nesterov = d.nesterov;
    o->cosine = 0;
    o->warmup_epochs = 0.5f;
    o->precision = d.precision;
    o->device = "auto";
    o->seed = 0;
    o->accum = d.accum;
    o->tta = 1;
    o->crop_pad = -1;
    o->flip = 1;
}

/* After the epochs: the loader's figures, an evaluation when the run had none (resumed from a
 * checkpoint taken after the last epoch), --log closed, the step counts over all ranks. */
static int finish(tf_run *r, int status)
{
    const tf_dist *D = r->D;
    fl_error err;
    fl_loader_stats_get(r->L, &r->t.ls);
    fl_loader_close(r->L);
    r->L = NULL;
    if (status == FL_EXIT_OK && !r->t.have_eval && D->rank == 0) {
        if (tf_evaluate(r->ops, r->b, r->o->val, r->batch, r->size, r->o->tta, r->o->ema > 0, 1,
                        &r->quiet, &r->t.ev, &err)) {
            fl_cli_error(TOOL, "evaluation: %s", err.msg);
            status = FL_EXIT_DATA;
        } else {
            r->t.have_eval = 1;
        }
    }
    if (r->log && D->rank == 0) {
        int e = tf_close_output(r->log);
        r->log = NULL;
        if (e && status == FL_EXIT_OK) {
            fl_cli_error(TOOL, "--log %s: cannot write: %s", r->o->log_path, strerror(e));
            status = FL_EXIT_DATA;
        }
    }
    status = tf_report_at_end(r, status); /* --report FILE.html */
    if (r->ops->get_state(r->b, &r->ck.st, &err) == 0)
        r->t.skipped_steps = r->ck.st.skipped_steps;
    /* data parallel: every rank must have run the same number of steps; count the samples of
     * this run over all ranks (a resumed run's count shows where it started) */
    r->t.steps_min = r->t.steps_max = (double)r->t.micro;
    r->t.samples_run = (double)r->t.images;
    if (D->world > 1 && status == FL_EXIT_OK) {
        double mm[2] = {(double)r->t.micro, -(double)r->t.micro};
        if (tf_dist_allreduce_f64(D, mm, 2, 1, &err) ||
            tf_dist_allreduce_f64(D, &r->t.samples_run, 1, 0, &err)) {
            fl_cli_error(TOOL, "%s", err.msg);
            status = FL_EXIT_DATA;
        }
        r->t.steps_max = mm[0];
        r->t.steps_min = -mm[1];
    }
    return tf_report_summary(r, status);
}

static void run_free(tf_run *r)
{
    if (r->log)
        fclose(r->log);
    if (r->ckpt_lock >= 0)
        close(r->ckpt_lock);
    fl_loader_close(r->L);
    tf_checkpoint_free(&r->ck);
    tf_checkpoint_free(&r->rck);
    fl_tbuf_free(&r->log_lines);
    if (r->ops)
        r->ops->destroy(r->b); /* and the communicator it owns */
    if (r->have_spec)
        tf_model_free(&r->spec);
}

static int train_run(const tf_options *o, const tf_dist *D)
{
    tf_run r;
    memset(&r, 0, sizeof r);
    r.ckpt_lock = -1;
    r.o = o;
    r.D = D;
    r.t_start = fl_now_s();
    r.quiet = o->quiet || D->rank != 0; /* only rank 0 reports */
    int status = tf_prepare_options(&r);
    if (!status)
        status = tf_restore_load(&r);
    if (!status)
        status = tf_prepare_data(&r);
    if (!status)
        status = tf_restore_check(&r);
    if (!status)
        status = tf_prepare_model(&r);
    if (!status)
        status = tf_restore_check_model(&r);
    if (!status)
        status = tf_prepare_backend(&r);
    if (!status)
        status = tf_restore_state(&r);
    if (!status)
        status = tf_prepare_loader(&r);
    if (!status)
        status = tf_restore_check_accum(&r);
    if (!status)
        status = tf_prepare_output(&r);
    if (!status)
        status = finish(&r, tf_run_epochs(&r));
    run_free(&r);
    return status;
}

int tf_train_main(const tf_options *o)
{
    fl_error err;
    tf_dist D;
    if (tf_dist_init(NULL, NULL, &D, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        tf_dist_finalize(&D);
        return FL_EXIT_USAGE;
    }
    int status = train_run(o, &D);
    if (D.world > 1 && status != FL_EXIT_OK && status < 128) {
        /* this rank failed: the others would wait for it in the next collective; end the job */
        fprintf(stderr, "%s: rank %d of %d failed (exit %d): aborting every rank\n", TOOL, D.rank,
                D.world, status);
        tf_dist_abort(&D, status);
    }
    tf_dist_finalize(&D);
    return status;
}
