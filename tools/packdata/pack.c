/* pack.c — `packdata pack`: option parsing, schema choice, dictionary training, the parallel
 * pipeline (workers decode/resize/encode/compress; one writer thread adds results in input order
 * through a bounded reorder ring), resume bookkeeping, and the final summary. */
#include "packdata.h"
#include "pack_internal.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_clock.h"
#include "fl_writer.h"
#include "pack_dst.h"

/* ---- the reorder ring ---------------------------------------------------------------------- */

enum { SLOT_EMPTY = 0, SLOT_BUSY, SLOT_READY };

typedef struct pipeline {
    const pd_pack_opts *po;
    const pd_items *items;
    const pd_plan *plan;
    pd_slot *slots;
    size_t n_slots;
    size_t end;            /* one past the last item */
    size_t next;           /* next item to claim */
    size_t consumed;       /* items handed to the writer so far (absolute index) */
    int stop;
    pthread_mutex_t m;
    pthread_cond_t cv_free, cv_ready;
    const void *dict;
    size_t dict_len;
} pipeline;

typedef struct worker {
    pipeline *p;
    pd_worker_ctx ctx;
    pthread_t tid;
    int started;
} worker;

static void *worker_main(void *arg) {
    worker *wk = arg;
    pipeline *p = wk->p;
    for (;;) {
        pthread_mutex_lock(&p->m);
        while (!p->stop && p->next < p->end && p->next >= p->consumed + p->n_slots)
            pthread_cond_wait(&p->cv_free, &p->m);
        if (p->stop || p->next >= p->end) {
            pthread_mutex_unlock(&p->m);
            break;
        }
        size_t seq = p->next++;
        pd_slot *s = &p->slots[seq % p->n_slots];
        s->state = SLOT_BUSY;
        pthread_mutex_unlock(&p->m);

        pd_process_item(&wk->ctx, p->plan, &p->items->v[seq], s);

        pthread_mutex_lock(&p->m);
        s->state = SLOT_READY;
        pthread_cond_broadcast(&p->cv_ready);
        pthread_mutex_unlock(&p->m);
    }
    return NULL;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static uint64_t tree_total; /* nftw has no user pointer; pack runs once per process */

static int tree_add(const char *fp, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)fp;
    (void)ftw;
    if (flag == FTW_F) tree_total += (uint64_t)sb->st_size;
    return 0;
}

static uint64_t tree_bytes(const char *path) {
    struct stat st;
    if (stat(path, &st) < 0) return 0;
    if (!S_ISDIR(st.st_mode)) return (uint64_t)st.st_size;
    tree_total = 0;
    nftw(path, tree_add, 16, FTW_PHYS);
    return tree_total;
}

/* ---- skip journal (resume in skip mode) -----------------------------------------------------
 * "<dst>.partial.skips": one line per skipped item "SEQ\tSOURCE\tREASON", appended and fsync'ed
 * before any later record can become durable, so after a kill the records in complete shards
 * map back to item positions exactly. Removed when the dataset is complete. */

typedef struct journal {
    FILE *f;
    char *path;
} journal;

static int journal_add(journal *j, size_t seq, const char *source, const char *reason) {
    if (!j->f) return 0;
    fprintf(j->f, "%zu\t", seq);
    for (const char *c = source; *c; c++) fputc(*c == '\t' || *c == '\n' ? ' ' : *c, j->f);
    fputc('\t', j->f);
    for (const char *c = reason; *c; c++) fputc(*c == '\t' || *c == '\n' ? ' ' : *c, j->f);
    fputc('\n', j->f);
    if (fflush(j->f) || fsync(fileno(j->f))) return -errno;
    return 0;
}

/* Map `records` already written to the first item index still to do, re-reporting journaled
 * skips before that point; rewrites the journal with only those. */
