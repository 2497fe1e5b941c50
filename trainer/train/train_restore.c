/* train_restore.c — the restore phases of `trainfast train --resume` (train_internal.h): read the
 * newest valid checkpoint, refuse a run that is not the one that wrote it, continue with its
 * global batch on any number of processes, and put its state (or fresh weights) in the backend. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fl_cli.h"
#include "train_internal.h"

int tf_restore_load(tf_run *r)
{
    const tf_options *o = r->o;
    fl_error err;
    if (!o->resume)
        return 0;
    /* read the checkpoint first, since the loader starts at its position */
    char skipped[4096];
    int rc = tf_checkpoint_load_latest(o->ckpt_dir, &r->rck, r->rpath, sizeof r->rpath, skipped,
                                       sizeof skipped, &err);
    if (skipped[0])
        fprintf(stderr, "%s: warning: skipped unreadable or damaged checkpoint(s): %s\n", TOOL,
                skipped);
    if (rc == 0) {
        r->resumed = 1;
    } else if (rc == -ENOENT && !skipped[0]) {
        fprintf(stderr, "%s: --resume: no checkpoint in %s yet, starting fresh\n", TOOL,
                o->ckpt_dir);
    } else {
        fl_cli_error(TOOL, "--resume: %s", err.msg);
        return FL_EXIT_DATA;
    }
    return 0;
}

/* the model and seed of the checkpoint's header against this run's; 1 with msg when they differ */
static int model_differs(const tf_run *r, char *why, size_t cap)
{
    const tf_options *o = r->o;
    const tf_checkpoint *ck = &r->rck;
    const tf_model_options *m = &r->mopt;
    const char *ck_model = ck->cfg.present & TF_CFG_MODEL ? ck->cfg.model : ck->model;
    if (strcmp(o->model, ck_model) && strcmp(o->model, ck->model))
        snprintf(why, cap, "--model %s differs from the checkpoint's --model %s", o->model,
                 ck_model);
    else if (m->width != ck->mopt.width)
        snprintf(why, cap, "--width %d differs from the checkpoint's --width %d%s", m->width,
                 ck->mopt.width, o->mopt.width ? "" : " (--width left out: 24)");
    else if (m->residual != ck->mopt.residual)
        snprintf(why, cap, "--residual was %s when the checkpoint was written, %s now",
                 ck->mopt.residual ? "given" : "absent", m->residual ? "given" : "absent");
    else if (m->gelu != ck->mopt.gelu)
        snprintf(why, cap, "--gelu was %s when the checkpoint was written, %s now",
                 ck->mopt.gelu ? "given" : "absent", m->gelu ? "given" : "absent");
    else if (o->seed != ck->seed)
        snprintf(why, cap, "--seed %llu differs from the checkpoint's --seed %llu",
                 (unsigned long long)o->seed, (unsigned long long)ck->seed);
    return why[0] != 0;
}

/* exact resume needs the batches of the interrupted run: the same global batch. On another world
 * size the per-rank batch is global/world, and the batch index is unchanged (the same global
 * sample position). */
static void global_batch_differs(const tf_run *r, uint32_t stored, uint64_t w0, char *why,
                                 size_t cap)
{
    const tf_options *o = r->o;
    const uint64_t world = (uint64_t)r->D->world, global = (uint64_t)stored * w0;
    if (o->batch && (uint64_t)o->batch * world != global)
        snprintf(why, cap,
                 "--batch %u on %d process(es) (global batch %llu) differs from the "
                 "checkpoint's --batch %u on %llu process(es) (global batch %llu); leave --batch "
                 "out to continue with the same global batch",
                 o->batch, r->D->world, (unsigned long long)o->batch * world, stored,
                 (unsigned long long)w0, (unsigned long long)global);
    else if (global % world)
        snprintf(why, cap,
                 "the checkpoint's global batch %llu (%llu x %u) cannot be split over "
                 "%d process(es); resume on a number of processes that divides it",
                 (unsigned long long)global, (unsigned long long)w0, stored, r->D->world);
}

/* continue with the checkpoint's global batch on this run's number of processes */
static void take_global_batch(tf_run *r, uint32_t stored, uint64_t w0)
{
    const tf_dist *D = r->D;
    tf_checkpoint *ck = &r->rck;
    const uint64_t global = (uint64_t)stored * w0;
    r->batch = (uint32_t)(global / (uint64_t)D->world);
    if ((uint64_t)D->world != w0 && D->rank == 0)
        fprintf(stderr,
                "%s: resume on %d process(es) x batch %u from a run of %llu x %u: same "
                "global batch %llu, continuing at global sample %llu of epoch %llu\n",
                TOOL, D->world, r->batch, (unsigned long long)w0, stored,
                (unsigned long long)global, (unsigned long long)(ck->batch * global),
                (unsigned long long)ck->epoch + 1);
    if ((uint64_t)D->world != w0 && ck->st.accum_count) {
        /* the stored partial gradient is the mean over the old ranks: hand each new rank
         * sum/new_world so the next reduction sees the same total */
        const float f = (float)w0 / (float)D->world;
        for (int64_t j = 0; j < ck->param_count; j++)
            ck->st.grad_accum[j] *= f;
    }
}

