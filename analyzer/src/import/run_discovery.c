/*
 * run_discovery.c — decides what a run directory holds (ssa_import.h has
 * the rules): which files are ranks (stepscope traces, Kineto traces) and
 * which are stepscope's own export and report, by content.
 *
 * How it works: a directory is read once; every regular file whose name ends
 * in .trace.zst, .json or .json.gz is classified. A JSON file's first 64 KiB
 * (inflated with zlib when the file starts with the gzip magic) are searched
 * for the marks of each producer: the report's "generator" at its start, then
 * Kineto's top-level keys or event categories (stepscope's export writes
 * neither: its categories are compute/comm/memcpy/memset/host/derived/
 * launch/counter), then — only when neither was found — the export's marker,
 * which chrome_export.c writes after the last event, in the file's last
 * 4 MiB (or, for gzip, anywhere in the inflated stream, which must then be
 * read to its end; a gzip file that begins with the exporter's first bytes
 * is taken as an export without that read: it is no rank either way; one that inflates past its
 * decompression limit, stepscope.h, is judged by its name). The marks are looked for as
 * raw bytes: inside a JSON string every quote is escaped, so a kernel name cannot fake a key.
 */
#include "ssa_import.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define HEAD_BYTES (64u << 10)
#define TAIL_BYTES (4u << 20)
#define GZ_CHUNK   (256u << 10)
#define HEAD_GZ_CHUNK                                                                              \
  (16u << 10) /* compressed bytes read at a time for the head: one or two reads */

/* chrome_export.c writes "metadata":{"stepscope":{"exporter":"stepscope export X.Y.Z",...}} */
static int has_export_marker(const unsigned char *h, size_t n);

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int is_json_name(const char *name) {
  return ends_with(name, ".json") || ends_with(name, ".json.gz");
}

/* Names that stay ranks even without a Kineto mark in their first bytes: the
 * names PyTorch users give (and that stepscope accepted by name before). */
static int rank_like_json_name(const char *name) {
  return is_json_name(name) &&
         (strncmp(name, "rank-", 5) == 0 || strncmp(name, "rank_", 5) == 0 ||
          strncmp(name, "worker", 6) == 0 || ends_with(name, ".pt.trace.json") ||
          ends_with(name, ".pt.trace.json.gz"));
}

static int trace_name(const char *name) {
  size_t n = strlen(name);
  return strncmp(name, "rank-", 5) == 0 && n > 14 && strcmp(name + n - 10, ".trace.zst") == 0;
}

int ssa_file_kind_is_rank(ssa_file_kind kind) {
  return kind == SSA_FILE_TRACE || kind == SSA_FILE_KINETO;
}

const char *ssa_file_kind_name(ssa_file_kind kind) {
  switch (kind) {
  case SSA_FILE_TRACE: return "stepscope trace";
  case SSA_FILE_KINETO: return "Kineto trace";
  case SSA_FILE_EXPORT: return "stepscope export";
  case SSA_FILE_REPORT: return "stepscope report";
  default: return "skipped";
  }
}

/* ---- reading the first bytes */

static long read_full(int fd, unsigned char *buf, size_t cap) {
  size_t got = 0;
  while (got < cap) {
    ssize_t r = read(fd, buf + got, cap - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (long)got;
}

/* The first HEAD_BYTES of the content (inflated when gzip) into head[]; its
 * length, or -1 when the file cannot be read or its gzip is damaged at once. */
static long read_head(int fd, int gz, unsigned char *head) {
  if (!gz) return read_full(fd, head, HEAD_BYTES);
  unsigned char *in = malloc(HEAD_GZ_CHUNK);
  if (!in) return -1;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 15 + 32) != Z_OK) {
    free(in);
    return -1;
  }
  z.next_out = head;
  z.avail_out = HEAD_BYTES;
  int zr = Z_OK;
  while (z.avail_out > 0 && zr != Z_STREAM_END) {
    if (z.avail_in == 0) {
      long r = read_full(fd, in, HEAD_GZ_CHUNK);
      if (r <= 0) break;
      z.next_in = in;
      z.avail_in = (uInt)r;
    }
    zr = inflate(&z, Z_NO_FLUSH);
    if (zr != Z_OK && zr != Z_STREAM_END) break;
  }
  long n = (long)(HEAD_BYTES - z.avail_out);
  inflateEnd(&z);
  free(in);
  return n == 0 && zr != Z_OK && zr != Z_STREAM_END ? -1 : n;
}

