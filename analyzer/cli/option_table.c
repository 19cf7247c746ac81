/*
 * option_table.c — how the commands parse their options (see
 * option_table.h): one loop over argv for every command, driven by the
 * command's table of options, and the options part of its --help written
 * from the same table. The commands' command lines differ in small ways
 * (which words are options, what a missing value means, how an unknown
 * option is reported); the table's flags say which way each reads, so that
 * every command keeps its spellings, messages and exit statuses.
 *
 * The analysis options are parsed by the library
 * (analyzer/src/metrics/analysis_options.c), which returns its messages;
 * here they are printed, one line on stderr, as the commands have always
 * printed them.
 *
 * The classification rules are kept in one process-wide set (a command
 * analyses with one set of rules; `diff` applies it to both runs), which
 * lives until the process exits.
 */
#include "option_table.h"

#include "cli_print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ssa_comm_rules rules; /* --comm-kernel, --compute-kernel, then the environment */

/* Prints a message of the library's parser as the commands print errors. */
static int print_message(const char *msg) {
  cli_print(stderr, "%s\n", msg);
  return -1;
}

int cli_apply_analysis_option(const char *command, const char *name, const char *value,
                              ssa_options *opt) {
  char msg[8192];
  int rc = ssa_apply_analysis_option(command, name, value, opt, &rules, msg, sizeof msg);
  return rc < 0 ? print_message(msg) : rc;
}

int cli_apply_rank_option(const char *command, const char *value, ssa_options *opt) {
  char msg[8192];
  return ssa_apply_rank_option(command, value, opt, msg, sizeof msg) ? print_message(msg) : 0;
}

int cli_finish_analysis_options(const char *command, ssa_options *opt) {
  char msg[8192];
  return ssa_finish_analysis_options(command, opt, &rules, msg, sizeof msg) ? print_message(msg)
                                                                            : 0;
}

const ssa_comm_rules *cli_comm_rules(void) {
  return &rules;
}

/* ---- the option table ---- */

static int is_group(const cli_option *o) {
  return o->kind == CLI_ANALYSIS || o->kind == CLI_CLASSIFY;
}

static int is_call(const cli_option *o) {
  return o->kind == CLI_CALL || o->kind == CLI_REPEAT;
}

/* The library's analysis option `name`, when the group row `o` holds it. */
static const ssa_analysis_option_doc *group_member(const cli_option *o, const char *name) {
  for (size_t i = 0; i < ssa_analysis_option_count; i++) {
    const ssa_analysis_option_doc *d = &ssa_analysis_option_docs[i];
    if (!strcmp(d->name, name) && (o->kind == CLI_ANALYSIS || d->classify)) return d;
  }
  return NULL;
}

/* The row of option `a`: its own row, or the group row holding it; NULL if unknown. */
static const cli_option *find(const cli_table *t, const char *a) {
  for (size_t i = 0; i < t->n; i++) {
    const cli_option *o = &t->options[i];
    if (o->kind == CLI_TEXT) continue;
    if (is_group(o) ? group_member(o, a) != NULL
                    : !strcmp(o->name, a) || (o->alias && !strcmp(o->alias, a)))
      return o;
  }
  return NULL;
}

static int takes_value(const cli_option *o) {
  return o->kind == CLI_STRING || is_group(o) || (is_call(o) && o->metavar);
}

/* Which options were given, to refuse one given twice: a row's index, or for the analysis
 * options the table's size plus the library's index. */
typedef struct given_set {
  unsigned char given[128];
} given_set;

/* Option `a` of row `o` is given (with a value): 0, or 2 when it was given before and may
 * not be repeated (said why). */
