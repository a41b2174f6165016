/* replay.c - runs a fuzz target over a corpus without libFuzzer (SQLite's fuzzcheck): every file
 * named on the command line, and every file under every directory named (recursively, in sorted
 * order, hidden files skipped), is passed once to LLVMFuzzerTestOneInput. A violated invariant
 * is counted instead of aborting; a crash still ends the run (with -v, each file is named on
 * stderr before it runs, so the last name is the culprit).
 *
 *   fuzz_replay [-v] PATH...
 *
 * Closes with `N passed, N failed`; exit status 1 when anything failed or no input was found. */
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "support/support.h"

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append path (a file) or the files under it (a directory) to out, sorted per directory. */
static bool collect(const char *path, PtrVec *out) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: cannot stat %s\n", path);
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        vec_push(out, strdup(path));
        return true;
    }
    DIR *d = opendir(path);
    if (d == NULL) {
        fprintf(stderr, "replay: cannot open directory %s\n", path);
        return false;
    }
    PtrVec names = {0};
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL)
        if (ent->d_name[0] != '.') vec_push(&names, strdup(ent->d_name));
    closedir(d);
    if (names.len) qsort(names.data, names.len, sizeof(char *), cmp_names);
    bool ok = true;
    for (size_t i = 0; i < names.len; i++) {
        size_t n = strlen(path) + strlen(names.data[i]) + 2;
        char *sub = malloc(n);
        snprintf(sub, n, "%s/%s", path, (char *)names.data[i]);
        ok = collect(sub, out) && ok;
        free(sub);
        free(names.data[i]);
    }
    vec_free(&names);
    return ok;
}

int main(int argc, char **argv) {
    bool verbose = false;
    PtrVec files = {0};
    size_t passed = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            verbose = true;
        else if (!collect(argv[i], &files))
            failed++;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_replay [-v] FILE|DIR...\n");
        return 2;
    }
    fuzz_keep_going = true;
    for (size_t i = 0; i < files.len; i++) {
        const char *path = files.data[i];
        char err[512], *data = NULL;
        size_t len = 0;
        if (verbose) fprintf(stderr, "replay: %s\n", path);
        if (!sup_read_file(path, &data, &len, err, sizeof err)) {
            fprintf(stderr, "replay: %s\n", err);
            failed++;
            continue;
        }
        /* an exact-size copy, as libFuzzer passes it, so ASan sees any read past the end */
        uint8_t *copy = malloc(len ? len : 1);
        if (len) memcpy(copy, data, len);
        size_t before = fuzz_n_failures;
        LLVMFuzzerTestOneInput(copy, len);
        free(copy);
        if (fuzz_n_failures != before) {
            fprintf(stderr, "replay: FAILED on %s\n", path);
            failed++;
        } else {
            passed++;
        }
        free(data);
    }
    for (size_t i = 0; i < files.len; i++)
        free(files.data[i]);
    vec_free(&files);
    if (passed + failed == 0) {
        fprintf(stderr, "replay: no input files\n");
        failed = 1;
    }
    printf("%zu passed, %zu failed\n", passed, failed);
    return failed ? 1 : 0;
}
