/*
 * device_peaks.c — the ceilings an op is measured against (ssa_ops.h): dense FLOP/s per dtype
 * and memory bandwidth of known accelerators, from their vendors' datasheets, and the user's
 * measured ceilings (`stepscope ops --peak bf16=780T,bw=4.3T`), which replace them.
 *
 * Numbers are dense (no 2:4 sparsity), in TFLOP/s and TB/s (10^12). Sources:
 *   H100 SXM5 / PCIe: NVIDIA H100 Tensor Core GPU datasheet (2023): FP32 67 / 51, TF32 494.7 /
 *     378, BF16 and FP16 989.4 / 756, FP8 1978.9 / 1513; HBM3 3.35 / 2.0 TB/s
 *   H200 SXM: NVIDIA H200 datasheet (2024): the H100 SXM's compute, HBM3e 4.8 TB/s;
 *     GH200: the same compute, HBM3e 4.9 TB/s (NVIDIA GH200 datasheet)
 *   A100 SXM4 80GB: NVIDIA A100 datasheet (2021): FP32 19.5, TF32 156, BF16 / FP16 312, no
 *     FP8; HBM2e 2.039 TB/s (the 40 GB part has 1.555 TB/s: give it with --peak bw=1.555T)
 *   MI300X: AMD Instinct MI300X data sheet (2023): FP32 (matrix) 163.4, TF32 653.7, BF16 /
 *     FP16 1307.4, FP8 2614.9; HBM3 5.3 TB/s
 *   B200 (HGX B200, per GPU): NVIDIA HGX B200 specifications (2024, eight GPUs: FP32 600 TF,
 *     TF32 18 PF, BF16 36 PF, FP8 72 PF sparse, HBM3e 64 TB/s): FP32 75, TF32 1125, BF16 /
 *     FP16 2250, FP8 4500 dense; 8 TB/s
 * tf32 is the rate of fp32 matmuls only when TF32 is allowed (torch.backends.cuda.matmul.
 * allow_tf32); the op table takes fp32 ops at the fp32 rate, and `--peak fp32=...` changes it.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_ops.h"

typedef struct device_row {
  const char *name;          /* the row's name, for --peak device=NAME */
  const char *pattern;       /* a substring of the device's name (case-insensitive) */
  double tflops[SSA_PEAK_N]; /* fp32, tf32, bf16, fp16, fp8 */
  double tbps;
} device_row;

/* Most specific first: "H100 PCIe" before "H100", "GH200" before "H200". */
static const device_row devices[] = {
    {"h100-pcie", "H100 PCIe", {51, 378, 756, 756, 1513}, 2.0},
    {"gh200", "GH200", {67, 494.7, 989.4, 989.4, 1978.9}, 4.9},
    {"h200", "H200", {67, 494.7, 989.4, 989.4, 1978.9}, 4.8},
    {"h100", "H100", {67, 494.7, 989.4, 989.4, 1978.9}, 3.35},
    {"a100", "A100", {19.5, 156, 312, 312, 0}, 2.039},
    {"mi300x", "MI300X", {163.4, 653.7, 1307.4, 1307.4, 2614.9}, 5.3},
    {"b200", "B200", {75, 1125, 2250, 2250, 4500}, 8.0},
};
#define NDEVICES (sizeof devices / sizeof devices[0])

static int contains(const char *hay, const char *needle) {
  for (; *hay; hay++) {
    size_t i = 0;
    while (needle[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
      i++;
    if (!needle[i]) return 1;
  }
  return 0;
}

static void take_row(const device_row *d, ssa_ceilings *c) {
  snprintf(c->device, sizeof c->device, "%s", d->name);
  for (int i = 0; i < SSA_PEAK_N; i++)
    c->flops[i] = d->tflops[i] * 1e12;
  c->bandwidth = d->tbps * 1e12;
}

int ssa_ceilings_of_device(const char *device_name, ssa_ceilings *c) {
  memset(c, 0, sizeof *c);
  for (size_t i = 0; device_name && i < NDEVICES; i++)
    if (contains(device_name, devices[i].pattern)) {
      take_row(&devices[i], c);
      return 1;
    }
  return 0;
}

const char *ssa_ceilings_devices(void) {
  return "h100|h100-pcie|h200|gh200|a100|mi300x|b200";
}

int ssa_ceilings_parse(const char *spec, ssa_ceilings *c, char *msg, size_t cap) {
  const char *p = spec;
  while (*p) {
    const char *eq = strchr(p, '='), *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    if (!eq || eq > end) {
      snprintf(msg, cap, "--peak: '%.*s' is not KEY=VALUE", (int)(end - p), p);
      return -1;
    }
    char key[16];
    snprintf(key, sizeof key, "%.*s", (int)(eq - p < 15 ? eq - p : 15), p);
    if (!strcmp(key, "device")) {
      size_t n = (size_t)(end - eq - 1), i = 0;
      while (i < NDEVICES &&
             !(strlen(devices[i].name) == n && !strncmp(devices[i].name, eq + 1, n)))
        i++;
      if (i == NDEVICES) {
        snprintf(msg, cap, "--peak: device must be one of %s", ssa_ceilings_devices());
        return -1;
      }
      take_row(&devices[i], c);
    } else {
      char *num_end;
      double v = strtod(eq + 1, &num_end);
      double scale = *num_end == 'P' ? 1e15 : *num_end == 'T' ? 1e12 : *num_end == 'G' ? 1e9 : 1;
      if (scale != 1) num_end++;
      int k = -1;
      for (int i = 0; i < SSA_PEAK_N; i++)
        if (!strcmp(key, ssa_peak_dtype_names[i])) k = i;
      if (num_end == eq + 1 || num_end != end || !(v > 0) || (k < 0 && strcmp(key, "bw"))) {
        snprintf(msg, cap,
                 "--peak: '%.*s' is not fp32|tf32|bf16|fp16|fp8|bw=NUMBER[G|T|P] or device=NAME",
                 (int)(end - p), p);
        return -1;
      }
      if (k >= 0)
        c->flops[k] = v * scale;
      else
        c->bandwidth = v * scale;
      c->given = 1;
    }
    p = *end ? end + 1 : end;
  }
  return 0;
}
