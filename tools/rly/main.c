/* main.c - the `rly` command-line tool. Each subcommand is a function over the public API;
 * errors print a located diagnostic on stderr and exit with status 1 (2 for usage errors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rly/rly.h"
#include "demo_rly.h" /* generated from examples/demo.rly: const char rly_demo_text[] */

static int usage(FILE *f) {
    fputs(
        "usage: rly <command> [args]\n"
        "\n"
        "commands:\n"
        "  print FILE|- [-o OUT]   parse a module or expression, check it, print canonical text\n"
        "                          (-o writes OUT, plus OUT's .npz side file of tensor constants)\n"
        "  check FILE|- [--prelude]\n"
        "                          infer and check types; print the module with /*ty=...*/ types,\n"
        "                          or every type error (exit status 1). --prelude makes the\n"
        "                          standard library (List, Option, Tree, map, foldl, ...) visible\n"
        "  run FILE [--entry NAME] [--input NAME=path.npy ...] [--inputs in.npz]\n"
        "      [--output out.npz] [--fill random|zeros|ones] [--seed N] [--prelude]\n"
        "                          type-check FILE and run its @main (or NAME) in the reference\n"
        "                          interpreter; print the result, or write it to out.npz as\n"
        "                          output_0, output_1, ... (tuples flattened depth-first).\n"
        "                          Parameters not given by a file are an error, or generated\n"
        "                          with --fill\n"
        "  ops [NAME]              list the operator table (or one operator): arguments, fusion\n"
        "                          pattern, doc, attributes with types and defaults\n"
        "  demo                    run the bundled example model (a small CNN with built-in\n"
        "                          random weights and input) and print its result\n"
        "  version                 print the version\n",
        f);
    return f == stdout ? 0 : 2;
}

static int report(const char *what) {
    fprintf(stderr, "%s%s%s\n", what ? what : "", what ? ": " : "", rly_last_error());
    return 1;
}

