/* cpu_onednn_plan.c — building a oneDNN plan (cpu_onednn_impl.h): per layer, the forward primitive
 * in the layout oneDNN picks for its output (format_tag any), and in training the backward
 * primitives (data and weights) created with the forward one as hint, so both agree on layouts.
 * Weights are reordered from the model.h layout every run (they change every step); weight
 * gradients are reordered back with a sum post-op, which adds them to the flat gradient as the
 * reference layers do. A tensor read by several layers gets its first gradient written in place
 * and the others added with a sum primitive. bf16 (cpu_onednn_impl.h): convolutions on bf16 copies
 * of their input, weights and output gradient, fp32 out. Training BN is a pair of host hooks
 * (cpu_onednn_bn.c) where the layout suits them. Ops whose outputs are computed element by element
 * (reorders, sums, element-wise, pooling, adds) are marked so a serial object runs them on one
 * thread (cpu_dnn_set_serial). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_onednn_impl.h"

static int grow(void **a, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 64;
    void *na = realloc(*a, (size_t)nc * elem);
    if (!na)
        return -ENOMEM;
    *a = na;
    *cap = nc;
    return 0;
}

static int own_mem(dnn_plan *p, const dnnl_memory_desc_t *md, void *handle, dnnl_memory_t *out)
{
    if (grow((void **)&p->own_m, &p->cap_own_m, p->n_own_m + 1, sizeof(dnnl_memory_t)))
        return fl_error_set(p->err, -ENOMEM, "oneDNN plan: out of memory");
    DNN_TRY(p, dnnl_memory_create(out, md, p->d->eng, handle));
    p->own_m[p->n_own_m++] = *out;
    return 0;
}

static int own_prim(dnn_plan *p, const_dnnl_primitive_desc_t pd, dnnl_primitive_t *out)
{
    if (grow((void **)&p->own_p, &p->cap_own_p, p->n_own_p + 1, sizeof(dnnl_primitive_t)))
        return fl_error_set(p->err, -ENOMEM, "oneDNN plan: out of memory");
    DNN_TRY(p, dnnl_primitive_create(out, pd));
    p->own_p[p->n_own_p++] = *out;
    return 0;
}

/* Append an op (prim or hook) to the forward or backward list; NULL when out of memory. */
static dnn_op *op_add(dnn_plan *p, int bwd, dnnl_primitive_t prim, dnn_hook hook, int layer)
{
    dnn_op **ops = bwd ? &p->bwd : &p->fwd;
    int *n = bwd ? &p->nbwd : &p->nfwd, *cap = bwd ? &p->capb : &p->capf;
    if (grow((void **)ops, cap, *n + 1, sizeof(dnn_op))) {
        fl_error_set(p->err, -ENOMEM, "oneDNN plan: out of memory");
        return NULL;
    }
    dnn_op *o = &(*ops)[(*n)++];
    memset(o, 0, sizeof *o);
    o->prim = prim;
    o->hook = hook;
    o->layer = layer;
    return o;
}

static void arg(dnn_op *o, int what, dnnl_memory_t m)
{
    if (!m)
        return;
    o->args[o->nargs].arg = what;
    o->args[o->nargs].memory = m;
    o->nargs++;
}

/* Create the primitive of pd (destroyed here) and append its op; NULL on failure. */
static dnn_op *prim_op(dnn_plan *p, int bwd, dnnl_primitive_desc_t pd)
{
    dnnl_primitive_t prim = NULL;
    int rc = own_prim(p, pd, &prim);
    dnnl_primitive_desc_destroy(pd);
    return rc ? NULL : op_add(p, bwd, prim, NULL, p->cur_layer);
}

static const dnnl_memory_desc_t *md_of(dnnl_memory_t m)
{
    const dnnl_memory_desc_t *md = NULL;
    dnnl_memory_get_memory_desc(m, &md);
    return md;
}

/* The memory of tensor t (activation, or gradient when diff) in its chosen layout: the logits
 * over the object's plain buffers, others over the arena when they fit. */
static int tensor_mem(dnn_plan *p, int t, int diff, dnnl_memory_t *out)
{
    cpu_dnn *d = p->d;
    const tf_model_spec *s = d->spec;
    if (t == s->n_tensors - 1) {
        dnnl_memory_desc_t plain;
        dnnl_dims_t dims = {p->N, s->num_classes, 1, 1};
        const dnnl_memory_desc_t *md = &p->md[t];
        DNN_TRY(p, dnnl_memory_desc_init_by_tag(&plain, md->ndims, dims, dnnl_f32,
                                                md->ndims == 2 ? dnnl_nc : dnnl_nchw));
        if (!dnnl_memory_desc_equal(&plain, md))
            return fl_error_set(p->err, FL_E_UNSUPPORTED,
                                "oneDNN plan: the logits come in a blocked layout (the last layer "
                                "must be linear or element-wise after it)");
        return own_mem(p, md, diff ? d->dlogits : d->logits, out);
    }
    size_t need = dnnl_memory_desc_get_size(&p->md[t]);
    int slot = 2 * t + (diff ? 1 : 0);
    return own_mem(p, &p->md[t],
                   need <= d->arena_bytes[slot] ? d->arena[slot] : DNNL_MEMORY_ALLOCATE, out);
}

