/*
 * view_html.c — `stepscope view RUN --html out.html`: one self-contained page.
 *
 * How it works: the embedded index.html is copied with its stylesheet link and
 * script tags replaced by the files' contents, and, before the first script, the
 * run data: window.STEPSCOPE_INLINE (the run listing) and one
 * <script type="application/json"> element per file holding the trace export and
 * the report. The data is streamed from disk, never loaded whole; every '<' byte
 * is written as \u003c, which is only legal (and means the same) inside JSON
 * strings, so no "</script>" can end the element early. A compressed export
 * (.json.gz) is inflated on the way (zlib's gzread, which passes plain files
 * through unchanged). What was written is summed up in one line for the
 * command to print: the files used, and the report's ranks and step time.
 */
#include "view.h"
#include "stepscope_viewer_assets.h"
#include "ssa_io.h"
#include "stepscope.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static int copy_json_escaped(FILE *out, const char *path, char *err, size_t errlen) {
  FILE *plain =
      fopen(path, "rb"); /* opened first: a FIFO or a missing file fails here, not in zlib */
  gzFile in = plain ? gzdopen(dup(fileno(plain)), "rb") : NULL;
  if (plain) fclose(plain);
  if (!in) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : ENOMEM));
    return -1;
  }
  gzbuffer(in, 1 << 17);
  static unsigned char buf[1 << 16];
  int got;
  while ((got = gzread(in, buf, sizeof buf)) > 0) {
    size_t r = (size_t)got;
    size_t start = 0;
    for (size_t i = 0; i < r; i++) {
      if (buf[i] != '<') continue;
      fwrite(buf + start, 1, i - start, out);
      fputs("\\u003c", out);
      start = i + 1;
    }
    fwrite(buf + start, 1, r - start, out);
  }
  int zerr = Z_OK;
  const char *msg = gzerror(in, &zerr);
  int bad = got < 0 || (zerr != Z_OK && zerr != Z_STREAM_END);
  if (bad) snprintf(err, errlen, "%s: read error (%s)", path, msg ? msg : "?");
  gzclose(in);
  return bad ? -1 : 0;
}

/* The report's "ranks_loaded" and first "step_time_ns" (the run's: "run" is
 * the report's first member), found by reading its start; -1 when absent
 * or null. */
static void report_headline(const char *path, long long *ranks, long long *step_ns) {
  *ranks = *step_ns = -1;
  FILE *f = fopen(path, "rb");
  if (!f) return;
  size_t cap = 1 << 20, len = 0;
  char *text = malloc(cap + 1);
  while (text && (*ranks < 0 || *step_ns < 0) && len < (16u << 20)) {
    if (len == cap) {
      char *t = realloc(text, cap * 2 + 1);
      if (!t) break;
      text = t;
      cap *= 2;
    }
    size_t r = fread(text + len, 1, cap - len, f);
    if (r == 0) break;
    len += r;
    text[len] = '\0';
    const char *k = strstr(text, "\"ranks_loaded\":");
    if (k) *ranks = strtoll(k + strlen("\"ranks_loaded\":"), NULL, 10);
    k = strstr(text, "\"step_time_ns\":");
    if (k && k[strlen("\"step_time_ns\":")] != 'n')
      *step_ns = strtoll(k + strlen("\"step_time_ns\":"), NULL, 10);
    else if (k)
      break; /* null: no steps */
  }
  free(text);
  fclose(f);
}

static void summarize(const view_run *runs, int nruns, const char *page, char *summary, size_t n) {
  size_t used = 0;
  summary[0] = '\0';
  for (int i = 0; i < nruns && used < n; i++) {
    const view_run *r = &runs[i];
    char path[PATH_MAX], step[64] = "no steps";
    long long ranks = -1, step_ns = -1;
    if (r->report_name[0] && view_run_file(r, r->report_name, path, sizeof path) == 0)
      report_headline(path, &ranks, &step_ns);
    if (step_ns >= 0) snprintf(step, sizeof step, "step time %.3f ms", (double)step_ns / 1e6);
    char ranks_text[32] = "";
    if (ranks >= 0)
      snprintf(ranks_text, sizeof ranks_text, "%lld rank%s, ", ranks, ranks == 1 ? "" : "s");
    used += (size_t)snprintf(
        summary + used, n - used, "%s%s: %s%s; export %s%s, report %s%s",
        i ? "; compared with " : "", r->name, r->report_name[0] ? ranks_text : "",
        r->report_name[0] ? step : "no report", r->trace_name[0] ? r->trace_name : "none",
        r->trace_generated ? " (generated)" : "", r->report_name[0] ? r->report_name : "none",
        r->report_generated ? " (generated)" : "");
  }
  struct stat st;
  if (used < n && stat(page, &st) == 0)
    snprintf(summary + used, n - used, "; %.1f MiB", (double)st.st_size / (1 << 20));
}

