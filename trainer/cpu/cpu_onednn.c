/* cpu_onednn.c — the oneDNN path of the CPU backend (cpu_onednn.h): the object (engine, stream,
 * arena buffers shared by all plans), the plan cache keyed by (batch size, mode), the runs of a
 * plan's op lists, and the host hooks between primitives (BN running statistics, bias and BN
 * gradients added to the flat gradient), and the choice of each training step's serial mode
 * (cpu_dnn_set_serial). Plans are built in cpu_onednn_plan.c, training BN runs on the host
 * kernels of cpu_onednn_bn.c. */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_onednn_impl.h"

int dnn_fail(dnn_plan *p, dnnl_status_t st, const char *what, int line)
{
    const tf_model_spec *s = p->d->spec;
    int l = p->cur_layer;
    char where[64] = "";
    if (l >= 0 && l < s->n_layers)
        snprintf(where, sizeof where, " (layer %d, kind %d)", l, (int)s->layers[l].kind);
    return fl_error_set(p->err, FL_E_UNSUPPORTED,
                        "oneDNN: %.200s failed with status %d at "
                        "cpu_onednn_plan.c:%d%s, model %s batch %d",
                        what, (int)st, line, where, s->name, p->N);
}

/* ---- hooks ---- */

static float *mem_ptr(dnnl_memory_t m)
{
    void *h = NULL;
    dnnl_memory_get_data_handle(m, &h);
    return h;
}

void dnn_hook_bn_stats(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    if (!p->stats)
        return;
    const tf_shape s = p->d->spec->tensors[T->in];
    const double M = (double)p->N * s.h * s.w;
    const float *bm = mem_ptr(p->L[l].mean), *bv = mem_ptr(p->L[l].var), m = T->bn_momentum;
    float *rm = p->stats + T->stat_off, *rv = rm + T->cin;
    for (int c = 0; c < T->cin; c++) { /* as cpu_bn_forward: unbiased running variance */
        double unb = M > 1 ? (double)bv[c] * M / (M - 1) : bv[c];
        rm[c] = (1.0f - m) * rm[c] + m * bm[c];
        rv[c] = (1.0f - m) * rv[c] + m * (float)unb;
    }
}

void dnn_hook_bn_grad(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    const float *ds = mem_ptr(p->L[l].dscale), *dh = mem_ptr(p->L[l].dshift);
    float *gg = p->grad + T->w_off, *gb = p->grad + T->b_off;
    for (int c = 0; c < T->cin; c++) {
        gg[c] += ds[c];
        gb[c] += dh[c];
    }
}

void dnn_hook_bias_grad(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    const float *db = mem_ptr(p->L[l].dbias);
    float *g = p->grad + T->b_off;
    for (int c = 0; c < T->cout; c++)
        g[c] += db[c];
}

/* ---- object ---- */

static void *falloc_bytes(size_t bytes)
{
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 64) ? NULL : p;
}

/* Gradient buffers shared between tensors whose gradients are never live at once: a training
 * step touches every page of them (on a VM, each first touch of a page costs a fault and a
 * clear, about 1 GB/s here; resnet18 at 112 px has ~0.9 GB of gradients). In the backward pass
 * (layers in decreasing order) tensor t's gradient is written first by its highest reader and
 * read last by its producer; the interval [producer - 1, highest reader] covers that with room
 * for a ReLU fused into the BN before it. An add may hand its output's gradient buffer to its
 * first input (add_bwd), so the output's interval reaches down to that input's. Tensors go,
 * widest first, into the first slot whose tensors' intervals are all disjoint from theirs. */
