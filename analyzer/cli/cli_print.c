/*
 * cli_print.c — see cli_print.h. The format is walked conversion by
 * conversion: text between conversions is written as it is, each conversion
 * other than %s is handed to fprintf with its own argument (fetched by its
 * length modifier), and each %s goes through the terminal-safe escaper; a
 * precision cuts the original string before it is escaped, a width pads the
 * escaped text. The conversions are C's (%d %i %u %x %X %o %c %e %f %g %a %p
 * %s %%, with flags, widths, precisions and the length modifiers hh h l ll z j
 * t L); the compiler checks the arguments against the format (cli_print.h).
 */
#include "cli_print.h"

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_io.h"

/* One %s: the first `prec` bytes of s (all when prec < 0), escaped, padded to `width`. */
static void put_string(FILE *f, const char *s, int left, int width, int prec) {
  if (!s) s = "(null)";
  size_t len = strlen(s);
  if (prec >= 0 && (size_t)prec < len) len = (size_t)prec;
  char *cut = malloc(len + 1), *safe = malloc(4 * len + 1); /* an escape is at most 4 bytes */
  if (!cut || !safe) {
    free(cut);
    free(safe);
    return;
  }
  memcpy(cut, s, len);
  cut[len] = '\0';
  sc_text_echo(cut, safe, 4 * len + 1);
  fprintf(f, left ? "%-*s" : "%*s", width, safe);
  free(cut);
  free(safe);
}

/* One conversion other than %s: `spec` ("%-8.3lf", NUL-terminated) with its argument. */
static void put_other(FILE *f, const char *spec, const char *length, char conv, int star_w,
                      int width, int star_p, int prec, va_list *ap) {
#define PUT(value)                                                                                 \
  do {                                                                                             \
    if (star_w && star_p)                                                                          \
      fprintf(f, spec, width, prec, value);                                                        \
    else if (star_w)                                                                               \
      fprintf(f, spec, width, value);                                                              \
    else if (star_p)                                                                               \
      fprintf(f, spec, prec, value);                                                               \
    else                                                                                           \
      fprintf(f, spec, value);                                                                     \
  } while (0)
  if (strchr("diouxXc", conv)) {
    int is_signed = conv == 'd' || conv == 'i';
    if (!strcmp(length, "l")) {
      if (is_signed)
        PUT(va_arg(*ap, long));
      else
        PUT(va_arg(*ap, unsigned long));
    } else if (!strcmp(length, "ll")) {
      if (is_signed)
        PUT(va_arg(*ap, long long));
      else
        PUT(va_arg(*ap, unsigned long long));
    } else if (!strcmp(length, "z")) {
      PUT(va_arg(*ap, size_t));
    } else if (!strcmp(length, "j")) {
      PUT(va_arg(*ap, intmax_t));
    } else if (!strcmp(length, "t")) {
      PUT(va_arg(*ap, ptrdiff_t));
    } else { /* int, and what is promoted to it (hh, h, c) */
      PUT(va_arg(*ap, int));
    }
  } else if (strchr("eEfFgGaA", conv)) {
    if (!strcmp(length, "L"))
      PUT(va_arg(*ap, long double));
    else
      PUT(va_arg(*ap, double));
  } else if (conv == 'p') {
    PUT(va_arg(*ap, void *));
  }
#undef PUT
}

/* A width or a precision at q: '*' (*star set, the value taken from the arguments) or digits
 * (at most 8), copied into spec at *k. Returns what follows it. */
static const char *read_count(const char *q, va_list *ap, char *spec, size_t *k, int *value,
                              int *star) {
  *value = 0;
  if (*q == '*') {
    *star = 1;
    *value = va_arg(*ap, int);
    spec[(*k)++] = *q++;
    return q;
  }
  for (int digits = 0; isdigit((unsigned char)*q) && digits < 8; q++, digits++) {
    *value = *value * 10 + (*q - '0');
    spec[(*k)++] = *q;
  }
  return q;
}

void cli_vprint(FILE *f, const char *fmt, va_list ap_in) {
  va_list ap;
  va_copy(ap, ap_in);
  const char *p = fmt;
  while (*p) {
    const char *pct = strchr(p, '%');
    if (!pct) {
      fputs(p, f);
      break;
    }
    fwrite(p, 1, (size_t)(pct - p), f);
    const char *q = pct + 1;
    if (*q == '%') {
      fputc('%', f);
      p = q + 1;
      continue;
    }
    char spec[32], length[3] = "";
    size_t k = 0;
    spec[k++] = '%';
    int left = 0, star_w = 0, star_p = 0, width = 0, prec = -1; /* prec -1: none */
    while (*q && strchr("-+ #0", *q) && k < 8) {
      left |= *q == '-';
      spec[k++] = *q++;
    }
    q = read_count(q, &ap, spec, &k, &width, &star_w);
    if (*q == '.') {
      spec[k++] = *q++;
      q = read_count(q, &ap, spec, &k, &prec, &star_p);
    }
    for (size_t n = 0; *q && strchr("hlzjtL", *q) && n < 2; n++) {
      length[n] = *q;
      length[n + 1] = '\0';
      spec[k++] = *q++;
    }
    char conv = *q ? *q++ : '\0';
    spec[k++] = conv;
    spec[k] = '\0';
    if (conv == 's')
      put_string(f, va_arg(ap, const char *), left || width < 0, width < 0 ? -width : width, prec);
    else
      put_other(f, spec, length, conv, star_w, width, star_p, prec, &ap);
    p = q;
  }
  va_end(ap);
}

void cli_print(FILE *f, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_vprint(f, fmt, ap);
  va_end(ap);
}