/* reorder src -> dst (accumulate: dst += src, through a sum post-op) appended to a list */
static int add_reorder(dnn_plan *p, int bwd, dnnl_memory_t src, dnnl_memory_t dst, int accumulate)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if (accumulate) {
        DNN_TRY(p, dnnl_primitive_attr_create(&attr));
        DNN_TRY(p, dnnl_post_ops_create(&po));
        DNN_TRY(p, dnnl_post_ops_append_sum(po, 1.0f));
        DNN_TRY(p, dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st =
        dnnl_reorder_primitive_desc_create(&pd, md_of(src), p->d->eng, md_of(dst), p->d->eng, attr);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    DNN_TRY(p, st);
    dnn_op *o = prim_op(p, bwd, pd);
    if (!o)
        return p->err->code ? p->err->code : -ENOMEM;
    o->elementwise = 1;
    arg(o, DNNL_ARG_FROM, src);
    arg(o, DNNL_ARG_TO, dst);
    return 0;
}

/* dact[t] += src (backward list) */
static int add_sum(dnn_plan *p, int t, dnnl_memory_t src)
{
    const float scales[2] = {1.0f, 1.0f};
    dnnl_memory_desc_t srcs[2] = {p->md[t], *md_of(src)};
    dnnl_primitive_desc_t pd;
    DNN_TRY(p, dnnl_sum_primitive_desc_create(&pd, &p->md[t], 2, scales, srcs, NULL, p->d->eng));
    dnn_op *o = prim_op(p, 1, pd);
    if (!o)
        return p->err->code;
    o->elementwise = 1;
    arg(o, DNNL_ARG_MULTIPLE_SRC, p->dact[t]);
    arg(o, DNNL_ARG_MULTIPLE_SRC + 1, src);
    arg(o, DNNL_ARG_DST, p->dact[t]);
    return 0;
}

/* Where a backward op writes the gradient of tensor t: dact[t] for the first writer (in backward
 * order), else a scratch view that add_sum(p, t, *m) then adds (*then_sum = 1). Tensor 0 (the
 * input) needs no gradient: callers skip it. */
static int grad_target(dnn_plan *p, int t, dnnl_memory_t *m, int *then_sum)
{
    *then_sum = 0;
    if (!p->dact_set[t]) {
        p->dact_set[t] = 1;
        int rc = p->dact[t] ? 0 : tensor_mem(p, t, 1, &p->dact[t]);
        *m = p->dact[t];
        return rc;
    }
    if (dnnl_memory_desc_get_size(&p->md[t]) > p->d->gscratch_bytes)
        return fl_error_set(p->err, FL_E_UNSUPPORTED, "oneDNN plan: gradient scratch too small");
    *then_sum = 1;
    return own_mem(p, &p->md[t], p->d->gscratch, m);
}

static int grad_finish(dnn_plan *p, int t, dnnl_memory_t m, int then_sum)
{
    return then_sum ? add_sum(p, t, m) : 0;
}

#define TRYRC(x)                                                                                   \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
    } while (0)

static void dims4(dnnl_dims_t d, int N, tf_shape s)
{
    d[0] = N;
    d[1] = s.c;
    d[2] = s.h;
    d[3] = s.w;
}

/* right padding that gives exactly the output size the model computed (floor division) */
static void pads(const tf_layer *T, tf_shape is, tf_shape os, int k, dnnl_dims_t st, dnnl_dims_t pl,
                 dnnl_dims_t pr)
{
    st[0] = st[1] = T->stride;
    pl[0] = pl[1] = T->pad;
    pr[0] = (dnnl_dim_t)(os.h - 1) * T->stride + k - is.h - T->pad;
    pr[1] = (dnnl_dim_t)(os.w - 1) * T->stride + k - is.w - T->pad;
}

/* ---- convolution and linear ---- */

static int weighted_descs(dnn_plan *p, const tf_layer *T, dnnl_memory_desc_t *wuser,
                          dnnl_memory_desc_t *bmd)
{
    const tf_model_spec *s = p->d->spec;
    tf_shape is = s->tensors[T->in];
    dnnl_dims_t wd = {T->cout, is.c, T->k, T->k}, bd = {T->cout};
    if (T->kind == TF_LINEAR) {
        wd[2] = is.h;
        wd[3] = is.w;
    }
    if (T->kind == TF_LINEAR && p->md[T->in].ndims == 2) {
        wd[1] = T->cin;
        DNN_TRY(p, dnnl_memory_desc_init_by_tag(wuser, 2, wd, dnnl_f32, dnnl_oi));
    } else {
        DNN_TRY(p, dnnl_memory_desc_init_by_tag(wuser, 4, wd, dnnl_f32, dnnl_oihw));
    }
    DNN_TRY(p, dnnl_memory_desc_init_by_tag(bmd, 1, bd, dnnl_f32, dnnl_a));
    return 0;
}

static int is_ref_impl(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return impl && !strncmp(impl, "ref", 3);
}

/* The forward convolution with the output layout oneDNN picks, unless that pairs the input's
 * layout with an output no optimised kernel takes (oneDNN then falls back to its reference
 * kernel, ~100x slower: seen with an 8-channel input in nChw16c): then the first of NHWC,
 * nChw16c, NCHW outputs that has one. */
