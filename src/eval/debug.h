/* debug.h - a step debugger over the reference interpreter (`rly debug`, docs/tools.md).
 *
 * The debugger is an EvObserver (eval.h): it watches every evaluation step, decides where to
 * stop (breakpoints on a source line or a global, step / next / finish), and at each stop reads
 * commands through a line-reading callback until one resumes the run. It never recurses over
 * the program: frames are read from the interpreter's heap stacks. Commands: break, delete,
 * step, next, finish, continue, print, backtrace, list, info breakpoints, help, quit. */
#ifndef RLY_EVAL_DEBUG_H
#define RLY_EVAL_DEBUG_H

#include <stdio.h>

#include "eval/eval.h"

typedef struct EvDebugger EvDebugger;

/* Reads one command line (without its newline) into a malloc'ed string, showing `prompt` when
 * the input is a terminal; NULL at the end of input. */
typedef char *(*EvReadLine)(void *state, const char *prompt);

/* A debugger for runs of module m (type-checked) whose program text is source file `file` of
 * m's context (breakpoint lines refer to it). Output goes to out, command errors to err. */
EvDebugger *ev_debugger_new(Module *m, uint32_t file, EvReadLine read_line, void *read_state,
                            FILE *out, FILE *err);
void ev_debugger_free(EvDebugger *d); /* NULL is a no-op */

/* The observer to attach to the interpreter that runs the program (ev_set_observer, or
 * ev_observe_new before rly_module_run creates it). Owned by d. */
EvObserver *ev_debugger_observer(EvDebugger *d);

/* Whether the user ended the session (`quit` or end of input) while the program ran: the run
 * then fails with "stopped by the debugger", which is not an error of the program. */
bool ev_debugger_quit(const EvDebugger *d);

#endif
