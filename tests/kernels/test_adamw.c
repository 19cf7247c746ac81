/*
 * test_adamw.c — AdamW: two steps against values computed by hand (in double, see
 * the comments), pure weight decay when the gradient is zero, and the moments.
 */
#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

int test_adamw(void) {
  int failures = 0;
  const float lr = 0.1f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, wd = 0.01f;

  /* p = 1, g = 0.5, m = v = 0, t = 1:
   *   m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25, mhat/(sqrt(vhat)+eps) = 0.99999998
   *   p = 1 - 0.1 (0.99999998 + 0.01 * 1) = 0.899000002 */
  float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
  cpu_adamw_update(&p, &g, &m, &v, 1, lr, beta1, beta2, eps, wd, 1);
  double want_p1 = 0.899000002, want_m1 = 0.05, want_v1 = 0.00025;
  failures += check_close("adamw step 1 param", &p, &want_p1, 1, 1e-6, 0);
  failures += check_close("adamw step 1 m", &m, &want_m1, 1, 1e-6, 0);
  /* v carries 1 - beta2 with beta2 = 0.999f rounded to float: relative 1.3e-5 off
   * the decimal value, hence the looser tolerance on v alone */
  failures += check_close("adamw step 1 v", &v, &want_v1, 1, 5e-5, 0);

  /* t = 2, g = -0.25: m = 0.02, v = 0.00031225, mhat = 0.02/0.19, vhat = 0.00031225/0.001999,
   *   p = 0.899000002 - 0.1 (mhat/(sqrt(vhat)+eps) + 0.01 * 0.899000002) = 0.8714672987 */
  g = -0.25f;
  cpu_adamw_update(&p, &g, &m, &v, 1, lr, beta1, beta2, eps, wd, 2);
  double want_p2 = 0.8714672987058464, want_m2 = 0.02, want_v2 = 0.00031225;
  failures += check_close("adamw step 2 param", &p, &want_p2, 1, 1e-6, 0);
  failures += check_close("adamw step 2 m", &m, &want_m2, 1, 1e-6, 0);
  failures += check_close("adamw step 2 v", &v, &want_v2, 1, 5e-5, 0);

  /* zero gradient from zero moments: only the decoupled decay acts, p *= 1 - lr wd */
  float ps[3] = {2.0f, -1.0f, 0.0f}, gs[3] = {0}, ms[3] = {0}, vs[3] = {0};
  cpu_adamw_update(ps, gs, ms, vs, 3, lr, beta1, beta2, eps, wd, 1);
  double want_decay[3] = {2.0 * 0.999, -1.0 * 0.999, 0.0};
  failures += check_close("adamw weight decay only", ps, want_decay, 3, 1e-7, 0);
  return failures;
}
