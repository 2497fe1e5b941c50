/* pack.c — `packdata pack` as a short driver over named phases (open DST, list the inputs, the
 * dictionary, open the writer, the parallel pipeline — workers decode/resize/encode/compress; one
 * writer thread adds results in input order through a bounded reorder ring —, finish), resume
 * bookkeeping, and the release of everything a run held. Options are parsed in pack_args.c. */
#include "packdata.h"
#include "pack_internal.h"

#include <errno.h>
#include <limits.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_cli.h"
#include "fl_clock.h"
#include "fl_file.h"
#include "archive_source.h"
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
    size_t end;      /* one past the last item */
    size_t next;     /* next item to claim */
    size_t consumed; /* items handed to the writer so far (absolute index) */
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

static void *worker_main(void *arg)
{
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

        pd_item tmp;
        const pd_item *it = pd_items_get(p->items, seq, &tmp, &s->path, &s->path_cap);
        if (it) {
            pd_process_item(&wk->ctx, p->plan, it, s);
        } else {
            s->status = PD_SLOT_FATAL;
            snprintf(s->msg, sizeof s->msg, "out of memory");
        }

        pthread_mutex_lock(&p->m);
        s->state = SLOT_READY;
        pthread_cond_broadcast(&p->cv_ready);
        pthread_mutex_unlock(&p->m);
    }
    return NULL;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static uint64_t tree_total; /* nftw has no user pointer; pack runs once per process */

static int tree_add(const char *fp, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)fp;
    (void)ftw;
    if (flag == FTW_F)
        tree_total += (uint64_t)sb->st_size;
    return 0;
}

static uint64_t tree_bytes(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return 0;
    if (!S_ISDIR(st.st_mode))
        return (uint64_t)st.st_size;
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

static int journal_add(journal *j, size_t seq, const char *source, const char *reason)
{
    if (!j->f)
        return 0;
    fprintf(j->f, "%zu\t", seq);
    for (const char *c = source; *c; c++)
        fputc(*c == '\t' || *c == '\n' ? ' ' : *c, j->f);
    fputc('\t', j->f);
    for (const char *c = reason; *c; c++)
        fputc(*c == '\t' || *c == '\n' ? ' ' : *c, j->f);
    fputc('\n', j->f);
    if (fflush(j->f) || fsync(fileno(j->f)))
        return -errno;
    return 0;
}

/* Map `records` already written to the first item index still to do, re-reporting journaled
 * skips before that point; rewrites the journal with only those. */
static int journal_resume(journal *j, const pd_pack_opts *po, uint64_t records, size_t n_items,
                          pd_reject_ctx *rc, size_t *start, fl_error *err)
{
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
            if (*end != '\t')
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                seqs = realloc(seqs, cap * sizeof *seqs);
                lines = realloc(lines, cap * sizeof *lines);
                if (!seqs || !lines)
                    return fl_error_set(err, -ENOMEM, "out of memory");
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
        while (k < n && seqs[k] < seq)
            k++;
        if (k < n && seqs[k] == seq) {
            seq++;
            continue;
        }
        good++;
        seq++;
    }
    if (good < records) {
        for (size_t i = 0; i < n; i++)
            free(lines[i]);
        free(lines);
        free(seqs);
        return fl_error_set(err, FL_E_FORMAT,
                            "%s.partial holds %llu records but the input has only "
                            "%llu usable items: the input changed since the killed run; remove "
                            "%s.partial (or pass --force) and pack again",
                            po->dst, (unsigned long long)records, (unsigned long long)good,
                            po->dst);
    }
    *start = seq;
    j->f = fopen(j->path, "w");
    if (!j->f)
        return fl_error_set(err, -errno, "%s: %s", j->path, strerror(errno));
    for (size_t i = 0; i < n; i++) {
        if (seqs[i] < seq) {
            fputs(lines[i], j->f);
            /* re-report the earlier run's skips so the report stays complete */
            char *src = strchr(lines[i], '\t') + 1;
            char *why = strchr(src, '\t');
            if (why) {
                *why++ = 0;
                why[strcspn(why, "\n")] = 0;
                if (rc->report)
                    fprintf(rc->report, "%s\t%s\n", src, why);
                rc->skipped++;
            }
        }
        free(lines[i]);
    }
    free(lines);
    free(seqs);
    if (fflush(j->f) || fsync(fileno(j->f)))
        return fl_error_set(err, -errno, "%s: %s", j->path, strerror(errno));
    return 0;
}