static int conv_fwd_pd(dnn_plan *p, const tf_layer *T, const dnnl_memory_desc_t *src,
                       const dnnl_memory_desc_t *wany, const dnnl_memory_desc_t *bias,
                       dnnl_prop_kind_t prop, dnnl_primitive_desc_t *out)
{
    const tf_model_spec *s = p->d->spec;
    tf_shape is = s->tensors[T->in], os = s->tensors[T->out];
    /* channels not a multiple of 16 would be padded in the blocked layout, and oneDNN 2.6 has
     * no optimised kernel for a padded blocked input (seen: 8 channels): NHWC first then */
    dnnl_format_tag_t tags[] = {dnnl_format_tag_any, dnnl_nhwc, dnnl_nChw16c, dnnl_nchw};
    if (os.c % 16) {
        tags[0] = dnnl_nhwc;
        tags[1] = dnnl_format_tag_any;
    }
    dnnl_dims_t dd, st, pl, pr;
    dims4(dd, p->N, os);
    pads(T, is, os, T->k, st, pl, pr);
    *out = NULL;
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        dnnl_memory_desc_t dmd;
        dnnl_convolution_desc_t cd;
        dnnl_primitive_desc_t pd;
        DNN_TRY(p, dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, tags[i]));
        DNN_TRY(p, dnnl_convolution_forward_desc_init(&cd, prop, dnnl_convolution_direct, src, wany,
                                                      bias, &dmd, st, pl, pr));
        if (dnnl_primitive_desc_create(&pd, &cd, NULL, p->d->eng, NULL) != dnnl_success)
            continue;
        if (!*out) {
            *out = pd; /* the first that exists, in case all are reference kernels */
        } else if (!is_ref_impl(pd)) {
            dnnl_primitive_desc_destroy(*out);
            *out = pd;
        } else {
            dnnl_primitive_desc_destroy(pd);
        }
        if (!is_ref_impl(*out))
            return 0;
    }
    return *out ? 0 : dnn_fail(p, dnnl_unimplemented, "convolution forward", __LINE__);
}

/* bf16: the forward convolution on a bf16 copy of the input (layout oneDNN picks) with bf16
 * weights, fp32 out; *out NULL (and 0) when oneDNN has only its reference kernel for it. */
static int conv_fwd_pd_bf16(dnn_plan *p, const tf_layer *T, const dnnl_memory_desc_t *wuser,
                            const dnnl_memory_desc_t *bias, dnnl_prop_kind_t prop,
                            dnnl_primitive_desc_t *out)
{
    dnnl_memory_desc_t w16, s16;
    const dnnl_memory_desc_t *in = &p->md[T->in];
    DNN_TRY(p, dnnl_memory_desc_init_by_tag(&w16, wuser->ndims, wuser->dims, dnnl_bf16,
                                            dnnl_format_tag_any));
    DNN_TRY(
        p, dnnl_memory_desc_init_by_tag(&s16, in->ndims, in->dims, dnnl_bf16, dnnl_format_tag_any));
    TRYRC(conv_fwd_pd(p, T, &s16, &w16, bias, prop, out));
    if (is_ref_impl(*out)) {
        dnnl_primitive_desc_destroy(*out);
        *out = NULL;
    }
    return 0;
}

static int weighted_fwd(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    dnnl_memory_desc_t wuser, bmd, wany, dmd;
    TRYRC(weighted_descs(p, T, &wuser, &bmd));
    DNN_TRY(p, dnnl_memory_desc_init_by_tag(&wany, wuser.ndims, wuser.dims, dnnl_f32,
                                            dnnl_format_tag_any));
    const dnnl_prop_kind_t prop = p->train ? dnnl_forward_training : dnnl_forward_inference;
    const dnnl_memory_desc_t *bias = T->b_off >= 0 ? &bmd : NULL;
    if (T->kind == TF_CONV && d->bf16) {
        TRYRC(conv_fwd_pd_bf16(p, T, &wuser, bias, prop, &L->fwd_pd));
        L->bf16 = L->fwd_pd != NULL;
    }
    if (L->bf16) {
        /* the input's bf16 copy, kept for the weight gradient */
        TRYRC(own_mem(p, dnnl_primitive_desc_query_md(L->fwd_pd, dnnl_query_src_md, 0),
                      DNNL_MEMORY_ALLOCATE, &L->src16));
        TRYRC(add_reorder(p, 0, p->act[T->in], L->src16, 0));
    } else if (T->kind == TF_CONV) {
        TRYRC(conv_fwd_pd(p, T, &p->md[T->in], &wany, bias, prop, &L->fwd_pd));
    } else {
        dnnl_dims_t dd = {p->N, T->cout};
        DNN_TRY(p, dnnl_memory_desc_init_by_tag(&dmd, 2, dd, dnnl_f32, dnnl_nc));
        dnnl_inner_product_desc_t ipd;
        DNN_TRY(p,
                dnnl_inner_product_forward_desc_init(&ipd, prop, &p->md[T->in], &wany, bias, &dmd));
        DNN_TRY(p, dnnl_primitive_desc_create(&L->fwd_pd, &ipd, NULL, d->eng, NULL));
    }
    p->md[L->out] = *dnnl_primitive_desc_query_md(L->fwd_pd, dnnl_query_dst_md, 0);
    TRYRC(tensor_mem(p, L->out, 0, &p->act[L->out]));
    TRYRC(own_mem(p, &wuser, DNNL_MEMORY_NONE, &L->w_user));
    TRYRC(own_mem(p, &wuser, DNNL_MEMORY_NONE, &L->gw_user));
    if (bias)
        TRYRC(own_mem(p, &bmd, DNNL_MEMORY_NONE, &L->b_user));
    TRYRC(own_mem(p, dnnl_primitive_desc_query_md(L->fwd_pd, dnnl_query_weights_md, 0),
                  DNNL_MEMORY_ALLOCATE, &L->w_fwd));
    TRYRC(add_reorder(p, 0, L->w_user, L->w_fwd, 0));
    dnnl_primitive_desc_t pd;
    DNN_TRY(p, dnnl_primitive_desc_clone(&pd, L->fwd_pd));
    dnn_op *o = prim_op(p, 0, pd);
    if (!o)
        return p->err->code;
    arg(o, DNNL_ARG_SRC, L->bf16 ? L->src16 : p->act[T->in]);
    arg(o, DNNL_ARG_WEIGHTS, L->w_fwd);
    arg(o, DNNL_ARG_BIAS, L->b_user);
    arg(o, DNNL_ARG_DST, p->act[L->out]);
    return 0;
}