/* ---- marks */

static const unsigned char *find(const unsigned char *h, size_t n, const char *needle) {
  return memmem(h, n, needle, strlen(needle));
}

static size_t skip_ws(const unsigned char *h, size_t n, size_t i) {
  while (i < n && (h[i] == ' ' || h[i] == '\t' || h[i] == '\n' || h[i] == '\r'))
    i++;
  return i;
}

/* Whether "key" appears as an object key (followed by ':'). */
static int has_key(const unsigned char *h, size_t n, const char *key) {
  char q[64];
  snprintf(q, sizeof q, "\"%s\"", key);
  size_t ql = strlen(q);
  for (const unsigned char *p = h; (p = find(p, n - (size_t)(p - h), q)) != NULL; p += ql) {
    size_t i = skip_ws(h, n, (size_t)(p - h) + ql);
    if (i < n && h[i] == ':') return 1;
  }
  return 0;
}

/* The value of the first "cat" key naming a Kineto category, copied into out. */
static int kineto_category(const unsigned char *h, size_t n, char *out, size_t outlen) {
  static const char *const cats[] = {"kernel",
                                     "cpu_op",
                                     "cuda_runtime",
                                     "cuda_driver",
                                     "user_annotation",
                                     "gpu_user_annotation",
                                     "python_function",
                                     "gpu_memcpy",
                                     "gpu_memset",
                                     "ac2g",
                                     "cpu_instant_event",
                                     "fwdbwd",
                                     "Trace",
                                     "mtia_runtime",
                                     "mtia_ccp_events",
                                     "privateuse1_runtime",
                                     "xpu_runtime",
                                     "cuda_sync"};
  for (const unsigned char *p = h; (p = find(p, n - (size_t)(p - h), "\"cat\"")) != NULL; p += 5) {
    size_t i = skip_ws(h, n, (size_t)(p - h) + 5);
    if (i >= n || h[i] != ':') continue;
    i = skip_ws(h, n, i + 1);
    if (i >= n || h[i] != '"') continue;
    i++;
    for (size_t c = 0; c < sizeof cats / sizeof cats[0]; c++) {
      size_t l = strlen(cats[c]);
      if (i + l < n && memcmp(h + i, cats[c], l) == 0 && h[i + l] == '"') {
        snprintf(out, outlen, "%s", cats[c]);
        return 1;
      }
    }
  }
  return 0;
}

/* The Kineto top-level key found in the first bytes, or NULL. */
static const char *kineto_key(const unsigned char *h, size_t n) {
  static const char *const keys[] = {"schemaVersion", "deviceProperties", "distributedInfo",
                                     "traceName", "baseTimeNanoseconds"};
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
    if (has_key(h, n, keys[k])) return keys[k];
  return NULL;
}

