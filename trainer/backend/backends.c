/* backends.c — the compute backends this trainfast was built with (backend.h), and the choice
 * of one for --device and of the CPU path for --cpu-backend. The only place in trainfast that
 * knows whether the CUDA backend is in. */
#include <stdio.h>
#include <string.h>

#include "fl_cli.h"
#include "fl_cli_table.h"
#include "train.h"

const fl_cli_choice tf_cpu_backend_choices[] = {
    {"reference", TF_CPU_REFERENCE, 0}, {"onednn", TF_CPU_ONEDNN, 0}, {NULL, 0, 0}};

int tf_cpu_impl_refused(int cpu_impl)
{
    if (cpu_impl != TF_CPU_ONEDNN || tf_cpu_have_onednn())
        return 0;
    fl_cli_error("trainfast", "--cpu-backend onednn: this trainfast was built without oneDNN "
                              "(install libdnnl-dev and reconfigure)");
    return FL_EXIT_USAGE;
}

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
#ifdef FL_HAVE_CUDA
    const tf_backend_ops *g = tf_backend_cuda();
    if (!g->available || g->available(why, sizeof why)) {
        *ops = g;
        return 0;
    }
#endif
    if (!strcmp(device, "cuda"))
        return fl_error_set(err, FL_E_UNSUPPORTED, "--device cuda: %s", why);
    if (notice)
        snprintf(notice, cap,
                 strncmp(why, "no GPU", 6) ? "no GPU (%s): running on the CPU in fp32"
                                           : "%s: running on the CPU in fp32",
                 why);
    *ops = tf_backend_cpu();
    return 0;
}
