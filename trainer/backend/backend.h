/* backend.h — the interface between the trainfast core (loop, schedule, checkpoints, reporting)
 * and a compute backend (trainer/cpu: fp32, bf16 convolutions on oneDNN; trainer/gpu: CUDA mixed
 * precision). A backend runs one tf_model_spec (model.h): forward, backward, optimizer on fp32
 * master weights, evaluation, and hands its whole state to the core as host fp32 arrays for
 * checkpoints.
 *
 * Call order: ops->create(spec, cfg) -> [ops->attach_comm(comm): data parallel]
 *             -> ops->set_state(initial state from tf_model_init)
 *             -> { ops->train_step(batch, lr) ... ops->eval_batch(batch) ... ops->get_state() }
 *             -> ops->destroy().
 * A backend object is driven by one thread. Errors: negative codes of fl_error.h with a message
 * (FL_E_CUDA carries the CUDA/cuDNN/cuBLAS error string, file:line and a hint). */
#ifndef TF_BACKEND_H
#define TF_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"
#include "fl_aug_rng.h" /* fl_aug_crop_flip: the crop/flip draw of every backend */
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_precision {
    TF_FP32 = 0, /* fp32 everything (the CPU backend's default) */
    TF_BF16 = 1, /* bf16 activations and weight copies, fp32 master weights / accumulation */
    TF_FP16 = 2  /* fp16 ditto, with dynamic loss scaling */
} tf_precision;

/* Training hyper-parameters a backend needs (the LR comes per step from the core's schedule). */
/* The CPU backend's compute path (--cpu-backend): the fp32 reference layers (cpu_layers.h, the
 * GPU kernels' oracle) or oneDNN primitives (cpu_onednn.h, builds with FL_HAVE_ONEDNN). The
 * training state means the same in both, so checkpoints move freely between them. */
typedef enum tf_cpu_impl {
    TF_CPU_DEFAULT = 0, /* $FASTLOAD_CPU_BACKEND (reference|onednn) if set, else oneDNN when
                           built with it, else the reference */
    TF_CPU_REFERENCE = 1,
    TF_CPU_ONEDNN = 2 /* create fails with FL_E_UNSUPPORTED in a build without oneDNN */
} tf_cpu_impl;

/* 1 when this build has the oneDNN path. */
int tf_cpu_have_onednn(void);

typedef struct tf_train_config {
    tf_precision precision;
    float label_smoothing; /* eps: target = (1 - eps) one-hot + eps / num_classes */
    float momentum;        /* SGD momentum mu (0.9) */
    int nesterov;          /* 1: Nesterov momentum */
    float weight_decay;    /* L2 decay added to the gradient of params without no_decay */
    int accum;             /* micro-batches per optimizer step (>= 1) */
    float ema_decay;       /* 0: no EMA; else after each optimizer step ema = d ema + (1-d) p
                              (params and BN stats) */
    int crop_pad;          /* random crop with this zero padding (0: none), see fl_aug_crop_flip */
    int flip;              /* random horizontal flip in the backend (fl_aug_crop_flip), 0: none */
    uint64_t aug_seed;     /* seed of the augmentation hash */
    int threads;           /* CPU backend: worker threads (0 = online CPUs) */
    int cpu_impl;          /* CPU backend: tf_cpu_impl (0 = default: oneDNN when built with it,
                              unless $FASTLOAD_CPU_BACKEND says reference) */
    int device;            /* GPU backend: CUDA device ordinal */
    uint32_t max_batch;    /* largest batch that train_step/eval_batch will be given */
    float loss_scale_init; /* fp16: initial dynamic loss scale (0 = 65536) */
    int loss_scale_window; /* fp16: good steps before the scale doubles (0 = 1000) */
    /* Data parallel over `world` processes (1 or 0: single process). Before each optimizer step
     * the backend sums its accumulated gradients over the ranks with grad_allreduce (in place,
     * param_count floats; user = grad_allreduce_user) and multiplies them by 1/world, so every rank
     * applies the same averaged update. NULL: no reduction. The trainer does not set these: it
     * hands its communicator to ops->attach_comm, and the CPU backend sets them from it; a
     * backend with its own collective (the CUDA backend's NCCL communicator, gpu_dist.h) ignores
     * them. A failure of the callback
     * makes train_step fail with its error (the weights are then out of step: abort the job). */
    int world;
    int (*grad_allreduce)(void *user, float *buf, int64_t n, fl_error *err);
    void *grad_allreduce_user;
    /* Synchronized BatchNorm (--sync-bn; CPU backend): when set (and world > 1), training-mode
     * BN layers sum their per-channel statistics over the ranks with this callback (in place, n
     * doubles; user = grad_allreduce_user), so every rank normalises with the global batch's
     * statistics. NULL: statistics per process. */
    int (*bn_allreduce)(void *user, double *buf, int64_t n, fl_error *err);
} tf_train_config;

