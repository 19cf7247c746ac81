/*
 * text_escape.c — makes untrusted strings (kernel names, communicator
 * names, hostnames, metadata, file names: anything from a trace, and the
 * arguments a user typed, which the analyzer's and the trainer's error
 * messages echo) safe to print on a terminal. A kernel name could otherwise set the terminal's
 * title, clear the screen or fake lines of the report. C0 controls, DEL and
 * C1 controls (raw bytes 0x80-0x9f and their UTF-8 encodings U+0080-U+009F)
 * are written as \xNN (tab, newline, carriage return as \t \n \r), a
 * backslash as \\ (sc_text_echo keeps it: messages that echo what the user
 * typed), and bytes that are not valid UTF-8 as \xNN; valid UTF-8 text is
 * kept as it is. The JSON outputs escape through sc_json.h instead.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sc_text.h"

/* Length of the valid UTF-8 sequence at p (1..4), 0 if invalid. */
static size_t utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0; /* also stops at the NUL */
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  if (cp >= 0x80 && cp <= 0x9f) return 0; /* a C1 control: escaped */
  return n;
}

/* sc_text_safe, and sc_text_echo with keep_backslash. */
static const char *escape(const char *s, char *buf, size_t n, int keep_backslash) {
  if (!n) return "";
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  while (*p) {
    char esc[8];
    size_t len = utf8_len(p), k;
    const char *out;
    if (*p == '\\' && !keep_backslash)
      out = "\\\\", k = 2, len = 1;
    else if (*p == '\n')
      out = "\\n", k = 2, len = 1;
    else if (*p == '\r')
      out = "\\r", k = 2, len = 1;
    else if (*p == '\t')
      out = "\\t", k = 2, len = 1;
    else if (len == 0 || *p < 0x20 || *p == 0x7f) {
      if (len == 0 && p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* UTF-8 C1 */
        snprintf(esc, sizeof esc, "\\x%02x", p[1]);
        len = 2;
      } else {
        snprintf(esc, sizeof esc, "\\x%02x", p[0]);
        len = 1;
      }
      out = esc, k = 4;
    } else {
      out = (const char *)p, k = len;
    }
    if (o + k >= n) break; /* never a partial escape or character */
    memcpy(buf + o, out, k);
    o += k;
    p += len;
  }
  buf[o] = '\0';
  return buf;
}

const char *sc_text_safe(const char *s, char *buf, size_t n) {
  return escape(s, buf, n, 0);
}

const char *sc_text_echo(const char *s, char *buf, size_t n) {
  return escape(s, buf, n, 1);
}

void sc_fputs_safe(const char *s, FILE *f) {
  char buf[1024];
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  /* in pieces; each piece ends on a character boundary */
  while (*p) {
    size_t take = 0;
    while (p[take] && take < 200) {
      size_t l = utf8_len(p + take);
      take += l ? l : 1;
    }
    char piece[256];
    memcpy(piece, p, take);
    piece[take] = '\0';
    fputs(sc_text_safe(piece, buf, sizeof buf), f);
    p += take;
  }
}