static int give(const cli_table *t, given_set *g, const cli_option *o, const char *a) {
  size_t key = (size_t)(o - t->options);
  if (o->kind == CLI_REPEAT) return 0;
  if (is_group(o)) {
    const ssa_analysis_option_doc *d = group_member(o, a);
    if (d->repeatable) return 0;
    key = t->n + (size_t)(d - ssa_analysis_option_docs);
  }
  if (key >= sizeof g->given) return 0;
  if (g->given[key]++) {
    cli_print(stderr, "stepscope %s: %s is given more than once (give it once)\n", t->command, a);
    return 2;
  }
  return 0;
}

static int is_option(const cli_table *t, const char *a) {
  if (t->flags & CLI_ARGS_NONE) return 1;
  if (t->flags & CLI_ARGS_DOUBLE_DASH) return a[0] == '-' && a[1] == '-';
  if (t->flags & CLI_ARGS_DASH_ALONE) return a[0] == '-' && a[1];
  return a[0] == '-';
}

static int unknown(const cli_table *t, const char *a) {
  const char *q = t->flags & CLI_UNKNOWN_QUOTED ? "'" : "";
  cli_print(stderr, "stepscope %s: unknown option %s%s%s%s\n", t->command, q, a, q,
            t->flags & CLI_UNKNOWN_SEE_HELP ? " (see --help)" : "");
  if (!(t->flags & CLI_UNKNOWN_SEE_HELP)) cli_usage(stderr, t);
  return 2;
}

static int needs_value(const cli_table *t, const cli_option *o, const char *a) {
  cli_print(stderr, "stepscope %s: %s needs a value\n", t->command, a);
  if ((t->flags & CLI_USAGE_AFTER_MISSING) && o && !is_group(o)) cli_usage(stderr, t);
  return 2;
}

/* Stores argument `a` as the command's next one: 0, or 2 when there is one too many. */
static int argument(const cli_table *t, void *cmd, int *nargs, const char *a) {
  if (*nargs >= t->nargs) {
    if (t->too_many)
      cli_print(stderr, "stepscope %s: %s\n", t->command, t->too_many);
    else
      cli_print(stderr, "stepscope %s: unexpected argument %s\n", t->command, a);
    return 2;
  }
  ((const char **)((char *)cmd + t->args))[(*nargs)++] = a;
  if (t->seen) t->seen(cmd, NULL, a);
  return 0;
}

/* Applies option `a` of row `o` with value `v` (NULL for a flag): 0, or an exit status. */
static int apply(const cli_table *t, const cli_option *o, const char *a, const char *v, void *cmd) {
  char *at = (char *)cmd + o->offset;
  switch (o->kind) {
  case CLI_STRING: *(const char **)at = v; return 0;
  case CLI_FLAG: *(int *)at = 1; return 0;
  case CLI_UNFLAG: *(int *)at = 0; return 0;
  case CLI_CALL:
  case CLI_REPEAT: return o->fn(o, v, cmd);
  case CLI_ANALYSIS:
  case CLI_CLASSIFY:
    return cli_apply_analysis_option(t->command, a, v, (ssa_options *)at) < 0 ? 2 : 0;
  case CLI_TEXT: break;
  }
  return 0;
}

/* The command line as a whole, once every word is read: enough arguments,
 * and the environment's classification rules for a command that analyses. */
static int check_whole(const cli_table *t, ssa_options *opt, int nargs) {
  if (nargs < t->nargs) {
    cli_usage(stderr, t);
    return 2;
  }
  return opt && cli_finish_analysis_options(t->command, opt) ? 2 : CLI_PARSED;
}

/* The ssa_options of the table's analysis options (NULL: it has none). */
static ssa_options *analysis_options(const cli_table *t, void *cmd) {
  for (size_t i = 0; i < t->n; i++)
    if (is_group(&t->options[i])) return (ssa_options *)((char *)cmd + t->options[i].offset);
  return NULL;
}