/* bf16: the bf16 copy of the output gradient in layout md (over the object's scratch: it is read
 * by this layer's two backward primitives only), and the reorder that fills it */
static int ddst16_mem(dnn_plan *p, dnn_layer *L, const dnnl_memory_desc_t *md)
{
    size_t need = dnnl_memory_desc_get_size(md);
    TRYRC(own_mem(p, md, need <= p->d->bscratch_bytes ? p->d->bscratch : DNNL_MEMORY_ALLOCATE,
                  &L->ddst16));
    return add_reorder(p, 1, p->dact[L->out], L->ddst16, 0);
}

static int weighted_bwd_weights(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    tf_shape is = d->spec->tensors[T->in], os = d->spec->tensors[T->out];
    dnnl_memory_desc_t wuser, bmd, wany;
    TRYRC(weighted_descs(p, T, &wuser, &bmd));
    DNN_TRY(p, dnnl_memory_desc_init_by_tag(&wany, wuser.ndims, wuser.dims, dnnl_f32,
                                            dnnl_format_tag_any));
    const dnnl_memory_desc_t *bias = T->b_off >= 0 ? &bmd : NULL;
    dnnl_primitive_desc_t pd;
    if (T->kind == TF_CONV) {
        dnnl_dims_t st, pl, pr;
        pads(T, is, os, T->k, st, pl, pr);
        dnnl_convolution_desc_t cd;
        dnnl_memory_desc_t dd16;
        const dnnl_memory_desc_t *dst = &p->md[L->out];
        if (L->bf16) { /* bf16 src copy and output gradient, fp32 weight gradient */
            DNN_TRY(p, dnnl_memory_desc_init_by_tag(&dd16, dst->ndims, dst->dims, dnnl_bf16,
                                                    dnnl_format_tag_any));
            dst = &dd16;
        }
        DNN_TRY(p, dnnl_convolution_backward_weights_desc_init(
                       &cd, dnnl_convolution_direct, L->bf16 ? md_of(L->src16) : &p->md[T->in],
                       &wany, bias, dst, st, pl, pr));
        DNN_TRY(p, dnnl_primitive_desc_create(&pd, &cd, NULL, d->eng, L->fwd_pd));
    } else {
        dnnl_inner_product_desc_t ipd;
        DNN_TRY(p, dnnl_inner_product_backward_weights_desc_init(&ipd, &p->md[T->in], &wany, bias,
                                                                 &p->md[L->out]));
        DNN_TRY(p, dnnl_primitive_desc_create(&pd, &ipd, NULL, d->eng, L->fwd_pd));
    }
    dnnl_memory_t dw = NULL;
    int rc = own_mem(p, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0),
                     DNNL_MEMORY_ALLOCATE, &dw);
    if (!rc && L->bf16)
        rc = ddst16_mem(p, L, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0));
    if (!rc && bias)
        rc = own_mem(p, &bmd, DNNL_MEMORY_ALLOCATE, &L->dbias);
    if (rc) {
        dnnl_primitive_desc_destroy(pd);
        return rc;
    }
    dnn_op *o = prim_op(p, 1, pd);
    if (!o)
        return p->err->code;
    arg(o, DNNL_ARG_SRC, L->bf16 ? L->src16 : p->act[T->in]);
    arg(o, DNNL_ARG_DIFF_DST, L->bf16 ? L->ddst16 : p->dact[L->out]);
    arg(o, DNNL_ARG_DIFF_WEIGHTS, dw);
    arg(o, DNNL_ARG_DIFF_BIAS, L->dbias);
    TRYRC(add_reorder(p, 1, dw, L->gw_user, 1));
    if (bias && !op_add(p, 1, NULL, dnn_hook_bias_grad, l))
        return p->err->code;
    return 0;
}

static int weighted_bwd_data(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    tf_shape is = d->spec->tensors[T->in], os = d->spec->tensors[T->out];
    dnnl_memory_desc_t wuser, bmd, wany;
    TRYRC(weighted_descs(p, T, &wuser, &bmd));
    DNN_TRY(p, dnnl_memory_desc_init_by_tag(&wany, wuser.ndims, wuser.dims,
                                            L->bf16 ? dnnl_bf16 : dnnl_f32, dnnl_format_tag_any));
    dnnl_primitive_desc_t pd;
    if (T->kind == TF_CONV) {
        dnnl_dims_t st, pl, pr;
        pads(T, is, os, T->k, st, pl, pr);
        dnnl_convolution_desc_t cd;
        /* bf16: the weight-gradient primitive's output-gradient copy, fp32 input gradient */
        DNN_TRY(p, dnnl_convolution_backward_data_desc_init(
                       &cd, dnnl_convolution_direct, &p->md[T->in], &wany,
                       L->bf16 ? md_of(L->ddst16) : &p->md[L->out], st, pl, pr));
        DNN_TRY(p, dnnl_primitive_desc_create(&pd, &cd, NULL, d->eng, L->fwd_pd));
    } else {
        dnnl_inner_product_desc_t ipd;
        DNN_TRY(p, dnnl_inner_product_backward_data_desc_init(&ipd, &p->md[T->in], &wany,
                                                              &p->md[L->out]));
        DNN_TRY(p, dnnl_primitive_desc_create(&pd, &ipd, NULL, d->eng, L->fwd_pd));
    }
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_t w = L->w_fwd, target = NULL;
    int rc = 0, then_sum = 0;
    if (!dnnl_memory_desc_equal(wmd, md_of(L->w_fwd))) {
        rc = own_mem(p, wmd, DNNL_MEMORY_ALLOCATE, &w);
        if (!rc)
            rc = add_reorder(p, 1, L->w_user, w, 0);
    }
    if (!rc)
        rc = grad_target(p, T->in, &target, &then_sum);
    if (rc) {
        dnnl_primitive_desc_destroy(pd);
        return rc;
    }
    dnn_op *o = prim_op(p, 1, pd);
    if (!o)
        return p->err->code;
    arg(o, DNNL_ARG_DIFF_DST, L->bf16 ? L->ddst16 : p->dact[L->out]);
    arg(o, DNNL_ARG_WEIGHTS, w);
    arg(o, DNNL_ARG_DIFF_SRC, target);
    return grad_finish(p, T->in, target, then_sum);
}

