/* repl.h - what `rly repl` (repl.c) and `rly debug` (debug.c) share: reading command lines,
 * with line editing and history through libedit when the input is a terminal and the CLI was
 * built with it (RLY_HAVE_LIBEDIT), plain stdin otherwise (scripts and tests). */
#ifndef RLY_TOOLS_REPL_H
#define RLY_TOOLS_REPL_H

#include <stdbool.h>
#include <stdio.h>

typedef struct CliReader {
    FILE *in;         /* where lines come from (stdin) */
    bool tty;         /* in is a terminal: show prompts, edit lines, keep history */
    const char *hist; /* history file name under $HOME (e.g. ".rly_history"), or NULL */
} CliReader;

/* Start reading from in; tty is detected. */
void cli_reader_init(CliReader *r, FILE *in, const char *hist);
/* Save the history (on a terminal). */
void cli_reader_close(CliReader *r);
/* One line without its newline, malloc'ed (free it); NULL at the end of input. The prompt is
 * shown only on a terminal. Matches EvReadLine (src/eval/debug.h) with state = the reader. */
char *cli_read_line(void *reader, const char *prompt);

/* Print a library error (rly_last_error()) on stderr: as it is when it starts with its location
 * (FILE:LINE:COL: ...), else after "rly: error: ". stdout is flushed first. */
void repl_print_error(const char *msg);

#endif