/* Fill defaults: fp32, label smoothing 0, momentum 0.9, nesterov 1, wd 5e-4, accum 1, no EMA,
 * no crop/flip, threads 0, device 0, max_batch 256, loss scale 65536 / 1000. */
void tf_train_config_init(tf_train_config *cfg);

/* A batch as the core hands it to a backend. Images are uint8 NHWC exactly as libfastload
 * delivers them; the backend normalises them with spec->mean/std (and applies crop/flip when the
 * config asks, using fl_aug_crop_flip so every backend augments identically).
 * Lifetime: the core gives the batch's memory (host and device) back to the loader as soon as
 * train_step/eval_batch returns, so a backend that reads it asynchronously must finish (or copy)
 * before returning, e.g. by recording its own event after its last read and waiting on it before
 * the slot can be overwritten. */
typedef struct tf_batch {
    const uint8_t *images;   /* host: n * h * w * c bytes, NHWC (always set) */
    const int32_t *labels;   /* host: n labels in [0, num_classes) (always set) */
    const uint64_t *indices; /* n dataset record indices (augmentation key); NULL: use 0..n-1 */
    uint64_t epoch;          /* augmentation key */
    uint32_t n, h, w, c;
    const void *device_images; /* optional (loader device mode): same bytes on the GPU */
    const void *device_labels; /* optional: same labels on the GPU */
    void *event;               /* optional cudaEvent_t: device copies ready when it completes */
    void *stream;              /* optional cudaStream_t the copies were issued on */
    uint32_t accum_group;      /* micro-batches in this batch's accumulation group: its gradient
                                  is divided by it and the optimizer steps when accum_count
                                  reaches it. 0 = cfg.accum. The core passes fewer than cfg.accum
                                  for an epoch's last, partial group, so that group still steps
                                  with the mean of the gradients it had. */
} tf_batch;

typedef struct tf_step_result {
    double loss;      /* mean loss over the micro-batch (with label smoothing) */
    uint32_t correct; /* top-1 correct predictions in the micro-batch */
    uint32_t n;       /* samples */
    int stepped;      /* 1 when this call ended an accumulation group and ran the optimizer */
    int skipped;      /* fp16: 1 when the step was skipped for inf/nan gradients */
    double h2d_s;     /* seconds spent copying input to the device (0 on CPU / device mode) */
} tf_step_result;

typedef struct tf_eval_result {
    double loss_sum;   /* summed (not mean) cross-entropy, no label smoothing */
    uint32_t correct1; /* top-1 correct */
    uint32_t correct5; /* top-5 correct (== n when num_classes <= 5) */
    uint32_t n;
} tf_eval_result;

/* Everything a checkpoint needs, as host fp32 arrays. For get_state the caller provides arrays of
 * the sizes noted (it owns them); for set_state the backend copies from them. */
typedef struct tf_state {
    float *params;        /* spec->param_count: fp32 master weights */
    float *momentum;      /* spec->param_count: SGD momentum buffer */
    float *grad_accum;    /* spec->param_count: gradients summed so far in the current accumulation
                             group (all zero when accum_count == 0) */
    float *stats;         /* spec->stat_count: BN running mean/var */
    float *ema_params;    /* spec->param_count, or NULL when cfg.ema_decay == 0 */
    float *ema_stats;     /* spec->stat_count, or NULL when cfg.ema_decay == 0 */
    uint64_t step;        /* optimizer steps done */
    uint64_t micro_step;  /* train_step calls done */
    uint32_t accum_count; /* micro-batches in grad_accum */
    float loss_scale;     /* fp16 dynamic loss scale (1 otherwise) */
    uint32_t good_steps;  /* fp16: consecutive finite steps since the last scale change */
    uint64_t skipped_steps; /* fp16: steps skipped for inf/nan */
} tf_state;

typedef struct tf_backend tf_backend; /* opaque, defined by each backend */

/* The trainer's communicator over the ranks of a data-parallel job (dist.h), as a backend sees
 * it: who it is and the collectives as callbacks (user = `user`). Sums are in place over all
 * ranks; bcast copies `bytes` bytes from rank `root` to every rank. Each returns 0 or a negative
 * error with a message. */
typedef struct tf_comm {
    int rank, world;
    int sync_bn; /* --sync-bn: synchronise BatchNorm statistics over the ranks */
    void *user;
    int (*sum_f32)(void *user, float *buf, int64_t n, fl_error *err);
    int (*sum_f64)(void *user, double *buf, int64_t n, fl_error *err);
    int (*bcast)(void *user, void *buf, size_t bytes, int root, fl_error *err);
} tf_comm;