/* ---- batch norm (with the following ReLU fused when it is the BN output's only reader) ---- */

static unsigned bn_flags(dnn_plan *p, int l, int fwd)
{
    unsigned f = dnnl_use_scale | dnnl_use_shift;
    if (p->L[l].fuse_relu)
        f |= dnnl_fuse_norm_relu;
    if (fwd && !p->train)
        f |= dnnl_use_global_stats;
    return f;
}

static int bn_fwd(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    dnnl_batch_normalization_desc_t bd;
    DNN_TRY(p, dnnl_batch_normalization_forward_desc_init(
                   &bd, p->train ? dnnl_forward_training : dnnl_forward_inference, &p->md[T->in],
                   T->bn_eps, bn_flags(p, l, 1)));
    DNN_TRY(p, dnnl_primitive_desc_create(&L->fwd_pd, &bd, NULL, d->eng, NULL));
    p->md[L->out] = *dnnl_primitive_desc_query_md(L->fwd_pd, dnnl_query_dst_md, 0);
    TRYRC(tensor_mem(p, L->out, 0, &p->act[L->out]));
    dnnl_memory_desc_t cmd;
    dnnl_dims_t cd = {T->cin};
    DNN_TRY(p, dnnl_memory_desc_init_by_tag(&cmd, 1, cd, dnnl_f32, dnnl_a));
    /* training: the host kernels (cpu_onednn_bn.c) where they take the layout; evaluation on
     * the running statistics has no reduction and stays oneDNN's */
    if (p->train && dnnl_memory_desc_equal(&p->md[T->in], &p->md[L->out]) &&
        !dnn_bn_geom_of(&p->md[T->in], &L->bn_g)) {
        dnnl_memory_desc_t smd;
        dnnl_dims_t sd = {2 * L->bn_g.Cp};
        DNN_TRY(p, dnnl_memory_desc_init_by_tag(&smd, 1, sd, dnnl_f32, dnnl_a));
        L->host_bn = 1;
        TRYRC(own_mem(p, &cmd, DNNL_MEMORY_ALLOCATE, &L->mean));
        TRYRC(own_mem(p, &cmd, DNNL_MEMORY_ALLOCATE, &L->var));
        TRYRC(own_mem(p, &smd, DNNL_MEMORY_ALLOCATE, &L->bn_save));
        TRYRC(own_mem(p, &cmd, DNNL_MEMORY_ALLOCATE, &L->dscale));
        TRYRC(own_mem(p, &cmd, DNNL_MEMORY_ALLOCATE, &L->dshift));
        if (!op_add(p, 0, NULL, dnn_hook_bn_fwd, l) || !op_add(p, 0, NULL, dnn_hook_bn_stats, l))
            return p->err->code;
        return 0;
    }
    TRYRC(own_mem(p, &cmd, DNNL_MEMORY_NONE, &L->w_user));
    TRYRC(own_mem(p, &cmd, DNNL_MEMORY_NONE, &L->b_user));
    void *stat_handle = p->train ? DNNL_MEMORY_ALLOCATE : DNNL_MEMORY_NONE;
    TRYRC(own_mem(p, &cmd, stat_handle, &L->mean));
    TRYRC(own_mem(p, &cmd, stat_handle, &L->var));
    if (p->train && L->fuse_relu)
        TRYRC(own_mem(p, dnnl_primitive_desc_query_md(L->fwd_pd, dnnl_query_workspace_md, 0),
                      DNNL_MEMORY_ALLOCATE, &L->ws));
    if (p->train) {
        TRYRC(own_mem(p, &cmd, DNNL_MEMORY_ALLOCATE, &L->dscale));
        TRYRC(own_mem(p, &cmd, DNNL_MEMORY_ALLOCATE, &L->dshift));
    }
    dnnl_primitive_desc_t pd;
    DNN_TRY(p, dnnl_primitive_desc_clone(&pd, L->fwd_pd));
    dnn_op *o = prim_op(p, 0, pd);
    if (!o)
        return p->err->code;
    arg(o, DNNL_ARG_SRC, p->act[T->in]);
    arg(o, DNNL_ARG_DST, p->act[L->out]);
    arg(o, DNNL_ARG_SCALE, L->w_user);
    arg(o, DNNL_ARG_SHIFT, L->b_user);
    arg(o, DNNL_ARG_MEAN, L->mean);
    arg(o, DNNL_ARG_VARIANCE, L->var);
    arg(o, DNNL_ARG_WORKSPACE, L->ws);
    if (p->train && !op_add(p, 0, NULL, dnn_hook_bn_stats, l))
        return p->err->code;
    return 0;
}