/* What the messages call the source: SRC, or the file of --csv, --jsonl, --coco, --wds, --idx. */
static const char *src_name(const pd_pack_opts *po)
{
    const pd_source_opts *so = &po->so;
    return po->src          ? po->src
           : so->csv        ? so->csv
           : so->jsonl      ? so->jsonl
           : so->coco       ? so->coco
           : so->wds        ? so->wds
           : so->idx_images ? so->idx_images
                            : "the input";
}

/* ---- pack: the state of one run and its phases ------------------------------------------ */

typedef struct pack_run {
    const pd_pack_opts *po; /* the options, DST normalised once pd_dst_begin has run (&pc) */
    pd_pack_opts pc;
    double t0;
    pd_reject_ctx rc;
    fl_error err;
    int status; /* the exit status when a phase ends the run */
    pd_items items;
    pd_plan plan;
    pd_dst dd;      /* the lock on DST and what was there */
    pd_job job;     /* options + input list, kept in DST.partial for --resume */
    int fresh;      /* a new DST.partial (not continuing one) */
    char *name_buf; /* the record being added: its name (and path; pd_items_get) */
    size_t name_cap;
    void *dict;
    size_t dict_len;
    char *options_json;
    char *partial;
    journal jn;
    fl_writer *w;
    int remove_partial_on_fail;
    pipeline p;
    int pipeline_init;
    worker *workers;
    size_t start; /* first input to pack (after a resume) */
    uint64_t n_records, bytes_in, parse_skipped;
} pack_run;

/* What a phase says: go on, or end the run (OUT: release everything; STOP: first stop the
 * workers; OOM: say "out of memory", then as STOP). */
enum { GO_ON = 0, TO_OUT, TO_STOP, TO_OOM };

/* Lock DST and learn what is there: cheap, and the user learns before any work. */
static int pack_open_dst(pack_run *s)
{
    int r = pd_dst_begin(s->po, &s->dd);
    if (r >= 0) {
        s->status = r;
        return TO_OUT;
    }
    s->pc = *s->po;
    s->pc.dst = s->dd.dst;
    s->po = &s->pc;
    if (asprintf(&s->partial, "%s.partial", s->po->dst) < 0)
        s->partial = NULL;
    if (asprintf(&s->jn.path, "%s.partial.skips", s->po->dst) < 0)
        s->jn.path = NULL;
    if (!s->partial || !s->jn.path) {
        fl_cli_error(PD_TOOL, "out of memory");
        return TO_OUT;
    }
    if (!s->po->resume)
        unlink(s->jn.path);
    return GO_ON;
}

