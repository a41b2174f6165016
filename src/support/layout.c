/* layout.c - the one parser of data layout strings ("NCHW", "NHWC", "NCHW16c", "OIHW4i4o";
 * support.h, "data layouts"). Type relations (src/ops) and kernels (src/kernels) both wrap it,
 * so a string one accepts the other accepts too. */
#include <stdio.h>

#include "support/support.h"

int sup_layout_find(const SupLayout *l, char a) {
    for (uint32_t i = 0; i < l->n; i++)
        if (l->axis[i] == a) return (int)i;
    return -1;
}

int64_t sup_layout_block(const SupLayout *l, char a) {
    int j = sup_layout_find(l, (char)(a - 'A' + 'a'));
    return j < 0 ? 0 : l->factor[j];
}

static bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
static bool is_lower(char c) { return c >= 'a' && c <= 'z'; }

bool sup_layout_convertible(const SupLayout *l, const char *ref) {
    for (uint32_t i = 0; i < l->n; i++)
        if (is_upper(l->axis[i]) && strchr(ref, l->axis[i]) == NULL) return false;
    for (const char *r = ref; *r; r++)
        if (sup_layout_find(l, *r) < 0) return false;
    return true;
}

const char *sup_layout_parse(const char *text, SupLayout *l, char *why, size_t cap) {
    l->text = text;
    l->n = 0;
    if (text == NULL || text[0] == '\0') {
        snprintf(why, cap, "is empty");
        return why;
    }
    for (const char *p = text; *p;) {
        if (l->n == SUP_LAYOUT_MAX) {
            snprintf(why, cap, "\"%s\" has more than %d axes", text, SUP_LAYOUT_MAX);
            return why;
        }
        if (is_upper(*p)) {
            if (sup_layout_find(l, *p) >= 0) {
                snprintf(why, cap, "\"%s\" names axis %c twice", text, *p);
                return why;
            }
            l->axis[l->n] = *p++;
            l->factor[l->n++] = 0;
            continue;
        }
        int64_t f = 0;
        while (*p >= '0' && *p <= '9' && f <= INT32_MAX)
            f = f * 10 + (*p++ - '0');
        if (f <= 0 || f > INT32_MAX || !is_lower(*p) || sup_layout_find(l, *p) >= 0) {
            snprintf(why, cap,
                     "\"%s\" is not a layout (upper-case axes, each once, and a block size before "
                     "a lower-case sub-axis, as in NCHW16c)",
                     text);
            return why;
        }
        l->axis[l->n] = *p++;
        l->factor[l->n++] = f;
    }
    for (uint32_t i = 0; i < l->n; i++) {
        char a = l->axis[i], up = (char)(a - 'a' + 'A');
        if (is_lower(a) && sup_layout_find(l, up) < 0) {
            snprintf(why, cap, "\"%s\" has sub-axis %c without axis %c", text, a, up);
            return why;
        }
    }
    return NULL;
}
