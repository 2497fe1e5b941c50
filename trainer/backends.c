/* backends.c — the compute backends this trainfast was built with (backend.h), and the choice
 * of one for --device. The only place in trainfast that knows whether the CUDA backend is in. */
#include <stdio.h>
#include <string.h>

#include "train.h"

int tf_pick_backend(const char *device, const tf_backend_ops **ops, char *notice, size_t cap,
                    fl_error *err)
{
    if (notice && cap)
        notice[0] = 0;
    if (!strcmp(device, "cpu")) {
        *ops = tf_backend_cpu();
        return 0;
    }
    if (strcmp(device, "cuda") && strcmp(device, "auto"))
        return fl_error_set(err, FL_E_INVALID, "--device %s: expected cpu, cuda or auto", device);
    char why[256] = "this trainfast was built without the CUDA backend";
#ifdef TF_HAVE_GPU_BACKEND
    const tf_backend_ops *g = tf_backend_cuda();
    if (!g->available || g->available(why, sizeof why)) {
        *ops = g;
        return 0;
    }
#endif
    if (!strcmp(device, "cuda"))
        return fl_error_set(err, FL_E_UNSUPPORTED, "--device cuda: %s", why);
    if (notice)
        snprintf(notice, cap, strncmp(why, "no GPU", 6) ? "no GPU (%s): running on the CPU in fp32"
                                                        : "%s: running on the CPU in fp32",
                 why);
    *ops = tf_backend_cpu();
    return 0;
}