int tf_restore_check(tf_run *r)
{
    if (!r->resumed)
        return 0;
    const tf_run_config *cfg = &r->rck.cfg;
    /* the checkpoint continues only the run that wrote it (train_config.c) */
    char why[600] = "", unchecked[300] = "";
    if (!model_differs(r, why, sizeof why)) {
        if (cfg->present)
            tf_run_config_differs(r, cfg, why, sizeof why, unchecked, sizeof unchecked);
        else
            snprintf(unchecked, sizeof unchecked, "all options but the model and --seed");
    }
    const uint32_t stored = cfg->present & TF_CFG_BATCH ? cfg->batch : 0;
    uint64_t w0 = cfg->present & TF_CFG_WORLD ? cfg->world : 1;
    r->pad_tail = (cfg->present & TF_CFG_PAD_TAIL && cfg->pad_tail) || r->D->world > 1;
    r->start_epoch = r->rck.epoch;
    r->start_batch = r->rck.batch;
    if (w0 == 0)
        w0 = 1;
    if (!why[0] && stored)
        global_batch_differs(r, stored, w0, why, sizeof why);
    if (why[0]) {
        fl_cli_error(TOOL,
                     "--resume: %s (%s); options that define the run must stay the same "
                     "(see trainfast --help)",
                     why, r->rpath);
        return FL_EXIT_USAGE;
    }
    if (unchecked[0] && r->D->rank == 0)
        fl_cli_warn(TOOL, "%s was written by an older trainfast: cannot check that %s match(es)",
                    r->rpath, unchecked);
    if (stored)
        take_global_batch(r, stored, w0);
    if (r->D->rank != 0) {
        /* rank 0 alone carries the interrupted epoch's figures (they are global sums) */
        r->rck.epoch_loss_sum = 0;
        r->rck.epoch_correct = r->rck.epoch_seen = 0;
    }
    return 0;
}

int tf_restore_check_model(tf_run *r)
{
    const tf_checkpoint *ck = &r->rck;
    const tf_model_spec *spec = &r->spec;
    if (!r->resumed)
        return 0;
    if (ck->spec_id != spec->spec_id || ck->param_count != spec->param_count ||
        ck->stat_count != spec->stat_count) {
        fl_cli_error(TOOL,
                     "%s was written for a different model (%s, spec %08x) than this run "
                     "builds (%s %dx%dx%d, %u classes, spec %08x)",
                     r->rpath, ck->model, ck->spec_id, spec->name, r->in_c, r->in_h, r->in_w,
                     r->num_classes, spec->spec_id);
        return FL_EXIT_USAGE;
    }
    if (ck->has_ema != (r->o->ema > 0)) {
        fl_cli_error(TOOL, "%s: EMA was %s when it was written; pass the same --ema", r->rpath,
                     ck->has_ema ? "on" : "off");
        return FL_EXIT_USAGE;
    }
    return 0;
}

int tf_restore_state(tf_run *r)
{
    const tf_dist *D = r->D;
    const tf_model_spec *spec = &r->spec;
    fl_error err;
    const size_t pm = (size_t)spec->param_count * sizeof(float),
                 sm = (size_t)spec->stat_count * sizeof(float);
    if (r->resumed) {
        tf_checkpoint *ck = &r->rck;
        /* every rank read the same checkpoint; rank 0's copy of the weights and optimizer state
         * is broadcast so the ranks cannot start apart (e.g. files differing between nodes) */
        if (tf_dist_bcast(D, ck->st.params, pm, 0, &err) ||
            tf_dist_bcast(D, ck->st.momentum, pm, 0, &err) ||
            tf_dist_bcast(D, ck->st.stats, sm, 0, &err)) {
            fl_cli_error(TOOL, "broadcast of the resumed state: %s", err.msg);
            return FL_EXIT_DATA;
        }
        if (r->ops->set_state(r->b, &ck->st, &err)) {
            fl_cli_error(TOOL, "%s: %s", r->rpath, err.msg);
            return FL_EXIT_DATA;
        }
        r->epoch_loss = ck->epoch_loss_sum;
        r->epoch_correct = ck->epoch_correct;
        r->epoch_seen = ck->epoch_seen;
        r->wall_before = ck->wall_s;
        r->t.micro = ck->st.micro_step;
        r->t.opt_steps = ck->st.step;
        return 0;
    }
    tf_state *st = &r->ck.st;
    tf_model_init(spec, r->o->seed, st->params, st->stats);
    /* every rank starts from rank 0's weights (identical by construction, made certain) */
    if (tf_dist_bcast(D, st->params, pm, 0, &err) || tf_dist_bcast(D, st->stats, sm, 0, &err)) {
        fl_cli_error(TOOL, "broadcast of the initial weights: %s", err.msg);
        return FL_EXIT_DATA;
    }
    tf_state init = {.params = st->params, .stats = st->stats, .loss_scale = 1.0f};
    if (r->ops->set_state(r->b, &init, &err)) {
        fl_cli_error(TOOL, "%s", err.msg);
        return FL_EXIT_DATA;
    }
    return 0;
}

int tf_restore_check_accum(tf_run *r)
{
    const uint64_t accum = (uint64_t)r->o->accum;
    if (!r->resumed || r->rck.st.accum_count == r->start_batch % accum)
        return 0;
    /* groups crossed epoch boundaries before they were kept within an epoch */
    fl_cli_error(TOOL,
                 "--resume: %s holds %u summed micro-batch(es) at batch %llu of an epoch, "
                 "where this trainfast's groups of --accum %llu hold %llu: it was written by an "
                 "older trainfast; finish it with that version or start again",
                 r->rpath, r->rck.st.accum_count, (unsigned long long)r->start_batch,
                 (unsigned long long)accum, (unsigned long long)(r->start_batch % accum));
    return FL_EXIT_USAGE;
}