static int bn_bwd(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    if (L->host_bn) {
        dnnl_memory_t target = NULL;
        int then_sum = 0;
        if (T->in != 0) /* the input needs no gradient */
            TRYRC(grad_target(p, T->in, &target, &then_sum));
        L->bn_dx = target;
        if (!op_add(p, 1, NULL, dnn_hook_bn_bwd, l) || !op_add(p, 1, NULL, dnn_hook_bn_grad, l))
            return p->err->code;
        return target ? grad_finish(p, T->in, target, then_sum) : 0;
    }
    dnnl_batch_normalization_desc_t bd;
    DNN_TRY(p, dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &p->md[L->out],
                                                           &p->md[T->in], T->bn_eps,
                                                           bn_flags(p, l, 0)));
    dnnl_primitive_desc_t pd;
    DNN_TRY(p, dnnl_primitive_desc_create(&pd, &bd, NULL, d->eng, L->fwd_pd));
    dnnl_memory_t target = NULL;
    int then_sum = 0, rc;
    if (T->in == 0) /* the input needs no gradient, but BN computes one: into the scratch */
        rc = own_mem(p, &p->md[0], p->d->gscratch, &target);
    else
        rc = grad_target(p, T->in, &target, &then_sum);
    if (rc) {
        dnnl_primitive_desc_destroy(pd);
        return rc;
    }
    dnn_op *o = prim_op(p, 1, pd);
    if (!o)
        return p->err->code;
    arg(o, DNNL_ARG_SRC, p->act[T->in]);
    arg(o, DNNL_ARG_MEAN, L->mean);
    arg(o, DNNL_ARG_VARIANCE, L->var);
    arg(o, DNNL_ARG_DIFF_DST, p->dact[L->out]);
    arg(o, DNNL_ARG_SCALE, L->w_user);
    arg(o, DNNL_ARG_SHIFT, L->b_user);
    arg(o, DNNL_ARG_WORKSPACE, L->ws);
    arg(o, DNNL_ARG_DIFF_SRC, target);
    arg(o, DNNL_ARG_DIFF_SCALE, L->dscale);
    arg(o, DNNL_ARG_DIFF_SHIFT, L->dshift);
    if (!op_add(p, 1, NULL, dnn_hook_bn_grad, l))
        return p->err->code;
    return grad_finish(p, T->in, target, then_sum);
}

/* ---- element-wise: ReLU, GELU (tanh form), fixed scale ---- */

static dnnl_alg_kind_t elt_alg(const tf_layer *T, float *alpha)
{
    *alpha = T->kind == TF_SCALE ? T->scale : 0.0f;
    return T->kind == TF_RELU   ? dnnl_eltwise_relu
           : T->kind == TF_GELU ? dnnl_eltwise_gelu_tanh
                                : dnnl_eltwise_linear;
}

static int elt_fwd(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    float alpha;
    dnnl_alg_kind_t alg = elt_alg(T, &alpha);
    dnnl_eltwise_desc_t ed;
    DNN_TRY(p, dnnl_eltwise_forward_desc_init(
                   &ed, p->train ? dnnl_forward_training : dnnl_forward_inference, alg,
                   &p->md[T->in], alpha, 0.0f));
    DNN_TRY(p, dnnl_primitive_desc_create(&L->fwd_pd, &ed, NULL, d->eng, NULL));
    p->md[L->out] = *dnnl_primitive_desc_query_md(L->fwd_pd, dnnl_query_dst_md, 0);
    TRYRC(tensor_mem(p, L->out, 0, &p->act[L->out]));
    dnnl_primitive_desc_t pd;
    DNN_TRY(p, dnnl_primitive_desc_clone(&pd, L->fwd_pd));
    dnn_op *o = prim_op(p, 0, pd);
    if (!o)
        return p->err->code;
    o->elementwise = 1;
    arg(o, DNNL_ARG_SRC, p->act[T->in]);
    arg(o, DNNL_ARG_DST, p->act[L->out]);
    return 0;
}

static int elt_bwd(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    if (T->in == 0)
        return 0;
    float alpha;
    dnnl_alg_kind_t alg = elt_alg(T, &alpha);
    dnnl_eltwise_desc_t ed;
    DNN_TRY(p,
            dnnl_eltwise_backward_desc_init(&ed, alg, &p->md[L->out], &p->md[T->in], alpha, 0.0f));
    dnnl_primitive_desc_t pd;
    DNN_TRY(p, dnnl_primitive_desc_create(&pd, &ed, NULL, d->eng, L->fwd_pd));
    dnnl_memory_t target = NULL;
    int then_sum = 0, rc = grad_target(p, T->in, &target, &then_sum);
    if (rc) {
        dnnl_primitive_desc_destroy(pd);
        return rc;
    }
    dnn_op *o = prim_op(p, 1, pd);
    if (!o)
        return p->err->code;
    o->elementwise = 1;
    arg(o, DNNL_ARG_SRC, p->act[T->in]);
    arg(o, DNNL_ARG_DIFF_DST, p->dact[L->out]);
    arg(o, DNNL_ARG_DIFF_SRC, target);
    return grad_finish(p, T->in, target, then_sum);
}

/* ---- pooling: max (padding never wins), average (count_include_pad), global average ---- */

