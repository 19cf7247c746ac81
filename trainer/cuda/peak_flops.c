/*
 * peak_flops.c — the dense (no 2:4 sparsity) bf16 tensor-core peak of known GPUs,
 * looked up by the name the driver reports (cudaGetDeviceProperties().name), for
 * MFU and HFU.
 *
 * How it works: a table of substrings tried in order, most specific first ("H100
 * PCIe" before "H100"), matched case-insensitively. Numbers are NVIDIA's datasheet
 * values for dense BF16 tensor operations, in TFLOP/s; MFU = model FLOPs per second
 * / peak. Unknown devices give 0: the trainer then asks for --peak-tflops.
 */
#include <ctype.h>
#include <stddef.h>

#include "device_cuda.h"

typedef struct peak_row {
  const char *pattern;
  double tflops;
} peak_row;

static const peak_row peak_table[] = {
    {"H200", 989.0}, /* H200 SXM: same tensor cores as H100 SXM */
    {"H100 PCIe", 756.0}, {"H100 NVL", 835.0}, {"H100", 989.0}, /* H100 SXM (80GB HBM3) */
    {"GH200", 989.0},     {"H800", 989.0},     {"H20", 148.0},  {"B200", 2250.0},
    {"B100", 1750.0},     {"A100", 312.0},     {"A800", 312.0}, {"A10G", 70.0},
    {"A10", 125.0},       {"L40S", 362.0},     {"L40", 181.0},  {"L4", 121.0},
    {"RTX 4090", 165.0},  {"RTX 3090", 71.0},  {"V100", 125.0}, /* fp16 tensor cores (no bf16 on
                                                                   Volta) */
};

/* Case-insensitive substring search. */
static int contains(const char *hay, const char *needle) {
  for (; *hay; hay++) {
    const char *h = hay, *n = needle;
    while (*h && *n && tolower((unsigned char)*h) == tolower((unsigned char)*n)) {
      h++;
      n++;
    }
    if (!*n) return 1;
  }
  return 0;
}

static const peak_row *lookup(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < sizeof peak_table / sizeof peak_table[0]; i++)
    if (contains(name, peak_table[i].pattern)) return &peak_table[i];
  return NULL;
}

double dev_cuda_peak_flops_bf16(const char *device_name) {
  const peak_row *r = lookup(device_name);
  return r ? r->tflops * 1e12 : 0.0;
}

const char *dev_cuda_peak_table_match(const char *device_name) {
  const peak_row *r = lookup(device_name);
  return r ? r->pattern : "";
}
