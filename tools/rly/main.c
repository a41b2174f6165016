/* main.c - the `rly` command-line tool. Each subcommand is a function over the public API;
 * errors print a located diagnostic (FILE:LINE:COL: error: ...) or an `rly: error: ...` line on
 * stderr and exit with status 1 (2 for usage errors). The help of every command is in help.c;
 * `rly CMD --help` is answered here before CMD runs. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rly/rly.h"
#include "cmds.h"
#include "demo_rly.h" /* generated from examples/demo.rly: const char rly_demo_text[] */

#define RLY_CLI_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* The files the current command reads, so report() knows a message that starts with one of
 * them ("model.onnx: node #3 ...") is located. */
static const char *g_files[2];

static void note_file(const char *path) {
    if (g_files[0] == NULL || strcmp(g_files[0], path) == 0)
        g_files[0] = path;
    else
        g_files[1] = path;
}

/* The length of the location msg starts with ("PATH:LINE:COL" or one of g_files), or 0. */
static size_t location_len(const char *msg) {
    const char *sep = strstr(msg, ": ");
    if (sep == NULL || sep == msg || memchr(msg, '\n', (size_t)(sep - msg))) return 0;
    size_t n = (size_t)(sep - msg);
    for (int i = 0; i < 2; i++)
        if (g_files[i] && strncmp(msg, g_files[i], strlen(g_files[i])) == 0 &&
            (msg[strlen(g_files[i])] == ':'))
            return n;
    /* PATH:LINE:COL with no space in PATH */
    const char *c2 = sep - 1;
    int colons = 0;
    for (const char *q = msg; q < sep; q++) {
        if (*q == ' ') return 0;
        colons += *q == ':';
    }
    while (c2 > msg && *c2 >= '0' && *c2 <= '9')
        c2--;
    return colons >= 2 && *c2 == ':' && c2 < sep - 1 ? n : 0;
}

/* Print the library's last error: its first line starts with its location (LOC: error: ...)
 * or with "rly: error:" (then `what`, when given, says what failed). Gives 1, the failure exit
 * status. */
static int report(const char *what) {
    const char *msg = rly_last_error();
    size_t loc = location_len(msg);
    if (loc) {
        const char *rest = msg + loc + 2;
        bool leveled = strncmp(rest, "error: ", 7) == 0 || strncmp(rest, "warning: ", 9) == 0 ||
                       strncmp(rest, "note: ", 6) == 0;
        fprintf(stderr, "%.*s: %s%s\n", (int)loc, msg, leveled ? "" : "error: ", rest);
    } else {
        if (strncmp(msg, "error: ", 7) == 0) msg += 7;
        fprintf(stderr, "rly: error: %s%s%s\n", what ? what : "", what ? ": " : "", msg);
    }
    return 1;
}

/* A usage error of command cmd: "rly: error: CMD: message"; gives 2. */
static int usage_error(const char *cmd, const char *fmt, ...) RLY_CLI_PRINTF(2, 3);
static int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rly: error: %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
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

/* The FILE argument of `rly CMD`: takes a (a path or "-") into *in when it is the first such
 * argument; otherwise reports it as unexpected and gives 2 (the usage exit status). */
static int file_arg(const char *cmd, const char *a, const char **in) {
    if (*in == NULL && (a[0] != '-' || strcmp(a, "-") == 0)) {
        *in = a;
        note_file(a);
        return 0;
    }
    return cli_bad_argument(cmd, a);
}

/* 0 when FILE was given; otherwise reports it and gives 2. */
static int need_file(const char *cmd, const char *in) {
    if (in) return 0;
    return usage_error(cmd, "missing FILE (use - for standard input; see rly %s --help)", cmd);
}

static int load(rly_ctx *ctx, const char *in, int prelude, rly_module **mod);

static int cmd_print(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (file_arg("print", argv[i], &in))
            return 2;
    }
    if (need_file("print", in)) return 2;
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
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
        else if (file_arg("check", argv[i], &in))
            return 2;
    }
    if (need_file("check", in)) return 2;
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
    rly_module *mod = NULL;
    int rc = load(ctx, in, prelude, &mod);
    if (rc == 0) rc = check_and_print(mod);
    rly_ctx_free(ctx);
    return rc;
}

/* Parse FILE, into the prelude when asked. */
static int is_onnx(const char *path) {
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".onnx") == 0;
}

static const char *g_input_shapes; /* --input-shapes for .onnx files */

static int is_rlyx(const char *path) {
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".rlyx") == 0;
}

/* --engine vm|interp into *out; false after reporting a bad value. */
static bool parse_engine(const char *cmd, const char *v, rly_engine *out) {
    if (strcmp(v, "vm") == 0)
        *out = RLY_ENGINE_VM;
    else if (strcmp(v, "interp") == 0)
        *out = RLY_ENGINE_INTERP;
    else if (strcmp(v, "rlyx") == 0 && strcmp(cmd, "test") == 0)
        *out = RLY_ENGINE_RLYX;
    else {
        fprintf(stderr, "rly: error: %s: --engine takes vm%s or interp, not '%s'\n", cmd,
                strcmp(cmd, "test") == 0 ? ", rlyx" : "", v);
        return false;
    }
    return true;
}