static int journal_resume(journal *j, const pd_pack_opts *po, uint64_t records, size_t n_items,
                          pd_reject_ctx *rc, size_t *start, fl_error *err) {
    size_t cap = 0, n = 0;
    size_t *seqs = NULL;
    char **lines = NULL;
    FILE *f = fopen(j->path, "r");
    if (f) {
        char *line = NULL;
        size_t lc = 0;
        while (getline(&line, &lc, f) > 0) {
            char *end;
            unsigned long long s = strtoull(line, &end, 10);
            if (*end != '\t') continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                seqs = realloc(seqs, cap * sizeof *seqs);
                lines = realloc(lines, cap * sizeof *lines);
                if (!seqs || !lines) return fl_error_set(err, -ENOMEM, "out of memory");
            }
            seqs[n] = (size_t)s;
            lines[n] = strdup(line);
            n++;
        }
        free(line);
        fclose(f);
    }
    /* walk: items not journaled are records */
    size_t seq = 0, k = 0;
    uint64_t good = 0;
    while (good < records && seq < n_items) {
        while (k < n && seqs[k] < seq) k++;
        if (k < n && seqs[k] == seq) {
            seq++;
            continue;
        }
        good++;
        seq++;
    }
    if (good < records) {
        for (size_t i = 0; i < n; i++) free(lines[i]);
        free(lines);
        free(seqs);
        return fl_error_set(err, FL_E_FORMAT, "%s.partial holds %llu records but the input has only "
                            "%llu usable items: the input changed since the killed run; remove "
                            "%s.partial (or pass --force) and pack again", po->dst,
                            (unsigned long long)records, (unsigned long long)good, po->dst);
    }
    *start = seq;
    j->f = fopen(j->path, "w");
    if (!j->f) return fl_error_set(err, -errno, "%s: %s", j->path, strerror(errno));
    for (size_t i = 0; i < n; i++) {
        if (seqs[i] < seq) {
            fputs(lines[i], j->f);
            /* re-report the earlier run's skips so the report stays complete */
            char *src = strchr(lines[i], '\t') + 1;
            char *why = strchr(src, '\t');
            if (why) {
                *why++ = 0;
                why[strcspn(why, "\n")] = 0;
                if (rc->report) fprintf(rc->report, "%s\t%s\n", src, why);
                rc->skipped++;
            }
        }
        free(lines[i]);
    }
    free(lines);
    free(seqs);
    if (fflush(j->f) || fsync(fileno(j->f))) return fl_error_set(err, -errno, "%s: %s", j->path, strerror(errno));
    return 0;
}

/* ---- pack ---------------------------------------------------------------------------------- */

