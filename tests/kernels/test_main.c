/*
 * test_main.c — entry point of the CPU kernel tests: `test_kernels NAME` runs one
 * suite (see kernel_tests.h) and exits 0 when all its checks pass, 1 otherwise;
 * `test_kernels all` runs every suite.
 */
#include <stdio.h>
#include <string.h>

#include "kernel_tests.h"

static const struct {
  const char *name;
  int (*run)(void);
} suites[] = {
    {"checker", test_checker},
    {"encoder", test_encoder},
    {"layernorm", test_layernorm},
    {"matmul", test_matmul},
    {"attention", test_attention},
    {"attention_block", test_attention_block},
    {"gelu", test_gelu},
    {"residual", test_residual},
    {"crossentropy", test_crossentropy},
    {"adamw", test_adamw},
    {"grad_clip", test_grad_clip},
    {"moe_router", test_moe_router},
    {"moe_dispatch", test_moe_dispatch},
    {"moe_layer", test_moe_layer},
};

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_kernels NAME|all\n");
    return 2;
  }
  int failures = 0, found = 0;
  for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
    if (strcmp(argv[1], "all") == 0 || strcmp(argv[1], suites[i].name) == 0) {
      found = 1;
      int f = suites[i].run();
      printf("%s: %s (%d failed checks)\n", suites[i].name, f ? "FAIL" : "PASS", f);
      failures += f;
    }
  }
  if (!found) {
    fprintf(stderr, "test_kernels: no suite named '%s'\n", argv[1]);
    return 2;
  }
  return failures ? 1 : 0;
}