/* true when FILE parses into the prelude (so a failure without --prelude is one it fixes). */
static bool parses_with_prelude(const char *in) {
    rly_ctx *ctx;
    rly_module *mod;
    if (strcmp(in, "-") == 0 || rly_ctx_new(&ctx) != RLY_STATUS_OK) return false;
    bool ok = rly_module_prelude(ctx, &mod) == RLY_STATUS_OK &&
              rly_module_parse_file_into(mod, in) == RLY_STATUS_OK;
    rly_ctx_free(ctx);
    return ok;
}

/* report() an error from running or differentiating FILE, and when an option fixes it, say
 * which on a "rly: help:" line. */
static int report_with_hint(const char *in) {
    bool unknown_dims = strstr(rly_last_error(), "unknown dimensions") != NULL;
    bool needs_static = strstr(rly_last_error(), "needs a static shape") != NULL;
    bool missing_input = strncmp(rly_last_error(), "missing input ", 14) == 0;
    report(NULL);
    if (missing_input)
        fputs("rly: help: give inputs with --input NAME=x.npy or --inputs in.npz, or generate "
              "them with --fill random|zeros|ones\n",
              stderr);
    if ((unknown_dims || needs_static) && is_onnx(in))
        fputs("rly: help: --input-shapes 'NAME:[d0,d1,...] ...' gives the model's inputs with "
              "unknown (?) dims concrete shapes\n",
              stderr);
    else if (unknown_dims)
        fputs("rly: help: --fill cannot choose a size for a ? dim: give that input from a file "
              "(--input NAME=x.npy or --inputs in.npz), or write its size in the parameter's "
              "type\n",
              stderr);
    else if (needs_static)
        fputs("rly: help: write the sizes of the ? dims in the parameters' types\n", stderr);
    return 1;
}

static int load(rly_ctx *ctx, const char *in, int prelude, rly_module **mod) {
    note_file(in);
    if (is_onnx(in)) {
        if (rly_module_import_onnx(ctx, in, g_input_shapes, mod) != RLY_STATUS_OK)
            return report(NULL);
    } else if (prelude) {
        if (rly_module_prelude(ctx, mod) != RLY_STATUS_OK ||
            rly_module_parse_file_into(*mod, in) != RLY_STATUS_OK)
            return report(NULL);
    } else if (rly_module_parse_file(ctx, in, mod) != RLY_STATUS_OK) {
        report(NULL);
        if (parses_with_prelude(in))
            fputs("rly: help: add --prelude to use the standard library (List, Option, Tree, "
                  "map, foldl, ...)\n",
                  stderr);
        return 1;
    }
    return 0;
}

/* "none", or a count with an optional K/M/G/T (powers of 1024) suffix when `sized`. */
static bool parse_limit(const char *s, bool sized, uint64_t *out) {
    if (strcmp(s, "none") == 0) {
        *out = RLY_NO_LIMIT;
        return true;
    }
    if (*s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || v == 0) return false;
    unsigned shift = 0;
    if (sized && *end != '\0' && end[1] == '\0') {
        const char *units = "KMGT", *u = strchr(units, *end);
        if (u == NULL) return false;
        shift = 10u * (unsigned)(u - units + 1);
        end++;
    }
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift))) return false;
    *out = (uint64_t)v << shift;
    return true;
}

/* -O0..-O3, or -O N (then *i moves past N); -1 after reporting a bad level. */
static int parse_opt_level(const char *a, const char *next, int *i) {
    const char *lv = a[2] ? a + 2 : next;
    if (!a[2] && next) (*i)++;
    if (lv == NULL || lv[0] < '0' || lv[0] > '3' || lv[1] != '\0') {
        fprintf(stderr, "rly: error: -O takes a level 0, 1, 2 or 3, not '%s'\n", lv ? lv : "");
        return -1;
    }
    return lv[0] - '0';
}

/* The options `rly run` and `rly bench` share: one argument (or two, moving *i) into o;
 * 1 when a is not one of them, 2 after reporting a bad value. */
static int run_option(const char *cmd, int argc, char **argv, int *i_io, rly_run_options *o,
                      const char **names, const char **paths, int *prelude) {
    int i = *i_io, rc = 0;
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (strcmp(a, "--prelude") == 0) {
        *prelude = 1;
    } else if (strcmp(a, "--entry") == 0 && has) {
        o->entry = argv[++i];
    } else if (strcmp(a, "--input-shapes") == 0 && has) {
        g_input_shapes = argv[++i];
    } else if (strcmp(a, "--inputs") == 0 && has) {
        o->inputs_npz = argv[++i];
    } else if (strcmp(a, "--profile") == 0 && has) { /* diag: docs/tools.md "Profiles" */
        o->profile = argv[++i];
    } else if (strcmp(a, "--seed") == 0 && has) {
        o->seed = (unsigned)strtoul(argv[++i], NULL, 10);
    } else if (strncmp(a, "-O", 2) == 0) {
        int lvl = parse_opt_level(a, has ? argv[i + 1] : NULL, &i);
        if (lvl < 0) return 2;
        o->opt_level = lvl;
    } else if (strcmp(a, "--input") == 0 && has) {
        char *eq = strchr(argv[++i], '=');
        if (eq == NULL || eq == argv[i] || eq[1] == '\0') {
            fprintf(stderr, "rly: error: %s: --input wants NAME=path.npy, got '%s'\n", cmd,
                    argv[i]);
            return 2;
        }
        if (o->n_inputs == 256) {
            fprintf(stderr, "rly: error: %s: at most 256 --input options\n", cmd);
            return 2;
        }
        *eq = '\0';
        names[o->n_inputs] = argv[i];
        paths[o->n_inputs++] = eq + 1;
    } else if (strcmp(a, "--fill") == 0 && has) {
        const char *m = argv[++i];
        if (strcmp(m, "random") == 0)
            o->fill = RLY_FILL_RANDOM;
        else if (strcmp(m, "zeros") == 0)
            o->fill = RLY_FILL_ZEROS;
        else if (strcmp(m, "ones") == 0)
            o->fill = RLY_FILL_ONES;
        else {
            fprintf(stderr, "rly: error: %s: --fill takes random, zeros or ones, not '%s'\n", cmd,
                    m);
            return 2;
        }
    } else {
        rc = 1;
    }
    *i_io = i;
    return rc;
}

