/* nvml.h — GPU utilisation and memory through NVML, loaded at run time (libnvidia-ml ships with
 * the driver and has no link stub here). Everything degrades to "not available" without it. */
#ifndef TF_NVML_H
#define TF_NVML_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_nvml tf_nvml;

/* Load and initialise NVML; NULL when it is not available. */
tf_nvml *tf_nvml_open(void);

/* Sample GPU `index`: utilisation in percent (over the driver's last sample period), memory used
 * and total in bytes. Returns 0, or -1 when the query failed. */
int tf_nvml_sample(tf_nvml *n, unsigned index, int *util, unsigned long long *used,
                   unsigned long long *total);

/* Number of GPUs NVML sees, or -1 when the query failed. */
int tf_nvml_count(tf_nvml *n);

/* Name of GPU `index` ("NVIDIA H200") into buf (cap bytes, NUL-terminated). Returns 0, or -1 when
 * the query failed (buf then unchanged). */
int tf_nvml_name(tf_nvml *n, unsigned index, char *buf, size_t cap);

/* Driver version string ("580.65.06"), or "" */
const char *tf_nvml_driver(tf_nvml *n);

void tf_nvml_close(tf_nvml *n);

#ifdef __cplusplus
}
#endif
#endif