static int run_pack(const pd_pack_opts *po) {
    double t0 = fl_now_s();
    pd_reject_ctx rc = {.skip = po->on_error_skip, .quiet_limit = 50};
    fl_error err;
    fl_error_clear(&err);
    int status = FL_EXIT_DATA;
    pd_items items;
    pd_items_init(&items);
    fl_writer *w = NULL;
    pd_plan plan;
    memset(&plan, 0, sizeof plan);
    worker *workers = NULL;
    pipeline p;
    memset(&p, 0, sizeof p);
    int pipeline_init = 0;
    void *dict = NULL;
    size_t dict_len = 0;
    char *partial = NULL;
    journal jn = {0};
    char *options_json = NULL;
    fl_progress *prog = NULL;
    int remove_partial_on_fail = 0;
    pd_dst dd;          /* the lock on DST and what was there */
    pd_job job;         /* options + input list, kept in DST.partial for --resume */
    pd_pack_opts pc;    /* *po with DST normalised */
    memset(&dd, 0, sizeof dd);
    memset(&job, 0, sizeof job);
    uint64_t n_records = 0, bytes_in = 0;

    if (po->report) {
        rc.report = fopen(po->report, "w"); /* on resume the journal re-reports earlier skips */
        if (!rc.report) {
            fl_cli_error(PD_TOOL, "--report %s: %s", po->report, strerror(errno));
            return FL_EXIT_USAGE;
        }
    }

    /* DST first: the lock (held to the end), then what is there; cheap, and the user learns
     * before any work */
    int r = pd_dst_begin(po, &dd);
    if (r >= 0) {
        status = r;
        goto out;
    }
    pc = *po;
    pc.dst = dd.dst;
    po = &pc;
    if (asprintf(&partial, "%s.partial", po->dst) < 0) partial = NULL;
    if (asprintf(&jn.path, "%s.partial.skips", po->dst) < 0) jn.path = NULL;
    if (!partial || !jn.path) {
        fl_cli_error(PD_TOOL, "out of memory");
        goto out;
    }
    if (!po->resume) unlink(jn.path);

    /* 1. the deterministic item list */
    r = pd_source_load(po->src, &po->so, &rc, &items, &err);
    if (r) {
        if (err.msg[0]) fl_cli_error(PD_TOOL, "%s", err.msg);
        status = r == FL_E_INVALID ? FL_EXIT_USAGE : FL_EXIT_DATA;
        goto out;
    }
    uint64_t parse_skipped = rc.skipped;
    if (po->shuffle) pd_items_shuffle(&items, po->seed);
    if (!items.n) {
        fl_cli_error(PD_TOOL, "%s: no input images to pack", po->src);
        goto out;
    }

    /* 2. schema, planned over the whole input list so that the N datasets of a --part job get
     * the same one (keep: the formats of all inputs; raw: the first input's size) */
    r = pd_plan_make(po, &items, &rc, &plan, &err);
    if (r) {
        if (err.msg[0]) fl_cli_error(PD_TOOL, "%s", err.msg);
        status = r == FL_E_INVALID ? FL_EXIT_USAGE : FL_EXIT_DATA;
        goto out;
    }
    pd_pack_warn_unused(po, &items, &plan);
    if (po->part_count) pd_items_slice(&items, po->part_index, po->part_count);
    if (!items.n) {
        fl_cli_error(PD_TOOL, "%s: no input images in part %u/%u", po->src, po->part_index,
                     po->part_count);
        goto out;
    }

    /* the job (options + input list): --resume continues only the same one, and is a no-op on
     * a finished dataset of the same job */
    if (pd_job_make(po, &items, &plan, &job)) goto oom;
    r = pd_dst_decide(po, &dd, &job);
    if (r >= 0) {
        status = r;
        goto out;
    }

    /* 3. dictionary (raw + zstd by default): trained on up to ~2000 evenly spaced records. Every
     * shard carries it, so it is kept to 1/16 of the shard size (none below 16K shards): a 110 KiB
     * dictionary in 64 KiB shards made the dataset 145x larger than its records */
    if (po->backend == FL_BACKEND_SHARDS && po->shard_size / 16 < 110 * 1024)
        plan.dict_cap = po->shard_size / 16 ? (size_t)(po->shard_size / 16) : 1;
    if (plan.schema.compression == FL_COMP_ZSTD && po->dict) {
        r = pd_train_dictionary(&plan, &items, &dict, &dict_len, &err);
        if (r) {
            fl_cli_error(PD_TOOL, "%s", err.msg);
            goto out;
        }
    }

    /* 4. open the writer */
    options_json = pd_job_options(pd_options_json(po, &plan, &items, dict_len), &job);
    fl_writer_options wo;
    memset(&wo, 0, sizeof wo);
    wo.backend = po->backend;
    wo.schema = plan.schema;
    wo.zstd_level = po->level;
    wo.zstd_dict = dict;
    wo.zstd_dict_len = dict_len;
    wo.shard_bytes = po->shard_size;
    wo.options_json = options_json;
    wo.tool_version = fl_cli_version();
    wo.part_index = po->part_count ? po->part_index : 0;
    wo.part_count = po->part_count;
    wo.resume = po->resume;
    wo.overwrite = po->force;
    wo.lock = dd.lock;
    wo.plan = job.plan;
    wo.plan_len = job.plan_len;
    r = fl_writer_open(po->dst, &wo, &w, &err);
    if (r) {
        fl_cli_error(PD_TOOL, "%s", err.msg[0] ? err.msg : fl_strerror(r));
        status = r == FL_E_INVALID || r == -EBUSY ? FL_EXIT_USAGE : FL_EXIT_DATA;
        w = NULL;
        goto out;
    }
    remove_partial_on_fail = !po->resume;
    size_t start = 0;
    uint64_t resumed = fl_writer_resume_count(w);
    if (po->resume) {
        size_t dl = 0;
        const void *d = fl_writer_dictionary(w, &dl);
        if (d && dl && (dl != dict_len || memcmp(d, dict, dl))) {
            /* keep compressing with the dictionary the earlier run stored */
            free(dict);
            dict = malloc(dl);
            if (!dict) goto oom;
            memcpy(dict, d, dl);
            dict_len = dl;
        }
        r = journal_resume(&jn, po, resumed, items.n, &rc, &start, &err);
        if (r) {
            fl_cli_error(PD_TOOL, "%s", err.msg);
            goto out;
        }
        if (resumed && !po->quiet)
            fprintf(stderr, PD_TOOL ": resuming: %llu records already packed, continuing at input %zu of %zu\n",
                    (unsigned long long)resumed, start, items.n);
    } else {
        jn.f = fopen(jn.path, "w");
        if (!jn.f) {
            fl_cli_error(PD_TOOL, "%s: %s", jn.path, strerror(errno));
            goto out;
        }
    }
    n_records = resumed;

    /* 5. pipeline */
    uint32_t nw = po->workers;
    p.po = po;
    p.items = &items;
    p.plan = &plan;
    p.n_slots = (size_t)nw * 4 + 4;
    p.end = items.n;
    p.next = start;
    p.consumed = start;
    p.dict = dict;
    p.dict_len = dict_len;
    p.slots = calloc(p.n_slots, sizeof *p.slots);
    workers = calloc(nw, sizeof *workers);
    if (!p.slots || !workers) goto oom;
    pthread_mutex_init(&p.m, NULL);
    pthread_cond_init(&p.cv_free, NULL);
    pthread_cond_init(&p.cv_ready, NULL);
    pipeline_init = 1;
    for (uint32_t i = 0; i < nw; i++) {
        workers[i].p = &p;
        r = pd_worker_init(&workers[i].ctx, &plan, dict, dict_len, &err);
        if (r) {
            fl_cli_error(PD_TOOL, "%s", err.msg);
            goto stop;
        }
    }
    for (uint32_t i = 0; i < nw; i++) {
        if (pthread_create(&workers[i].tid, NULL, worker_main, &workers[i])) {
            fl_cli_error(PD_TOOL, "cannot start worker thread");
            goto stop;
        }
        workers[i].started = 1;
    }

    long kill_after = -1;
    const char *ka = getenv("PACKDATA_TEST_KILL_AFTER");
    if (ka && *ka) kill_after = atol(ka);
    prog = fl_progress_start("packing", items.n, "img", po->quiet || po->json);
    int failed = 0;
    for (size_t seq = start; seq < items.n; seq++) {
        pd_slot *s = &p.slots[seq % p.n_slots];
        pthread_mutex_lock(&p.m);
        while (s->state != SLOT_READY) pthread_cond_wait(&p.cv_ready, &p.m);
        pthread_mutex_unlock(&p.m);

        if (s->status == PD_SLOT_REJECT) {
            if (pd_reject(&rc, s->source, "%s", s->msg)) {
                failed = 1;
            } else if ((r = journal_add(&jn, seq, s->source, s->msg))) {
                fl_cli_error(PD_TOOL, "%s: %s", jn.path, strerror(-r));
                failed = 2;
            }
        } else if (s->status == PD_SLOT_FATAL) {
            fl_cli_error(PD_TOOL, "%s", s->msg);
            failed = 1;
        } else {
            const pd_item *it = &items.v[seq];
            /* s->format: the record's own format (keep on a mixed folder), else the schema's */
            if (plan.schema.compression == FL_COMP_ZSTD)
                r = fl_writer_add_stored_as(w, s->format, s->buf, s->len, s->raw_len, it->label,
                                            it->name, s->height, s->width, &err);
            else
                r = fl_writer_add_as(w, s->format, s->buf, s->len, it->label, it->name, s->height,
                                     s->width, &err);
            if (r) {
                fl_cli_error(PD_TOOL, "%s", err.msg[0] ? err.msg : fl_strerror(r));
                if (r < 0 && r > -4096) {
                    fprintf(stderr, PD_TOOL ": complete shards are kept in %s: fix the problem and "
                            "run the same command with --resume to continue\n", partial);
                    remove_partial_on_fail = 0;
                }
                failed = 2;
            } else {
                n_records++;
                bytes_in += s->in_bytes;
                if (kill_after >= 0 && n_records >= (uint64_t)kill_after) raise(SIGKILL);
            }
        }
        pthread_mutex_lock(&p.m);
        s->state = SLOT_EMPTY;
        p.consumed = seq + 1;
        pthread_cond_broadcast(&p.cv_free);
        pthread_mutex_unlock(&p.m);
        fl_progress_update(prog, seq + 1);
        if (failed) break;
    }
    fl_progress_finish(prog);
    prog = NULL;
    if (failed) goto stop;

    /* 6. finish */
    for (uint32_t i = 0; i < nw; i++)
        if (workers[i].started) pthread_join(workers[i].tid, NULL), workers[i].started = 0;
    if (n_records == 0) {
        fl_cli_error(PD_TOOL, "%s: every input was skipped: nothing to pack", po->src);
        goto stop;
    }
    r = fl_writer_finish(w, (const char *const *)items.class_names, items.num_classes, &err);
    w = NULL;
    if (r) {
        fl_cli_error(PD_TOOL, "%s", err.msg[0] ? err.msg : fl_strerror(r));
        if (r == FL_E_INVALID) status = FL_EXIT_USAGE; /* DST changed into something not ours */
        remove_partial_on_fail = 0;
        goto out;
    }
    if (jn.f) fclose(jn.f);
    jn.f = NULL;
    unlink(jn.path);
    remove_partial_on_fail = 0;

    double el = fl_now_s() - t0;
    uint64_t bytes_out = tree_bytes(po->dst);
    uint64_t skipped = rc.skipped;
    pd_print_summary(po, &plan, &items, n_records, skipped, parse_skipped, bytes_in, bytes_out, el);
    status = FL_EXIT_OK;
    goto out;

oom:
    fl_cli_error(PD_TOOL, "out of memory");
stop:
    if (pipeline_init) {
        pthread_mutex_lock(&p.m);
        p.stop = 1;
        pthread_cond_broadcast(&p.cv_free);
        pthread_cond_broadcast(&p.cv_ready);
        pthread_mutex_unlock(&p.m);
    }
    if (workers)
        for (uint32_t i = 0; i < po->workers; i++)
            if (workers[i].started) pthread_join(workers[i].tid, NULL), workers[i].started = 0;
out:
    fl_progress_finish(prog);
    if (w) fl_writer_abort(w);
    if (jn.f) fclose(jn.f);
    if (remove_partial_on_fail && status != FL_EXIT_OK && partial) {
        fl_error e2;
        fl_writer_remove_partial(po->dst, &e2); /* only files of ours, under our lock */
        if (jn.path) unlink(jn.path);
    }
    pd_dst_end(&dd); /* after the writer: it used the lock */
    pd_job_free(&job);
    if (workers) {
        for (uint32_t i = 0; i < po->workers; i++) pd_worker_free(&workers[i].ctx);
        free(workers);
    }
    if (p.slots) {
        for (size_t i = 0; i < p.n_slots; i++) free(p.slots[i].buf);
        free(p.slots);
    }
    if (pipeline_init) {
        pthread_mutex_destroy(&p.m);
        pthread_cond_destroy(&p.cv_free);
        pthread_cond_destroy(&p.cv_ready);
    }
    if (rc.report) fclose(rc.report);
    free(dict);
    free(options_json);
    free(partial);
    free(jn.path);
    pd_plan_free(&plan);
    pd_items_free(&items);
    return status;
}

int pd_cmd_pack(int argc, char **argv) {
    pd_pack_opts po;
    int r = pd_pack_parse_args(argc, argv, &po);
    if (r >= 0) return r; /* --help / --version / usage error */
    r = run_pack(&po);
    pd_pack_opts_free(&po);
    return r;
}