/* A compiled executable takes no source-level options. */
static int rlyx_options_ok(const char *cmd, const rly_run_options *o, int prelude) {
    if (o->entry == NULL && o->opt_level == 0 && !prelude && g_input_shapes == NULL &&
        o->engine != RLY_ENGINE_INTERP)
        return 1;
    fprintf(
        stderr,
        "rly: error: %s: %s applies to source files; a .rlyx executable is compiled already (its "
        "entry and opt level were chosen by rly compile) and runs on the VM\n",
        cmd,
        o->entry         ? "--entry"
        : o->opt_level   ? "-O"
        : prelude        ? "--prelude"
        : g_input_shapes ? "--input-shapes"
                         : "--engine interp");
    return 0;
}

static int cmd_run(int argc, char **argv) {
    const char *in = NULL;
    int prelude = 0;
    rly_run_options o = {.opt_level = -1}; /* -1: not given */
    const char *names[256], *paths[256];
    o.input_names = names;
    o.input_paths = paths;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        int r = run_option("run", argc, argv, &i, &o, names, paths, &prelude);
        if (r == 2) return 2;
        if (r == 0) continue;
        if (strcmp(a, "--check-numerics") == 0) { /* diag: docs/tools.md "Numerics" */
            o.check_numerics = 1;
        } else if (strcmp(a, "--engine") == 0 && has) {
            if (!parse_engine("run", argv[++i], &o.engine)) return 2;
        } else if (strcmp(a, "--output") == 0 && has) {
            o.output_npz = argv[++i];
        } else if (strcmp(a, "--threads") == 0 && has) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end != '\0' || end == argv[i] || v < 0 || v > 1024) {
                fprintf(stderr,
                        "rly: error: run: --threads takes 0..1024 (0: the default), not '%s'\n",
                        argv[i]);
                return 2;
            }
            o.threads = (int)v;
        } else if ((strcmp(a, "--max-memory") == 0 || strcmp(a, "--max-depth") == 0) && has) {
            bool mem = a[6] == 'm';
            if (!parse_limit(argv[++i], mem, mem ? &o.max_memory : &o.max_depth)) {
                fprintf(stderr, "rly: error: run: %s takes %s or 'none', not '%s'\n", a,
                        mem ? "a byte count (with an optional K, M, G or T)" : "a positive count",
                        argv[i]);
                return 2;
            }
        } else if (strcmp(a, "--timeout") == 0 && has) {
            const char *t = argv[++i];
            char *end;
            double sec = strcmp(t, "none") == 0 ? 0 : strtod(t, &end);
            if (strcmp(t, "none") != 0 && (*end != '\0' || !(sec > 0) || sec > 1e9)) {
                fprintf(stderr,
                        "rly: error: run: --timeout takes seconds (> 0) or 'none', not '%s'\n", t);
                return 2;
            }
            o.timeout = sec;
        } else if (file_arg("run", a, &in)) {
            return 2;
        }
    }
    if (need_file("run", in)) return 2;
    char *profile_table = NULL; /* diag: the top operators of --profile, on stderr */
    o.profile_table = &profile_table;
    /* Sources run on the VM at -O3 by default; the interpreter (the oracle) runs them as
     * written (-O0) unless asked; an executable was optimized when compiled. */
    if (o.opt_level < 0) o.opt_level = is_rlyx(in) || o.engine == RLY_ENGINE_INTERP ? 0 : 3;
    if (is_rlyx(in)) {
        if (!rlyx_options_ok("run", &o, prelude)) return 2;
        rly_executable *exe = NULL;
        char *text = NULL;
        int rc = 0;
        if (rly_executable_load(in, &exe) != RLY_STATUS_OK ||
            rly_executable_run(exe, &o, &text) != RLY_STATUS_OK)
            rc = report_with_hint(in);
        else if (text) {
            fputs(text, stdout);
            rc = fflush(stdout) == 0 ? 0 : 1;
        }
        if (profile_table) fputs(profile_table, stderr); /* diag */
        rly_free(profile_table);
        rly_free(text);
        rly_executable_free(exe);
        return rc;
    }
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
    rly_module *mod = NULL;
    int rc = load(ctx, in, prelude, &mod);
    if (rc == 0) {
        char *text = NULL;
        cli_busy_start(o.engine == RLY_ENGINE_INTERP ? "running" : "compiling and running");
        rly_status st = rly_module_run(mod, &o, &text);
        cli_busy_end();
        if (st != RLY_STATUS_OK)
            rc = report_with_hint(in);
        else if (text) {
            fputs(text, stdout);
            rc = fflush(stdout) == 0 ? 0 : 1;
        }
        rly_free(text); /* also after a failure that left a result (a --profile write error) */
        if (profile_table) fputs(profile_table, stderr); /* diag */
        rly_free(profile_table);
    }
    rly_ctx_free(ctx);
    return rc;
}

