/* cmds.h - what the files of the `rly` command-line tool (tools/rly/) share: the subcommands
 * that live outside main.c, the help table (help.c) and the progress line (progress.c).
 * A subcommand takes the arguments after its name and returns the exit status: 0 success,
 * 1 failure (a message on stderr), 2 usage error. main.c answers `--help`/`-h` for every
 * command before calling it, from the table in help.c. */
#ifndef RLY_TOOLS_CMDS_H
#define RLY_TOOLS_CMDS_H

#include <stdbool.h>
#include <stdio.h>

/* ---- subcommands in their own files (dispatched when the file exists, see CMakeLists.txt) ---- */

int cmd_repl(int argc, char **argv);  /* repl.c: rly repl [FILE] */
int cmd_debug(int argc, char **argv); /* debug.c: rly debug FILE [--entry NAME] [inputs] */
int cmd_viz(int argc, char **argv);   /* viz.c: rly viz FILE|model.onnx [-O N] [-o OUT] */

/* ---- help.c: usage, options and an example for every command ---- */

/* The overview (`rly --help`): every command with its one-line summary, on f. */
void cli_help_overview(FILE *f);

/* The whole help of command cmd on f (usage, description, options, example); false when cmd
 * is not a command (nothing printed). */
bool cli_help_command(const char *cmd, FILE *f);

/* true when cmd names a command in the help table. */
bool cli_is_command(const char *cmd);

/* Report an unknown command on stderr, with the closest command name when one is close;
 * returns 2 (the usage exit status). */
int cli_unknown_command(const char *cmd);

/* Report argument arg of command cmd as not understood, on stderr: an option of cmd given
 * without its value, an unknown option (with the closest of cmd's options when one is close),
 * or an extra operand. Returns 2. */
int cli_bad_argument(const char *cmd, const char *arg);

/* The candidate closest to word by edit distance, or NULL when none is close enough to be a
 * plausible typo. cands is an array of n strings. */
const char *cli_closest(const char *word, const char *const *cands, int n);

/* ---- progress.c: a progress line on stderr, only when stderr is a terminal ---- */

/* RLY_PROGRESS=always|never overrides the terminal test (for tests and scripts). */
typedef struct CliProgress {
    bool on;          /* drawing at all */
    bool drawn;       /* a line is on screen now (cleared before other output) */
    const char *what; /* the label, e.g. "test" */
    double t_start;   /* when it started (seconds, monotonic) */
    double t_drawn;   /* when it was last drawn, to redraw at most 10 times a second */
} CliProgress;

/* Start a progress line labelled what; quiet turns it off. */
void cli_progress_start(CliProgress *p, const char *what, bool quiet);
/* Show fraction frac (0..1) of the work done, with a short note (or NULL) after the bar. */
void cli_progress_update(CliProgress *p, double frac, const char *note);
/* Remove the line (before printing anything else on the terminal); the next update redraws. */
void cli_progress_clear(CliProgress *p);
/* Remove the line for good. */
void cli_progress_end(CliProgress *p);

/* An elapsed-time line ("rly: compiling model.onnx ... 3.2 s") for one long call that reports
 * no progress of its own, drawn by a helper thread from half a second in, while stderr is a
 * terminal. cli_busy_end removes it; call it before printing anything. One at a time. */
void cli_busy_start(const char *what);
void cli_busy_end(void);

/* Seconds on a monotonic clock. */
double cli_now(void);

#endif