/* 1-2. The deterministic item list and the plan; then the job, which --resume must match. */
static int pack_list_inputs(pack_run *s)
{
    const pd_pack_opts *po = s->po;
    /* an ImageFolder lists only this part's inputs (in order: a shuffled job needs them all) */
    pd_source_opts so = po->so;
    if (po->part_count && !po->shuffle && (po->encode != PD_ENC_RAW || po->resize_w)) {
        so.part_index = po->part_index;
        so.part_count = po->part_count;
    }
    int r = pd_source_load(po->src, &so, &s->rc, &s->items, &s->err);
    if (r) {
        if (s->err.msg[0])
            fl_cli_error(PD_TOOL, "%s", s->err.msg);
        s->status = r == FL_E_INVALID ? FL_EXIT_USAGE : FL_EXIT_DATA;
        return TO_OUT;
    }
    s->parse_skipped = s->rc.skipped;
    const char *stream = pd_archives_stream_only(s->items.archives);
    if (po->shuffle && stream) {
        fl_cli_error(PD_TOOL,
                     "--shuffle: %s is a compressed tar, whose members can only be read "
                     "in order (a shuffled pack would decompress it again for almost every "
                     "record): decompress it first (a plain .tar is read at random), or pack "
                     "in order and let the loader shuffle",
                     stream);
        s->status = FL_EXIT_USAGE;
        return TO_OUT;
    }
    if (po->shuffle)
        pd_items_shuffle(&s->items, po->seed);
    const uint64_t job_n = s->items.presliced ? s->items.job_n : s->items.n;
    if (!job_n) {
        fl_cli_error(PD_TOOL, "%s: no %s to pack", src_name(po),
                     po->so.no_image ? "rows" : "input images");
        return TO_OUT;
    }
    /* the plan's options (before the slice: raw takes its size from the job's first input, so
     * that the N datasets of a --part job get the same schema) */
    r = pd_plan_make(po, &s->items, &s->rc, &s->plan, &s->err);
    if (r) {
        if (s->err.msg[0])
            fl_cli_error(PD_TOOL, "%s", s->err.msg);
        s->status = r == FL_E_INVALID ? FL_EXIT_USAGE : FL_EXIT_DATA;
        return TO_OUT;
    }
    pd_pack_warn_unused(po, &s->items, &s->plan);
    /* every part needs an input: a part dataset of none could never join the others, and
     * N <= inputs gives each part at least one (pd_items_slice cuts at n*i/N) */
    if (po->part_count > job_n) {
        fl_cli_error(PD_TOOL,
                     "--part %u/%u: %s has %llu inputs, so a job can have at most %llu "
                     "parts (each part needs an input): use --part I/%llu or fewer parts",
                     po->part_index, po->part_count, src_name(po), (unsigned long long)job_n,
                     (unsigned long long)job_n, (unsigned long long)job_n);
        s->status = FL_EXIT_USAGE;
        return TO_OUT;
    }
    if (po->part_count && !s->items.presliced) {
        pd_items_count_formats(&s->items); /* the whole job's, for the keep format */
        pd_items_slice(&s->items, po->part_index, po->part_count);
    }
    if (!s->items.n) {
        fl_cli_error(PD_TOOL, "%s: no inputs in part %u/%u", src_name(po), po->part_index,
                     po->part_count);
        return TO_OUT;
    }
    /* the job (options + input list): --resume continues only the same one, and is a no-op on
     * a finished dataset of the same job (decided before any input is opened) */
    r = pd_dst_job(po, &s->dd, &s->items, &s->plan, &s->job, &s->fresh);
    if (r >= 0) {
        s->status = r;
        return TO_OUT;
    }
    /* what is stored under --encode keep (reads the inputs' first bytes in one process) */
    pd_plan_formats(po, &s->items, &s->plan);
    return GO_ON;
}

/* 3. The dictionary (raw + zstd by default): trained on up to ~2000 evenly spaced records. Every
 * shard carries it, so it is kept to 1/16 of the shard size (none below 16K shards): a 110 KiB
 * dictionary in 64 KiB shards made the dataset 145x larger than its records. */
static int pack_dictionary(pack_run *s)
{
    const pd_pack_opts *po = s->po;
    if (po->backend == FL_BACKEND_SHARDS && po->shard_size / 16 < 110 * 1024)
        s->plan.dict_cap = po->shard_size / 16 ? (size_t)(po->shard_size / 16) : 1;
    if (s->plan.schema.compression == FL_COMP_ZSTD && po->dict) {
        int r = pd_train_dictionary(&s->plan, &s->items, &s->dict, &s->dict_len, &s->err);
        if (r) {
            fl_cli_error(PD_TOOL, "%s", s->err.msg);
            return TO_OUT;
        }
    }
    return GO_ON;
}

/* After the writer reopened DST.partial: keep its dictionary, replay the skips journal and find
 * the first input to pack. */
static int pack_resume(pack_run *s, uint64_t resumed)
{
    size_t dl = 0;
    const void *d = fl_writer_dictionary(s->w, &dl);
    if (d && dl && (dl != s->dict_len || memcmp(d, s->dict, dl))) {
        /* keep compressing with the dictionary the earlier run stored */
        free(s->dict);
        s->dict = malloc(dl);
        if (!s->dict)
            return TO_OOM;
        memcpy(s->dict, d, dl);
        s->dict_len = dl;
    }
    int r = journal_resume(&s->jn, s->po, resumed, s->items.n, &s->rc, &s->start, &s->err);
    if (r) {
        fl_cli_error(PD_TOOL, "%s", s->err.msg);
        return TO_OUT;
    }
    if (resumed && !s->po->quiet)
        fprintf(stderr,
                PD_TOOL ": resuming: %llu records already packed, continuing at input %zu of %zu\n",
                (unsigned long long)resumed, s->start, s->items.n);
    return GO_ON;
}