static int cmd_compile(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *entry = NULL;
    int prelude = 0, opt_level = 3, what = 0;
    unsigned save_flags = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (strcmp(a, "--prelude") == 0) {
            prelude = 1;
        } else if (strcmp(a, "--no-prepack") == 0) {
            save_flags |= RLY_SAVE_NO_PREPACK;
        } else if (strcmp(a, "--entry") == 0 && has) {
            entry = argv[++i];
        } else if (strcmp(a, "--input-shapes") == 0 && has) {
            g_input_shapes = argv[++i];
        } else if (strcmp(a, "-o") == 0 && has) {
            out = argv[++i];
        } else if (strcmp(a, "--stats") == 0) {
            what |= RLY_DESCRIBE_STATS;
        } else if (strcmp(a, "--disasm") == 0) {
            what |= RLY_DESCRIBE_DISASM;
        } else if (strncmp(a, "-O", 2) == 0) {
            if ((opt_level = parse_opt_level(a, has ? argv[i + 1] : NULL, &i)) < 0) return 2;
        } else if (file_arg("compile", a, &in)) {
            return 2;
        }
    }
    if (need_file("compile", in)) return 2;
    if (out == NULL && what == 0) {
        fputs(
            "rly: error: compile: missing -o OUT.rlyx (or --stats, --disasm to only describe it)\n",
            stderr);
        return 2;
    }
    rly_ctx *ctx = NULL;
    rly_executable *exe = NULL;
    int rc = 0;
    if (is_rlyx(in)) { /* describe (or copy) an executable */
        if (entry || prelude || g_input_shapes) {
            fputs("rly: error: compile: a .rlyx executable is compiled already\n", stderr);
            return 2;
        }
        if (rly_executable_load(in, &exe) != RLY_STATUS_OK) rc = report(NULL);
    } else {
        if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
        rly_module *mod = NULL;
        rc = load(ctx, in, prelude, &mod);
        if (rc == 0) {
            cli_busy_start("compiling");
            rly_status st = rly_module_compile(mod, opt_level, entry, &exe);
            cli_busy_end();
            if (st != RLY_STATUS_OK) rc = report(NULL);
        }
    }
    if (rc == 0 && out && rly_executable_save_with(exe, out, save_flags) != RLY_STATUS_OK)
        rc = report(NULL);
    if (rc == 0 && what) {
        char *text = NULL;
        if (rly_executable_describe(exe, what, &text) != RLY_STATUS_OK) {
            rc = report(NULL);
        } else {
            fputs(text, stdout);
            rly_free(text);
            rc = fflush(stdout) == 0 ? 0 : 1;
        }
    }
    rly_executable_free(exe);
    rly_ctx_free(ctx);
    return rc;
}

/* ---- rly bench ------------------------------------------------------------------------------ */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A duration with a unit that keeps 3-4 significant digits. */
static const char *fmt_time(double s, char *buf, size_t cap) {
    /* the unit after rounding to 3 digits: 999.6 us is "1 ms", not "1e+03 us" */
    if (s < 0.9995e-6)
        snprintf(buf, cap, "%.0f ns", s * 1e9);
    else if (s < 0.9995e-3)
        snprintf(buf, cap, "%.3g us", s * 1e6);
    else if (s < 0.9995)
        snprintf(buf, cap, "%.3g ms", s * 1e3);
    else
        snprintf(buf, cap, "%.3g s", s);
    return buf;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A whole count >= lo, or -1. */
static long parse_count(const char *s, long lo) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && v >= lo && v <= 100000000 ? v : -1;
}