static int is_gz(const char *name) {
  size_t n = strlen(name);
  return n > 3 && !strcmp(name + n - 3, ".gz");
}

/* The bytes of a run's file of that kind the page would hold (0: none, or a .gz: unknown). */
static uint64_t file_bytes(const view_run *run, int kind) {
  const char *name = view_run_file_name(run, kind);
  char path[PATH_MAX];
  struct stat st;
  if (name[0] && !is_gz(name) && view_run_file(run, name, path, sizeof path) == 0 &&
      stat(path, &st) == 0)
    return (uint64_t)st.st_size;
  return 0;
}

static uint64_t page_bytes(const view_run *runs, int nruns) {
  uint64_t total = 0;
  for (int i = 0; i < nruns; i++)
    for (int k = 0; k < VIEW_NFILES; k++)
      total += file_bytes(&runs[i], k);
  return total;
}

void view_fit_reports(view_run *runs, int nruns, uint64_t limit, int whole_page) {
  for (int i = 0; i < nruns && limit; i++) {
    view_run *r = &runs[i];
    uint64_t bytes = file_bytes(r, VIEW_REPORT);
    if (!r->heatmap_name[0] || (whole_page ? page_bytes(runs, nruns) : bytes) <= limit) continue;
    char note[300];
    snprintf(note, sizeof note,
             "%s (%.1f MiB) left out of the page: over %.1f MiB (a browser parses a report whole: "
             "slow, and impossible over ~512 MiB): the heatmap carries the per-rank steps, "
             "stragglers and culprits",
             r->report_name, (double)bytes / (1 << 20), (double)limit / (1 << 20));
    view_run_note(r, note);
    r->report_name[0] = '\0';
    r->report_generated = 0;
  }
}

int view_html_check_size(const view_run *runs, int nruns, uint64_t limit, char *err,
                         size_t errlen) {
  uint64_t total = page_bytes(runs, nruns);
  if (!limit || total <= limit) return 0;
  snprintf(err, errlen,
           "the page would hold %.1f MiB of trace and report, over the limit of %.1f MiB "
           "(--max-size): Chromium holds at most ~512 MiB in one string and would open it empty; "
           "choose ranks with --ranks (e.g. --ranks 0-7,12, or --ranks auto: the culprit, "
           "stragglers, slowest and fastest ranks), or serve it instead of --html",
           (double)total / (1 << 20), (double)limit / (1 << 20));
  return -1;
}

static int write_data(FILE *out, const view_run *runs, int nruns, char *err, size_t errlen) {
  char *listing = view_runs_json(runs, nruns, 1);
  if (!listing) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  fprintf(out, "<script>window.STEPSCOPE_INLINE = %s;</script>\n", listing);
  free(listing);
  for (int i = 0; i < nruns; i++) {
    for (int k = 0; k < VIEW_NFILES; k++) {
      const char *name = view_run_file_name(&runs[i], k);
      if (!name[0]) continue;
      char path[PATH_MAX];
      if (view_run_file(&runs[i], name, path, sizeof path) != 0) {
        snprintf(err, errlen, "%s/%s: not readable", runs[i].dir, name);
        return -1;
      }
      /* its size, when known: the page tells an element the browser could not hold (over
       * ~512 MiB in Chromium: it reads as empty) from an empty file */
      struct stat st;
      long long bytes = !is_gz(name) && stat(path, &st) == 0 ? (long long)st.st_size : -1;
      fprintf(out, "<script type=\"application/json\" data-bytes=\"%lld\" id=\"data-%s-%s\">",
              bytes, runs[i].id, view_file_kinds[k]);
      if (copy_json_escaped(out, path, err, errlen) != 0) return -1;
      fputs("</script>\n", out);
    }
  }
  return 0;
}