void cli_options_first(const cli_table *t, int argc, char **argv) {
  /* a stable partition: options (and the values they take) keep their order, the arguments
   * theirs; "--" and what follows stay last, as they are */
  int end = 1;
  while (end < argc && strcmp(argv[end], "--"))
    end++;
  char **words = malloc((size_t)(end > 1 ? end - 1 : 1) * sizeof *words);
  if (!words) return; /* left as it is: cli_parse then says what it finds first */
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 1; i < end; i++) {
      int option = is_option(t, argv[i]);
      const cli_option *o = option ? find(t, argv[i]) : NULL;
      int valued = o && takes_value(o) && i + 1 < end;
      if (option == (pass == 0)) {
        words[n++] = argv[i];
        if (valued) words[n++] = argv[i + 1];
      }
      i += valued;
    }
  memcpy(argv + 1, words, (size_t)n * sizeof *words);
  free(words);
}

int cli_parse(const cli_table *t, int argc, char **argv, void *cmd, int *next) {
  ssa_options *opt = analysis_options(t, cmd);
  if (opt) ssa_options_default(opt);
  int i = 1, nargs = 0;
  given_set given;
  memset(&given, 0, sizeof given);
  for (; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if ((t->flags & CLI_STOP_AT_ARG) && !strcmp(a, "--")) {
      i++;
      break;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      cli_usage(stdout, t);
      return 0;
    }
    if (!is_option(t, a)) {
      if (t->flags & CLI_STOP_AT_ARG) break;
      int rc = argument(t, cmd, &nargs, a);
      if (rc) return rc;
      continue;
    }
    const cli_option *o = find(t, a);
    if (!o) return unknown(t, a);
    int valued = takes_value(o);
    if (valued && !v && (t->flags & CLI_MISSING_IS_UNKNOWN)) return unknown(t, a);
    if (valued && !v) {
      int rc = is_call(o) && (t->flags & CLI_MISSING_TO_CALL) ? o->fn(o, NULL, cmd) : 0;
      return rc ? rc : needs_value(t, o, a);
    }
    int rc = valued ? give(t, &given, o, a) : 0;
    if (rc) return rc;
    rc = apply(t, o, a, valued ? v : NULL, cmd);
    if (rc) return rc;
    if (!valued) continue;
    i++;
    if (t->seen) t->seen(cmd, a, v);
  }
  if (next) *next = i;
  return check_whole(t, opt, nargs);
}

/* One option's --help lines: `left` ("  -o, --output FILE"), then the help
 * from `column` (on the next line when left reaches the column), each
 * further line of it indented to the column. */
static void print_row(FILE *f, const char *left, const char *help, int column) {
  int n = fprintf(f, "%s", left);
  if (n >= column) { /* too wide for the column: the help starts on the next line */
    fputc('\n', f);
    n = 0;
  }
  do {
    const char *eol = strchr(help, '\n');
    int len = eol ? (int)(eol - help) : (int)strlen(help);
    fprintf(f, "%*s%.*s\n", n < column ? column - n : 1, "", len, help);
    n = 0;
    help = eol ? eol + 1 : NULL;
  } while (help);
}

void cli_usage(FILE *f, const cli_table *t) {
  if (t->head) fputs(t->head, f);
  for (size_t i = 0; i < t->n; i++) {
    const cli_option *o = &t->options[i];
    char left[160];
    if (o->kind == CLI_TEXT) {
      fputs(o->help, f);
    } else if (is_group(o)) {
      for (size_t k = 0; k < ssa_analysis_option_count; k++) {
        const ssa_analysis_option_doc *d = &ssa_analysis_option_docs[k];
        if (o->kind == CLI_CLASSIFY && !d->classify) continue;
        snprintf(left, sizeof left, "  %s %s", d->name, d->metavar);
        print_row(f, left, d->help, SSA_ANALYSIS_HELP_COLUMN);
      }
    } else {
      snprintf(left, sizeof left, "  %s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "",
               o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
      print_row(f, left, o->help_fn ? o->help_fn() : o->help,
                t->column ? t->column : SSA_ANALYSIS_HELP_COLUMN);
    }
  }
  if (t->tail) fputs(t->tail, f);
}
