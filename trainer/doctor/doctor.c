/* doctor.c — `trainfast doctor`: what this machine offers for training. CUDA driver and runtime
 * versions (libcudart loaded at run time), GPUs via NVML (nvml.c), cuDNN/cuBLAS versions, io_uring,
 * the pinned-memory limit, cores and a worker suggestion.
 * Everything is probed with dlopen so the command works (and says "no GPU") anywhere. */
#include <dlfcn.h>
#include <liburing.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cpu_layers.h"
#include "fastload.h"
#include "fl_cli.h"
#include "nvml.h"
#include "train.h"

typedef struct gpu_info {
    char name[256];
    int cc_major, cc_minor;
    unsigned long long mem_total, mem_used;
    int util; /* percent, -1 unknown */
} gpu_info;

typedef struct doctor {
    int cudart; /* libcudart loaded */
    char cudart_lib[64];
    int driver_ver, runtime_ver; /* 12040 = 12.4; 0 unknown */
    int ngpu;
    char cuda_error[160];
    int nvml;
    char nvml_driver[80];
    gpu_info gpu[8];
    int cudnn_ver; /* 90100 or 0 */
    int cublas_major, cublas_minor, cublas_patch;
    int uring_ok;
    char uring_err[120];
    unsigned long long memlock; /* bytes; ~0ull unlimited */
    long cores;
    int workers;
} doctor;

static void *open_first(const char *const *names, char *which, size_t cap)
{
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            if (which)
                snprintf(which, cap, "%s", names[i]);
            return h;
        }
    }
    return NULL;
}

static void probe_cuda(doctor *d)
{
    static const char *const libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                       "libcudart.so.11.0", NULL};
    void *h = open_first(libs, d->cudart_lib, sizeof d->cudart_lib);
    if (!h) {
        snprintf(d->cuda_error, sizeof d->cuda_error, "libcudart not found (no CUDA runtime)");
        return;
    }
    d->cudart = 1;
    int (*drv)(int *) = (int (*)(int *))dlsym(h, "cudaDriverGetVersion");
    int (*rt)(int *) = (int (*)(int *))dlsym(h, "cudaRuntimeGetVersion");
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cudaGetDeviceCount");
    const char *(*estr)(int) = (const char *(*)(int))dlsym(h, "cudaGetErrorString");
    int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(h, "cudaDeviceGetAttribute");
    int (*props)(void *, int) = (int (*)(void *, int))dlsym(h, "cudaGetDeviceProperties_v2");
    if (!props)
        props = (int (*)(void *, int))dlsym(h, "cudaGetDeviceProperties");
    if (drv)
        drv(&d->driver_ver);
    if (rt)
        rt(&d->runtime_ver);
    int n = 0, rc = count ? count(&n) : -1;
    if (rc != 0) {
        snprintf(d->cuda_error, sizeof d->cuda_error, "cudaGetDeviceCount: %s",
                 estr ? estr(rc) : "failed");
        n = 0;
    }
    d->ngpu = n > 8 ? 8 : n;
    for (int i = 0; i < d->ngpu; i++) {
        /* cudaDeviceProp starts with char name[256] in every CUDA version; its size varies, so
         * give it a generous buffer and read only the name */
        static unsigned char buf[16384];
        memset(buf, 0, sizeof buf);
        if (props && props(buf, i) == 0) {
            memcpy(d->gpu[i].name, buf, sizeof d->gpu[i].name - 1);
            d->gpu[i].name[sizeof d->gpu[i].name - 1] = 0;
        }
        if (attr) {
            attr(&d->gpu[i].cc_major, 75 /* cudaDevAttrComputeCapabilityMajor */, i);
            attr(&d->gpu[i].cc_minor, 76 /* cudaDevAttrComputeCapabilityMinor */, i);
        }
        d->gpu[i].util = -1;
    }
    /* libcudart stays loaded: unloading a CUDA runtime mid-process is not supported */
}

static void probe_nvml(doctor *d)
{
    tf_nvml *nv = tf_nvml_open();
    if (!nv)
        return;
    d->nvml = 1;
    snprintf(d->nvml_driver, sizeof d->nvml_driver, "%s", tf_nvml_driver(nv));
    int n = tf_nvml_count(nv);
    if (n >= 0) {
        if (d->ngpu == 0)
            d->ngpu = n > 8 ? 8 : n;
        for (int i = 0; i < n && i < 8; i++) {
            int util;
            unsigned long long used, total;
            if (tf_nvml_sample(nv, (unsigned)i, &util, &used, &total) != 0)
                continue; /* no handle for this GPU */
            if (!d->gpu[i].name[0])
                tf_nvml_name(nv, (unsigned)i, d->gpu[i].name, sizeof d->gpu[i].name);
            if (total) { /* 0/0: the memory query failed (left unknown) */
                d->gpu[i].mem_total = total;
                d->gpu[i].mem_used = used;
            }
            d->gpu[i].util = util;
        }
    }
    tf_nvml_close(nv);
}

