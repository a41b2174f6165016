/* file.c - whole-file reads and atomic writes (temporary file + rename, so a failure never
 * leaves a half-written output). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/support.h"

bool sup_read_file(const char *path, char **data, size_t *len, char *err, size_t errlen) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return false;
    }
    StrBuf sb = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sb_putn(&sb, buf, n);
    bool failed = ferror(f) != 0;
    if (f != stdin) fclose(f);
    if (failed) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        sb_free(&sb);
        return false;
    }
    *len = sb.len;
    *data = sb_take(&sb);
    return true;
}

bool sup_write_file_atomic(const char *path, const void *data, size_t len, char *err,
                           size_t errlen) {
    size_t pl = strlen(path);
    char *tmp = sup_malloc(pl + 32);
    snprintf(tmp, pl + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        free(tmp);
        return false;
    }
    bool ok = fwrite(data, 1, len, f) == len;
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    return ok;
}