/* 4. Open the writer (a new DST.partial, or the one --resume continues). */
static int pack_open_writer(pack_run *s)
{
    const pd_pack_opts *po = s->po;
    s->options_json =
        pd_options_json(po, &s->plan, &s->items, s->dict_len, s->job.count, s->job.sha256);
    fl_writer_options wo;
    memset(&wo, 0, sizeof wo);
    wo.backend = po->backend;
    wo.schema = s->plan.schema;
    wo.zstd_level = po->level;
    wo.zstd_dict = s->dict;
    wo.zstd_dict_len = s->dict_len;
    wo.shard_bytes = po->shard_size;
    wo.options_json = s->options_json;
    wo.tool_version = fl_cli_version();
    wo.part_index = po->part_count ? po->part_index : 0;
    wo.part_count = po->part_count;
    /* a fresh run clears whatever DST.partial holds; its plan.txt is the short plan, the whole
     * one (pd_dst_job) stays beside it */
    wo.resume = s->fresh ? 0 : po->resume;
    wo.overwrite = po->force;
    wo.lock = s->dd.lock;
    wo.plan = s->fresh ? s->job.summary : NULL;
    wo.plan_len = s->fresh ? s->job.summary_len : 0;
    wo.fields = s->plan.fields;
    wo.num_fields = s->plan.num_fields;
    int r = fl_writer_open(po->dst, &wo, &s->w, &s->err);
    if (r) {
        fl_cli_error(PD_TOOL, "%s", s->err.msg[0] ? s->err.msg : fl_strerror(r));
        s->status = r == FL_E_INVALID || r == -EBUSY ? FL_EXIT_USAGE : FL_EXIT_DATA;
        s->w = NULL;
        return TO_OUT;
    }
    s->remove_partial_on_fail = !po->resume;
    if (s->fresh)
        pd_job_keep(&s->job);
    uint64_t resumed = fl_writer_resume_count(s->w);
    if (po->resume) {
        r = pack_resume(s, resumed);
        if (r)
            return r;
    } else {
        s->jn.f = fopen(s->jn.path, "w");
        if (!s->jn.f) {
            fl_cli_error(PD_TOOL, "%s: %s", s->jn.path, strerror(errno));
            return TO_OUT;
        }
    }
    s->n_records = resumed;
    return GO_ON;
}

/* 5a. The pipeline: the reorder ring and the worker threads. */
static int pack_start_workers(pack_run *s)
{
    pipeline *p = &s->p;
    uint32_t nw = s->po->workers;
    p->po = s->po;
    p->items = &s->items;
    p->plan = &s->plan;
    p->n_slots = (size_t)nw * 4 + 4;
    p->end = s->items.n;
    p->next = s->start;
    p->consumed = s->start;
    p->dict = s->dict;
    p->dict_len = s->dict_len;
    p->slots = calloc(p->n_slots, sizeof *p->slots);
    s->workers = calloc(nw, sizeof *s->workers);
    if (!p->slots || !s->workers)
        return TO_OOM;
    pthread_mutex_init(&p->m, NULL);
    pthread_cond_init(&p->cv_free, NULL);
    pthread_cond_init(&p->cv_ready, NULL);
    s->pipeline_init = 1;
    pd_archives_begin_ordered(&s->items, s->start); /* compressed tars: members in item order */
    for (uint32_t i = 0; i < nw; i++) {
        s->workers[i].p = p;
        int r = pd_worker_init(&s->workers[i].ctx, &s->plan, s->dict, s->dict_len, &s->err);
        if (r) {
            fl_cli_error(PD_TOOL, "%s", s->err.msg);
            return TO_STOP;
        }
    }
    for (uint32_t i = 0; i < nw; i++) {
        if (pthread_create(&s->workers[i].tid, NULL, worker_main, &s->workers[i])) {
            fl_cli_error(PD_TOOL, "cannot start worker thread");
            return TO_STOP;
        }
        s->workers[i].started = 1;
    }
    return GO_ON;
}

/* After a system error (a full disk, an I/O error) what was written stays in DST.partial, and
 * the same command with --resume continues from it. LMDB reports a short write as EIO. */
static void resume_hint(const pack_run *s, int r)
{
    int lmdb = s->po->backend == FL_BACKEND_LMDB;
    fprintf(stderr,
            PD_TOOL ": %s kept in %s: %sfix the problem and run the same command with "
                    "--resume to continue\n",
            lmdb ? "the records written are" : "complete shards are", s->partial,
            lmdb && r == -EIO ? "LMDB reports a failed write (a full disk, say) as an "
                                "I/O error; "
                              : "");
}

