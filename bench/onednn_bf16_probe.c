/* onednn_bf16_probe.c — measure before building (issue 26): times oneDNN convolution forward
 * (training), backward-data and backward-weights for every convolution of resnet18 at a given
 * input size and batch (default 112 px, batch 64), once in fp32 and once with bf16 src/weights/
 * dst (fp32 weight gradients, as a bf16 training step with fp32 master weights would use), on the
 * same threads. Prints per-layer times, the implementation oneDNN chose, the whole-step totals,
 * the bf16/fp32 ratio and the ISA oneDNN reports. Not part of the default build:
 *
 *   cc -O2 -o /tmp/onednn_bf16_probe bench/onednn_bf16_probe.c -ldnnl
 *   OMP_NUM_THREADS=2 /tmp/onednn_bf16_probe [px=112] [batch=64] [reps=3]
 *
 * Layouts are format_tag_any (oneDNN's blocked choice), as in trainer/cpu/cpu_onednn_plan.c; the
 * fp32->bf16 weight conversion and activation reorders are not timed (small next to the convs). */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        dnnl_status_t s_ = (x);                                                                    \
        if (s_ != dnnl_success) {                                                                  \
            fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #x, (int)s_);                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct conv_shape {
    const char *name;
    int ic, oc, k, s, p, ih; /* square */
    int count;               /* how many resnet18 convolutions have this shape */
    int need_bwd_data;       /* the stem's input needs no gradient */
} conv_shape;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static dnnl_engine_t eng;
static dnnl_stream_t strm;

static dnnl_memory_t mem_for(const dnnl_memory_desc_t *md)
{
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    /* fill with small values so bf16/fp32 kernels see normal numbers */
    size_t n = dnnl_memory_desc_get_size(md);
    void *h;
    CHECK(dnnl_memory_get_data_handle(m, &h));
    memset(h, 0, n);
    if (md->data_type == dnnl_f32) {
        float *f = h;
        for (size_t i = 0; i < n / 4; i++)
            f[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    } else if (md->data_type == dnnl_bf16) {
        unsigned short *b = h;
        for (size_t i = 0; i < n / 2; i++) {
            float f = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
            unsigned u;
            memcpy(&u, &f, 4);
            b[i] = (unsigned short)(u >> 16);
        }
    }
    return m;
}

static const char *impl(const_dnnl_primitive_desc_t pd)
{
    const char *s = NULL;
    CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s));
    return s;
}

static double time_prim(dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args, int reps)
{
    CHECK(dnnl_primitive_execute(p, strm, nargs, args)); /* warm-up */
    CHECK(dnnl_stream_wait(strm));
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        CHECK(dnnl_primitive_execute(p, strm, nargs, args));
        CHECK(dnnl_stream_wait(strm));
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

/* Times fwd, bwd-data, bwd-weights of one shape; act: activations' type, wgrad: diff weights. */
static double time_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, int reps)
{
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL));
    dnnl_primitive_t p;
    CHECK(dnnl_primitive_create(&p, pd));
    dnnl_memory_t a = mem_for(from), b = mem_for(to);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    double t = time_prim(p, 2, args, reps);
    dnnl_primitive_destroy(p);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(a);
    dnnl_memory_destroy(b);
    return t;
}

/* Times fwd, bwd-data, bwd-weights of one shape; act: src/weights/diff_dst type, out: dst and
 * diff_src type, wgrad: diff weights. With act bf16 and out f32 (the mixed-precision island a
 * trainer keeping fp32 activations would use), t[3] is the time of the reorders it adds: src and
 * diff_dst from their fp32 layout into the bf16 one. */