/* Whether the export marker lies in the last TAIL_BYTES of a plain file. */
static int plain_tail_has_marker(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) return 0;
  size_t len = (size_t)st.st_size < TAIL_BYTES ? (size_t)st.st_size : TAIL_BYTES;
  unsigned char *buf = malloc(len);
  if (!buf) return 0;
  size_t got = 0;
  off_t at = st.st_size - (off_t)len;
  while (got < len) {
    ssize_t r = pread(fd, buf + got, len - got, at + (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  int found = has_export_marker(buf, got);
  free(buf);
  return found;
}

/* Whether the inflated stream holds the export marker; -1 when the gzip data
 * is damaged or cut before its end, -2 when it inflates past `limit` bytes
 * before the marker (a decompression bomb is not read to its end). */
static int gzip_stream_has_marker(const char *path, uint64_t limit) {
  gzFile g = gzopen(path, "rb");
  if (!g) return -1;
  uint64_t inflated = 0;
  gzbuffer(g, GZ_CHUNK);
  size_t ml = 256, keep = 0; /* bytes kept from one read to the next: a marker cut between two */
  unsigned char *buf = malloc(GZ_CHUNK + ml);
  int found = 0, n;
  while (buf && !found && (n = gzread(g, buf + keep, GZ_CHUNK)) > 0) {
    if ((inflated += (uint64_t)n) > limit) break;
    size_t have = keep + (size_t)n;
    found = has_export_marker(buf, have);
    keep = have < ml ? have : ml;
    memmove(buf, buf + have - keep, keep);
  }
  int zerr = Z_OK;
  gzerror(g, &zerr);
  gzclose(g);
  free(buf);
  if (!found && inflated > limit) return -2;
  if (!found && zerr != Z_OK && zerr != Z_STREAM_END) return -1;
  return found;
}

/* Whether `key` appears as an object key whose string value starts with
 * `prefix` (whitespace allowed around the colon). */
static int key_value_prefix(const unsigned char *h, size_t n, const char *key, const char *prefix) {
  char q[64];
  snprintf(q, sizeof q, "\"%s\"", key);
  size_t ql = strlen(q), pl = strlen(prefix);
  for (const unsigned char *p = h; (p = find(p, n - (size_t)(p - h), q)) != NULL; p += ql) {
    size_t i = skip_ws(h, n, (size_t)(p - h) + ql);
    if (i >= n || h[i] != ':') continue;
    i = skip_ws(h, n, i + 1);
    if (i < n && h[i] == '"' && i + 1 + pl <= n && memcmp(h + i + 1, prefix, pl) == 0) return 1;
  }
  return 0;
}

static int has_export_marker(const unsigned char *h, size_t n) {
  return key_value_prefix(h, n, "exporter", "stepscope export");
}

/* The kind a file's name gives when its content shows no producer's mark:
 * stepscope's conventional output names (trace.json[.gz], report.json, so
 * that exports and reports of any version, or cut ones, reach the checks of
 * `view`), rank-like names and explicitly named files (Kineto, for the
 * importer to judge), nothing else. */
static ssa_file_kind by_name(const char *base, int explicit_file) {
  if (!strcmp(base, "trace.json") || !strcmp(base, "trace.json.gz")) return SSA_FILE_EXPORT;
  if (!strcmp(base, "report.json")) return SSA_FILE_REPORT;
  if (rank_like_json_name(base) || explicit_file) return SSA_FILE_KINETO;
  return SSA_FILE_SKIPPED;
}

/* ssa_classify_file, keeping its stat of the file in *st (*stat_ok 0: it failed). */
static ssa_file_kind classify(const char *path, int explicit_file,
                              const stepscope_inflate_limits *inflate, int *gzip, char *why,
                              size_t whylen, struct stat *stp, int *stat_ok) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  *gzip = 0;
  struct stat st;
  *stat_ok = 0;
  if (stat(path, &st) != 0) {
    snprintf(why, whylen, "cannot be read (%s)", strerror(errno)); /* a dangling link... */
    if (rank_like_json_name(base) || (explicit_file && is_json_name(base))) return SSA_FILE_KINETO;
    return explicit_file || trace_name(base) ? SSA_FILE_TRACE : SSA_FILE_SKIPPED;
  }
  *stat_ok = 1;
  *stp = st;
  if (!S_ISREG(st.st_mode)) {
    /* never opened (a FIFO would block): the loader names the problem */
    snprintf(why, whylen, "not a regular file");
    if (trace_name(base) || (explicit_file && !is_json_name(base))) return SSA_FILE_TRACE;
    if (rank_like_json_name(base) || explicit_file) return SSA_FILE_KINETO;
    return SSA_FILE_SKIPPED;
  }
  if (trace_name(base)) {
    snprintf(why, whylen, "named rank-*.trace.zst");
    return SSA_FILE_TRACE;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, whylen, "cannot be opened (%s)", strerror(errno));
    return explicit_file               ? (is_json_name(base) ? SSA_FILE_KINETO : SSA_FILE_TRACE)
           : rank_like_json_name(base) ? SSA_FILE_KINETO
                                       : SSA_FILE_SKIPPED;
  }
  unsigned char magic[4] = {0};
  long m = pread(fd, magic, sizeof magic, 0);
  *gzip = m >= 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  int zstd = m >= 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd;
  if (zstd || (!*gzip && !is_json_name(base) && m >= 1 && magic[0] != '{' && magic[0] != '[' &&
               magic[0] != ' ' && magic[0] != '\n')) {
    close(fd);
    /* stepscope traces are zstd frames; one renamed from rank-N.trace.zst still is one */
    int trace = zstd && (explicit_file || ends_with(base, ".trace.zst"));
    snprintf(why, whylen, trace ? "zstd data named *.trace.zst" : zstd ? "zstd data" : "not JSON");
    return trace || explicit_file ? SSA_FILE_TRACE : SSA_FILE_SKIPPED;
  }
  unsigned char *head = malloc(HEAD_BYTES);
  long n = head ? read_head(fd, *gzip, head) : -1;
  ssa_file_kind kind = SSA_FILE_SKIPPED;
  char cat[32];
  const char *key = NULL;
  size_t first = n > 0 ? skip_ws(head, (size_t)n, 0) : 0;
  size_t start = n <= 0 ? 0 : (size_t)n < 512 ? (size_t)n : 512; /* where a report's generator is */
  if (n < 0) {
    snprintf(why, whylen, "%s", *gzip ? "damaged gzip data" : "cannot be read");
    kind = by_name(base, explicit_file);
  } else if (n == 0 || first >= (size_t)n) {
    snprintf(why, whylen, "empty");
    kind = by_name(base, explicit_file);
  } else if (head[first] != '{' && head[first] != '[') {
    snprintf(why, whylen, "not JSON");
    kind = by_name(base, explicit_file);
  } else if (key_value_prefix(head, start, "generator", "stepscope analyze")) {
    snprintf(why, whylen, "its generator is `stepscope analyze`");
    kind = SSA_FILE_REPORT;
  } else if (key_value_prefix(head, start, "generator", "stepscope ") ||
             key_value_prefix(head, start, "kind", "stepscope.")) {
    snprintf(why, whylen, "another stepscope output, not a report nor a trace");
  } else if ((key = kineto_key(head, (size_t)n)) != NULL) {
    snprintf(why, whylen, "has Kineto's \"%s\"", key);
    kind = SSA_FILE_KINETO;
  } else if (kineto_category(head, (size_t)n, cat, sizeof cat)) {
    snprintf(why, whylen, "has events of Kineto's category \"%s\"", cat);
    kind = SSA_FILE_KINETO;
  } else {
    int chrome = find(head, (size_t)n, "\"traceEvents\"") != NULL || head[first] == '[';
    int export_head =
        find(head, (size_t)n < 64 ? (size_t)n : 64, "{\"traceEvents\":[\n{\"ph\":\"M\"") != NULL;
    /* a gzip file that begins as the exporter writes is not inflated to its end
     * (an export of a large run is gigabytes): it is no rank either way, and view
     * reads it whole before using it (view_validate.c) */
    int marker =
        *gzip && export_head ? 2
        : *gzip
            ? gzip_stream_has_marker(path, stepscope_inflate_limit(inflate, (uint64_t)st.st_size))
            : plain_tail_has_marker(fd);
    kind = by_name(base, explicit_file);
    if (marker == 2) {
      snprintf(why, whylen, "begins as `stepscope export` writes (gzip: its end not read)");
      kind = SSA_FILE_EXPORT;
    } else if (marker > 0) {
      snprintf(why, whylen, "has the marker of `stepscope export`");
      kind = SSA_FILE_EXPORT;
    } else if (marker == -2) {
      snprintf(why, whylen,
               "gzip data that inflates past its decompression limit (a bomb?), not read to "
               "its end");
    } else if (marker < 0) {
      snprintf(why, whylen, "damaged or cut gzip data");
    } else if (export_head) {
      /* a cut export: the export where one is expected (view says it is cut), else no rank */
      snprintf(why, whylen,
               "begins like a stepscope export but lacks the marker at its end: cut short?");
      kind = kind == SSA_FILE_EXPORT || explicit_file ? SSA_FILE_EXPORT : SSA_FILE_SKIPPED;
    } else if (kind == SSA_FILE_EXPORT || kind == SSA_FILE_REPORT) {
      snprintf(why, whylen, "no mark of Kineto nor of stepscope: taken as %s by its name",
               kind == SSA_FILE_EXPORT ? "the export" : "the report");
    } else if (kind == SSA_FILE_KINETO) {
      snprintf(why, whylen, "%s without Kineto marks, read as one by its name",
               chrome ? "a Chrome trace" : "JSON");
    } else if (chrome) {
      snprintf(why, whylen,
               "a Chrome trace without Kineto marks: name it rank-N.json to read it as a rank");
    } else {
      snprintf(why, whylen, "JSON that is not a trace");
    }
  }
  free(head);
  close(fd);
  return kind;
}