static int cmd_bench(int argc, char **argv) {
    const char *in = NULL;
    int prelude = 0;
    rly_run_options o = {.opt_level = -1}; /* -1: not given (-O3 for sources) */
    const char *names[256], *paths[256];
    o.input_names = names;
    o.input_paths = paths;
    long threads = 0, warmup = 1, repeat = 0;
    double min_time = 0;
    bool quiet = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        int r = run_option("bench", argc, argv, &i, &o, names, paths, &prelude);
        if (r == 2) return 2;
        if (r == 0) continue;
        if ((strcmp(a, "--threads") == 0 || strcmp(a, "--warmup") == 0 ||
             strcmp(a, "--repeat") == 0) &&
            has) {
            long lo = a[2] == 'w' ? 0 : 1, v = parse_count(argv[++i], lo);
            if (v < 0) {
                fprintf(stderr, "rly: error: bench: %s takes a count >= %ld, not '%s'\n", a, lo,
                        argv[i]);
                return 2;
            }
            *(a[2] == 't' ? &threads : a[2] == 'w' ? &warmup : &repeat) = v;
        } else if (strcmp(a, "--min-time") == 0 && has) {
            char *end;
            min_time = strtod(argv[++i], &end);
            if (*end != '\0' || !(min_time > 0) || min_time > 1e6) {
                fprintf(stderr, "rly: error: bench: --min-time takes seconds (> 0), not '%s'\n",
                        argv[i]);
                return 2;
            }
        } else if (strcmp(a, "-q") == 0) {
            quiet = true;
        } else if (file_arg("bench", a, &in)) {
            return 2;
        }
    }
    if (need_file("bench", in)) return 2;
    if (repeat && min_time > 0) {
        fputs("rly: error: bench: --repeat and --min-time exclude each other\n", stderr);
        return 2;
    }
    if (min_time == 0) min_time = 1.0;
    rly_ctx *ctx = NULL;
    rly_executable *exe = NULL;
    rly_session *sess = NULL;
    double *times = NULL;
    char b1[32], b2[32], b3[32], b4[32];
    int rc = 0;
    double t0 = now_seconds();
    if (is_rlyx(in)) {
        if (o.opt_level < 0) o.opt_level = 0;
        if (!rlyx_options_ok("bench", &o, prelude)) return 2;
        if (rly_executable_load(in, &exe) != RLY_STATUS_OK) return report(NULL);
        printf("%s: load %s\n", in, fmt_time(now_seconds() - t0, b1, sizeof b1));
    } else {
        int level = o.opt_level < 0 ? 3 : o.opt_level;
        if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
        rly_module *mod = NULL;
        rc = load(ctx, in, prelude, &mod);
        if (rc == 0) {
            if (!quiet) cli_busy_start("compiling");
            rly_status st = rly_module_compile(mod, level, o.entry, &exe);
            cli_busy_end();
            if (st != RLY_STATUS_OK) rc = report(NULL);
        }
        if (rc == 0)
            printf("%s: parse and compile (-O%d) %s\n", in, level,
                   fmt_time(now_seconds() - t0, b1, sizeof b1));
    }
    o.entry = NULL;
    rly_session_options so = {.threads = (int)threads};
    if (rc == 0 && (rly_session_new(exe, &so, &sess) != RLY_STATUS_OK ||
                    rly_session_bind_inputs(sess, &o) != RLY_STATUS_OK))
        rc = report_with_hint(in);
    for (long k = 0; rc == 0 && k < warmup; k++)
        if (rly_session_run(sess) != RLY_STATUS_OK) rc = report("warmup run");
    if (rc == 0 && o.profile && rly_session_set_probes(sess, RLY_PROBE_PROFILE) != RLY_STATUS_OK)
        rc = report(NULL); /* diag: the timed runs are profiled */
    size_t n = 0, cap = 0;
    double start = now_seconds();
    CliProgress bar;
    cli_progress_start(&bar, "bench", quiet);
    fflush(stdout); /* the compile line before the bar */
    while (rc == 0 && (repeat ? n < (size_t)repeat
                              : (n < 10 || now_seconds() - start < min_time) && n < 100000000)) {
        if (bar.on) {
            char note[48];
            snprintf(note, sizeof note, "%zu runs", n);
            double by_time = (now_seconds() - start) / min_time, by_count = (double)n / 10;
            cli_progress_update(&bar,
                                repeat ? (double)n / (double)repeat
                                       : (by_time < by_count ? by_time : by_count),
                                note);
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            double *grown = realloc(times, cap * sizeof *times);
            if (grown == NULL) {
                cli_progress_clear(&bar);
                fputs("rly: error: bench: out of memory\n", stderr);
                rc = 1;
                break;
            }
            times = grown;
        }
        double a = now_seconds();
        if (rly_session_run(sess) != RLY_STATUS_OK) {
            cli_progress_clear(&bar);
            rc = report("run");
            break;
        }
        times[n++] = now_seconds() - a;
    }
    cli_progress_end(&bar);
    if (rc == 0) {
        qsort(times, n, sizeof *times, by_value);
        double sum = 0;
        for (size_t k = 0; k < n; k++)
            sum += times[k];
        double median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
        size_t p90 = (size_t)((double)n * 0.9 + 0.999999);
        printf("runs: %zu timed after %ld warmup; threads: %d\n", n, warmup,
               rly_session_threads(sess));
        printf("per run: min %s, median %s, p90 %s, mean %s\n", fmt_time(times[0], b1, sizeof b1),
               fmt_time(median, b2, sizeof b2), fmt_time(times[p90 ? p90 - 1 : 0], b3, sizeof b3),
               fmt_time(sum / (double)n, b4, sizeof b4));
        rc = fflush(stdout) == 0 ? 0 : 1;
    }
    if (rc == 0 && o.profile) { /* diag: the trace, and the top operators on stderr */
        char *table = NULL;
        if (rly_session_write_profile(sess, o.profile, 20, &table) != RLY_STATUS_OK)
            rc = report(NULL);
        if (table) fputs(table, stderr);
        rly_free(table);
    }
    free(times);
    rly_session_free(sess);
    rly_executable_free(exe);
    rly_ctx_free(ctx);
    return rc;
}