/* One finished slot, in input order: a rejected input is reported (and journaled), a record is
 * added. Returns 0, 1 (stop: a bad input in fail mode, a fatal error) or 2 (a write failed). */
static int pack_take_slot(pack_run *s, size_t seq, pd_slot *sl, long kill_after)
{
    int r;
    if (sl->status == PD_SLOT_REJECT) {
        if (pd_reject(&s->rc, sl->source, "%s", sl->msg))
            return 1;
        if ((r = journal_add(&s->jn, seq, sl->source, sl->msg))) {
            fl_cli_error(PD_TOOL, "%s: %s", s->jn.path, strerror(-r));
            return 2;
        }
        return 0;
    }
    if (sl->status == PD_SLOT_FATAL) {
        fl_cli_error(PD_TOOL, "%s", sl->msg);
        return 1;
    }
    pd_item tmp;
    const pd_item *it = pd_items_get(&s->items, seq, &tmp, &s->name_buf, &s->name_cap);
    if (!it) {
        fl_cli_error(PD_TOOL, "out of memory");
        return 1;
    }
    /* sl->format: the record's own format (keep on a mixed folder), else the schema's */
    if (s->plan.num_fields) {
        /* a schema with fields: the payload and its fields block, one record */
        fl_record_in rec;
        memset(&rec, 0, sizeof rec);
        rec.format = sl->format;
        rec.stored = sl->buf ? sl->buf : (const uint8_t *)""; /* no image: no payload */
        rec.stored_len = sl->len;
        rec.raw_len = sl->raw_len;
        rec.compressed = s->plan.schema.compression == FL_COMP_ZSTD;
        rec.fields_block = sl->fields_buf;
        rec.fields_len = sl->fields_len;
        rec.label = it->label;
        rec.name = it->name;
        rec.height = sl->height;
        rec.width = sl->width;
        r = fl_writer_add_record(s->w, &rec, &s->err);
        if (r == FL_E_INVALID) {
            /* the writer refused this record's block (the writer stays usable): a bad input */
            if (pd_reject(&s->rc, sl->source, "%s", s->err.msg))
                return 1;
            if ((r = journal_add(&s->jn, seq, sl->source, s->err.msg))) {
                fl_cli_error(PD_TOOL, "%s: %s", s->jn.path, strerror(-r));
                return 2;
            }
            return 0;
        }
    } else if (s->plan.schema.compression == FL_COMP_ZSTD)
        r = fl_writer_add_stored_as(s->w, sl->format, sl->buf, sl->len, sl->raw_len, it->label,
                                    it->name, sl->height, sl->width, &s->err);
    else
        r = fl_writer_add_as(s->w, sl->format, sl->buf, sl->len, it->label, it->name, sl->height,
                             sl->width, &s->err);
    if (r) {
        fl_cli_error(PD_TOOL, "%s", s->err.msg[0] ? s->err.msg : fl_strerror(r));
        if (r < 0 && r > -4096) {
            resume_hint(s, r);
            s->remove_partial_on_fail = 0;
        }
        return 2;
    }
    s->n_records++;
    s->bytes_in += sl->in_bytes;
    if (kill_after >= 0 && s->n_records >= (uint64_t)kill_after)
        raise(SIGKILL);
    return 0;
}

/* 5b. The writer side: take the slots in input order until the end or the first failure. */
static int pack_consume(pack_run *s)
{
    pipeline *p = &s->p;
    long kill_after = -1;
    const char *ka = getenv("PACKDATA_TEST_KILL_AFTER");
    if (ka && *ka)
        kill_after = atol(ka);
    fl_progress *prog =
        fl_progress_start("packing", s->items.n, s->plan.encode == PD_ENC_NONE ? "rec" : "img",
                          s->po->quiet || s->po->json);
    int failed = 0;
    for (size_t seq = s->start; seq < s->items.n; seq++) {
        pd_slot *sl = &p->slots[seq % p->n_slots];
        pthread_mutex_lock(&p->m);
        while (sl->state != SLOT_READY)
            pthread_cond_wait(&p->cv_ready, &p->m);
        pthread_mutex_unlock(&p->m);
        failed = pack_take_slot(s, seq, sl, kill_after);
        pthread_mutex_lock(&p->m);
        sl->state = SLOT_EMPTY;
        p->consumed = seq + 1;
        pthread_cond_broadcast(&p->cv_free);
        pthread_mutex_unlock(&p->m);
        fl_progress_update(prog, seq + 1);
        if (failed)
            break;
    }
    fl_progress_finish(prog);
    return failed ? TO_STOP : GO_ON;
}

