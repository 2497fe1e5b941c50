/* cpu_gemm.c — the one GEMM the CPU backend uses: OpenBLAS cblas_sgemm when built with it,
 * otherwise a cache-blocked C loop (slower, same semantics). The loop stays although setup.sh
 * installs OpenBLAS: tests/gpu/check.sh builds without it on a GPU machine whose glibc is older
 * than the carried Debian OpenBLAS needs, and the GPU tests' CPU reference runs on this loop there.
 */
#include "cpu_layers.h"

#include <string.h>

#ifdef FL_HAVE_OPENBLAS
#include <cblas.h>

void cpu_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *cpu_gemm_name(void)
{
    static char name[64];
    if (!name[0]) {
        const char *cfg = openblas_get_config();
        /* config string starts with "OpenBLAS 0.3.21 ..." */
        int i = 0;
        int spaces = 0;
        while (cfg && cfg[i] && i < 63) {
            if (cfg[i] == ' ' && ++spaces == 2)
                break;
            name[i] = cfg[i];
            i++;
        }
        name[i] = 0;
        if (!name[0])
            strcpy(name, "OpenBLAS");
    }
    return name;
}
#else
#define BK 128
#define BN 256

void cpu_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        float *c = C + (long)i * ldc;
        if (beta == 0.0f)
            memset(c, 0, sizeof(float) * (size_t)N);
        else if (beta != 1.0f)
            for (int j = 0; j < N; j++)
                c[j] *= beta;
    }
    for (int k0 = 0; k0 < K; k0 += BK) {
        int k1 = k0 + BK < K ? k0 + BK : K;
        for (int j0 = 0; j0 < N; j0 += BN) {
            int j1 = j0 + BN < N ? j0 + BN : N;
            for (int i = 0; i < M; i++) {
                float *c = C + (long)i * ldc;
                for (int k = k0; k < k1; k++) {
                    float a = alpha * (ta ? A[(long)k * lda + i] : A[(long)i * lda + k]);
                    if (a == 0.0f)
                        continue;
                    if (!tb) {
                        const float *b = B + (long)k * ldb;
                        for (int j = j0; j < j1; j++)
                            c[j] += a * b[j];
                    } else {
                        for (int j = j0; j < j1; j++)
                            c[j] += a * B[(long)j * ldb + k];
                    }
                }
            }
        }
    }
}

const char *cpu_gemm_name(void) { return "builtin"; }
#endif
