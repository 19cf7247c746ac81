/*
 * bf16.h — bfloat16 <-> float conversions on the CPU (round to nearest even).
 *
 * What it is for: the CPU backend can store activations in bf16 (device_cpu.c stages
 * them through fp32 around each reference kernel) and the shared-memory communicator
 * reduces bf16 buffers; both must round exactly as the GPU does (__float2bfloat16_rn),
 * so that a CPU run in bf16 is a reference for a CUDA run in bf16.
 *
 * How it works: a bf16 value is the top 16 bits of an IEEE-754 float. Rounding adds
 * 0x7fff plus the lowest kept bit (ties to even) before truncating; NaNs keep a set
 * quiet bit so that they cannot round into infinity. Written by hand: three lines
 * that no Debian library offers as a C function.
 */
#ifndef STEPSCOPE_KERNELS_CPU_BF16_H
#define STEPSCOPE_KERNELS_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t bf16_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
    return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* n values; dst and src must not overlap. */
static inline void bf16_widen(float *dst, const uint16_t *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = bf16_to_float(src[i]);
}

static inline void bf16_round(uint16_t *dst, const float *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = bf16_from_float(src[i]);
}

#endif /* STEPSCOPE_KERNELS_CPU_BF16_H */
