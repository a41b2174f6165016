/* bench_parse.c - throughput of the Relay text parser and printer (not a test).
 *
 *   bench_parse [-r REPS] [N...]      (default: N = 100000 1000000, REPS = 3)
 *   bench_parse -e N                  write the generated N-line program to stdout
 *
 * For each N, generates a module of about N lines of realistic text - functions of ~2000 lines
 * with graph-binding chains (conv/bias/relu, batch_norm with a projection, reductions with
 * attributes), lets of tuples and projections, local closures, `if` and `match` blocks, and calls
 * to the previous function - then times text_parse and ir_print_module separately (the best of
 * REPS runs each, wall clock) and reports seconds, lines/s, MB/s and the peak RSS of a child
 * process that does only that N (getrusage). With two or more N, the scaling ratio
 * time(N_last) / time(N_first) is checked against 1.2 x N_last / N_first (12 for 10^5 -> 10^6);
 * the exit status is 1 when it is exceeded or a run fails. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frontend/text/text.h"
#include "ir/ir.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define T4 "Tensor[(1, 64, 56, 56), float32]"
#define T1 "Tensor[(64), float32]"

/* Append about n_lines lines of program text to sb; returns the number of lines written. */
static long generate(StrBuf *sb, long n_lines) {
    long lines = 0;
#define LINE(...)                                                                                  \
    do {                                                                                           \
        sb_printf(sb, __VA_ARGS__);                                                                \
        lines++;                                                                                   \
    } while (0)
    LINE("#[version = \"0.0.5\"]\n");
    LINE("type List[A] {\n");
    LINE("  Cons(A, List[A]),\n");
    LINE("  Nil,\n");
    LINE("}\n");
    LINE("type Option[A] {\n");
    LINE("  Some(A),\n");
    LINE("  None,\n");
    LINE("}\n");
    for (int f = 0; lines < n_lines; f++) {
        LINE("def @f%d(%%x: " T4 ", %%w: Tensor[(64, 64, 3, 3), float32], %%b: " T1 ", %%g: " T1
             ",\n",
             f);
        LINE("        %%m: " T1 ", %%v: " T1 ", %%flag: bool, %%o: Option[" T4 "]) -> " T4 " {\n");
        long t = 0; /* next graph binding number */
        char cur[32] = "%x";
        long stop = lines + 2000 < n_lines ? lines + 2000 : n_lines - 2;
        for (int u = 0; lines < stop; u++) {
            switch (u % 8) {
            case 0:
                LINE("  %%%ld = nn.conv2d(%s, %%w, padding=[1, 1, 1, 1], channels=64, "
                     "kernel_size=[3, 3]);\n",
                     t, cur);
                LINE("  %%%ld = nn.bias_add(%%%ld, %%b, axis=1);\n", t + 1, t);
                LINE("  %%%ld = nn.relu(%%%ld);\n", t + 2, t + 1);
                t += 3;
                break;
            case 1:
                LINE("  let %%p%d = (%s, %%x);\n", u, cur);
                LINE("  %%%ld = add(%%p%d.0, %%p%d.1);\n", t, u, u);
                LINE("  %%%ld = multiply(%%%ld, 0.5f);\n", t + 1, t);
                t += 2;
                break;
            case 2:
                LINE("  %%%ld = if (%%flag) {\n", t);
                LINE("    nn.relu(%s)\n", cur);
                LINE("  } else {\n");
                LINE("    negative(%s)\n", cur);
                LINE("  };\n");
                t += 1;
                break;
            case 3:
                LINE("  %%%ld = match (%%o) {\n", t);
                LINE("    Some(%%s%d) => add(%s, %%s%d),\n", u, cur, u);
                LINE("    None => %s,\n", cur);
                LINE("  };\n");
                t += 1;
                break;
            case 4:
                LINE("  %%%ld = nn.batch_norm(%s, %%g, %%b, %%m, %%v, axis=1, epsilon=1e-05f);\n",
                     t, cur);
                LINE("  %%%ld = %%%ld.0;\n", t + 1, t);
                t += 2;
                break;
            case 5:
                LINE("  %%%ld = mean(%s, axis=[2, 3], keepdims=True);\n", t, cur);
                LINE("  %%%ld = reshape(%%%ld, newshape=[1, -1, 1, 1]);\n", t + 1, t);
                LINE("  %%%ld = multiply(%s, %%%ld);\n", t + 2, cur, t + 1);
                t += 3;
                break;
            case 6:
                LINE("  let %%c%d = fn (%%y: " T4 ") {\n", u);
                LINE("    nn.leaky_relu(%%y, alpha=0.1f)\n");
                LINE("  };\n");
                LINE("  %%%ld = %%c%d(%s);\n", t, u, cur);
                t += 1;
                break;
            default:
                if (f > 0)
                    LINE("  %%%ld = @f%d(%s, %%w, %%b, %%g, %%m, %%v, %%flag, %%o);\n", t, f - 1,
                         cur);
                else
                    LINE("  %%%ld = nn.max_pool2d(%s, pool_size=[3, 3], padding=[1, 1, 1, 1]);\n",
                         t, cur);
                t += 1;
                break;
            }
            snprintf(cur, sizeof cur, "%%%ld", t - 1);
        }
        LINE("  %s\n", cur);
        LINE("}\n");
    }
#undef LINE
    return lines;
}

