/*
 * cmd_view.c — `stepscope view RUN [--compare RUN_B] [--port P] [--bind ADDR] [--html OUT]
 * [--ranks LIST|auto] [--max-size SIZE]`.
 *
 * Serves the bundled viewer (embedded in the binary) and the run's export and
 * report on http://127.0.0.1:P/t/<token>/ (read-only, behind a random access
 * token in the path; see view_http.c for what is served and what is refused), or with
 * --html writes one self-contained page, prints one line and exits. RUN is
 * what every command takes (run_discovery.c): its export and report, written
 * by `stepscope export` and `stepscope analyze --json`, are used when there and
 * generated into a temporary directory from the rank traces when not
 * (view_run.c), the export with --memory (a PyTorch trace's memory counter tracks); a
 * PyTorch run also gets its module tree and memory timeline (`stepscope ops --by module`,
 * `ops --memory`) for the Summary.
 * --ranks and --max-size go to the `export` it runs (export_ranks.c); a --html page is held to
 * --max-size too (default 512 MiB: Chromium cannot hold more in one string), checked before
 * it is written. A run whose export is refused (over --max-size: thousands of ranks) or fails,
 * without --ranks, is shown by its ranks x steps heatmap (`analyze --heatmap`, the viewer's
 * Heatmap tab) with the analysis instead of a timeline, and view says so; a report too large
 * for such a page to open in seconds (over 64 MiB), or for a browser (over 512 MiB served, over
 * --max-size in a page), is then left out, the heatmap carrying its per-rank steps and verdict.
 * With --ranks, a refused export is an error.
 * --comm-kernel / --compute-kernel are checked here (option_table.c) and
 * passed on to the `export`, `analyze` and `diff` commands it runs through
 * the environment (STEPSCOPE_COMM_KERNELS, STEPSCOPE_COMPUTE_KERNELS).
 * Exit codes: 0 done, 1 error, 2 usage.
 */
#include "view.h"

#include "cli_print.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <unistd.h>

#include "cli_env.h"
#include "option_table.h"
#include "export_ranks.h"

/* Appends the command line's rules of one class to the environment variable
 * the commands that view runs read (after what it held already). 0, or -1
 * (a pattern with ';', which the variable cannot carry; or no memory). */
static int pass_rules_on(int comm) {
  const char *var = comm ? SSA_COMM_ENV : SSA_COMPUTE_ENV;
  const ssa_comm_rules *rules = cli_comm_rules();
  const char *old = getenv(var);
  size_t len = old ? strlen(old) : 0;
  for (size_t i = 0; i < rules->n; i++)
    len += strlen(rules->rule[i].pattern) + 1;
  char *v = malloc(len + 1);
  if (!v) return -1;
  size_t k = 0;
  if (old) {
    memcpy(v, old, strlen(old));
    k = strlen(old);
  }
  int any = 0;
  for (size_t i = 0; i < rules->n; i++) {
    const ssa_comm_rule *r = &rules->rule[i];
    if (r->comm != comm || strcmp(r->origin, "command line")) continue;
    if (strchr(r->pattern, ';')) {
      cli_print(stderr,
                "stepscope view: %s '%s': view passes rules on in %s, which separates "
                "patterns with ';' (write it as [;] in the regex)\n",
                ssa_comm_rule_option(r), r->pattern, var);
      free(v);
      return -1;
    }
    if (k) v[k++] = ';';
    memcpy(v + k, r->pattern, strlen(r->pattern));
    k += strlen(r->pattern);
    any = 1;
  }
  v[k] = 0;
  int rc = any ? setenv(var, v, 1) : 0;
  free(v);
  return rc ? -1 : 0;
}

typedef struct view_args {
  const char *run_a, *run_b, *html, *bind_addr;
  cli_export_limits limits; /* --ranks, --max-size: passed on to the export */
  int port;
  ssa_options rule_opt; /* only the classification rules are used */
} view_args;

static int opt_port(const cli_option *o, const char *v, void *cmd) {
  char *end = NULL;
  long p = strtol(v, &end, 10);
  if (!*v || *end || p < 0 || p > 65535) {
    cli_print(stderr, "stepscope view: --port %s: not a port number\n", v);
    return 2;
  }
  ((view_args *)cmd)->port = (int)p;
  return 0;
}

/* --bind ADDR is a numeric IPv4 or IPv6 address (view_serve listens there): 0, or 2 (said
 * why). Checked before any run is read. */
