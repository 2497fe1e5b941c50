/* decode_workers.c — the decode worker count of a CPU run (decode_workers.h). */
#include "decode_workers.h"

#include <math.h>

static uint32_t clamp_u32(double v, uint32_t lo, uint32_t hi)
{
    if (!(v >= (double)lo)) /* also NaN */
        return lo;
    return v >= (double)hi ? hi : (uint32_t)v;
}

uint32_t tf_decode_workers_needed(double busy_per_batch, double step_s, double wait_frac,
                                  uint32_t active, uint32_t floor, uint32_t max)
{
    if (max < 1)
        max = 1;
    const uint32_t lo = floor < 1 ? 1 : floor > max ? max : floor;
    /* one spare beside the need: a worker with nothing to decode costs nothing, and one that
     * is there when a burst comes keeps the step from waiting (measured: fastcnn 64 px on 2 quiet
     * cores, a need of a quarter of a worker: 1 at work 0.90-0.98 of the bound, 2 at 0.99-1.06) */
    double want = step_s > 0 && busy_per_batch > 0
                      ? ceil(TF_DW_HEADROOM * busy_per_batch / step_s) + TF_DW_SPARE
                  : step_s > 0 ? 1.0
                               : (double)max;
    uint32_t n = clamp_u32(want, lo, max);
    if (wait_frac > TF_DW_WAIT_HIGH && n <= active)
        n = active + 1 > max ? max : active + 1;
    if (wait_frac > TF_DW_WAIT_LOW && n < active)
        n = active;
    return n < lo ? lo : n;
}

void tf_decode_auto_init(tf_decode_auto *a, uint32_t max, uint32_t initial)
{
    *a = (tf_decode_auto){.max = max < 1 ? 1 : max};
    a->active = initial < 1 ? 1 : initial > a->max ? a->max : initial;
    a->lo = a->hi = a->active;
    a->floor = 1;
}

uint32_t tf_decode_auto_step(tf_decode_auto *a, uint32_t batch, double wait_s, double compute_s,
                             double busy_s, uint64_t images)
{
    a->steps++;
    a->active_steps += a->active;
    if (a->steps <= TF_DW_SKIP || a->max == 1)
        return a->active;
    if (!a->have0) { /* the window starts after this step */
        a->busy0 = busy_s;
        a->images0 = images;
        a->have0 = 1;
        return a->active;
    }
    a->n++;
    a->wait += wait_s;
    a->compute += compute_s;
    if (a->n < TF_DW_STEPS || a->wait + a->compute < TF_DW_SECONDS || images <= a->images0)
        return a->active;
    a->busy_per_image = (busy_s - a->busy0) / (double)(images - a->images0);
    a->step_s = a->compute / a->n;
    a->need = a->step_s > 0 ? a->busy_per_image * batch / a->step_s : 0;
    const double wf = a->wait / (a->wait + a->compute);
    if (wf > TF_DW_WAIT_HIGH && a->active < a->max && a->floor <= a->active)
        a->floor = a->active + 1;
    uint32_t n = tf_decode_workers_needed(a->busy_per_image * batch, a->step_s, wf, a->active,
                                          a->floor, a->max);
    if (n != a->active) {
        a->changes++;
        a->active = n;
        a->lo = n < a->lo ? n : a->lo;
        a->hi = n > a->hi ? n : a->hi;
    }
    a->n = 0;
    a->wait = a->compute = 0;
    a->busy0 = busy_s;
    a->images0 = images;
    return a->active;
}
