/* gpu_check.c — turns CUDA / cuDNN / cuBLAS failures into one fl_error line with file:line, the
 * failing call, the library's own error text and a hint for the common causes. */
#include "gpu_check.h"

#include "gpu_cublas.h"

static const char *cuda_hint(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation:
        return "; hint: out of GPU memory: lower --batch, or use --batch auto";
    case cudaErrorInsufficientDriver:
        return "; hint: the NVIDIA driver is older than this CUDA runtime: update the driver or "
               "build against an older CUDA (trainfast doctor shows both versions)";
    case cudaErrorNoDevice:
        return "; hint: no GPU visible: check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device "
               "cpu";
    case cudaErrorInvalidDevice:
        return "; hint: --gpu names a device that does not exist (see trainfast doctor)";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
        return "; hint: this build targets sm_90 (CMAKE_CUDA_ARCHITECTURES): rebuild for your GPU";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
        return "; hint: a kernel faulted (a bug): rerun with CUDA_LAUNCH_BLOCKING=1 and "
               "compute-sanitizer";
    default: return "";
    }
}

int gpu_fail_cuda(fl_error *err, cudaError_t e, const char *call, const char *file, int line)
{
    return fl_error_set(err, FL_E_CUDA, "%s:%d: %s: %s (%s)%s", file, line, call,
                        cudaGetErrorName(e), cudaGetErrorString(e), cuda_hint(e));
}

int gpu_fail_cudnn(fl_error *err, cudnnStatus_t s, const char *call, const char *file, int line)
{
    const char *hint = "";
    if (s == CUDNN_STATUS_NOT_SUPPORTED)
        hint =
            "; hint: cuDNN has no kernel for this layer shape and precision: try --precision fp32";
    else if (s == CUDNN_STATUS_ALLOC_FAILED)
        hint = "; hint: out of GPU memory: lower --batch, or use --batch auto";
    else if (s == CUDNN_STATUS_VERSION_MISMATCH)
        hint = "; hint: libcudnn at run time differs from the headers this was built with";
    return fl_error_set(err, FL_E_CUDA, "%s:%d: %s: cuDNN %s%s", file, line, call,
                        cudnnGetErrorString(s), hint);
}

int gpu_fail_cublas(fl_error *err, cublasStatus_t s, const char *call, const char *file, int line)
{
    const char *hint = "";
    if (s == CUBLAS_STATUS_ALLOC_FAILED)
        hint = "; hint: out of GPU memory: lower --batch, or use --batch auto";
    else if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH)
        hint =
            "; hint: this GEMM type combination is not supported on this GPU: try --precision fp32";
    if (!gpu_cublas.status_name) /* cannot happen after gpu_cublas_load; say the number */
        return fl_error_set(err, FL_E_CUDA, "%s:%d: %s: cuBLAS status %d%s", file, line, call,
                            (int)s, hint);
    return fl_error_set(err, FL_E_CUDA, "%s:%d: %s: cuBLAS %s (%s)%s", file, line, call,
                        gpu_cublas.status_name(s), gpu_cublas.status_string(s), hint);
}
