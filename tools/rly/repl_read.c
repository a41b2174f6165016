/* repl_read.c - reading command lines for `rly repl` and `rly debug` (repl.h): libedit's
 * readline with history on a terminal when the CLI is built with it, getline otherwise. Kept
 * apart from the IR headers because readline.h defines its own `Function`. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "repl.h"

#ifdef RLY_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

static void history_path(const CliReader *r, char *buf, size_t cap) {
    const char *home = getenv("HOME");
    buf[0] = '\0';
    if (home && r->hist) snprintf(buf, cap, "%s/%s", home, r->hist);
}

void cli_reader_init(CliReader *r, FILE *in, const char *hist) {
    r->in = in;
    r->tty = isatty(fileno(in)) && isatty(fileno(stdout));
    r->hist = hist;
#ifdef RLY_HAVE_LIBEDIT
    if (r->tty) {
        char path[1024];
        history_path(r, path, sizeof path);
        using_history();
        if (path[0]) read_history(path);
    }
#endif
}

void cli_reader_close(CliReader *r) {
#ifdef RLY_HAVE_LIBEDIT
    if (r->tty) {
        char path[1024];
        history_path(r, path, sizeof path);
        if (path[0]) write_history(path);
    }
#else
    (void)r;
    (void)history_path;
#endif
}

char *cli_read_line(void *reader, const char *prompt) {
    CliReader *r = reader;
#ifdef RLY_HAVE_LIBEDIT
    if (r->tty) {
        char *s = readline(prompt);
        if (s && *s) add_history(s);
        return s;
    }
#endif
    if (r->tty) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, r->in);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
    return line;
}

void repl_print_error(const char *msg) {
    const char *sep = strstr(msg, ": ");
    bool located = false;
    if (sep != NULL && sep > msg && memchr(msg, '\n', (size_t)(sep - msg)) == NULL &&
        memchr(msg, ' ', (size_t)(sep - msg)) == NULL) {
        const char *d = sep;
        while (d > msg && d[-1] >= '0' && d[-1] <= '9')
            d--;
        located = d < sep && d > msg && d[-1] == ':';
    }
    fflush(stdout);
    fprintf(stderr, "%s%s\n", located ? "" : "rly: error: ", msg);
}
