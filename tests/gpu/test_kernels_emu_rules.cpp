/* test_kernels_emu_rules.cpp — the host emulation of the kernels (kernels/emu) itself: its
 * barriers, shared memory and warp shuffles give the CUDA results on 2-D blocks; a kernel that
 * breaks a rule the hardware leaves undefined (a shuffle naming an exited lane, __syncthreads at
 * two places, a block that can never finish) fails its launch with a message naming the rule, and a
 * bad launch configuration is refused; its fp16/bf16 conversions equal the CPU reference's
 * (cpu_half.c) bit for bit. Each failing case runs in a child process: a failed launch is sticky,
 * as on a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu_half.h"
#include "flk_cuda_host.h"

static int failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Block sum of 256 threads laid out 32 × 8: warp shuffles, then shared memory across warps. */
__global__ void block_sum(const int *x, int *out)
{
    __shared__ int part[8];
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    int v = x[blockIdx.x * 256 + t];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (t % 32 == 0)
        part[t / 32] = v;
    __syncthreads();
    if (t == 0) {
        int s = 0;
        for (int w = 0; w < 8; w++)
            s += part[w];
        out[blockIdx.x] = s;
    }
}

/* Lanes 16..31 leave, then the warp shuffles with the full mask. */
__global__ void shfl_after_exit(int *out)
{
    if (threadIdx.x >= 16)
        return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

__global__ void divergent_barrier(int *out)
{
    if (threadIdx.x < 32)
        __syncthreads();
    else
        __syncthreads();
    out[threadIdx.x] = 1;
}

/* Lane 0 waits at the block barrier while lanes 1..31 wait for it in a shuffle. */
__global__ void deadlock(int *out)
{
    if (threadIdx.x == 0)
        __syncthreads();
    else
        out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
}

static void expect_launch_failure(const char *name, void (*launch)(int *), const char *rule)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int *out = NULL;
        cudaMalloc((void **)&out, 64 * sizeof(int));
        launch(out);
        cudaError_t e = cudaDeviceSynchronize();
        const char *msg = cudaGetErrorString(e);
        int ok = e == cudaErrorLaunchFailure && strstr(msg, rule) != NULL;
        if (!ok)
            fprintf(stderr, "FAIL %s: got '%s', want a launch failure naming '%s'\n", name, msg,
                    rule);
        else
            printf("ok %s: %s\n", name, msg);
        cudaFree(out);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", name);
}

static void launch_shfl_after_exit(int *out) { FLK_LAUNCH(shfl_after_exit, 1, 32, 0, out); }
static void launch_divergent(int *out) { FLK_LAUNCH(divergent_barrier, 1, 64, 0, out); }
static void launch_deadlock(int *out) { FLK_LAUNCH(deadlock, 1, 32, 0, out); }

static void check_semantics(void)
{
    const int blocks = 3;
    int x[blocks * 256], want[blocks] = {0}, *dx = NULL, *dout = NULL, got[blocks];
    for (int i = 0; i < blocks * 256; i++) {
        x[i] = (i * 7919) % 1000 - 500;
        want[i / 256] += x[i];
    }
    cudaMalloc((void **)&dx, sizeof x);
    cudaMalloc((void **)&dout, sizeof got);
    cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
    FLK_LAUNCH(block_sum, blocks, dim3(32, 8), 0, dx, dout);
    EXPECT(cudaGetLastError() == cudaSuccess, "block_sum launch");
    cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost);
    for (int b = 0; b < blocks; b++)
        EXPECT(got[b] == want[b], "block %d sum %d, want %d", b, got[b], want[b]);
    /* too many threads: refused at launch, not sticky */
    FLK_LAUNCH(block_sum, 1, 2048, 0, dx, dout);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "2048 threads per block accepted");
    EXPECT(cudaGetLastError() == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess,
           "a configuration error must not be sticky");
    cudaFree(dx);
    cudaFree(dout);
}

/* fp16/bf16: every 16-bit pattern to fp32 exactly; fp32 → 16 bits on edges and random patterns */
static void check_conversions(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float a = __half2float(__half{(uint16_t)h}), b = cpu_f16_to_f32((uint16_t)h);
        EXPECT((isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0, "fp16 0x%04x: %g vs %g", h, a, b);
        a = __bfloat162float(__nv_bfloat16{(uint16_t)h});
        b = cpu_bf16_to_f32((uint16_t)h);
        EXPECT((isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0, "bf16 0x%04x: %g vs %g", h, a, b);
        if (failures > 10)
            return;
    }
    uint64_t s = 88172645463325252ull;
    int bad = 0;
    for (int i = 0; i < 4000000 && bad < 10; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)s;
        if (i < 65536 * 2) /* ties and near-ties around every 16-bit value, both formats */
            u = (uint32_t)(i >> 1) << 16 | ((i & 1) ? 0x8000u : 0x1000u);
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f))
            continue;
        uint16_t h = __float2half_rn(f).x, hr = cpu_f32_to_f16(f);
        uint16_t b = __float2bfloat16_rn(f).x, br = cpu_f32_to_bf16(f);
        if (h != hr || b != br) {
            fprintf(stderr, "FAIL %.9g (0x%08x): fp16 0x%04x vs 0x%04x, bf16 0x%04x vs 0x%04x\n", f,
                    u, h, hr, b, br);
            bad++;
        }
    }
    failures += bad;
}

int main(void)
{
    check_semantics();
    check_conversions();
    expect_launch_failure("shuffle naming an exited lane", launch_shfl_after_exit, "exited");
    expect_launch_failure("divergent __syncthreads", launch_divergent, "divergent __syncthreads");
    expect_launch_failure("barrier vs shuffle", launch_deadlock, "deadlock");
    if (failures) {
        fprintf(stderr, "test_kernels_emu_rules: %d failures\n", failures);
        return 1;
    }
    printf("test_kernels_emu_rules: the emulation keeps CUDA's semantics and flags broken rules\n");
    return 0;
}