static int cmd_grad(int argc, char **argv) {
    const char *in = NULL, *entry = "main", *mode = "higher", *out = NULL, *name = "main";
    int prelude = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (strcmp(a, "--prelude") == 0) {
            prelude = 1;
        } else if (strcmp(a, "--entry") == 0 && has) {
            entry = argv[++i];
        } else if (strcmp(a, "--name") == 0 && has) {
            name = argv[++i];
        } else if (strcmp(a, "--mode") == 0 && has) {
            mode = argv[++i];
            if (strcmp(mode, "higher") != 0 && strcmp(mode, "first") != 0) {
                fprintf(stderr, "rly: error: grad: --mode takes higher or first, not '%s'\n", mode);
                return 2;
            }
        } else if (strcmp(a, "--input-shapes") == 0 && has) {
            g_input_shapes = argv[++i];
        } else if (strcmp(a, "-o") == 0 && has) {
            out = argv[++i];
        } else if (file_arg("grad", a, &in)) {
            return 2;
        }
    }
    if (need_file("grad", in)) return 2;
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
    rly_module *mod = NULL;
    int rc = load(ctx, in, prelude, &mod);
    if (rc == 0) {
        if (rly_module_gradient(mod, entry, mode, name) != RLY_STATUS_OK)
            rc = report_with_hint(in);
        else
            rc = print_module(ctx, mod, out);
    }
    rly_ctx_free(ctx);
    return rc;
}

static int cmd_import(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *params = NULL; /* names: params, as_params */
    int as_params = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--input-shapes") == 0 && i + 1 < argc)
            g_input_shapes = argv[++i];
        /* names: --params-as-inputs [--params FILE] (weights as @main's parameters) */
        else if (strcmp(argv[i], "--params-as-inputs") == 0)
            as_params = 1;
        else if (strcmp(argv[i], "--params") == 0 && i + 1 < argc)
            params = argv[++i], as_params = 1;
        /* end names */
        else if (in == NULL && argv[i][0] != '-')
            note_file(in = argv[i]);
        else
            return cli_bad_argument("import", argv[i]);
    }
    if (in == NULL) {
        fputs("rly: error: import: missing MODEL.onnx\n", stderr);
        return 2;
    }
    /* names: the weights go to --params FILE, or OUT (less .rly) + .params.npz */
    char params_buf[4096];
    if (as_params && params == NULL && out != NULL) {
        size_t n = strlen(out);
        if (n > 4 && strcmp(out + n - 4, ".rly") == 0) n -= 4;
        snprintf(params_buf, sizeof params_buf, "%.*s.params.npz", (int)n, out);
        params = params_buf;
    }
    if (as_params && params == NULL) {
        fputs("rly: error: import: --params-as-inputs needs -o OUT or --params FILE\n", stderr);
        return 2;
    }
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
    rly_module *mod = NULL;
    int rc = 0;
    if ((as_params ? rly_module_import_onnx_params(ctx, in, g_input_shapes, params, &mod)
                   : rly_module_import_onnx(ctx, in, g_input_shapes, &mod)) != RLY_STATUS_OK)
        rc = report(NULL);
    else
        rc = print_module(ctx, mod, out);
    rly_ctx_free(ctx);
    return rc;
}

static int cmd_info(int argc, char **argv) {
    if (argc != 1) {
        fputs("rly: error: info: expected one MODEL.onnx\n", stderr);
        return 2;
    }
    if (argv[0][0] == '-') return cli_bad_argument("info", argv[0]);
    note_file(argv[0]);
    char *text = NULL;
    if (rly_onnx_info(argv[0], &text) != RLY_STATUS_OK) return report(NULL);
    fputs(text, stdout);
    rly_free(text);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* The exclusion file: lines "case_name  reason" ('#' comments). */
typedef struct Exclusion {
    char *name, *reason;
    int used;
} Exclusion;

static int read_exclusions(const char *path, Exclusion **out, int *n) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "rly: error: test: cannot open --exclude file '%s'\n", path);
        return 0;
    }
    char line[2048];
    int cap = 0, lineno = 0;
    *n = 0;
    *out = NULL;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\0') continue;
        char *e = p;
        while (*e && *e != ' ' && *e != '\t' && *e != '\n')
            e++;
        char *r = e;
        while (*r == ' ' || *r == '\t')
            r++;
        size_t rl = strcspn(r, "\n");
        if (rl == 0) {
            fprintf(stderr, "%s:%d: error: an excluded case needs a reason\n", path, lineno);
            fclose(f);
            return 0;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            *out = realloc(*out, (size_t)cap * sizeof **out);
        }
        Exclusion *x = &(*out)[(*n)++];
        x->name = strndup(p, (size_t)(e - p));
        x->reason = strndup(r, rl);
        x->used = 0;
    }
    fclose(f);
    return 1;
}

static void free_exclusions(Exclusion *ex, int n_ex) {
    for (int k = 0; k < n_ex; k++) {
        free(ex[k].name);
        free(ex[k].reason);
    }
    free(ex);
}

/* The case name of a test-case folder: its last path component. */
static void case_name(const char *dir, char *name, size_t cap) {
    snprintf(name, cap, "%s", dir);
    size_t nl = strlen(name);
    while (nl > 1 && name[nl - 1] == '/')
        name[--nl] = '\0';
    char *slash = strrchr(name, '/');
    if (slash) memmove(name, slash + 1, strlen(slash + 1) + 1);
}

