/*
 * kernel_check.h — helpers shared by the CPU kernel tests (tests/kernels/).
 *
 * A deterministic random generator (so every run checks the same numbers), buffer
 * helpers, a closeness check against double-precision expectations, and the
 * finite-difference gradient checker every kernel test uses:
 *
 *   Each test defines a scalar loss L(x) = sum_i out_i * R_i over the kernel's forward
 *   output with fixed random weights R, so that dL/dout = R is what is fed to the
 *   backward kernel. The checker perturbs every element of one input by +-h, reruns
 *   the forward, and compares the central difference (L(x+h) - L(x-h)) / 2h (L summed
 *   in double) with the analytic gradient the backward kernel produced.
 *
 * Error measure: for each element, |analytic - numeric| / max(|numeric|, floor), where
 * floor = 0.1 * max_j |numeric_j|, so tiny gradient entries are judged on the scale of
 * the tensor and float noise in the forward pass does not make them fail. A test fails
 * when the largest such error exceeds its stated tolerance.
 */
#ifndef STEPSCOPE_TESTS_KERNEL_CHECK_H
#define STEPSCOPE_TESTS_KERNEL_CHECK_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t state;
} check_rng;

void check_rng_seed(check_rng *rng, uint64_t seed);
/* uniform in [lo, hi) */
float check_rng_uniform(check_rng *rng, float lo, float hi);
int check_rng_below(check_rng *rng, int n);
void check_fill_uniform(float *x, size_t n, check_rng *rng, float lo, float hi);

/* calloc that ends the test program (exit 1) when memory runs out: tests may exit */
float *check_floats(size_t n);
int *check_ints(size_t n);

/* L = sum out_i * weights_i, summed in double */
double check_weighted_sum(const float *out, const float *weights, size_t n);

/* Returns 0 when |got_i - want_i| <= atol + rtol * |want_i| for all i; prints the
 * worst element and returns 1 otherwise. */
int check_close(const char *what, const float *got, const double *want, size_t n, double rtol,
                double atol);

/* The scalar loss as a function of the current contents of the perturbed input. */
typedef double (*check_loss_fn)(void *ctx);

/* Central-difference gradient check of `analytic` (n values) against the loss as a
 * function of x[0..n-1]; x is restored afterwards. Returns 0 on pass, 1 on fail, and
 * prints one line with the measured worst error either way. */
int check_gradient(const char *what, float *x, const float *analytic, size_t n, check_loss_fn loss,
                   void *ctx, float h, double tol);

/* The error measure of check_gradient on given numeric/analytic vectors (exposed so
 * the checker can be tested on its own). */
double check_gradient_error(const double *numeric, const float *analytic, size_t n);

#endif