/* 6. Finish: the dataset is renamed to DST; print the summary. */
static int pack_finish(pack_run *s)
{
    const pd_pack_opts *po = s->po;
    for (uint32_t i = 0; i < po->workers; i++)
        if (s->workers[i].started)
            pthread_join(s->workers[i].tid, NULL), s->workers[i].started = 0;
    if (s->n_records == 0) {
        fl_cli_error(PD_TOOL, "%s: every input was skipped: nothing to pack", src_name(po));
        return TO_STOP;
    }
    int r = fl_writer_finish(s->w, (const char *const *)s->items.class_names, s->items.num_classes,
                             &s->err);
    s->w = NULL;
    if (r) {
        fl_cli_error(PD_TOOL, "%s", s->err.msg[0] ? s->err.msg : fl_strerror(r));
        if (r < 0 && r > -4096)
            resume_hint(s, r);
        if (r == FL_E_INVALID)
            s->status = FL_EXIT_USAGE; /* DST changed into something not ours */
        s->remove_partial_on_fail = 0;
        return TO_OUT;
    }
    if (s->jn.f)
        fclose(s->jn.f);
    s->jn.f = NULL;
    unlink(s->jn.path);
    pd_job_done(&s->dd);
    s->remove_partial_on_fail = 0;
    double el = fl_now_s() - s->t0;
    uint64_t bytes_out = tree_bytes(po->dst);
    pd_print_summary(po, &s->plan, &s->items, s->n_records, s->rc.skipped, s->parse_skipped,
                     s->bytes_in, bytes_out, el);
    s->status = FL_EXIT_OK;
    return TO_OUT;
}

/* A failed run: tell the workers to stop and wait for them. */
static void pack_stop_workers(pack_run *s)
{
    pipeline *p = &s->p;
    if (s->pipeline_init) {
        pthread_mutex_lock(&p->m);
        p->stop = 1;
        pthread_cond_broadcast(&p->cv_free);
        pthread_cond_broadcast(&p->cv_ready);
        pthread_mutex_unlock(&p->m);
    }
    if (s->workers)
        for (uint32_t i = 0; i < s->po->workers; i++)
            if (s->workers[i].started)
                pthread_join(s->workers[i].tid, NULL), s->workers[i].started = 0;
}

/* Release everything; a failed new run removes its DST.partial (only files of ours, under our
 * lock). Returns the run's exit status. */
static int pack_release(pack_run *s)
{
    pipeline *p = &s->p;
    if (s->w)
        fl_writer_abort(s->w);
    if (s->jn.f)
        fclose(s->jn.f);
    if (s->remove_partial_on_fail && s->status != FL_EXIT_OK && s->partial) {
        fl_error e2;
        fl_writer_remove_partial(s->po->dst, &e2);
        if (s->jn.path)
            unlink(s->jn.path);
        pd_job_done(&s->dd);
    }
    pd_dst_end(&s->dd); /* after the writer: it used the lock */
    pd_job_free(&s->job);
    if (s->workers) {
        for (uint32_t i = 0; i < s->po->workers; i++)
            pd_worker_free(&s->workers[i].ctx);
        free(s->workers);
    }
    if (p->slots) {
        for (size_t i = 0; i < p->n_slots; i++) {
            free(p->slots[i].buf);
            free(p->slots[i].fields_buf);
            free(p->slots[i].path);
        }
        free(p->slots);
    }
    if (s->pipeline_init) {
        pthread_mutex_destroy(&p->m);
        pthread_cond_destroy(&p->cv_free);
        pthread_cond_destroy(&p->cv_ready);
    }
    if (s->rc.report) {
        char what[64 + 4096];
        snprintf(what, sizeof what, "--report %s", s->po->report);
        if (fl_cli_close_output(PD_TOOL, s->rc.report, what) && s->status == FL_EXIT_OK)
            s->status = FL_EXIT_DATA;
    }
    free(s->dict);
    free(s->name_buf);
    free(s->options_json);
    free(s->partial);
    free(s->jn.path);
    pd_plan_free(&s->plan);
    pd_items_free(&s->items);
    return s->status;
}

/* Ctrl-C or SIGTERM: say how to finish the job, then die of the signal as before (exit 130/143;
 * what is on disk is what a kill leaves, which --resume continues). The text is made before the
 * handler is installed: a handler may only write(2) and raise. */
