/*
 * test_out_numbers.c — the hand-written number writers of the report (out_writer.c) against
 * printf: ssa_out_double (with its memo of recent texts) against "%.9g" on random doubles of
 * every magnitude, repeated values, values whose bits map to the same memo entry in turn,
 * zeros, negatives, subnormals, NaN and infinities (null); ssa_out_hex64 against "%016llx".
 * Everything is written through one ssa_out into a temporary file and read back.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_io.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t next_u64(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static double pick_double(void) {
  uint64_t r = next_u64();
  switch (r % 6) {
  case 0: { /* any bit pattern */
    double d;
    uint64_t b = next_u64();
    memcpy(&d, &b, sizeof d);
    return d;
  }
  case 1: return (double)(next_u64() % 100000) / 7.0;
  case 2: return ldexp((double)(next_u64() % 1000000), (int)(next_u64() % 80) - 40);
  case 3: return (double)(int64_t)(next_u64() % 2000000000) - 1e9;
  case 4: return 279.620267 + (double)(next_u64() % 3); /* repeated values */
  default: {
    static const double special[] = {
        0.0, -0.0,        1e-320, 5e-324,      1e308, -1e308,       1.7976931348623157e308,
        0.5, 123456789.5, 1e9,    999999999.5, 1e-5,  9.99999999e-5};
    return special[next_u64() % (sizeof special / sizeof *special)];
  }
  }
}

int main(void) {
  enum { N = 200000 };
  static double values[N];
  static uint64_t hexes[N];
  for (size_t i = 0; i < N; i++) {
    values[i] = i % 50 == 7   ? NAN
                : i % 50 == 8 ? INFINITY
                : i % 50 == 9 ? -INFINITY
                              : pick_double();
    hexes[i] = i % 3 ? next_u64() : next_u64() >> (next_u64() % 64);
  }
  FILE *f = tmpfile();
  ssa_out o;
  if (!f || ssa_out_open_file(&o, f)) return 1;
  for (size_t i = 0; i < N; i++) {
    ssa_out_double(&o, values[i]);
    ssa_out_char(&o, ' ');
    ssa_out_hex64(&o, hexes[i]);
    ssa_out_char(&o, '\n');
  }
  if (ssa_out_close(&o)) return 1;
  rewind(f);
  char line[128], want[128];
  int failures = 0;
  for (size_t i = 0; i < N; i++) {
    double v = values[i];
    if (v != v || v > 1e308 || v < -1e308)
      snprintf(want, sizeof want, "null %016llx\n", (unsigned long long)hexes[i]);
    else
      snprintf(want, sizeof want, "%.9g %016llx\n", v, (unsigned long long)hexes[i]);
    if (!fgets(line, sizeof line, f) || strcmp(line, want) != 0) {
      if (failures++ < 10)
        fprintf(stderr, "FAIL value %zu: wrote \"%s\", printf \"%s\"\n", i, line, want);
    }
  }
  fclose(f);
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("out numbers: %d doubles and hex values equal to printf's\n", N);
  return 0;
}