static int cmd_test(int argc, char **argv) {
    Exclusion *ex = NULL;
    int n_ex = 0, passed = 0, failed = 0, skipped = 0, n_dirs = 0, opt_level = 0;
    int verbosity = 1; /* 0 (-q): failures and the summary; 1: also SKIP; 2 (-v): also PASS */
    const char *exclude = NULL;
    rly_engine engine = RLY_ENGINE_DEFAULT;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--exclude") == 0 && i + 1 < argc) {
            exclude = argv[++i];
        } else if (strcmp(a, "--engine") == 0 && i + 1 < argc) {
            if (!parse_engine("test", argv[++i], &engine)) return 2;
        } else if (strncmp(a, "-O", 2) == 0) {
            if ((opt_level = parse_opt_level(a, i + 1 < argc ? argv[i + 1] : NULL, &i)) < 0)
                return 2;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            verbosity = 0;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            verbosity = 2;
        } else if (a[0] == '-') {
            return cli_bad_argument("test", a);
        } else {
            argv[n_dirs++] = argv[i]; /* the folders, compacted in place */
        }
    }
    if (n_dirs == 0) {
        fputs("rly: error: test: no test-case folders given\n", stderr);
        return 2;
    }
    if (exclude && !read_exclusions(exclude, &ex, &n_ex)) {
        free_exclusions(ex, n_ex);
        return 2;
    }
    CliProgress bar;
    cli_progress_start(&bar, "test", false);
    for (int d = 0; d < n_dirs; d++) {
        const char *dir = argv[d];
        char name[512], note[64];
        case_name(dir, name, sizeof name);
        snprintf(note, sizeof note, "%d/%d, %d failed", d, n_dirs, failed);
        cli_progress_update(&bar, (double)d / n_dirs, note);
        int skip = -1;
        for (int k = 0; k < n_ex; k++)
            if (strcmp(ex[k].name, name) == 0) skip = k;
        if (skip >= 0) {
            ex[skip].used = 1;
            skipped++;
            if (verbosity >= 1) {
                cli_progress_clear(&bar);
                printf("SKIP %s: %s\n", name, ex[skip].reason);
            }
            continue;
        }
        int ok = 0;
        char *why = NULL;
        double t0 = cli_now();
        if (rly_onnx_test_case(dir, opt_level, engine, &ok, &why) != RLY_STATUS_OK) {
            cli_progress_clear(&bar);
            printf("FAIL %s: %s\n", name, rly_last_error());
            failed++;
        } else if (ok) {
            passed++;
            if (verbosity >= 2) {
                cli_progress_clear(&bar);
                printf("PASS %s (%.3f s)\n", name, cli_now() - t0);
            }
        } else {
            /* one line per failure: newlines in the reason become spaces */
            for (char *p = why; p && *p; p++)
                if (*p == '\n') *p = ' ';
            cli_progress_clear(&bar);
            printf("FAIL %s: %s\n", name, why ? why : "");
            failed++;
        }
        rly_free(why);
        fflush(stdout);
    }
    cli_progress_end(&bar);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    free_exclusions(ex, n_ex);
    return failed ? 1 : 0;
}

static int cmd_ops(int argc, char **argv) {
    if (argc > 1) {
        fputs("rly: error: ops: at most one operator name\n", stderr);
        return 2;
    }
    if (argc == 1 && argv[0][0] == '-') return cli_bad_argument("ops", argv[0]);
    char *text = NULL;
    if (rly_ops_describe(argc ? argv[0] : NULL, &text) != RLY_STATUS_OK) return report(NULL);
    fputs(text, stdout);
    rly_free(text);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_demo(int argc, char **argv) {
    if (argc > 0) return cli_bad_argument("demo", argv[0]);
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
    rly_module *mod;
    int rc = 0;
    if (rly_module_parse(ctx, rly_demo_text, strlen(rly_demo_text), "examples/demo.rly", &mod) !=
        RLY_STATUS_OK) {
        rc = report(NULL);
    } else {
        rly_run_options o = {.fill = RLY_FILL_RANDOM, .seed = 0, .opt_level = 3};
        char *text = NULL;
        if (rly_module_run(mod, &o, &text) != RLY_STATUS_OK) {
            rc = report(NULL);
        } else {
            printf(
                "// examples/demo.rly: a small CNN (conv-relu-pool, conv-relu, global pool, "
                "dense, softmax)\n// optimized (-O3), compiled and run on the VM on generated "
                "weights and input (seed 0).\n// result: (class probabilities, argmax class, the "
                "probabilities mapped over a List, a counter closure's second call)\n");
            fputs(text, stdout);
            rly_free(text);
            rc = fflush(stdout) == 0 ? 0 : 1;
        }
    }
    rly_ctx_free(ctx);
    return rc;
}

static int cmd_opt(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    int prelude = 0;
    rly_opt_options o = {.opt_level = 3};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (strcmp(a, "--list") == 0) {
            char *text = NULL;
            if (rly_passes_describe(&text) != RLY_STATUS_OK) return report(NULL);
            fputs(text, stdout);
            rly_free(text);
            return fflush(stdout) == 0 ? 0 : 1;
        } else if (strncmp(a, "-O", 2) == 0) {
            if ((o.opt_level = parse_opt_level(a, has ? argv[i + 1] : NULL, &i)) < 0) return 2;
        } else if (strcmp(a, "--passes") == 0 && has) {
            o.passes = argv[++i];
        } else if (strcmp(a, "--required") == 0 && has) {
            o.required_passes = argv[++i];
        } else if (strcmp(a, "--disabled") == 0 && has) {
            o.disabled_passes = argv[++i];
        } else if (strcmp(a, "--print-ir-after") == 0 && has) {
            o.print_ir_after = argv[++i];
        } else if (strcmp(a, "--time-passes") == 0) {
            o.time_passes = 1;
        } else if (strcmp(a, "--verify") == 0) {
            o.verify_types = 1;
        } else if (strcmp(a, "--prelude") == 0) {
            prelude = 1;
        } else if (strcmp(a, "--input-shapes") == 0 && has) {
            g_input_shapes = argv[++i];
        } else if (strcmp(a, "-o") == 0 && has) {
            out = argv[++i];
        } else if (file_arg("opt", a, &in)) {
            return 2;
        }
    }
    if (need_file("opt", in)) return 2;
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
    rly_module *mod = NULL;
    int rc = load(ctx, in, prelude, &mod);
    if (rc == 0) {
        char *rep = NULL;
        rly_status st = rly_module_optimize(mod, &o, &rep);
        if (rep) {
            fputs(rep, stderr);
            rly_free(rep);
        }
        rc = st != RLY_STATUS_OK ? report(NULL) : print_module(ctx, mod, out);
    }
    rly_ctx_free(ctx);
    return rc;
}

