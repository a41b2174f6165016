/* file.c - whole-file reads and atomic writes (temporary file + rename, so a failure never
 * leaves a half-written output). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

/* Output files. The temporary is created with O_CREAT|O_EXCL|O_NOFOLLOW under a fresh name in
 * the target's directory, so nothing planted at a predictable name (a symlink, a file) can
 * redirect or receive the write; O_EXCL refuses to follow or reuse an existing entry. What the
 * output path already is decides how it is written:
 *   missing            -> new regular file (mode 0666 less the umask), by rename
 *   regular file       -> replaced atomically by rename; mode and (where allowed) owner kept
 *   symlink            -> written through: the file it finally names is replaced as above, the
 *                         link stays; a link to nothing is refused
 *   FIFO, char device  -> written through in place (/dev/stdout, /dev/null, a pipe): no temporary,
 *                         and a failed write (/dev/full) is an error, never a replaced node
 *   directory, block device, socket -> refused */
static bool write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += n;
        len -= (size_t)n;
    }
    return true;
}

static bool write_fail(char *err, size_t errlen, const char *path, const char *why) {
    snprintf(err, errlen, "cannot write '%s': %s", path, why);
    return false;
}

/* Create `target`'s temporary beside it: "<target>.tmp.<pid>.<n>", O_EXCL so an existing entry
 * of that name (planted or left over) is never opened; a fresh name is tried on a clash. */
static int create_temp(const char *target, char **tmp_out) {
    static _Atomic unsigned counter;
    size_t n = strlen(target) + 64;
    char *tmp = sup_malloc(n);
    for (int attempt = 0; attempt < 100; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned k = counter++;
        snprintf(tmp, n, "%s.tmp.%ld.%u.%lx", target, (long)getpid(), k,
                 (unsigned long)ts.tv_nsec ^ ((unsigned long)k * 2654435761u));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *tmp_out = tmp;
            return fd;
        }
        if (errno != EEXIST) break;
    }
    int e = errno;
    free(tmp);
    errno = e;
    return -1;
}

struct SupOut {
    char *path;   /* as given, for messages */
    char *target; /* the regular file replaced (path, or where its links lead); NULL: in place */
    char *tmp;    /* the temporary beside target; NULL when writing in place */
    int fd;
    bool failed;
    int err_no;
    struct stat st; /* of the replaced file, when `exists` */
    bool exists;
};

static SupOut *out_fail(SupOut *o, char *err, size_t errlen, const char *why) {
    write_fail(err, errlen, o->path, why);
    free(o->path);
    free(o->target);
    free(o);
    return NULL;
}

SupOut *sup_out_open(const char *path, char *err, size_t errlen) {
    SupOut *o = sup_calloc(1, sizeof *o);
    o->fd = -1;
    o->path = sup_malloc(strlen(path) + 1);
    strcpy(o->path, path);
    struct stat lst, st;
    if (lstat(path, &lst) == 0) {
        if (stat(path, &st) != 0) /* a symlink whose chain ends nowhere */
            return out_fail(o, err, errlen,
                            errno == ENOENT ? "it is a symbolic link to a missing file"
                                            : strerror(errno));
        if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) { /* written in place */
            o->fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
            if (o->fd < 0) return out_fail(o, err, errlen, strerror(errno));
            return o;
        }
        if (S_ISDIR(st.st_mode)) return out_fail(o, err, errlen, "it is a directory");
        if (!S_ISREG(st.st_mode))
            return out_fail(o, err, errlen,
                            S_ISBLK(st.st_mode)    ? "it is a block device (refusing to replace it)"
                            : S_ISSOCK(st.st_mode) ? "it is a socket"
                                                   : "it is not a regular file");
        o->exists = true;
        o->st = st;
        if (S_ISLNK(lst.st_mode) && (o->target = realpath(path, NULL)) == NULL)
            return out_fail(o, err, errlen, strerror(errno));
    } else if (errno != ENOENT) {
        return out_fail(o, err, errlen, strerror(errno));
    }
    if (o->target == NULL) {
        o->target = sup_malloc(strlen(path) + 1);
        strcpy(o->target, path);
    }
    o->fd = create_temp(o->target, &o->tmp);
    if (o->fd < 0) return out_fail(o, err, errlen, strerror(errno));
    return o;
}

bool sup_out_write(SupOut *o, const void *data, size_t len) {
    if (o->failed) return false;
    if (!write_all(o->fd, data, len)) {
        o->failed = true;
        o->err_no = errno;
    }
    return !o->failed;
}

bool sup_out_commit(SupOut *o, char *err, size_t errlen) {
    bool ok = !o->failed;
    int e = o->err_no;
    if (ok && o->tmp && o->exists) {
        /* keep the replaced file's owner (best effort: only root may give a file away) and mode */
        if (fchown(o->fd, o->st.st_uid, o->st.st_gid) != 0 && errno != EPERM) ok = false, e = errno;
        if (ok && fchmod(o->fd, o->st.st_mode & 07777) != 0) ok = false, e = errno;
    }
    if (close(o->fd) != 0 && ok) ok = false, e = errno;
    o->fd = -1;
    if (ok && o->tmp && rename(o->tmp, o->target) != 0) ok = false, e = errno;
    if (!ok) {
        write_fail(err, errlen, o->path, strerror(e));
        if (o->tmp) unlink(o->tmp);
    }
    free(o->tmp);
    free(o->target);
    free(o->path);
    free(o);
    return ok;
}

void sup_out_abort(SupOut *o) {
    if (o == NULL) return;
    if (o->fd >= 0) close(o->fd);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->target);
    free(o->path);
    free(o);
}

bool sup_write_file_atomic(const char *path, const void *data, size_t len, char *err,
                           size_t errlen) {
    SupOut *o = sup_out_open(path, err, errlen);
    if (o == NULL) return false;
    sup_out_write(o, data, len);
    return sup_out_commit(o, err, errlen);
}
