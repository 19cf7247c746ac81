/*
 * kernel_tests.h — the list of CPU kernel test suites; each returns the number of
 * failed checks (0 = pass). test_main.c runs the one named on its command line, so
 * every suite is its own CTest test (kernels.<name>).
 */
#ifndef STEPSCOPE_TESTS_KERNEL_TESTS_H
#define STEPSCOPE_TESTS_KERNEL_TESTS_H

int test_checker(void);
int test_encoder(void);
int test_layernorm(void);
int test_matmul(void);
int test_attention(void);
int test_attention_block(void);
int test_gelu(void);
int test_residual(void);
int test_crossentropy(void);
int test_adamw(void);
int test_grad_clip(void);
int test_moe_router(void);
int test_moe_dispatch(void);
int test_moe_layer(void);

#endif