static dnnl_alg_kind_t pool_geom(const tf_model_spec *s, const tf_layer *T, dnnl_dims_t k,
                                 dnnl_dims_t st, dnnl_dims_t pl, dnnl_dims_t pr)
{
    tf_shape is = s->tensors[T->in], os = s->tensors[T->out];
    if (T->kind == TF_GAP) {
        k[0] = is.h;
        k[1] = is.w;
        st[0] = st[1] = 1;
        pl[0] = pl[1] = pr[0] = pr[1] = 0;
        return dnnl_pooling_avg_exclude_padding;
    }
    k[0] = k[1] = T->k;
    pads(T, is, os, T->k, st, pl, pr);
    return T->kind == TF_MAXPOOL ? dnnl_pooling_max : dnnl_pooling_avg_include_padding;
}

static int pool_fwd(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    dnnl_dims_t k, st, pl, pr, dd;
    dnnl_alg_kind_t alg = pool_geom(d->spec, T, k, st, pl, pr);
    dims4(dd, p->N, d->spec->tensors[T->out]);
    dnnl_memory_desc_t dmd;
    DNN_TRY(p, dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, dnnl_format_tag_any));
    dnnl_pooling_desc_t pdsc;
    DNN_TRY(p, dnnl_pooling_forward_desc_init(
                   &pdsc, p->train ? dnnl_forward_training : dnnl_forward_inference, alg,
                   &p->md[T->in], &dmd, st, k, pl, pr));
    DNN_TRY(p, dnnl_primitive_desc_create(&L->fwd_pd, &pdsc, NULL, d->eng, NULL));
    p->md[L->out] = *dnnl_primitive_desc_query_md(L->fwd_pd, dnnl_query_dst_md, 0);
    TRYRC(tensor_mem(p, L->out, 0, &p->act[L->out]));
    if (p->train && alg == dnnl_pooling_max)
        TRYRC(own_mem(p, dnnl_primitive_desc_query_md(L->fwd_pd, dnnl_query_workspace_md, 0),
                      DNNL_MEMORY_ALLOCATE, &L->ws));
    dnnl_primitive_desc_t pd;
    DNN_TRY(p, dnnl_primitive_desc_clone(&pd, L->fwd_pd));
    dnn_op *o = prim_op(p, 0, pd);
    if (!o)
        return p->err->code;
    o->elementwise = 1;
    arg(o, DNNL_ARG_SRC, p->act[T->in]);
    arg(o, DNNL_ARG_DST, p->act[L->out]);
    arg(o, DNNL_ARG_WORKSPACE, L->ws);
    return 0;
}

static int pool_bwd(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    if (T->in == 0)
        return 0;
    dnnl_dims_t k, st, pl, pr;
    dnnl_alg_kind_t alg = pool_geom(d->spec, T, k, st, pl, pr);
    dnnl_pooling_desc_t pdsc;
    DNN_TRY(p, dnnl_pooling_backward_desc_init(&pdsc, alg, &p->md[T->in], &p->md[L->out], st, k, pl,
                                               pr));
    dnnl_primitive_desc_t pd;
    DNN_TRY(p, dnnl_primitive_desc_create(&pd, &pdsc, NULL, d->eng, L->fwd_pd));
    dnnl_memory_t target = NULL;
    int then_sum = 0, rc = grad_target(p, T->in, &target, &then_sum);
    if (rc) {
        dnnl_primitive_desc_destroy(pd);
        return rc;
    }
    dnn_op *o = prim_op(p, 1, pd);
    if (!o)
        return p->err->code;
    o->elementwise = 1;
    arg(o, DNNL_ARG_DIFF_DST, p->dact[L->out]);
    arg(o, DNNL_ARG_WORKSPACE, L->ws);
    arg(o, DNNL_ARG_DIFF_SRC, target);
    return grad_finish(p, T->in, target, then_sum);
}

/* ---- residual add ---- */

static int add_fwd(dnn_plan *p, int l)
{
    cpu_dnn *d = p->d;
    const tf_layer *T = &d->spec->layers[l];
    dnn_layer *L = &p->L[l];
    dnnl_binary_desc_t bd;
    DNN_TRY(p, dnnl_binary_desc_init(&bd, dnnl_binary_add, &p->md[T->in], &p->md[T->in2],
                                     &p->md[T->in]));
    dnnl_primitive_desc_t pd;
    DNN_TRY(p, dnnl_primitive_desc_create(&pd, &bd, NULL, d->eng, NULL));
    p->md[L->out] = p->md[T->in];
    int rc = tensor_mem(p, L->out, 0, &p->act[L->out]);
    if (rc) {
        dnnl_primitive_desc_destroy(pd);
        return rc;
    }
    dnn_op *o = prim_op(p, 0, pd);
    if (!o)
        return p->err->code;
    o->elementwise = 1;
    arg(o, DNNL_ARG_SRC_0, p->act[T->in]);
    arg(o, DNNL_ARG_SRC_1, p->act[T->in2]);
    arg(o, DNNL_ARG_DST, p->act[L->out]);
    return 0;
}

/* the gradient of the output flows unchanged to both inputs: a copy (reorder) or a sum for the
 * second input; the first input takes over the output's gradient buffer when it is its first
 * gradient (nothing reads the output's gradient after this layer) */
static int add_bwd(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    dnnl_memory_t dy = p->dact[p->L[l].out];
    int in[2] = {T->in2, T->in};
    for (int i = 0; i < 2; i++) {
        int t = in[i];
        if (t == 0)
            continue;
        if (!p->dact_set[t] && !p->dact[t] && i == 1 &&
            dnnl_memory_desc_equal(&p->md[t], md_of(dy))) {
            p->dact[t] = dy;
            p->dact_set[t] = 1;
        } else if (!p->dact_set[t]) {
            p->dact_set[t] = 1;
            if (!p->dact[t])
                TRYRC(tensor_mem(p, t, 1, &p->dact[t]));
            TRYRC(add_reorder(p, 1, dy, p->dact[t], 0));
        } else {
            TRYRC(add_sum(p, t, dy));
        }
    }
    return 0;
}