static int grad_slots(cpu_dnn *d)
{
    const tf_model_spec *s = d->spec;
    const int nt = s->n_tensors;
    int *lo = malloc(sizeof(int) * (size_t)nt), *hi = malloc(sizeof(int) * (size_t)nt),
        *order = malloc(sizeof(int) * (size_t)nt), *slot = malloc(sizeof(int) * (size_t)nt);
    size_t *sbytes = calloc((size_t)nt, sizeof *sbytes);
    int rc = lo && hi && order && slot && sbytes ? 0 : -ENOMEM, ns = 0, no = 0;
    for (int t = 0; !rc && t < nt; t++) {
        lo[t] = s->n_layers;
        hi[t] = -1;
        slot[t] = -1;
    }
    for (int l = 0; !rc && l < s->n_layers; l++) {
        const tf_layer *T = &s->layers[l];
        lo[T->out] = l - 1 < lo[T->out] ? l - 1 : lo[T->out];
        hi[T->out] = l > hi[T->out] ? l : hi[T->out];
        hi[T->in] = l > hi[T->in] ? l : hi[T->in];
        if (T->in2 >= 0)
            hi[T->in2] = l > hi[T->in2] ? l : hi[T->in2];
    }
    for (int pass = 0, moved = 1; !rc && moved && pass < s->n_layers; pass++) {
        moved = 0;
        for (int l = 0; l < s->n_layers; l++) {
            const tf_layer *T = &s->layers[l];
            if (T->kind == TF_ADD && lo[T->in] < lo[T->out]) {
                lo[T->out] = lo[T->in];
                moved = 1;
            }
        }
    }
    for (int t = 1; !rc && t < nt - 1; t++)
        if (hi[t] >= 0)
            order[no++] = t;
    for (int i = 1; i < no; i++) /* widest first; ties in tensor order */
        for (int j = i; j > 0 && d->arena_bytes[2 * order[j]] > d->arena_bytes[2 * order[j - 1]];
             j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    for (int i = 0; i < no; i++) {
        const int t = order[i];
        int k = 0;
        for (; k < ns; k++) {
            int ok = 1;
            for (int j = 0; j < i && ok; j++) {
                const int u = order[j];
                ok = slot[u] != k || hi[u] < lo[t] || hi[t] < lo[u];
            }
            if (ok)
                break;
        }
        if (k == ns)
            ns++;
        slot[t] = k;
        if (d->arena_bytes[2 * t + 1] > sbytes[k])
            sbytes[k] = d->arena_bytes[2 * t + 1];
    }
    if (!rc && !(d->gbufs = calloc((size_t)ns + 1, sizeof *d->gbufs)))
        rc = -ENOMEM;
    for (int k = 0; !rc && k < ns; k++, d->n_gbufs++)
        if (!(d->gbufs[k] = falloc_bytes(sbytes[k])))
            rc = -ENOMEM;
    for (int t = 1; !rc && t < nt - 1; t++) {
        if (slot[t] < 0) { /* no reader: never gets a gradient */
            d->arena_bytes[2 * t + 1] = 0;
            continue;
        }
        d->arena[2 * t + 1] = d->gbufs[slot[t]];
        d->arena_bytes[2 * t + 1] = sbytes[slot[t]];
    }
    free(lo);
    free(hi);
    free(order);
    free(slot);
    free(sbytes);
    return rc;
}

/* Arena buffers: each tensor's activation and gradient for max_batch samples, channels padded to
 * 16 (the widest fp32 blocking oneDNN uses); a plan whose layout needs more allocates its own. */
static int arena_alloc(cpu_dnn *d)
{
    const tf_model_spec *s = d->spec;
    d->arena = calloc(2 * (size_t)s->n_tensors, sizeof *d->arena);
    d->arena_bytes = calloc(2 * (size_t)s->n_tensors, sizeof *d->arena_bytes);
    d->readers = calloc((size_t)s->n_tensors, sizeof *d->readers);
    if (!d->arena || !d->arena_bytes || !d->readers)
        return -ENOMEM;
    for (int l = 0; l < s->n_layers; l++) {
        d->readers[s->layers[l].in]++;
        if (s->layers[l].in2 >= 0)
            d->readers[s->layers[l].in2]++;
    }
    for (int t = 1; t < s->n_tensors - 1; t++) {
        tf_shape sh = s->tensors[t];
        size_t bytes = sizeof(float) * (size_t)d->max_batch * (size_t)((sh.c + 15) / 16 * 16) *
                       (size_t)sh.h * (size_t)sh.w;
        d->arena_bytes[2 * t] = d->arena_bytes[2 * t + 1] = bytes;
        if (!(d->arena[2 * t] = falloc_bytes(bytes)))
            return -ENOMEM;
        if (bytes > d->gscratch_bytes)
            d->gscratch_bytes = bytes;
    }
    if (grad_slots(d))
        return -ENOMEM;
    d->gscratch = falloc_bytes(d->gscratch_bytes);
    int maxc = 16;
    for (int l = 0; l < s->n_layers; l++)
        if (s->layers[l].kind == TF_BN && s->layers[l].cin > maxc)
            maxc = s->layers[l].cin;
    d->bn_part = calloc(2 * DNN_BN_CHUNKS * (size_t)((maxc + 15) / 16 * 16), sizeof(double));
    if (!d->bn_part)
        return -ENOMEM;
    if (d->bf16) { /* a bf16 copy of the widest gradient (same padding) */
        d->bscratch_bytes = d->gscratch_bytes / 2;
        if (!(d->bscratch = falloc_bytes(d->bscratch_bytes)))
            return -ENOMEM;
    }
    size_t K = (size_t)d->max_batch * (size_t)s->num_classes;
    d->input = falloc_bytes(sizeof(float) * (size_t)d->max_batch * (size_t)s->in_c *
                            (size_t)s->in_h * (size_t)s->in_w);
    d->logits = falloc_bytes(sizeof(float) * K);
    d->dlogits = falloc_bytes(sizeof(float) * K);
    return d->gscratch && d->input && d->logits && d->dlogits ? 0 : -ENOMEM;
}

void cpu_dnn_free(cpu_dnn *d)
{
    if (!d)
        return;
    for (int i = 0; i < DNN_PLANS; i++)
        dnn_plan_free(d->plans[i]);
    if (d->arena) /* gradient slots point into gbufs */
        for (int t = 0; t < d->spec->n_tensors; t++)
            free(d->arena[2 * t]);
    for (int k = 0; k < d->n_gbufs; k++)
        free(d->gbufs[k]);
    free(d->gbufs);
    free(d->arena);
    free(d->arena_bytes);
    free(d->readers);
    free(d->bn_part);
    free(d->gscratch);
    free(d->bscratch);
    free(d->input);
    free(d->logits);
    free(d->dlogits);
    if (d->stream)
        dnnl_stream_destroy(d->stream);
    if (d->eng)
        dnnl_engine_destroy(d->eng);
    free(d);
}

/* the cached plan for (N, train), built on first use; the least recently used one goes when the
 * cache is full */
static int plan_get(cpu_dnn *d, int N, int train, dnn_plan **out, fl_error *err)
{
    fl_error local;
    if (!err)
        err = &local;
    int slot = 0;
    for (int i = 0; i < DNN_PLANS; i++) {
        dnn_plan *p = d->plans[i];
        if (p && p->N == N && p->train == train) {
            p->last_use = ++d->clock;
            *out = p;
            return 0;
        }
        if (!p || (d->plans[slot] && p->last_use < d->plans[slot]->last_use))
            slot = i;
    }
    dnn_plan *p = NULL;
    int rc = dnn_plan_build(d, N, train, &p, err);
    if (rc)
        return rc;
    if (d->plans[slot] == d->last_train)
        d->last_train = NULL;
    dnn_plan_free(d->plans[slot]);
    d->plans[slot] = p;
    p->last_use = ++d->clock;
    *out = p;
    return 0;
}

static const char *isa_name(dnnl_cpu_isa_t isa);

int cpu_dnn_native_bf16(const char **isa)
{
    dnnl_cpu_isa_t i = dnnl_get_effective_cpu_isa();
    if (isa)
        *isa = isa_name(i);
    /* the ISA values are bit masks, each including the ones below it */
    return (i & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

int cpu_dnn_create(const tf_model_spec *spec, int max_batch, int threads, cpu_dnn **out,
                   fl_error *err)
{
    return cpu_dnn_create_prec(spec, max_batch, threads, 0, out, err);
}

/* TRAINFAST_SERIAL_OPS (cpu_onednn.h) into *mode; unset or empty: auto. -1 for another value. */
static int serial_mode_env(int *mode)
{
    const char *v = getenv("TRAINFAST_SERIAL_OPS");
    static const char *const names[] = {"auto", "never", "always", "alternate"};
    *mode = CPU_DNN_SERIAL_AUTO;
    if (!v || !*v)
        return 0;
    for (int i = 0; i < 4; i++)
        if (!strcmp(v, names[i])) {
            *mode = i; /* the enum's order */
            return 0;
        }
    return -1;
}

void cpu_dnn_set_serial(cpu_dnn *d, int mode) { d->serial_mode = mode; }

void cpu_dnn_serial_stats(const cpu_dnn *d, uint64_t *steps, uint64_t *serial)
{
    *steps = d->train_steps;
    *serial = d->serial_steps;
}

/* this training step's mode */
static void serial_choose(cpu_dnn *d)
{
    switch (d->serial_mode) {
    case CPU_DNN_SERIAL_NEVER: d->serial = 0; break;
    case CPU_DNN_SERIAL_ALWAYS: d->serial = 1; break;
    case CPU_DNN_SERIAL_ALTERNATE: d->serial = (int)(d->train_steps & 1); break;
    default: d->serial = d->threads > 1 && cpu_contention_poll(&d->probe); break;
    }
    d->train_steps++;
    d->serial_steps += (uint64_t)d->serial;
}

int cpu_dnn_create_prec(const tf_model_spec *spec, int max_batch, int threads, int bf16,
                        cpu_dnn **out, fl_error *err)
{
    *out = NULL;
    const char *isa;
    /* oneDNN 2.6 would run bf16 convolutions below avx512_core_bf16 emulated or on its reference
     * kernels (many times slower than fp32): refuse rather than be silently slow */
    if (bf16 && !cpu_dnn_native_bf16(&isa))
        return fl_error_set(err, FL_E_UNSUPPORTED,
                            "--precision bf16 needs a CPU with native bf16 (oneDNN ISA "
                            "avx512_core_bf16 or avx512_core_amx); oneDNN reports %s here: use "
                            "--precision fp32",
                            isa);
    cpu_dnn *d = calloc(1, sizeof *d);
    if (!d)
        return fl_error_set(err, -ENOMEM, "oneDNN: out of memory");
    d->spec = spec;
    d->bf16 = bf16 ? 1 : 0;
    d->max_batch = max_batch;
    /* Grain size, as PyTorch's parallel_for has: a training step under ~1 GMAC (the test
     * models, tiny images) runs each primitive in microseconds, where a second thread's barrier
     * costs more than it saves, and on a loaded machine OpenMP barriers whose partner thread is
     * descheduled spin for milliseconds (seen: 10x the CPU time, 20x the wall time of one thread
     * at load 25 on 2 cores). Decided from the model alone, so a given model and batch always
     * gets the same thread count and the same bit-exact results. */
    d->threads = threads > 0 ? threads : omp_get_num_procs();
    if (tf_model_flops(spec) * 3.0 * max_batch < 1e9)
        d->threads = 1;
    omp_set_num_threads(d->threads);
    if (serial_mode_env(&d->serial_mode)) {
        free(d);
        return fl_error_set(err, FL_E_INVALID,
                            "TRAINFAST_SERIAL_OPS=%s: expected auto, never, always or alternate",
                            getenv("TRAINFAST_SERIAL_OPS"));
    }
    cpu_contention_init(&d->probe);
    if (dnnl_engine_create(&d->eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags) != dnnl_success) {
        cpu_dnn_free(d);
        return fl_error_set(err, FL_E_UNSUPPORTED, "oneDNN: no CPU engine");
    }
    if (arena_alloc(d)) {
        cpu_dnn_free(d);
        return fl_error_set(err, -ENOMEM, "oneDNN: out of memory for %s at batch %d", spec->name,
                            max_batch);
    }
    dnn_plan *p;
    int rc = plan_get(d, max_batch, 1, &p, err);
    if (!rc)
        rc = plan_get(d, max_batch, 0, &p, err);
    if (rc) {
        cpu_dnn_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

float *cpu_dnn_input(cpu_dnn *d) { return d->input; }
float *cpu_dnn_dlogits(cpu_dnn *d) { return d->dlogits; }

/* point the model.h views of a plan at this run's arrays */
static void plan_bind(dnn_plan *p, const float *params, float *stats, float *grad)
{
    const tf_model_spec *s = p->d->spec;
    p->params = params;
    p->stats = stats;
    p->grad = grad;
    for (int l = 0; l < s->n_layers; l++) {
        const tf_layer *T = &s->layers[l];
        dnn_layer *L = &p->L[l];
        if (L->skip)
            continue;
        if (L->w_user)
            dnnl_memory_set_data_handle(L->w_user, (void *)(params + T->w_off));
        if (L->b_user)
            dnnl_memory_set_data_handle(L->b_user, (void *)(params + T->b_off));
        if (L->gw_user && grad)
            dnnl_memory_set_data_handle(L->gw_user, grad + T->w_off);
        if (T->kind == TF_BN && !p->train && stats) {
            dnnl_memory_set_data_handle(L->mean, stats + T->stat_off);
            dnnl_memory_set_data_handle(L->var, stats + T->stat_off + T->cin);
        }
    }
}

static int run_ops(cpu_dnn *d, dnn_plan *p, const dnn_op *ops, int n, fl_error *err)
{
    for (int i = 0; i < n; i++) {
        const dnn_op *o = &ops[i];
        if (!o->prim) {
            o->hook(p, o->layer);
            continue;
        }
        /* serial: an element-wise op on this thread alone (oneDNN sizes its split from the
         * calling thread's OpenMP thread count when it executes), the same bits either way */
        const int one = d->serial && o->elementwise && d->threads > 1;
        if (one)
            omp_set_num_threads(1);
        dnnl_status_t st = dnnl_primitive_execute(o->prim, d->stream, o->nargs, o->args);
        if (one)
            omp_set_num_threads(d->threads);
        if (st != dnnl_success)
            return fl_error_set(err, FL_E_UNSUPPORTED,
                                "oneDNN: execution failed (status %d) in "
                                "layer %d of %s",
                                (int)st, o->layer, d->spec->name);
        if (i + 1 < n && !ops[i + 1].prim)
            dnnl_stream_wait(d->stream);
    }
    dnnl_stream_wait(d->stream);
    return 0;
}

int cpu_dnn_forward(cpu_dnn *d, int N, int train, const float *params, float *stats,
                    const float **logits, fl_error *err)
{
    if (N < 1 || N > d->max_batch)
        return fl_error_set(err, FL_E_INVALID, "oneDNN: batch of %d (sized for 1..%d)", N,
                            d->max_batch);
    dnn_plan *p;
    int rc = plan_get(d, N, train, &p, err);
    if (rc)
        return rc;
    plan_bind(p, params, stats, NULL);
    if (train)
        serial_choose(d); /* the backward pass that follows runs in the same mode */
    rc = run_ops(d, p, p->fwd, p->nfwd, err);
    if (train)
        d->last_train = rc ? NULL : p;
    *logits = d->logits;
    return rc;
}

int cpu_dnn_backward(cpu_dnn *d, const float *params, float *grad, fl_error *err)
{
    dnn_plan *p = d->last_train;
    if (!p)
        return fl_error_set(err, FL_E_INVALID, "oneDNN: backward without a training forward");
    plan_bind(p, params, p->stats, grad);
    return run_ops(d, p, p->bwd, p->nbwd, err);
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_sse41: return "sse41";
    default: return "isa ?";
    }
}

void cpu_dnn_describe(cpu_dnn *d, char *buf, size_t cap)
{
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, cap, "oneDNN %d.%d.%d (%s, %d thread%s%s)", v->major, v->minor, v->patch,
             isa_name(dnnl_get_effective_cpu_isa()), d->threads, d->threads == 1 ? "" : "s",
             d->bf16 ? ", bf16 convs" : "");
}
