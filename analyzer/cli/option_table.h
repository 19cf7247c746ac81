/*
 * option_table.h — how the `stepscope` commands parse their options. The
 * options that choose how a run is analysed (`--steps`, `--step-range`,
 * `--launch-gap-us`, `--threads`, `--comm-kernel`, `--compute-kernel`,
 * `--rank`) are parsed by the library (analysis_options.h, shared with the
 * C API); the functions here apply them and print the library's message
 * when a value is bad, for every command that analyses runs (`analyze`,
 * `diff`, `export`; `view` passes the classification rules on to the
 * commands it runs).
 */
#ifndef STEPSCOPE_CLI_OPTION_TABLE_H
#define STEPSCOPE_CLI_OPTION_TABLE_H

#include "analysis_options.h"

#include <stddef.h>
#include <stdio.h>

/* ---- the option table ----
 *
 * A command describes its options as rows of a table; cli_parse() walks argv
 * with it and cli_usage() writes the command's --help from the same rows, so
 * that --help and parsing cannot disagree. The table also says how many
 * arguments the command takes and where they go; checks that need more than
 * one option at a time stay in the command. */

typedef struct cli_option cli_option;

typedef enum cli_kind {
  CLI_STRING,   /* takes a value: stored as a const char * at `offset` */
  CLI_FLAG,     /* no value: sets the int at `offset` to 1 */
  CLI_UNFLAG,   /* no value: sets the int at `offset` to 0 */
  CLI_CALL,     /* fn applies it (a value when metavar is set) */
  CLI_REPEAT,   /* the same, and the option may be given more than once (any other option
                   with a value is refused when given twice) */
  CLI_ANALYSIS, /* not one row: the library's analysis options (ssa_analysis_option_docs)
                   into the ssa_options at `offset` (at most one such row in a table) */
  CLI_CLASSIFY, /* the same, only the classification rules (--comm-kernel, --compute-kernel) */
  CLI_TEXT      /* not an option: `help` is printed as it is, in its place */
} cli_kind;

struct cli_option {
  cli_kind kind;
  const char *name;    /* "--json" */
  const char *alias;   /* another spelling ("-o"), or NULL */
  const char *metavar; /* the value's name in --help ("FILE"); NULL: the option takes none */
  const char *help;    /* lines separated by '\n' (CLI_TEXT: printed as it is) */
  size_t offset;       /* CLI_STRING, CLI_FLAG, CLI_UNFLAG, CLI_ANALYSIS: where in the
                          command's own struct (offsetof) */
  /* CLI_CALL, CLI_REPEAT: applies `value` (NULL when it is missing and the
   * table has CLI_MISSING_TO_CALL) to `cmd`, the command's struct. 0, or the
   * exit status after the message is printed. */
  int (*fn)(const cli_option *o, const char *value, void *cmd);
  double lo, hi;                /* CLI_CALL: the range fn checks, if any */
  const char *(*help_fn)(void); /* help computed when printed (instead of help) */
};

/* How a command's command line reads (the commands differ; each keeps its own). */
enum {
  CLI_ARGS_DOUBLE_DASH = 1 << 0,    /* only "--..." are options; "-x" is an argument */
  CLI_ARGS_DASH_ALONE = 1 << 1,     /* "-" alone is an argument (else any "-..." is an option) */
  CLI_ARGS_NONE = 1 << 2,           /* no arguments: every word is an option */
  CLI_MISSING_IS_UNKNOWN = 1 << 4,  /* an option whose value is missing is an unknown option */
  CLI_MISSING_TO_CALL = 1 << 5,     /* CLI_CALL gets NULL for a missing value (its message) */
  CLI_USAGE_AFTER_MISSING = 1 << 6, /* usage on stderr after "needs a value" (own options) */
  CLI_UNKNOWN_QUOTED = 1 << 7,      /* "unknown option '-x'" (else unquoted) */
  CLI_UNKNOWN_SEE_HELP = 1 << 8,    /* "... (see --help)" instead of the usage on stderr */
  CLI_STOP_AT_ARG = 1 << 9          /* "--" or the first argument ends the options */
};

