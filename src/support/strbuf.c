/* strbuf.c - growable NUL-terminated string buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

static void reserve(StrBuf *sb, size_t extra) {
    if (extra > SIZE_MAX - sb->len - 1) sup_oom();
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return;
    size_t c = sb->cap ? sb->cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2) sup_oom();
        c *= 2;
    }
    sb->data = sup_realloc(sb->data, c);
    sb->cap = c;
}

void sb_putn(StrBuf *sb, const char *s, size_t n) {
    reserve(sb, n);
    if (n) memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void sb_putc(StrBuf *sb, char c) {
    reserve(sb, 1);
    sb->data[sb->len++] = c;
    sb->data[sb->len] = '\0';
}

void sb_puts(StrBuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

RLY_PRINTF(2, 0) void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return;
    reserve(sb, (size_t)n);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void sb_printf(StrBuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

void sb_indent(StrBuf *sb, int n) {
    if (n <= 0) return;
    reserve(sb, (size_t)n);
    memset(sb->data + sb->len, ' ', (size_t)n);
    sb->len += (size_t)n;
    sb->data[sb->len] = '\0';
}

const char *sb_cstr(StrBuf *sb) { return sb->data ? sb->data : ""; }

char *sb_take(StrBuf *sb) {
    char *s = sb->data;
    if (s == NULL) {
        s = sup_malloc(1);
        s[0] = '\0';
    }
    sb->data = NULL;
    sb->len = sb->cap = 0;
    return s;
}

void sb_free(StrBuf *sb) {
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
}
