/* nvml.c — the few NVML calls trainfast needs (training's utilisation samples, `trainfast doctor`'s
 * GPU list), through dlopen (see nvml.h). */
#include "nvml.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef struct nvml_mem {
    unsigned long long total, free, used;
} nvml_mem;
typedef struct nvml_util {
    unsigned gpu, memory;
} nvml_util;

struct tf_nvml {
    void *lib;
    int (*shutdown)(void);
    int (*count)(unsigned *);
    int (*handle)(unsigned, void **);
    int (*name)(void *, char *, unsigned);
    int (*mem)(void *, nvml_mem *);
    int (*util)(void *, nvml_util *);
    char driver[80];
};

tf_nvml *tf_nvml_open(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return NULL;
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    if (!init || init() != 0) {
        dlclose(h);
        return NULL;
    }
    tf_nvml *n = calloc(1, sizeof *n);
    if (!n) {
        dlclose(h);
        return NULL;
    }
    n->lib = h;
    n->shutdown = (int (*)(void))dlsym(h, "nvmlShutdown");
    n->count = (int (*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    n->handle = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    n->name = (int (*)(void *, char *, unsigned))dlsym(h, "nvmlDeviceGetName");
    n->mem = (int (*)(void *, nvml_mem *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    n->util = (int (*)(void *, nvml_util *))dlsym(h, "nvmlDeviceGetUtilizationRates");
    int (*drv)(char *, unsigned) =
        (int (*)(char *, unsigned))dlsym(h, "nvmlSystemGetDriverVersion");
    if (!drv || drv(n->driver, sizeof n->driver) != 0)
        n->driver[0] = 0;
    return n;
}

int tf_nvml_sample(tf_nvml *n, unsigned index, int *util, unsigned long long *used,
                   unsigned long long *total)
{
    void *dev;
    if (!n || !n->handle || n->handle(index, &dev) != 0)
        return -1;
    nvml_util u;
    nvml_mem m;
    *util = (n->util && n->util(dev, &u) == 0) ? (int)u.gpu : -1;
    if (n->mem && n->mem(dev, &m) == 0) {
        *used = m.used;
        *total = m.total;
    } else {
        *used = *total = 0;
    }
    return 0;
}

int tf_nvml_count(tf_nvml *n)
{
    unsigned c = 0;
    if (!n || !n->count || n->count(&c) != 0)
        return -1;
    return c > 1024 ? 1024 : (int)c;
}

int tf_nvml_name(tf_nvml *n, unsigned index, char *buf, size_t cap)
{
    void *dev;
    if (!n || !n->name || !n->handle || n->handle(index, &dev) != 0)
        return -1;
    return n->name(dev, buf, (unsigned)cap) == 0 ? 0 : -1;
}

const char *tf_nvml_driver(tf_nvml *n) { return n ? n->driver : ""; }

void tf_nvml_close(tf_nvml *n)
{
    if (!n)
        return;
    if (n->shutdown)
        n->shutdown();
    dlclose(n->lib);
    free(n);
}