typedef struct tf_backend_ops {
    const char *name; /* "cpu", "cuda" */

    /* 1 when this backend can run here; else 0 and a one-line reason in why (e.g. "no GPU:
     * cudaGetDeviceCount says no CUDA-capable device is detected"). May be NULL = always. */
    int (*available)(char *why, size_t why_cap);

    /* Allocate everything for batches up to cfg->max_batch. `spec` must outlive the backend; cfg
     * is copied. Parameters are undefined until set_state. Errors: FL_E_UNSUPPORTED (a precision
     * or layer this backend lacks), -ENOMEM / FL_E_CUDA (out of memory: message says how much). */
    int (*create)(const tf_model_spec *spec, const tf_train_config *cfg, tf_backend **out,
                  fl_error *err);

    /* Forward + backward on one micro-batch (n <= max_batch), with loss = mean over the batch of
     * the label-smoothed cross-entropy; gradients (of the mean, divided by the group size G =
     * batch->accum_group, or cfg.accum when 0) are added to the accumulator. When accum_count
     * reaches G the optimizer step runs with learning rate
     * `lr` on the fp32 master weights:
     *   g = grad_accum + wd * p  (wd only where !no_decay)
     *   m = mu * m + g;  p -= lr * (nesterov ? g + mu * m : m)
     * then EMA update, grad_accum zeroed. BN running stats are updated every micro-batch.
     * Results go to *res. Errors: FL_E_INVALID (bad shape or label), FL_E_CUDA. */
    int (*train_step)(tf_backend *b, const tf_batch *batch, float lr, tf_step_result *res,
                      fl_error *err);

    /* Inference (BN in eval mode) on one batch without augmentation; flip_tta: the logits are the
     * mean of the logits of the image and of its horizontal mirror (loss/top-k use that mean);
     * use_ema: evaluate the EMA weights (error FL_E_INVALID when EMA is off). Does not change the
     * training state. */
    int (*eval_batch)(tf_backend *b, const tf_batch *batch, int flip_tta, int use_ema,
                      tf_eval_result *res, fl_error *err);

    /* Copy the whole training state to host arrays (see tf_state); synchronises the device. */
    int (*get_state)(tf_backend *b, tf_state *st, fl_error *err);

    /* Replace the whole training state (initialisation or resume). */
    int (*set_state)(tf_backend *b, const tf_state *st, fl_error *err);

    /* Optional (may be NULL): the largest power-of-two batch <= limit that fits in memory for
     * training, found by trying. Errors as create. */
    int (*probe_batch)(const tf_model_spec *spec, const tf_train_config *cfg, uint32_t limit,
                       uint32_t *batch, fl_error *err);

    /* Optional (may be NULL): one-line description of the device ("NVIDIA H200, 139 GiB, cc 9.0"
     * or "CPU, 2 threads, OpenBLAS"). */
    void (*describe)(tf_backend *b, char *buf, size_t cap);

    /* Free everything (the communicator attach_comm set up, too). NULL allowed. */
    void (*destroy)(tf_backend *b);

    /* Optional (NULL: this backend cannot train data-parallel): join the job of `comm` before the
     * first set_state, every rank at once (it may use comm's collectives). From then on each
     * optimizer step averages the gradients over the ranks: through comm (CPU backend), or
     * through a communicator of the backend's own that it sets up here and frees in destroy
     * (CUDA backend: NCCL, its unique id broadcast with comm->bcast). Called for world > 1, and
     * for world 1 when the user asks for the backend's collective path (--nccl). `note` (may be
     * NULL) receives a one-line description for the user ("" when there is nothing to say).
     * comm must outlive the backend. Errors: FL_E_UNSUPPORTED (e.g. a build without NCCL,
     * --sync-bn where unsupported), FL_E_CUDA, those of comm's callbacks. */
    int (*attach_comm)(tf_backend *b, const tf_comm *comm, char *note, size_t note_cap,
                       fl_error *err);

    /* Optional (NULL: this backend cannot predict): the forward of eval_batch without TTA (BN in
     * eval mode, no augmentation; use_ema as there) returning the logits themselves:
     * batch->n x spec->num_classes fp32, row-major, written to `logits` (host memory the caller
     * owns), so their argmax is eval_batch's top-1 without TTA. The label values are not used
     * (batch->labels must still point at n labels). The CUDA backend computes in its configured
     * precision (bf16 as in training) and converts the logits to fp32 on the device. Does not
     * change the training state. Errors: as eval_batch. */
    int (*predict_batch)(tf_backend *b, const tf_batch *batch, int use_ema, float *logits,
                         fl_error *err);
} tf_backend_ops;

/* The CPU fp32 reference backend (trainer/cpu). Always built. */
const tf_backend_ops *tf_backend_cpu(void);

#ifdef FL_HAVE_CUDA
/* The CUDA backend (trainer/gpu): FL_HAVE_CUDA, the one macro for "the CUDA backend is built",
 * is defined exactly when trainer/gpu/CMakeLists.txt builds the static library `tf_gpu`, which
 * trainfast then links. */
const tf_backend_ops *tf_backend_cuda(void);
#endif

/* Augmentation shared by all backends: per-sample crop offset and flip are a pure function of
 * (seed, epoch, record index), fl_aug_crop_flip (common/fl_aug_rng.h, also the GPU input
 * kernel's), so every backend, thread count and resumed run sees the same augmented pixels. */

#ifdef __cplusplus
}
#endif
#endif
