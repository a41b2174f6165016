/* diag.c - source files and diagnostics: spans are byte ranges; line and column are computed
 * only when a diagnostic is rendered, from a per-file table of line starts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

void diags_init(Diags *ds) {
    memset(ds, 0, sizeof *ds);
    SourceFile none = {0};
    vec_push(&ds->files, none);
}

void diags_clear(Diags *ds) {
    for (size_t i = 0; i < ds->items.len; i++)
        free(ds->items.data[i].msg);
    ds->items.len = 0;
    ds->n_errors = 0;
}

void diags_free(Diags *ds) {
    diags_clear(ds);
    vec_free(&ds->items);
    for (size_t i = 0; i < ds->files.len; i++) {
        free(ds->files.data[i].name);
        free(ds->files.data[i].text);
        free(ds->files.data[i].line_starts);
    }
    vec_free(&ds->files);
}

uint32_t diags_add_file(Diags *ds, const char *name, const char *text, size_t len) {
    RLY_CHECK(len < UINT32_MAX, "source file too large for 32-bit spans");
    SourceFile none = {0};
    vec_push(&ds->files, none); /* first: if an allocation below fails, diags_free frees the rest */
    SourceFile *f = &vec_last(&ds->files);
    size_t nl = strlen(name);
    f->name = sup_malloc(nl + 1);
    memcpy(f->name, name, nl + 1);
    f->text = sup_malloc(len + 1);
    if (len) memcpy(f->text, text, len);
    f->text[len] = '\0';
    f->len = len;
    return (uint32_t)(ds->files.len - 1);
}

const SourceFile *diags_file(const Diags *ds, uint32_t file) {
    if (file == 0 || file >= ds->files.len) return NULL;
    return &ds->files.data[file];
}

void diag_add(Diags *ds, DiagLevel level, Span span, const char *fmt, va_list ap) {
    StrBuf sb = {0};
    sb_vprintf(&sb, fmt, ap);
    Diag d = {level, span, sb_take(&sb)};
    vec_push(&ds->items, d);
    if (level == DIAG_ERROR) ds->n_errors++;
}

void diag_error(Diags *ds, Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_add(ds, DIAG_ERROR, span, fmt, ap);
    va_end(ap);
}

void diag_note(Diags *ds, Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_add(ds, DIAG_NOTE, span, fmt, ap);
    va_end(ap);
}

static void compute_lines(SourceFile *f) {
    if (f->line_starts != NULL) return;
    size_t n = 1;
    for (size_t i = 0; i < f->len; i++)
        n += f->text[i] == '\n';
    f->line_starts = sup_malloc(sup_mul(n, sizeof(uint32_t)));
    f->n_lines = n;
    size_t k = 0;
    f->line_starts[k++] = 0;
    for (size_t i = 0; i < f->len; i++)
        if (f->text[i] == '\n') f->line_starts[k++] = (uint32_t)(i + 1);
}

void diags_line_col(Diags *ds, uint32_t file, uint32_t off, uint32_t *line, uint32_t *col) {
    *line = *col = 1;
    if (file == 0 || file >= ds->files.len) return;
    SourceFile *f = &ds->files.data[file];
    compute_lines(f);
    if (off > f->len) off = (uint32_t)f->len;
    size_t lo = 0, hi = f->n_lines; /* last line start <= off */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (f->line_starts[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    *line = (uint32_t)lo + 1;
    *col = off - f->line_starts[lo] + 1;
}

static const char *level_name(DiagLevel l) {
    switch (l) {
    case DIAG_ERROR: return "error";
    case DIAG_WARNING: return "warning";
    case DIAG_NOTE: return "note";
    }
    return "?";
}

/* The source line, with control bytes shown as spaces so the caret lines up. */
static void render_one(Diags *ds, const Diag *d, StrBuf *out) {
    const SourceFile *f = diags_file(ds, d->span.file);
    if (f == NULL) {
        sb_printf(out, "%s: %s\n", level_name(d->level), d->msg);
        return;
    }
    uint32_t line, col;
    diags_line_col(ds, d->span.file, d->span.lo, &line, &col);
    sb_printf(out, "%s:%u:%u: %s: %s\n", f->name, line, col, level_name(d->level), d->msg);
    uint32_t start = f->line_starts[line - 1];
    uint32_t end = start;
    while (end < f->len && f->text[end] != '\n')
        end++;
    const uint32_t max_shown = 200;
    uint32_t show_lo = start, lo = d->span.lo < start ? start : d->span.lo;
    if (lo > f->len) lo = (uint32_t)f->len;
    if (lo - start > max_shown / 2) show_lo = lo - max_shown / 2; /* long line: a window */
    uint32_t show_hi = end - show_lo > max_shown ? show_lo + max_shown : end;
    sb_puts(out, "  ");
    for (uint32_t i = show_lo; i < show_hi; i++) {
        unsigned char c = (unsigned char)f->text[i];
        sb_putc(out, (c < 0x20 || c == 0x7f) ? ' ' : (char)c);
    }
    sb_putc(out, '\n');
    sb_puts(out, "  ");
    sb_indent(out, (int)(lo - show_lo));
    sb_putc(out, '^');
    uint32_t hi = d->span.hi < end ? d->span.hi : end;
    if (hi > show_hi) hi = show_hi;
    for (uint32_t i = lo + 1; i < hi; i++)
        sb_putc(out, '~');
    sb_putc(out, '\n');
}

void diags_render(Diags *ds, size_t from, StrBuf *out) {
    for (size_t i = from; i < ds->items.len; i++)
        render_one(ds, &ds->items.data[i], out);
}