static char interrupt_msg[4096 + 512];
static size_t interrupt_len;

static void on_interrupt(int sig)
{
    ssize_t w = write(STDERR_FILENO, interrupt_msg, interrupt_len);
    (void)w;
    raise(sig); /* SA_RESETHAND: the default action, once this handler returns */
}

static void catch_interrupts(const pd_pack_opts *po)
{
    int n = snprintf(interrupt_msg, sizeof interrupt_msg,
                     "%s" PD_TOOL ": interrupted: run the same command with --resume to finish %s "
                     "(what it has packed so far, if anything, is kept in %s.partial)\n",
                     isatty(STDERR_FILENO) ? "\n" : "", po->dst, po->dst);
    interrupt_len = n < 0                              ? 0
                    : (size_t)n < sizeof interrupt_msg ? (size_t)n
                                                       : sizeof interrupt_msg - 1;
    static const int sigs[] = {SIGINT, SIGTERM};
    /* a signal the caller ignores (nohup, a background job of a script) stays ignored */
    fl_cli_catch_signals(sigs, sizeof sigs / sizeof sigs[0], on_interrupt, SA_RESETHAND);
}

/* One pack run: the phases in order; the first that ends the run decides how to clean up. */
static int run_pack(const pd_pack_opts *po)
{
    pack_run s;
    memset(&s, 0, sizeof s);
    s.po = po;
    s.t0 = fl_now_s();
    s.rc = (pd_reject_ctx){.skip = po->on_error_skip, .quiet_limit = 50};
    fl_error_clear(&s.err);
    s.status = FL_EXIT_DATA;
    pd_items_init(&s.items);
    if (po->report) {
        /* "w" truncates: --report naming an input file (the list, CSV, JSONL, annotations)
         * would erase the user's file before it is read */
        const pd_source_opts *so = &po->so;
        const char *in[] = {po->src, so->csv,        so->jsonl,      so->coco,
                            so->wds, so->idx_images, so->idx_labels, po->dst};
        for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
            struct stat ist;
            if (in[i] && stat(in[i], &ist) == 0 && (S_ISREG(ist.st_mode) || in[i] == po->dst) &&
                fl_file_clobbers(po->report, in[i])) {
                fl_cli_error(PD_TOOL,
                             "--report %s would overwrite %s %s: write it elsewhere; nothing "
                             "was changed",
                             po->report,
                             in[i] == po->dst ? "a file of the destination" : "the input", in[i]);
                return FL_EXIT_USAGE;
            }
        }
        /* the destination itself (not there yet: the check above needs it to exist), or the
         * folder it is built in: the report file would take its name */
        char partial[PATH_MAX];
        snprintf(partial, sizeof partial, "%s.partial", po->dst);
        if (fl_file_same_name(po->report, po->dst) || fl_file_same_name(po->report, partial)) {
            fl_cli_error(PD_TOOL,
                         "--report %s names the destination%s: write it elsewhere; nothing was "
                         "changed",
                         po->report,
                         fl_file_same_name(po->report, po->dst) ? "" : "'s partial folder");
            return FL_EXIT_USAGE;
        }
        s.rc.report = fopen(po->report, "w"); /* on resume the journal re-reports earlier skips */
        if (!s.rc.report) {
            fl_cli_error(PD_TOOL, "--report %s: %s", po->report, strerror(errno));
            return FL_EXIT_USAGE;
        }
    }
    catch_interrupts(po);
    int to = pack_open_dst(&s);
    if (to == GO_ON)
        to = pack_list_inputs(&s);
    if (to == GO_ON)
        to = pack_dictionary(&s);
    if (to == GO_ON)
        to = pack_open_writer(&s);
    if (to == GO_ON)
        to = pack_start_workers(&s);
    if (to == GO_ON)
        to = pack_consume(&s);
    if (to == GO_ON)
        to = pack_finish(&s);
    if (to == TO_OOM)
        fl_cli_error(PD_TOOL, "out of memory");
    if (to == TO_OOM || to == TO_STOP)
        pack_stop_workers(&s);
    return pack_release(&s);
}

int pd_cmd_pack(int argc, char **argv)
{
    pd_pack_opts po;
    int r = pd_pack_parse_args(argc, argv, &po);
    if (r >= 0)
        return r; /* --help / --version / usage error */
    r = run_pack(&po);
    pd_pack_opts_free(&po);
    return r;
}