static int cmd_equal(int argc, char **argv) {
    const char *files[2] = {NULL, NULL};
    int prelude = 0, n = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--prelude") == 0) {
            prelude = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_bad_argument("equal", argv[i]);
        } else if (n == 2) {
            fprintf(stderr,
                    "rly: error: equal: unexpected argument '%s' (two files are compared)\n",
                    argv[i]);
            return 2;
        } else {
            note_file(files[n++] = argv[i]);
        }
    }
    if (n < 2) {
        fputs("rly: error: equal: two files to compare are needed\n", stderr);
        return 2;
    }
    rly_ctx *ctx;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return report(NULL);
    rly_module *a = NULL, *b = NULL;
    int rc = load(ctx, files[0], prelude, &a);
    if (rc == 0) rc = load(ctx, files[1], prelude, &b);
    if (rc == 0) {
        int equal = 0;
        if (rly_module_compare(a, b, &equal) != RLY_STATUS_OK)
            rc = report(NULL);
        else if (!equal)
            rc = report(NULL);
    }
    rly_ctx_free(ctx);
    return rc;
}

/* The dispatch table: a command name and its function (help in help.c). */
typedef struct Command {
    const char *name;
    int (*run)(int argc, char **argv);
} Command;

static const Command k_commands[] = {
    {"print", cmd_print}, {"check", cmd_check}, {"run", cmd_run},       {"compile", cmd_compile},
    {"bench", cmd_bench}, {"ops", cmd_ops},     {"import", cmd_import}, {"grad", cmd_grad},
    {"opt", cmd_opt},     {"equal", cmd_equal}, {"info", cmd_info},     {"test", cmd_test},
    {"demo", cmd_demo},
/* ---- commands in their own files (tools/rly/cmds.h), built when the file exists ---- */
#ifdef RLY_HAVE_REPL
    {"repl", cmd_repl},
#endif
#ifdef RLY_HAVE_DEBUG
    {"debug", cmd_debug},
#endif
#ifdef RLY_HAVE_VIZ
    {"viz", cmd_viz},
#endif
};

int main(int argc, char **argv) {
    if (argc < 2) {
        cli_help_overview(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0))
            return cli_help_command("version", stdout) ? 0 : 1;
        if (argc > 2) return cli_bad_argument("version", argv[2]);
        printf("rly %s\n", rly_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc < 3) {
            cli_help_overview(stdout);
            return 0;
        }
        const char *topic = argv[2];
        if (strcmp(topic, "--help") == 0 || strcmp(topic, "-h") == 0) topic = "help";
        if (argc > 3) return cli_bad_argument("help", argv[3]);
        return cli_help_command(topic, stdout) ? 0 : cli_unknown_command(topic);
    }
    if (cmd[0] == '-') {
        const char *globals[] = {"--help", "--version", "-h"};
        const char *s = cli_closest(cmd, globals, 3);
        if (s)
            fprintf(stderr, "rly: error: unknown option '%s'; did you mean '%s'?\n", cmd, s);
        else
            fprintf(stderr,
                    "rly: error: unknown option '%s' (the first argument is a command: rly "
                    "--help lists them)\n",
                    cmd);
        return 2;
    }
    /* `rly CMD --help` (or -h) anywhere in CMD's arguments: its help, and nothing is run */
    for (int i = 2; i < argc; i++)
        if ((strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) &&
            cli_help_command(cmd, stdout))
            return 0;
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (strcmp(cmd, k_commands[i].name) == 0) return k_commands[i].run(argc - 2, argv + 2);
    if (cli_is_command(cmd)) {
        fprintf(stderr, "rly: error: '%s' is not built into this rly\n", cmd);
        return 2;
    }
    return cli_unknown_command(cmd);
}