static int check_bind(const char *addr) {
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  int rc = getaddrinfo(addr, NULL, &hints, &ai);
  if (rc != 0) {
    cli_print(stderr, "stepscope view: --bind %s: %s (give a numeric IPv4 or IPv6 address)\n", addr,
              gai_strerror(rc));
    return 2;
  }
  freeaddrinfo(ai);
  return 0;
}

#define A(f) offsetof(view_args, f)
static const cli_option view_options[] = {
    {CLI_STRING, "--compare", NULL, "RUN_B",
     "a second run for the Compare view (which shows `stepscope diff\n"
     "RUN RUN_B`'s findings and verdicts when both have rank traces)",
     A(run_b), NULL, 0, 0, NULL},
    {CLI_CALL, "--port", NULL, "P", "TCP port (default 8642, 0 = any free port)", 0, opt_port, 0, 0,
     NULL},
    {CLI_STRING, "--bind", NULL, "ADDR",
     "numeric address to listen on (default 127.0.0.1; anything else\n"
     "exposes the run's files to the network)",
     A(bind_addr), NULL, 0, 0, NULL},
    {CLI_STRING, "--html", NULL, "OUT.html",
     "write one self-contained page (viewer + data) and exit; prints\n"
     "one line: what was written, from what, and the headline",
     A(html), NULL, 0, 0, NULL},
    CLI_EXPORT_LIMIT_ROWS(A(limits)),
    CLI_TEXT_ROW("                    (view: a --html page is held to --max-size too, default\n"
                 "                    512M; over it, without --ranks, the page shows the run's\n"
                 "                    ranks x steps heatmap and its analysis instead, made by\n"
                 "                    `analyze --low-memory` (view says so); with --ranks it is\n"
                 "                    an error)\n"),
    {CLI_CLASSIFY, NULL, NULL, NULL, NULL, A(rule_opt), NULL, 0, 0, NULL},
    {CLI_TEXT, NULL, NULL, NULL,
     "                      (they apply to what view generates, not to an export or\n"
     "                      report already in RUN)\n"
     "  --help            this text\n"
     "\n"
     "The printed URL carries a random access token in its path (/t/TOKEN/): any\n"
     "request without it is refused (403), so other users of this machine cannot read\n"
     "the run, and no cookie is set, so other servers on this machine never see it.\n"
     "Only GET and HEAD are served, and only the viewer's own files and each run's\n"
     "export and report, nothing else of the run directory. An export or report found\n"
     "in RUN that is cut short (a full disk, a killed writer), or older than RUN's\n"
     "newest rank file (an earlier run's), is not served: it is regenerated from the\n"
     "rank traces, with a note.\n"
     "\n"
     "Exit status: 0 served until stopped, or the page was written (a heatmap page\n"
     "without a timeline when the export is over --max-size: said on stdout and\n"
     "stderr); 1 the run could not be shown, the page could not be written or would\n"
     "be over --max-size, or --ranks asked for a timeline that could not be made;\n"
     "2 usage error.\n",
     0, NULL, 0, 0, NULL},
};

static const cli_table view_table = {
    .command = "view",
    .head =
        "usage: stepscope view RUN [--compare RUN_B] [--port P] [--bind ADDR] [--html OUT.html]\n"
        "\n"
        "Serve the bundled offline viewer for a run on http://127.0.0.1:P/ (default port 8642;\n"
        "0 picks a free port). RUN is a run directory (or one file of it) as every command\n"
        "takes it: stepscope rank-*.trace.zst files, or PyTorch profiler traces (rank-*,\n"
        "rank_*, worker*, *.pt.trace.json[.gz], or any *.json[.gz] whose content is Kineto's,\n"
        "trace.json.gz included), with or without the export of `stepscope export` (told by\n"
        "its marker) and the report of `stepscope analyze --json`; what is missing is\n"
        "generated first into a temporary directory. The export it generates has memory\n"
        "counter tracks (`export --memory`) where a PyTorch trace has memory events\n"
        "(profile_memory=True); for PyTorch traces it also runs `stepscope ops --by module`\n"
        "and `ops --memory`, whose module tree (with_modules=True) and memory peaks the\n"
        "Summary shows.\n"
        "\n",
    CLI_ROWS(view_options),
    .column = 20,
    .flags = CLI_ARGS_DASH_ALONE | CLI_USAGE_AFTER_MISSING,
    .args = A(run_a),
    .nargs = 1,
    .too_many = "one run only (use --compare for a second one)"};

