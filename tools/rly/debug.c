/* debug.c - `rly debug FILE [--entry NAME] [inputs as for run]`: run FILE's entry in the
 * reference interpreter under the step debugger (src/eval/debug.c), reading debugger commands
 * from stdin (a terminal: with a prompt and line editing; otherwise a script, no prompt). The
 * program stops first at its first line. Exit status: 0 when the program finished or the user
 * quit, 1 on a load, input or runtime error, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "eval/debug.h"
#include "repl.h"
#include "rly/rly.h"

static int debug_usage(FILE *f) {
    fputs("usage: rly debug FILE [--entry NAME] [--input NAME=path.npy ...] [--inputs in.npz]\n"
          "                 [--fill random|zeros|ones] [--seed N] [--prelude]\n"
          "\n"
          "Run FILE's @main (or NAME) in the reference interpreter under a step debugger that\n"
          "reads commands from stdin: break LINE | break @global, delete N, step, next, finish,\n"
          "continue, print %x, backtrace, list, info breakpoints, help, quit. The program stops\n"
          "at its first line. Without a terminal there is no prompt, so a script can drive it.\n"
          "\n"
          "example:\n"
          "  printf 'break @fact\\ncontinue\\nbacktrace\\nquit\\n' | rly debug fact.rly\n",
          f);
    return f == stdout ? 0 : 2;
}

/* The source file breakpoint lines refer to: the entry's, else the module's last definition's
 * (after the prelude's), else the bare expression's. */
static uint32_t program_file(const Module *m, const char *entry) {
    FuncDef *d = ir_module_lookup(m, entry, strlen(entry));
    if (d && d->func) return d->func->base.span.file ? d->func->base.span.file : d->span.file;
    if (m->is_expr && m->expr) return m->expr->span.file;
    return m->funcs.len ? vec_last(&m->funcs).span.file : 0;
}

int cmd_debug(int argc, char **argv) {
    const char *in = NULL;
    rly_run_options o = {.engine = RLY_ENGINE_INTERP};
    const char *names[256], *paths[256];
    int prelude = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return debug_usage(stdout);
        if (!strcmp(a, "--prelude")) {
            prelude = 1;
        } else if (!strcmp(a, "--entry") && has) {
            o.entry = argv[++i];
        } else if (!strcmp(a, "--inputs") && has) {
            o.inputs_npz = argv[++i];
        } else if (!strcmp(a, "--seed") && has) {
            o.seed = (unsigned)strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--input") && has) {
            char *eq = strchr(argv[++i], '=');
            if (eq == NULL || eq == argv[i] || eq[1] == '\0') {
                fprintf(stderr, "rly: error: debug: --input wants NAME=path.npy, got '%s'\n",
                        argv[i]);
                return 2;
            }
            if (o.n_inputs == 256) {
                fputs("rly: error: debug: at most 256 --input options\n", stderr);
                return 2;
            }
            *eq = '\0';
            names[o.n_inputs] = argv[i];
            paths[o.n_inputs++] = eq + 1;
        } else if (!strcmp(a, "--fill") && has) {
            const char *m = argv[++i];
            if (!strcmp(m, "random"))
                o.fill = RLY_FILL_RANDOM;
            else if (!strcmp(m, "zeros"))
                o.fill = RLY_FILL_ZEROS;
            else if (!strcmp(m, "ones"))
                o.fill = RLY_FILL_ONES;
            else {
                fprintf(stderr, "rly: error: debug: --fill takes random, zeros or ones, not '%s'\n",
                        m);
                return 2;
            }
        } else if (in == NULL && (a[0] != '-' || !strcmp(a, "-"))) {
            in = a;
        } else {
            fprintf(stderr, "rly: error: debug: unexpected argument '%s'\n", a);
            return debug_usage(stderr);
        }
    }
    if (in == NULL) {
        fputs("rly: error: debug: missing FILE\n", stderr);
        return debug_usage(stderr);
    }
    if (!strcmp(in, "-")) {
        fputs("rly: error: debug: the program must come from a file: stdin carries the "
              "debugger's commands\n",
              stderr);
        return 2;
    }
    o.input_names = names;
    o.input_paths = paths;
    rly_ctx *ctx = NULL;
    rly_module *mod = NULL;
    int rc = 1;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) {
        repl_print_error(rly_last_error());
        return 1;
    }
    rly_status st = prelude ? rly_module_prelude(ctx, &mod) : RLY_STATUS_OK;
    if (st == RLY_STATUS_OK)
        st = prelude ? rly_module_parse_file_into(mod, in) : rly_module_parse_file(ctx, in, &mod);
    if (st != RLY_STATUS_OK) {
        repl_print_error(rly_last_error());
        rly_ctx_free(ctx);
        return 1;
    }
    CliReader reader;
    cli_reader_init(&reader, stdin, ".rly_debug_history");
    EvDebugger *dbg = ev_debugger_new(mod, program_file(mod, o.entry ? o.entry : "main"),
                                      cli_read_line, &reader, stdout, stderr);
    ev_observe_new(ev_debugger_observer(dbg)); /* rly_module_run's interpreter gets it */
    char *text = NULL;
    st = rly_module_run(mod, &o, &text);
    ev_observe_new(NULL);
    if (st == RLY_STATUS_OK) {
        printf("Program finished: %s", text);
        rc = fflush(stdout) == 0 ? 0 : 1;
    } else if (ev_debugger_quit(dbg)) {
        rc = 0; /* the user stopped it */
    } else {
        repl_print_error(rly_last_error());
    }
    rly_free(text);
    ev_debugger_free(dbg);
    cli_reader_close(&reader);
    rly_ctx_free(ctx);
    return rc;
}