ssa_file_kind ssa_classify_file(const char *path, int explicit_file,
                                const stepscope_inflate_limits *inflate, int *gzip, char *why,
                                size_t whylen) {
  struct stat st;
  int stat_ok;
  return classify(path, explicit_file, inflate, gzip, why, whylen, &st, &stat_ok);
}

/* ---- directories */

static int cmp_found(const void *a, const void *b) {
  return strcmp(((const ssa_found_file *)a)->name, ((const ssa_found_file *)b)->name);
}

static void set_err(stepscope_error *err, int code, const char *path, const char *what) {
  if (!err) return;
  err->code = code;
  err->offset = 0;
  snprintf(err->message, sizeof err->message, "%s: %s", path, what);
}

static int add_file(ssa_run_files *out, size_t *cap, const char *dir, const char *name,
                    int explicit_file, const stepscope_inflate_limits *inflate) {
  if (out->nfiles == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    ssa_found_file *v = realloc(out->files, nc * sizeof *v);
    if (!v) return STEPSCOPE_E_NOMEM;
    out->files = v;
    *cap = nc;
  }
  ssa_found_file *f = &out->files[out->nfiles];
  memset(f, 0, sizeof *f);
  if (dir) {
    size_t len = strlen(dir) + strlen(name) + 2;
    f->path = malloc(len);
    if (f->path) snprintf(f->path, len, "%s/%s", dir, name);
  } else {
    f->path = strdup(name);
  }
  if (!f->path) return STEPSCOPE_E_NOMEM;
  const char *base = strrchr(f->path, '/');
  f->name = base ? base + 1 : f->path;
  f->kind = classify(f->path, explicit_file, inflate, &f->gzip, f->why, sizeof f->why, &f->st,
                     &f->stat_ok);
  if (ssa_file_kind_is_rank(f->kind)) out->nranks++;
  out->nfiles++;
  return 0;
}