typedef struct Result {
    long lines;
    size_t bytes;
    double parse_s, print_s;
    double rss_mb;
    int ok;
} Result;

/* Generate, parse and print once per rep; keep the best times. Runs in a child process. */
static Result measure(long n, int reps) {
    Result r = {0};
    StrBuf text = {0};
    r.lines = generate(&text, n);
    r.bytes = text.len;
    r.parse_s = r.print_s = 1e30;
    r.ok = 1;
    for (int i = 0; i < reps && r.ok; i++) {
        Ctx *ctx = ir_ctx_new();
        double t0 = now();
        Module *m = text_parse(ctx, "bench.rly", text.data, text.len, NULL, 0);
        double t1 = now();
        if (m == NULL) {
            StrBuf sb = {0};
            diags_render(&ctx->diags, 0, &sb);
            fprintf(stderr, "bench_parse: the generated program does not parse:\n%s", sb_cstr(&sb));
            sb_free(&sb);
            r.ok = 0;
        } else {
            StrBuf out = {0};
            double t2 = now();
            ir_print_module(m, NULL, &out);
            double t3 = now();
            if (out.len < text.len / 4) r.ok = 0;
            sb_free(&out);
            if (t1 - t0 < r.parse_s) r.parse_s = t1 - t0;
            if (t3 - t2 < r.print_s) r.print_s = t3 - t2;
        }
        ir_ctx_free(ctx);
    }
    sb_free(&text);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r.rss_mb = (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
    return r;
}

/* measure() in a child, so that each N has its own peak RSS. */
static Result measure_child(long n, int reps) {
    Result r = {0};
    int fd[2];
    if (pipe(fd) != 0) return r;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        Result c = measure(n, reps);
        ssize_t w = write(fd[1], &c, sizeof c);
        _exit(w == (ssize_t)sizeof c ? 0 : 1);
    }
    close(fd[1]);
    if (pid < 0 || read(fd[0], &r, sizeof r) != (ssize_t)sizeof r) r.ok = 0;
    close(fd[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) r.ok = 0;
    return r;
}

int main(int argc, char **argv) {
    int reps = 3;
    long ns[16];
    int n_ns = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc) {
            StrBuf text = {0};
            generate(&text, atol(argv[++i]));
            fwrite(text.data, 1, text.len, stdout);
            sb_free(&text);
            return 0;
        } else if (atol(argv[i]) > 0 && n_ns < 16) {
            ns[n_ns++] = atol(argv[i]);
        } else {
            fprintf(stderr, "usage: bench_parse [-r REPS] [N...] | -e N\n");
            return 2;
        }
    }
    if (n_ns == 0) {
        ns[n_ns++] = 100000;
        ns[n_ns++] = 1000000;
    }
    if (reps < 1) reps = 1;
#ifndef NDEBUG
    printf("note: built without NDEBUG (assertions on); use the release preset for figures\n");
#endif
    printf("%10s %8s | %9s %12s %7s | %9s %12s %7s | %8s\n", "lines", "MB", "parse s", "lines/s",
           "MB/s", "print s", "lines/s", "MB/s", "peak RSS");
    Result res[16];
    int failed = 0;
    for (int i = 0; i < n_ns; i++) {
        Result r = res[i] = measure_child(ns[i], reps);
        if (!r.ok) {
            printf("%10ld: FAILED\n", ns[i]);
            failed = 1;
            continue;
        }
        double mb = (double)r.bytes / 1e6;
        printf("%10ld %8.1f | %9.3f %12.0f %7.1f | %9.3f %12.0f %7.1f | %5.0f MB\n", r.lines, mb,
               r.parse_s, (double)r.lines / r.parse_s, mb / r.parse_s, r.print_s,
               (double)r.lines / r.print_s, mb / r.print_s, r.rss_mb);
        fflush(stdout);
    }
    if (n_ns >= 2 && !failed) {
        Result a = res[0], b = res[n_ns - 1];
        double size = (double)b.lines / (double)a.lines, limit = 1.2 * size;
        double rp = b.parse_s / a.parse_s, rq = b.print_s / a.print_s;
        printf("scaling %ld -> %ld lines (x%.1f): parse x%.2f, print x%.2f (limit x%.1f): %s\n",
               a.lines, b.lines, size, rp, rq, limit,
               rp <= limit && rq <= limit ? "ok" : "EXCEEDED");
        if (rp > limit || rq > limit) failed = 1;
    }
    return failed;
}