typedef struct cli_table {
  const char *command; /* "analyze", in messages: "stepscope analyze: ..." */
  const char *head;    /* --help before the options: the usage line, what the command does */
  const char *tail;    /* --help after the options (NULL: nothing) */
  const cli_option *options;
  size_t n;
  int column;     /* where the help texts of the options start (0: where the analysis
                     options' do, SSA_ANALYSIS_HELP_COLUMN) */
  unsigned flags; /* CLI_ARGS_..., ... above */
  /* The command takes exactly `nargs` arguments that are not options, stored
   * in turn as const char * from offset `args` of its struct on (offsetof; an
   * array when more than one). Fewer: the usage on stderr, exit 2. One more:
   * `too_many` ("one FILE only"; NULL: "unexpected argument ARG"), exit 2. */
  size_t args;
  int nargs;
  const char *too_many;
  /* called after each option with a value is applied, and with name NULL
   * after each argument (diff's reproduce line) */
  void (*seen)(void *cmd, const char *name, const char *value);
} cli_table;

/* `.options` and `.n` of a cli_table from an array of rows. */
#define CLI_ROWS(rows) .options = (rows), .n = sizeof(rows) / sizeof(rows)[0]

/* The table of a command that reads one RUN (`stepscope NAME RUN [options]`, options only of
 * the "--x" form): analyze, ops, replay. `run_field` is the offset of its const char *. */
#define CLI_RUN_TABLE(name, rows, run_field)                                                       \
  {                                                                                                \
    .command = (name), .head = "usage: stepscope " name " RUN [options]\n", CLI_ROWS(rows),        \
    .flags = CLI_ARGS_DOUBLE_DASH, .args = (run_field), .nargs = 1                                 \
  }

/* A row that is not an option: `text` as it is, in its place in --help. */
#define CLI_TEXT_ROW(text)                                                                         \
  { CLI_TEXT, NULL, NULL, NULL, (text), 0, NULL, 0, 0, NULL }

#define CLI_PARSED (-1) /* cli_parse: the command line was read; go on */

/* Parses argv[1..argc-1] (argv[0] is the command's name) into `cmd`; the
 * ssa_options of a table's analysis options start from ssa_options_default.
 * "-h" and "--help" print the usage on stdout. Then checks the command line as a
 * whole: the number of arguments, and, in a table with analysis options, the
 * classification rules of the environment (cli_finish_analysis_options).
 * CLI_PARSED, or the status the command exits with: 0 after --help, 2 after a
 * usage error (message printed). With CLI_STOP_AT_ARG, *next is the index of
 * the first word after the options. */
int cli_parse(const cli_table *t, int argc, char **argv, void *cmd, int *next);

/* Reorders argv[1..] so that the options, each with the value it takes, come before the
 * arguments (both in their order; from "--" on nothing moves): for a CLI_STOP_AT_ARG command
 * whose arguments are a list (`merge PARTIAL... [options]`), so options may follow them. */
void cli_options_first(const cli_table *t, int argc, char **argv);

/* The command's --help: the table's head, its rows as they are (CLI_TEXT) or
 * as option lines, "  --name META" and the help text from the table's
 * column, continuation lines indented to it, and its tail. */
void cli_usage(FILE *f, const cli_table *t);

/* ---- the analysis options (the library's, printed) ---- */

/* Applies option `name` with value `value` to `opt`. Returns 1 if it was one
 * of the options above and is valid, 0 if `name` is not one of them, and -1 if
 * the value is bad (the library's message, naming `command`, is printed on
 * stderr). */
int cli_apply_analysis_option(const char *command, const char *name, const char *value,
                              ssa_options *opt);

/* After the command line: adds the rules of the environment variables
 * STEPSCOPE_COMM_KERNELS and STEPSCOPE_COMPUTE_KERNELS (';'-separated
 * regexes) and points opt->comm_rules at the rules (NULL when there are
 * none). 0, or -1 with a message naming `command` and the bad pattern
 * (printed). The rules live until the process exits. */
int cli_finish_analysis_options(const char *command, ssa_options *opt);

/* The rules given so far (command line and, after cli_finish_analysis_options,
 * environment), for commands that pass them on (`view`). */
const ssa_comm_rules *cli_comm_rules(void);

/* Parses a `--rank R` value into opt->rank: 0, or -1 with a message (printed). */
int cli_apply_rank_option(const char *command, const char *value, ssa_options *opt);

#endif /* STEPSCOPE_CLI_OPTION_TABLE_H */
