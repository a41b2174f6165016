/* golden_util.c - the folder, file and directive helpers of the golden suites (golden_util.h). */
#include "golden_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

bool golden_update_requested(void) {
    const char *s = getenv("RLY_UPDATE_GOLDEN");
    return s && strcmp(s, "1") == 0;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

size_t golden_list(const char *dir, bool cases_only, char ***out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    PtrVec names = {0};
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        size_t n = strlen(ent->d_name);
        if (ends_with(ent->d_name, n, ".rly") &&
            !(cases_only && ends_with(ent->d_name, n, ".expected.rly")))
            vec_push(&names, strdup(ent->d_name));
    }
    closedir(d);
    if (names.len) qsort(names.data, names.len, sizeof(char *), cmp_names);
    *out = (char **)names.data;
    return names.len;
}

char *golden_read(const char *path, size_t *len) {
    char err[512], *data = NULL;
    size_t n;
    if (!sup_read_file(path, &data, &n, err, sizeof err)) {
        fprintf(stderr, "FAIL %s\n", err);
        return NULL;
    }
    if (len) *len = n;
    return data;
}

bool golden_directive(const char *text, const char *key, char *buf, size_t cap) {
    size_t kn = strlen(key);
    for (const char *p = text; strncmp(p, "//", 2) == 0 || strncmp(p, "#[", 2) == 0;) {
        const char *q = p + 2;
        while (*q == ' ')
            q++;
        const char *eol = strchr(p, '\n');
        if (eol == NULL) eol = p + strlen(p);
        if (strncmp(p, "//", 2) == 0 && strncmp(q, key, kn) == 0 &&
            (q[kn] == ':' || q[kn] == '\n' || q[kn] == ' ' || q[kn] == '\0')) {
            q += kn;
            if (*q == ':') q++;
            while (*q == ' ')
                q++;
            snprintf(buf, cap, "%.*s", (int)(eol - q), q);
            return true;
        }
        if (*eol == '\0') break;
        p = eol + 1;
    }
    return false;
}

int golden_run_dir(const char *dir, bool cases_only,
                   bool (*run)(const char *dir, const char *name)) {
    char **names = NULL;
    size_t n = golden_list(dir, cases_only, &names), passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        run(dir, names[i]) ? passed++ : failed++;
        free(names[i]);
    }
    free(names);
    if (n == 0) {
        fprintf(stderr, "no cases (NAME.rly) in %s\n", dir);
        failed = 1;
    }
    printf("%zu passed, %zu failed\n", passed, failed);
    return failed ? 1 : 0;
}