/* Parse (from a file or from text), check well-formedness, then print or save. */
static int print_module(rly_ctx *ctx, rly_module *mod, const char *out_path) {
    if (rly_module_check_well_formed(mod) != RLY_STATUS_OK) return report(NULL);
    if (out_path) {
        if (rly_module_save(mod, out_path) != RLY_STATUS_OK) return report(NULL);
        return 0;
    }
    char *text = NULL;
    if (rly_module_print(mod, &text) != RLY_STATUS_OK) return report(NULL);
    fputs(text, stdout);
    if (strstr(text, "meta[relay.Constant]") != NULL)
        fputs("// tensor constants are not shown here: use -o FILE to write them to a side file\n",
              stdout);
    rly_free(text);
    (void)ctx;
    return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_print(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (in == NULL && (argv[i][0] != '-' || strcmp(argv[i], "-") == 0))
            in = argv[i];
        else {
            fprintf(stderr, "rly print: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (in == NULL) {
        fputs("rly print: missing FILE (use - for standard input)\n", stderr);
        return 2;
    }
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report("rly");
    rly_module *mod;
    int rc = rly_module_parse_file(ctx, in, &mod) == RLY_STATUS_OK ? print_module(ctx, mod, out)
                                                                   : report(NULL);
    rly_ctx_free(ctx);
    return rc;
}

/* Infer types, then print the module with them (or report every type error). */
static int check_and_print(rly_module *mod) {
    char *text = NULL;
    if (rly_module_infer(mod) != RLY_STATUS_OK ||
        rly_module_print_typed(mod, &text) != RLY_STATUS_OK)
        return report(NULL);
    fputs(text, stdout);
    rly_free(text);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_check(int argc, char **argv) {
    const char *in = NULL;
    int prelude = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--prelude") == 0)
            prelude = 1;
        else if (in == NULL && (argv[i][0] != '-' || strcmp(argv[i], "-") == 0))
            in = argv[i];
        else {
            fprintf(stderr, "rly check: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (in == NULL) {
        fputs("rly check: missing FILE (use - for standard input)\n", stderr);
        return 2;
    }
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report("rly");
    rly_module *mod = NULL;
    int rc = 0;
    if (prelude) {
        if (rly_module_prelude(ctx, &mod) != RLY_STATUS_OK ||
            rly_module_parse_file_into(mod, in) != RLY_STATUS_OK)
            rc = report(NULL);
    } else if (rly_module_parse_file(ctx, in, &mod) != RLY_STATUS_OK) {
        rc = report(NULL);
    }
    if (rc == 0) rc = check_and_print(mod);
    rly_ctx_free(ctx);
    return rc;
}

/* Parse FILE, into the prelude when asked. */
static int load(rly_ctx *ctx, const char *in, int prelude, rly_module **mod) {
    if (prelude) {
        if (rly_module_prelude(ctx, mod) != RLY_STATUS_OK ||
            rly_module_parse_file_into(*mod, in) != RLY_STATUS_OK)
            return report(NULL);
    } else if (rly_module_parse_file(ctx, in, mod) != RLY_STATUS_OK) {
        return report(NULL);
    }
    return 0;
}

static int cmd_run(int argc, char **argv) {
    const char *in = NULL;
    int prelude = 0;
    rly_run_options o = {0};
    const char *names[256], *paths[256];
    o.input_names = names;
    o.input_paths = paths;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (strcmp(a, "--prelude") == 0) {
            prelude = 1;
        } else if (strcmp(a, "--entry") == 0 && has) {
            o.entry = argv[++i];
        } else if (strcmp(a, "--inputs") == 0 && has) {
            o.inputs_npz = argv[++i];
        } else if (strcmp(a, "--output") == 0 && has) {
            o.output_npz = argv[++i];
        } else if (strcmp(a, "--seed") == 0 && has) {
            o.seed = (unsigned)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(a, "--input") == 0 && has) {
            char *eq = strchr(argv[++i], '=');
            if (eq == NULL || eq == argv[i] || eq[1] == '\0') {
                fprintf(stderr, "rly run: --input wants NAME=path.npy, got '%s'\n", argv[i]);
                return 2;
            }
            if (o.n_inputs == 256) {
                fputs("rly run: at most 256 --input options\n", stderr);
                return 2;
            }
            *eq = '\0';
            names[o.n_inputs] = argv[i];
            paths[o.n_inputs++] = eq + 1;
        } else if (strcmp(a, "--fill") == 0 && has) {
            const char *m = argv[++i];
            if (strcmp(m, "random") == 0)
                o.fill = RLY_FILL_RANDOM;
            else if (strcmp(m, "zeros") == 0)
                o.fill = RLY_FILL_ZEROS;
            else if (strcmp(m, "ones") == 0)
                o.fill = RLY_FILL_ONES;
            else {
                fprintf(stderr, "rly run: --fill takes random, zeros or ones, not '%s'\n", m);
                return 2;
            }
        } else if (in == NULL && (a[0] != '-' || strcmp(a, "-") == 0)) {
            in = a;
        } else {
            fprintf(stderr, "rly run: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (in == NULL) {
        fputs("rly run: missing FILE (use - for standard input)\n", stderr);
        return 2;
    }
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report("rly");
    rly_module *mod = NULL;
    int rc = load(ctx, in, prelude, &mod);
    if (rc == 0) {
        char *text = NULL;
        if (rly_module_run(mod, &o, &text) != RLY_STATUS_OK)
            rc = report(NULL);
        else if (text) {
            fputs(text, stdout);
            rly_free(text);
            rc = fflush(stdout) == 0 ? 0 : 1;
        }
    }
    rly_ctx_free(ctx);
    return rc;
}

static int cmd_ops(int argc, char **argv) {
    if (argc > 1) {
        fputs("rly ops: at most one operator name\n", stderr);
        return 2;
    }
    char *text = NULL;
    if (rly_ops_describe(argc ? argv[0] : NULL, &text) != RLY_STATUS_OK) return report(NULL);
    fputs(text, stdout);
    rly_free(text);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_demo(void) {
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report("rly");
    rly_module *mod;
    int rc = 0;
    if (rly_module_parse(ctx, rly_demo_text, strlen(rly_demo_text), "examples/demo.rly", &mod) !=
        RLY_STATUS_OK) {
        rc = report(NULL);
    } else {
        rly_run_options o = {.fill = RLY_FILL_RANDOM, .seed = 0};
        char *text = NULL;
        if (rly_module_run(mod, &o, &text) != RLY_STATUS_OK) {
            rc = report(NULL);
        } else {
            printf("// examples/demo.rly: a small CNN (conv-relu-pool, conv-relu, global pool, "
                   "dense, softmax)\n// run by the reference interpreter on generated weights "
                   "and input (seed 0).\n// result: (class probabilities, argmax class, the "
                   "probabilities mapped over a List, a counter closure's second call)\n");
            fputs(text, stdout);
            rly_free(text);
            rc = fflush(stdout) == 0 ? 0 : 1;
        }
    }
    rly_ctx_free(ctx);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage(stderr);
    const char *cmd = argv[1];
    if (strcmp(cmd, "print") == 0) return cmd_print(argc - 2, argv + 2);
    if (strcmp(cmd, "check") == 0) return cmd_check(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "ops") == 0) return cmd_ops(argc - 2, argv + 2);
    if (strcmp(cmd, "demo") == 0) return cmd_demo();
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("rly %s\n", rly_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        return usage(stdout);
    fprintf(stderr, "rly: unknown command '%s'\n", cmd);
    return usage(stderr);
}