/* ---- the plan ---- */

static int layer_fwd(dnn_plan *p, int l)
{
    switch (p->d->spec->layers[l].kind) {
    case TF_CONV:
    case TF_LINEAR: return weighted_fwd(p, l);
    case TF_BN: return bn_fwd(p, l);
    case TF_RELU:
    case TF_GELU:
    case TF_SCALE: return elt_fwd(p, l);
    case TF_MAXPOOL:
    case TF_AVGPOOL:
    case TF_GAP: return pool_fwd(p, l);
    case TF_ADD: return add_fwd(p, l);
    }
    return fl_error_set(p->err, FL_E_UNSUPPORTED, "oneDNN plan: layer %d: unknown kind", l);
}

static int layer_bwd(dnn_plan *p, int l)
{
    const tf_layer *T = &p->d->spec->layers[l];
    if (!p->dact[p->L[l].out])
        return fl_error_set(p->err, FL_E_UNSUPPORTED,
                            "oneDNN plan: layer %d: its output has no gradient", l);
    switch (T->kind) {
    case TF_CONV:
    case TF_LINEAR:
        TRYRC(weighted_bwd_weights(p, l));
        return T->in == 0 ? 0 : weighted_bwd_data(p, l);
    case TF_BN: return bn_bwd(p, l);
    case TF_RELU:
    case TF_GELU:
    case TF_SCALE: return elt_bwd(p, l);
    case TF_MAXPOOL:
    case TF_AVGPOOL:
    case TF_GAP: return pool_bwd(p, l);
    case TF_ADD: return add_bwd(p, l);
    }
    return 0;
}

static int plan_alloc(dnn_plan *p, const tf_model_spec *s)
{
    p->md = calloc((size_t)s->n_tensors, sizeof *p->md);
    p->act = calloc((size_t)s->n_tensors, sizeof *p->act);
    p->dact = calloc((size_t)s->n_tensors, sizeof *p->dact);
    p->dact_set = calloc((size_t)s->n_tensors, sizeof *p->dact_set);
    p->L = calloc((size_t)s->n_layers, sizeof *p->L);
    if (!p->md || !p->act || !p->dact || !p->dact_set || !p->L)
        return fl_error_set(p->err, -ENOMEM, "oneDNN plan: out of memory");
    for (int l = 0; l < s->n_layers; l++)
        p->L[l].out = s->layers[l].out;
    /* BN followed by a ReLU that is the only reader of its output: one fused primitive */
    for (int l = 0; l + 1 < s->n_layers; l++) {
        const tf_layer *T = &s->layers[l], *R = &s->layers[l + 1];
        if (T->kind == TF_BN && R->kind == TF_RELU && R->in == T->out &&
            p->d->readers[T->out] == 1) {
            p->L[l].fuse_relu = 1;
            p->L[l].out = R->out;
            p->L[l + 1].skip = 1;
        }
    }
    return 0;
}

int dnn_plan_build(cpu_dnn *d, int N, int train, dnn_plan **out, fl_error *err)
{
    const tf_model_spec *s = d->spec;
    *out = NULL;
    dnn_plan *p = calloc(1, sizeof *p);
    if (!p)
        return fl_error_set(err, -ENOMEM, "oneDNN plan: out of memory");
    p->d = d;
    p->N = N;
    p->train = train;
    p->err = err;
    p->cur_layer = -1;
    int rc = plan_alloc(p, s);
    dnnl_dims_t in_dims = {N, s->in_c, s->in_h, s->in_w};
    /* one channel: NCHW and NHWC are the same bytes, and NHWC lets the first convolution write
     * NHWC for a following one (see conv_fwd_pd) */
    if (!rc && dnnl_memory_desc_init_by_tag(&p->md[0], 4, in_dims, dnnl_f32,
                                            s->in_c == 1 ? dnnl_nhwc : dnnl_nchw))
        rc = fl_error_set(err, FL_E_UNSUPPORTED, "oneDNN plan: input descriptor");
    if (!rc)
        rc = own_mem(p, &p->md[0], d->input, &p->act[0]);
    for (int l = 0; l < s->n_layers && !rc; l++) {
        p->cur_layer = l;
        if (!p->L[l].skip)
            rc = layer_fwd(p, l);
    }
    if (!rc && train) {
        const int lt = s->n_tensors - 1;
        rc = tensor_mem(p, lt, 1, &p->dact[lt]);
        p->dact_set[lt] = 1;
        for (int l = s->n_layers - 1; l >= 0 && !rc; l--) {
            p->cur_layer = l;
            if (!p->L[l].skip)
                rc = layer_bwd(p, l);
        }
    }
    for (int l = 0; l < s->n_layers && p->L; l++)
        if (p->L[l].fwd_pd) {
            dnnl_primitive_desc_destroy(p->L[l].fwd_pd);
            p->L[l].fwd_pd = NULL;
        }
    if (rc) {
        dnn_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void dnn_plan_free(dnn_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_own_p; i++)
        dnnl_primitive_destroy(p->own_p[i]);
    for (int i = 0; i < p->n_own_m; i++)
        dnnl_memory_destroy(p->own_m[i]);
    free(p->own_p);
    free(p->own_m);
    free(p->fwd);
    free(p->bwd);
    free(p->md);
    free(p->act);
    free(p->dact);
    free(p->dact_set);
    free(p->L);
    free(p);
}