static void probe_libs(doctor *d)
{
    static const char *const dnn[] = {"libcudnn.so.9", "libcudnn.so", "libcudnn.so.8", NULL};
    void *h = open_first(dnn, NULL, 0);
    if (h) {
        size_t (*ver)(void) = (size_t(*)(void))dlsym(h, "cudnnGetVersion");
        if (ver)
            d->cudnn_ver = (int)ver();
    }
    static const char *const blas[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", NULL};
    h = open_first(blas, NULL, 0);
    if (h) {
        int (*prop)(int, int *) = (int (*)(int, int *))dlsym(h, "cublasGetProperty");
        if (prop) {
            prop(0, &d->cublas_major); /* MAJOR_VERSION */
            prop(1, &d->cublas_minor);
            prop(2, &d->cublas_patch);
        }
    }
}

static void probe_host(doctor *d)
{
    struct io_uring ring;
    int rc = io_uring_queue_init(8, &ring, 0);
    if (rc == 0) {
        d->uring_ok = 1;
        io_uring_queue_exit(&ring);
    } else {
        snprintf(d->uring_err, sizeof d->uring_err, "io_uring_queue_init: %s", strerror(-rc));
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
        d->memlock = rl.rlim_cur == RLIM_INFINITY ? ~0ull : (unsigned long long)rl.rlim_cur;
    d->cores = sysconf(_SC_NPROCESSORS_ONLN);
    /* decode workers: all cores but one for the training thread (at least 1) */
    d->workers = d->cores > 1 ? (int)d->cores - 1 : 1;
}

static void ver(char *buf, size_t cap, int v)
{
    if (v <= 0)
        snprintf(buf, cap, "unknown");
    else
        snprintf(buf, cap, "%d.%d", v / 1000, (v % 1000) / 10);
}

int tf_doctor_main(int json)
{
    doctor d;
    memset(&d, 0, sizeof d);
    probe_cuda(&d);
    probe_nvml(&d);
    probe_libs(&d);
    probe_host(&d);
    char dv[16], rv[16];
    ver(dv, sizeof dv, d.driver_ver);
    ver(rv, sizeof rv, d.runtime_ver);
    int mismatch = d.driver_ver > 0 && d.runtime_ver > 0 && d.driver_ver < d.runtime_ver;
    const char *backend_built =
#ifdef FL_HAVE_CUDA
        "cpu, cuda";
#else
        "cpu";
#endif
    if (json) {
        fl_json j;
        fl_json_init(&j);
        fl_json_begin_object(&j);
        fl_json_key(&j, "trainfast_version");
        fl_json_string(&j, fl_cli_version());
        fl_json_key(&j, "backends");
        fl_json_string(&j, backend_built);
        fl_json_key(&j, "gpu_count");
        fl_json_int(&j, d.ngpu);
        fl_json_key(&j, "cuda_runtime_loaded");
        fl_json_bool(&j, d.cudart);
        fl_json_key(&j, "cuda_driver_version");
        if (d.driver_ver > 0)
            fl_json_string(&j, dv);
        else
            fl_json_null(&j);
        fl_json_key(&j, "cuda_runtime_version");
        if (d.runtime_ver > 0)
            fl_json_string(&j, rv);
        else
            fl_json_null(&j);
        fl_json_key(&j, "driver_runtime_mismatch");
        fl_json_bool(&j, mismatch);
        fl_json_key(&j, "cuda_error");
        if (d.cuda_error[0])
            fl_json_string(&j, d.cuda_error);
        else
            fl_json_null(&j);
        fl_json_key(&j, "nvml");
        fl_json_bool(&j, d.nvml);
        fl_json_key(&j, "gpus");
        fl_json_begin_array(&j);
        for (int i = 0; i < d.ngpu; i++) {
            fl_json_begin_object(&j);
            fl_json_key(&j, "name");
            fl_json_string(&j, d.gpu[i].name);
            fl_json_key(&j, "compute_capability");
            char cc[16];
            snprintf(cc, sizeof cc, "%d.%d", d.gpu[i].cc_major, d.gpu[i].cc_minor);
            fl_json_string(&j, cc);
            fl_json_key(&j, "memory_bytes");
            fl_json_uint(&j, d.gpu[i].mem_total);
            fl_json_key(&j, "utilization");
            fl_json_int(&j, d.gpu[i].util);
            fl_json_end_object(&j);
        }
        fl_json_end_array(&j);
        fl_json_key(&j, "cudnn_version");
        fl_json_int(&j, d.cudnn_ver);
        fl_json_key(&j, "cublas_version");
        char cb[32];
        snprintf(cb, sizeof cb, "%d.%d.%d", d.cublas_major, d.cublas_minor, d.cublas_patch);
        if (d.cublas_major)
            fl_json_string(&j, cb);
        else
            fl_json_null(&j);
        fl_json_key(&j, "io_uring");
        fl_json_bool(&j, d.uring_ok);
        fl_json_key(&j, "memlock_bytes");
        if (d.memlock == ~0ull)
            fl_json_string(&j, "unlimited");
        else
            fl_json_uint(&j, d.memlock);
        fl_json_key(&j, "cores");
        fl_json_int(&j, d.cores);
        fl_json_key(&j, "suggested_workers");
        fl_json_int(&j, d.workers);
        fl_json_key(&j, "cpu_gemm");
        fl_json_string(&j, cpu_gemm_name());
        fl_json_end_object(&j);
        printf("%s\n", fl_json_text(&j));
        fl_json_free(&j);
        return 0;
    }
    printf("trainfast %s (libfastload %s), backends built: %s\n", fl_cli_version(), fl_version(),
           backend_built);
    if (!d.cudart)
        printf("CUDA runtime : not found (%s)\n", d.cuda_error);
    else
        printf("CUDA runtime : %s (%s); %s%s\n", rv, d.cudart_lib,
               d.driver_ver > 0 ? "driver supports CUDA " : "no NVIDIA driver loaded",
               d.driver_ver > 0 ? dv : "");
    if (mismatch)
        printf("  MISMATCH   : the driver (CUDA %s) is older than the runtime (CUDA %s): upgrade "
               "the NVIDIA driver, or use a CUDA toolkit <= %s\n",
               dv, rv, dv);
    if (d.ngpu == 0)
        printf("GPU          : no GPU%s%s%s -> trainfast trains on the CPU\n",
               d.cuda_error[0] ? " (" : "", d.cuda_error, d.cuda_error[0] ? ")" : "");
    for (int i = 0; i < d.ngpu; i++) {
        char mem[32] = "?";
        if (d.gpu[i].mem_total)
            fl_cli_human_bytes(d.gpu[i].mem_total, mem, sizeof mem);
        printf("GPU %d        : %s, %s, compute capability %d.%d", i, d.gpu[i].name, mem,
               d.gpu[i].cc_major, d.gpu[i].cc_minor);
        if (d.gpu[i].util >= 0)
            printf(", utilisation %d%%", d.gpu[i].util);
        printf("\n");
    }
    printf("NVML         : %s%s%s\n", d.nvml ? "driver " : "not available (no NVIDIA driver)",
           d.nvml ? d.nvml_driver : "", "");
    if (d.cudnn_ver)
        printf("cuDNN        : %d.%d.%d\n", d.cudnn_ver / 10000, (d.cudnn_ver / 100) % 100,
               d.cudnn_ver % 100);
    else
        printf("cuDNN        : not found\n");
    if (d.cublas_major)
        printf("cuBLAS       : %d.%d.%d\n", d.cublas_major, d.cublas_minor, d.cublas_patch);
    else
        printf("cuBLAS       : not found\n");
    printf("io_uring     : %s%s\n",
           d.uring_ok ? "available" : "NOT available: ", d.uring_ok ? "" : d.uring_err);
    if (d.memlock == ~0ull)
        printf("pinned memory: ulimit -l unlimited\n");
    else {
        char m[32];
        fl_cli_human_bytes(d.memlock, m, sizeof m);
        printf("pinned memory: ulimit -l %s%s\n", m,
               d.memlock < (64ull << 20) ? " (low: io_uring registered buffers and pinned batches "
                                           "may fail; raise it with ulimit -l unlimited)"
                                         : "");
    }
    printf("CPU          : %ld cores, GEMM %s; suggested --workers %d\n", d.cores, cpu_gemm_name(),
           d.workers);
    return 0;
}