static void run_shape(const conv_shape *c, int N, dnnl_data_type_t act, dnnl_data_type_t out,
                      dnnl_data_type_t wgrad, int reps, double t[4], char impls[3][64])
{
    int oh = (c->ih + 2 * c->p - c->k) / c->s + 1;
    dnnl_dims_t sd = {N, c->ic, c->ih, c->ih}, wd = {c->oc, c->ic, c->k, c->k}, bd = {c->oc},
                dd = {N, c->oc, oh, oh}, st = {c->s, c->s}, pl = {c->p, c->p};
    dnnl_memory_desc_t smd, wmd, bmd, dmd, gwmd;
    CHECK(dnnl_memory_desc_init_by_tag(&smd, 4, sd, act, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&wmd, 4, wd, act, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&gwmd, 4, wd, wgrad, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_a));
    CHECK(dnnl_memory_desc_init_by_tag(&dmd, 4, dd, out, dnnl_format_tag_any));
    dnnl_memory_desc_t dsmd, ddmd; /* diff_src (out type), diff_dst (act type) */
    CHECK(dnnl_memory_desc_init_by_tag(&dsmd, 4, sd, out, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&ddmd, 4, dd, act, dnnl_format_tag_any));
    dnnl_convolution_desc_t fd, bdd, bwd;
    CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
                                             &smd, &wmd, NULL, &dmd, st, pl, pl));
    dnnl_primitive_desc_t fpd, bdpd = NULL, bwpd;
    CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
    const dnnl_memory_desc_t *s_q = dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *w_q = dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *d_q = dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0);
    dnnl_memory_t src = mem_for(s_q), wei = mem_for(w_q), dst = mem_for(d_q);
    dnnl_primitive_t fp;
    CHECK(dnnl_primitive_create(&fp, fpd));
    dnnl_exec_arg_t fa[3] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    t[0] = time_prim(fp, 3, fa, reps);
    snprintf(impls[0], 64, "%s", impl(fpd));

    t[1] = 0;
    snprintf(impls[1], 64, "-");
    if (c->need_bwd_data) {
        CHECK(dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &dsmd, &wmd,
                                                       &ddmd, st, pl, pl));
        CHECK(dnnl_primitive_desc_create(&bdpd, &bdd, NULL, eng, fpd));
        const dnnl_memory_desc_t *ds_q =
            dnnl_primitive_desc_query_md(bdpd, dnnl_query_diff_src_md, 0);
        const dnnl_memory_desc_t *bw_q =
            dnnl_primitive_desc_query_md(bdpd, dnnl_query_weights_md, 0);
        const dnnl_memory_desc_t *dd_q =
            dnnl_primitive_desc_query_md(bdpd, dnnl_query_diff_dst_md, 0);
        dnnl_memory_t dsrc = mem_for(ds_q), w2 = mem_for(bw_q), ddst = mem_for(dd_q);
        dnnl_primitive_t bp;
        CHECK(dnnl_primitive_create(&bp, bdpd));
        dnnl_exec_arg_t ba[3] = {
            {DNNL_ARG_DIFF_SRC, dsrc}, {DNNL_ARG_WEIGHTS, w2}, {DNNL_ARG_DIFF_DST, ddst}};
        t[1] = time_prim(bp, 3, ba, reps);
        snprintf(impls[1], 64, "%s", impl(bdpd));
        dnnl_primitive_destroy(bp);
        dnnl_memory_destroy(dsrc);
        dnnl_memory_destroy(w2);
        dnnl_memory_destroy(ddst);
        dnnl_primitive_desc_destroy(bdpd);
    }

    CHECK(dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &smd, &gwmd,
                                                      NULL, &ddmd, st, pl, pl));
    CHECK(dnnl_primitive_desc_create(&bwpd, &bwd, NULL, eng, fpd));
    const dnnl_memory_desc_t *ws_q = dnnl_primitive_desc_query_md(bwpd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *gw_q =
        dnnl_primitive_desc_query_md(bwpd, dnnl_query_diff_weights_md, 0);
    const dnnl_memory_desc_t *wd_q = dnnl_primitive_desc_query_md(bwpd, dnnl_query_diff_dst_md, 0);
    dnnl_memory_t s2 = mem_for(ws_q), gw = mem_for(gw_q), dd2 = mem_for(wd_q);
    dnnl_primitive_t wp;
    CHECK(dnnl_primitive_create(&wp, bwpd));
    dnnl_exec_arg_t wa[3] = {
        {DNNL_ARG_SRC, s2}, {DNNL_ARG_DIFF_WEIGHTS, gw}, {DNNL_ARG_DIFF_DST, dd2}};
    t[2] = time_prim(wp, 3, wa, reps);
    snprintf(impls[2], 64, "%s", impl(bwpd));
    t[3] = 0;
    if (act != out) {
        dnnl_memory_desc_t s32 = *ws_q, d32 = *wd_q;
        s32.data_type = dnnl_f32; /* same layout in fp32: what the fp32 neighbours would use */
        d32.data_type = dnnl_f32;
        t[3] = time_reorder(&s32, ws_q, reps) + time_reorder(&d32, wd_q, reps);
    }
    dnnl_primitive_destroy(wp);
    dnnl_memory_destroy(s2);
    dnnl_memory_destroy(gw);
    dnnl_memory_destroy(dd2);
    dnnl_primitive_desc_destroy(bwpd);
    dnnl_primitive_destroy(fp);
    dnnl_memory_destroy(src);
    dnnl_memory_destroy(wei);
    dnnl_memory_destroy(dst);
    dnnl_primitive_desc_destroy(fpd);
    (void)bmd;
}

static const char *isa_name(dnnl_cpu_isa_t i)
{
    switch (i) {
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return "other";
    }
}