int ssa_run_discover(const char *path, const stepscope_inflate_limits *inflate, ssa_run_files *out,
                     stepscope_error *err) {
  memset(out, 0, sizeof *out);
  struct stat st;
  if (stat(path, &st) != 0) {
    set_err(err, STEPSCOPE_E_IO, path,
            errno == ENOENT ? "no such file or directory" : strerror(errno));
    return STEPSCOPE_E_IO;
  }
  size_t cap = 0;
  int rc = 0;
  if (!S_ISDIR(st.st_mode)) {
    out->single = 1;
    const char *slash = strrchr(path, '/');
    out->dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!out->dir || add_file(out, &cap, NULL, path, 1, inflate)) rc = STEPSCOPE_E_NOMEM;
  } else {
    out->dir = strdup(path);
    DIR *d = out->dir ? opendir(path) : NULL;
    if (!out->dir) {
      rc = STEPSCOPE_E_NOMEM;
    } else if (!d) {
      set_err(err, STEPSCOPE_E_IO, path, "cannot open directory");
      rc = STEPSCOPE_E_IO;
    } else {
      struct dirent *e;
      while (rc == 0 && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (n[0] == '.' || !(ends_with(n, ".trace.zst") || is_json_name(n))) continue;
        rc = add_file(out, &cap, path, n, 0, inflate);
      }
      closedir(d);
    }
    if (rc == 0 && out->nfiles > 1) qsort(out->files, out->nfiles, sizeof *out->files, cmp_found);
  }
  if (rc == STEPSCOPE_E_NOMEM) set_err(err, rc, path, "out of memory");
  if (rc) ssa_run_files_free(out);
  return rc;
}

void ssa_run_files_free(ssa_run_files *files) {
  for (size_t i = 0; i < files->nfiles; i++)
    free(files->files[i].path);
  free(files->files);
  free(files->dir);
  memset(files, 0, sizeof *files);
}

const ssa_found_file *ssa_run_files_find(const ssa_run_files *files, ssa_file_kind kind,
                                         const char *preferred_name) {
  const ssa_found_file *first = NULL;
  for (size_t i = 0; i < files->nfiles; i++) {
    const ssa_found_file *f = &files->files[i];
    if (f->kind != kind) continue;
    if (preferred_name && strcmp(f->name, preferred_name) == 0) return f;
    if (!first) first = f;
  }
  return first;
}

void ssa_run_files_why_none(const ssa_run_files *files, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len,
                                 "no rank files (stepscope rank-*.trace.zst, or PyTorch "
                                 "profiler traces *.json[.gz])");
  size_t shown = 0;
  for (size_t i = 0; i < files->nfiles && used < len; i++) {
    const ssa_found_file *f = &files->files[i];
    if (shown == 4) {
      used += (size_t)snprintf(buf + used, len - used, "; and %zu more", files->nfiles - i);
      break;
    }
    used += (size_t)snprintf(buf + used, len - used, "%s %s: %s", shown ? ";" : ": found", f->name,
                             f->kind == SSA_FILE_SKIPPED ? f->why : ssa_file_kind_name(f->kind));
    shown++;
  }
}
