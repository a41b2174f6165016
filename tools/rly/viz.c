/* viz.c - `rly viz FILE|MODEL.onnx [-O N] [-o OUT]` (docs/tools.md "Graphs"): the dataflow graph
 * of a module (rly_module_draw) as DOT on stdout, or written to OUT: .dot (DOT), .html (a
 * self-contained page with pan and zoom) or .svg (DOT drawn by Graphviz's `dot`, when it is
 * installed). An output file is written whole or not at all (a temporary file, then a rename). */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmds.h"
#include "rly/rly.h"

extern char **environ;

static void viz_usage(FILE *f) {
    fputs("usage: rly viz FILE|MODEL.onnx [-O N] [-o out.dot|out.svg|out.html] [--prelude]\n"
          "               [--input-shapes 'name:[1,3,224,224] ...']\n"
          "Draw the dataflow graph: each function a cluster, fused groups (after -O1 and up) as\n"
          "nested clusters, the type of each value on its edge, if/match and calls of globals\n"
          "(dashed) visible. DOT on stdout by default; -o picks the format by extension: .dot,\n"
          ".svg (drawn by Graphviz's dot, which must be installed), .html (a self-contained page\n"
          "with pan and zoom that needs nothing). -O N optimizes first (default: as written).\n"
          "example: rly viz model.onnx -O3 -o model.html\n",
          f);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Write text to path whole or not at all: "path.tmp-PID", then a rename. */
static int write_whole(const char *path, const char *text) {
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (tmp == NULL) return 1;
    snprintf(tmp, n, "%s.tmp-%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    bool ok = f != NULL;
    if (ok) ok = fputs(text, f) >= 0;
    if (f != NULL && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) {
        fprintf(stderr, "rly: error: viz: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    return ok ? 0 : 1;
}

/* DOT text to SVG at path through `dot -Tsvg`: the DOT in a temporary file, dot's output in
 * another, renamed over path when dot succeeded. */
static int write_svg(const char *path, const char *dot_text) {
    size_t n = strlen(path) + 32;
    char *tdot = malloc(n), *tsvg = malloc(n);
    int rc = 1;
    if (tdot == NULL || tsvg == NULL) goto out;
    snprintf(tdot, n, "%s.tmp-%ld.dot", path, (long)getpid());
    snprintf(tsvg, n, "%s.tmp-%ld.svg", path, (long)getpid());
    FILE *f = fopen(tdot, "wb");
    bool ok = f != NULL && fputs(dot_text, f) >= 0;
    if (f != NULL && fclose(f) != 0) ok = false;
    if (!ok) {
        fprintf(stderr, "rly: error: viz: cannot write %s: %s\n", tdot, strerror(errno));
        goto out;
    }
    char *argv[] = {(char *)"dot", (char *)"-Tsvg", (char *)"-o", tsvg, tdot, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, "dot", NULL, NULL, argv, environ);
    if (err != 0) {
        fprintf(stderr,
                "rly: error: viz: cannot run Graphviz's dot (%s): install graphviz to write "
                "SVG, or write -o %s.html (needs nothing) or .dot\n",
                strerror(err), path);
        goto out;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "rly: error: viz: dot failed drawing %s (status %d)\n", path, status);
        goto out;
    }
    if (rename(tsvg, path) != 0) {
        fprintf(stderr, "rly: error: viz: cannot write %s: %s\n", path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (tdot) remove(tdot);
    if (tsvg && rc != 0) remove(tsvg);
    free(tdot);
    free(tsvg);
    return rc;
}

int cmd_viz(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *shapes = NULL;
    int prelude = 0, level = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            viz_usage(stdout);
            return 0;
        } else if (strcmp(a, "--prelude") == 0) {
            prelude = 1;
        } else if (strcmp(a, "-o") == 0 && has) {
            out = argv[++i];
        } else if (strcmp(a, "--input-shapes") == 0 && has) {
            shapes = argv[++i];
        } else if (strncmp(a, "-O", 2) == 0) {
            const char *lv = a[2] ? a + 2 : has ? argv[++i] : "";
            if (lv[0] < '0' || lv[0] > '3' || lv[1] != '\0') {
                fprintf(stderr, "rly: error: viz: -O takes a level 0, 1, 2 or 3, not '%s'\n", lv);
                return 2;
            }
            level = lv[0] - '0';
        } else if (in == NULL && (a[0] != '-' || strcmp(a, "-") == 0)) {
            in = a;
        } else {
            return cli_bad_argument("viz", a);
        }
    }
    if (in == NULL) {
        fputs("rly: error: viz: missing FILE (a .rly file, - for standard input, or a .onnx "
              "model)\n",
              stderr);
        viz_usage(stderr);
        return 2;
    }
    rly_draw_format format = RLY_DRAW_DOT;
    bool svg = false;
    if (out != NULL) {
        if (ends_with(out, ".html") || ends_with(out, ".htm"))
            format = RLY_DRAW_HTML;
        else if (ends_with(out, ".svg"))
            svg = true;
        else if (!ends_with(out, ".dot") && !ends_with(out, ".gv")) {
            fprintf(stderr,
                    "rly: error: viz: -o %s: the extension picks the format: .dot, .svg "
                    "or .html\n",
                    out);
            return 2;
        }
    }
    rly_ctx *ctx = NULL;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) {
        fprintf(stderr, "rly: error: %s\n", rly_last_error());
        return 1;
    }
    rly_module *mod = NULL;
    rly_status st;
    if (ends_with(in, ".onnx"))
        st = rly_module_import_onnx(ctx, in, shapes, &mod);
    else if (prelude)
        st = rly_module_prelude(ctx, &mod) == RLY_STATUS_OK ? rly_module_parse_file_into(mod, in)
                                                            : RLY_STATUS_ERROR;
    else
        st = rly_module_parse_file(ctx, in, &mod);
    if (st == RLY_STATUS_OK && level > 0) {
        rly_opt_options o = {.opt_level = level};
        st = rly_module_optimize(mod, &o, NULL);
    }
    char *text = NULL;
    if (st == RLY_STATUS_OK) st = rly_module_draw(mod, format, in, &text);
    int rc = 0;
    if (st != RLY_STATUS_OK) {
        const char *msg = rly_last_error();
        size_t n = strlen(msg);
        fprintf(stderr, "%s%s", msg, n && msg[n - 1] == '\n' ? "" : "\n");
        rc = 1;
    } else if (out == NULL) {
        fputs(text, stdout);
        rc = fflush(stdout) == 0 ? 0 : 1;
    } else {
        rc = svg ? write_svg(out, text) : write_whole(out, text);
    }
    rly_free(text);
    rly_ctx_free(ctx);
    return rc;
}