/* Writes an asset's text, checking it cannot close the element it is put in. */
static int write_asset(FILE *out, const char *path, const char *closing, char *err, size_t errlen) {
  const stepscope_viewer_asset *a = stepscope_viewer_asset_find(path);
  if (!a) {
    snprintf(err, errlen, "viewer asset %s is not in this build", path);
    return -1;
  }
  if (memmem(a->data, a->size, closing, strlen(closing))) {
    snprintf(err, errlen, "viewer asset %s contains %s and cannot be inlined", path, closing);
    return -1;
  }
  fwrite(a->data, 1, a->size, out);
  return 0;
}

int view_write_html(const view_run *runs, int nruns, const char *path, char *summary,
                    size_t summary_len, char *err, size_t errlen) {
  const stepscope_viewer_asset *index = stepscope_viewer_asset_find("index.html");
  if (!index) {
    snprintf(err, errlen, "viewer asset index.html is not in this build");
    return -1;
  }
  char *page = malloc(index->size + 1);
  if (!page) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  memcpy(page, index->data, index->size);
  page[index->size] = '\0';
  /* written like every output (ssa_io.h): under a temporary name, renamed
   * when whole, never over one of the run's files that the page is made of */
  for (int i = 0; i < nruns; i++) {
    char in[PATH_MAX + 300];
    snprintf(in, sizeof in, "%s/%s", runs[i].trace_generated ? runs[i].gen_dir : runs[i].dir,
             runs[i].trace_name);
    if (runs[i].trace_name[0]) ssa_out_protect_input(in);
    snprintf(in, sizeof in, "%s/%s", runs[i].report_generated ? runs[i].gen_dir : runs[i].dir,
             runs[i].report_name);
    if (runs[i].report_name[0]) ssa_out_protect_input(in);
  }
  ssa_out o;
  if (ssa_out_open(&o, path) != 0) {
    snprintf(err, errlen, "%s", o.why);
    free(page);
    return -1;
  }
  FILE *out = o.gz ? NULL : o.file;
  if (!out) {
    o.error = STEPSCOPE_E_ARGUMENT; /* a .gz name: not for a page */
    ssa_out_close(&o);
    snprintf(err, errlen, "%s: write the page to an .html file", path);
    free(page);
    return -1;
  }
  int rc = 0, data_written = 0;
  const char *p = page;
  while (*p && rc == 0) {
    const char *link = strstr(p, "<link rel=\"stylesheet\" href=\"");
    const char *script = strstr(p, "<script src=\"");
    const char *next = link && (!script || link < script) ? link : script;
    if (!next) {
      fputs(p, out);
      break;
    }
    fwrite(p, 1, (size_t)(next - p), out);
    int is_link = next == link;
    const char *name =
        next + (is_link ? strlen("<link rel=\"stylesheet\" href=\"") : strlen("<script src=\""));
    const char *quote = strchr(name, '"');
    const char *close = quote ? strchr(quote, '>') : NULL;
    if (!quote || !close) {
      snprintf(err, errlen, "index.html: malformed tag");
      rc = -1;
      break;
    }
    char asset[256];
    snprintf(asset, sizeof asset, "%.*s", (int)(quote - name), name);
    if (is_link) {
      fputs("<style>\n", out);
      rc = write_asset(out, asset, "</style", err, errlen);
      fputs("</style>", out);
      p = close + 1;
    } else {
      if (!data_written) {
        rc = write_data(out, runs, nruns, err, errlen);
        data_written = 1;
        if (rc) break;
      }
      fputs("<script>\n", out);
      rc = write_asset(out, asset, "</script", err, errlen);
      fputs("</script>", out);
      const char *end = strstr(close, "</script>");
      p = end ? end + strlen("</script>") : close + 1;
    }
  }
  free(page);
  if (rc != 0 || ferror(out)) o.error = o.error ? o.error : STEPSCOPE_E_IO; /* nothing renamed */
  if (ssa_out_close(&o) != 0 && rc == 0) {
    snprintf(err, errlen, "%s", o.why);
    rc = -1;
  }
  if (rc == 0) summarize(runs, nruns, path, summary, summary_len);
  return rc;
}