int cmd_view(int argc, char **argv) {
  view_args x;
  memset(&x, 0, sizeof x);
  x.bind_addr = "127.0.0.1";
  x.port = 8642;
  x.limits.command = "view";
  int parsed = cli_parse(&view_table, argc, argv, &x, NULL);
  if (parsed != CLI_PARSED) return parsed;
  if (check_bind(x.bind_addr) || pass_rules_on(1) || pass_rules_on(0)) return 2;
  const char *html = x.html;

  char self_exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (n > 0) self_exe[n] = '\0';

  cli_env env; /* the decompression limits (the commands view runs read the same) */
  cli_env_read(&env);
  /* what the export it runs is told: the ranks and the size limit (a page's own) */
  const char *page_limit = x.limits.max_size ? x.limits.max_size : html ? "512M" : NULL;
  const char *export_args[5] = {NULL};
  int na = 0;
  if (x.limits.ranks) {
    export_args[na++] = "--ranks";
    export_args[na++] = x.limits.ranks;
  }
  if (page_limit) {
    export_args[na++] = "--max-size";
    export_args[na++] = page_limit;
  }
  view_run runs[2];
  int nruns = 0;
  char err[1024];
  view_catch_stop_signals(); /* while files are generated: removed when killed */
  const char *args[2] = {x.run_a, x.run_b};
  for (int i = 0; i < 2; i++) {
    if (!args[i]) continue;
    if (view_run_open(&runs[nruns], i == 0 ? "a" : "b", args[i], n > 0 ? self_exe : NULL,
                      html != NULL, &env.import.inflate, export_args, x.limits.ranks != NULL, err,
                      sizeof err) != 0) {
      if (!view_stop_signal) cli_print(stderr, "stepscope view: %s\n", err);
      view_runs_close_all(runs, nruns);
      return 1;
    }
    nruns++;
  }
  if (nruns == 2 && !view_stop_signal) view_run_diff(&runs[1], &runs[0], n > 0 ? self_exe : NULL);
  if (view_stop_signal) view_runs_close_all(runs, nruns); /* does not return */
  for (int k = 0; k < nruns && x.rule_opt.comm_rules; k++)
    if (!runs[k].trace_generated || !runs[k].report_generated)
      cli_print(stderr,
                "stepscope view: note: %s holds its own export or report, made without "
                "these --comm-kernel/--compute-kernel rules; they apply only to what view "
                "generates\n",
                runs[k].dir);

  int heatmap_only = runs[0].export_failed && runs[0].heatmap_name[0];
  if (runs[0].export_failed && (x.limits.ranks || !heatmap_only)) {
    cli_print(stderr, "stepscope view: %s: no timeline (%s)%s\n", runs[0].name,
              runs[0].export_why[0] ? runs[0].export_why : "`stepscope export` failed",
              x.limits.ranks ? ""
                             : ", and no heatmap to show instead (`stepscope analyze` failed)");
    view_runs_close_all(runs, nruns);
    return 1;
  }
  if (heatmap_only) {
    view_fit_reports(runs, 1, VIEW_HEATMAP_REPORT_MAX, 0);
    cli_print(stderr,
              "stepscope view: %s: no timeline: the export was refused or failed (above); the "
              "page shows the run's ranks x steps heatmap and its analysis instead: select ranks "
              "there for the command that opens their timeline, or use --ranks auto\n",
              runs[0].name);
  }
  int rc;
  if (html) {
    char summary[1024];
    uint64_t limit = 0;
    cli_parse_size(page_limit, &limit); /* checked when parsed */
    view_fit_reports(runs, nruns, limit, 1);
    rc = view_html_check_size(runs, nruns, limit, err, sizeof err) == 0 &&
                 view_write_html(runs, nruns, html, summary, sizeof summary, err, sizeof err) == 0
             ? 0
             : 1;
    if (rc)
      cli_print(stderr, "stepscope view: %s\n", err);
    else /* one line */
      cli_print(stdout, "stepscope view: wrote %s (%s%s)\n", html,
                heatmap_only ? "a heatmap page, no timeline: the export is over --max-size or "
                               "failed; "
                             : "",
                summary);
  } else {
    view_fit_reports(runs, nruns, VIEW_STRING_MAX, 0);
    rc = view_serve(runs, nruns, x.bind_addr, x.port, stdout);
    view_stop_signal = 0; /* how the server stops: exit 0, not death by the signal */
  }
  view_runs_close_all(runs, nruns);
  return rc;
}