int main(int argc, char **argv)
{
    int px = argc > 1 ? atoi(argv[1]) : 112, N = argc > 2 ? atoi(argv[2]) : 64;
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    int s1 = (px + 6 - 7) / 2 + 1; /* stem output */
    int p1 = (s1 + 2 - 3) / 2 + 1; /* after max pool: layer1 */
    int p2 = (p1 + 2 - 3) / 2 + 1; /* layer2 */
    int p3 = (p2 + 2 - 3) / 2 + 1; /* layer3 */
    conv_shape sh[] = {
        {"stem 3->64 7x7/2", 3, 64, 7, 2, 3, px, 1, 0},
        {"l1 64->64 3x3", 64, 64, 3, 1, 1, p1, 4, 1},
        {"l2a 64->128 3x3/2", 64, 128, 3, 2, 1, p1, 1, 1},
        {"l2 128->128 3x3", 128, 128, 3, 1, 1, p2, 3, 1},
        {"l2down 64->128 1x1/2", 64, 128, 1, 2, 0, p1, 1, 1},
        {"l3a 128->256 3x3/2", 128, 256, 3, 2, 1, p2, 1, 1},
        {"l3 256->256 3x3", 256, 256, 3, 1, 1, p3, 3, 1},
        {"l3down 128->256 1x1/2", 128, 256, 1, 2, 0, p2, 1, 1},
        {"l4a 256->512 3x3/2", 256, 512, 3, 2, 1, p3, 1, 1},
        {"l4 512->512 3x3", 512, 512, 3, 1, 1, (p3 + 2 - 3) / 2 + 1, 3, 1},
        {"l4down 256->512 1x1/2", 256, 512, 1, 2, 0, p3, 1, 1},
    };
    int ns = (int)(sizeof sh / sizeof sh[0]);
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    const dnnl_version_t *v = dnnl_version();
    printf("oneDNN %d.%d.%d, effective ISA %s, resnet18 convs at %d px, batch %d, best of %d\n",
           v->major, v->minor, v->patch, isa_name(dnnl_get_effective_cpu_isa()), px, N, reps);
    double tot[3][4] = {{0}};
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double w0 = now();
    for (int i = 0; i < ns; i++) {
        double t32[4], t16[4], tm[4];
        char i32[3][64], i16[3][64], im[3][64];
        run_shape(&sh[i], N, dnnl_f32, dnnl_f32, dnnl_f32, reps, t32, i32);
        run_shape(&sh[i], N, dnnl_bf16, dnnl_bf16, dnnl_f32, reps, t16, i16);
        run_shape(&sh[i], N, dnnl_bf16, dnnl_f32, dnnl_f32, reps, tm, im);
        for (int k = 0; k < 4; k++) {
            tot[0][k] += t32[k] * sh[i].count;
            tot[1][k] += t16[k] * sh[i].count;
            tot[2][k] += tm[k] * sh[i].count;
        }
        printf("%-24s x%d fp32 fwd %7.2f bwd_d %7.2f bwd_w %7.2f ms | bf16 %7.2f %7.2f %7.2f ms"
               " | x%.2f %.2f %.2f\n",
               sh[i].name, sh[i].count, t32[0] * 1e3, t32[1] * 1e3, t32[2] * 1e3, t16[0] * 1e3,
               t16[1] * 1e3, t16[2] * 1e3, t32[0] / t16[0], t16[1] > 0 ? t32[1] / t16[1] : 0,
               t32[2] / t16[2]);
        printf("    mixed (bf16 in, fp32 out) %7.2f %7.2f %7.2f ms + reorders %5.2f ms\n",
               tm[0] * 1e3, tm[1] * 1e3, tm[2] * 1e3, tm[3] * 1e3);
        printf("    impl fp32: %s / %s / %s   bf16: %s / %s / %s   mixed: %s / %s / %s\n", i32[0],
               i32[1], i32[2], i16[0], i16[1], i16[2], im[0], im[1], im[2]);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double wall = now() - w0, cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    double s32 = tot[0][0] + tot[0][1] + tot[0][2], s16 = tot[1][0] + tot[1][1] + tot[1][2];
    printf("total fp32: fwd %.1f bwd_d %.1f bwd_w %.1f = %.1f ms/step\n", tot[0][0] * 1e3,
           tot[0][1] * 1e3, tot[0][2] * 1e3, s32 * 1e3);
    printf("total bf16: fwd %.1f bwd_d %.1f bwd_w %.1f = %.1f ms/step\n", tot[1][0] * 1e3,
           tot[1][1] * 1e3, tot[1][2] * 1e3, s16 * 1e3);
    double sm = tot[2][0] + tot[2][1] + tot[2][2] + tot[2][3];
    printf("total mixed: fwd %.1f bwd_d %.1f bwd_w %.1f reorders %.1f = %.1f ms/step\n",
           tot[2][0] * 1e3, tot[2][1] * 1e3, tot[2][2] * 1e3, tot[2][3] * 1e3, sm * 1e3);
    printf("bf16 speed-up, whole conv step: x%.2f (fwd x%.2f, bwd_d x%.2f, bwd_w x%.2f)\n",
           s32 / s16, tot[0][0] / tot[1][0], tot[0][1] / tot[1][1], tot[0][2] / tot[1][2]);
    printf("mixed (bf16 in, fp32 out, reorders counted) speed-up: x%.2f\n", s32 / sm);
    printf("probe wall %.1f s, process CPU %.1f s (%.2f cores busy on average)\n", wall, cpu,
           cpu / wall);
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return 0;
}
