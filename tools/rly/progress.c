/* progress.c - progress lines of the `rly` tool on stderr: a bar for work that counts (test
 * cases, bench runs) and an elapsed-time line, drawn by a helper thread, for one long library
 * call that reports nothing (compiling a large model). Both show only when stderr is a
 * terminal, so piped and redirected output stays exactly the results; RLY_PROGRESS=always or
 * never overrides the test. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmds.h"

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool progress_wanted(void) {
    const char *env = getenv("RLY_PROGRESS");
    if (env && strcmp(env, "always") == 0) return true;
    if (env && strcmp(env, "never") == 0) return false;
    return isatty(STDERR_FILENO) == 1;
}

void cli_progress_start(CliProgress *p, const char *what, bool quiet) {
    memset(p, 0, sizeof *p);
    p->on = !quiet && progress_wanted();
    p->what = what;
    p->t_start = cli_now();
}

void cli_progress_update(CliProgress *p, double frac, const char *note) {
    if (!p->on) return;
    double t = cli_now();
    if (p->drawn && t - p->t_drawn < 0.1 && frac < 1) return; /* at most 10 redraws a second */
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
    int full = (int)(frac * WIDTH);
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < full ? '#' : '.';
    bar[WIDTH] = '\0';
    /* \r and erase-to-end-of-line: the line is rewritten in place; the note is cut short so
     * the line never wraps on an 80-column terminal */
    fprintf(stderr, "\r%s [%s] %3d%% %.30s\033[K", p->what, bar, (int)(frac * 100 + 0.5),
            note ? note : "");
    fflush(stderr);
    p->drawn = true;
    p->t_drawn = t;
}

void cli_progress_clear(CliProgress *p) {
    if (!p->on || !p->drawn) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->drawn = false;
}

void cli_progress_end(CliProgress *p) {
    cli_progress_clear(p);
    p->on = false;
}

/* ---- the elapsed-time line ---- */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool running; /* the thread exists (joined by cli_busy_end) */
    bool stop;    /* guarded by mu */
    char what[160];
} g_busy = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *busy_main(void *arg) {
    (void)arg;
    double t0 = cli_now();
    bool drawn = false;
    pthread_mutex_lock(&g_busy.mu);
    while (!g_busy.stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 200 * 1000 * 1000; /* redraw five times a second */
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&g_busy.cv, &g_busy.mu, &until);
        double dt = cli_now() - t0;
        if (g_busy.stop || dt < 0.5) continue;
        fprintf(stderr, "\rrly: %s ... %.1f s\033[K", g_busy.what, dt);
        fflush(stderr);
        drawn = true;
    }
    if (drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    pthread_mutex_unlock(&g_busy.mu);
    return NULL;
}

void cli_busy_start(const char *what) {
    if (g_busy.running || !progress_wanted()) return;
    snprintf(g_busy.what, sizeof g_busy.what, "%s", what);
    g_busy.stop = false;
    g_busy.running = pthread_create(&g_busy.thread, NULL, busy_main, NULL) == 0;
}

void cli_busy_end(void) {
    if (!g_busy.running) return;
    pthread_mutex_lock(&g_busy.mu);
    g_busy.stop = true;
    pthread_cond_signal(&g_busy.cv);
    pthread_mutex_unlock(&g_busy.mu);
    pthread_join(g_busy.thread, NULL);
    g_busy.running = false;
}
