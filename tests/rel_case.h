/* rel_case.h - a case line of a relation file (tests/types/rel: "op(ARGS) -> TYPE") as a Relay
 * program that calls op once: each argument type becomes a parameter %a0, %a1, ..., each
 * attribute ("name=value") stays an attribute. Shared by test_kernel_stress (which runs the
 * cases) and fuzz_kernels (which turns them into seeds). */
#ifndef RLY_TESTS_REL_CASE_H
#define RLY_TESTS_REL_CASE_H

#include <stdbool.h>
#include <string.h>

#include "support/support.h"

/* Splits "a, b=[1, 2], c" at the top-level commas (in place); at most max items. */
static inline int rel_split_items(char *s, char **items, int max) {
    int n = 0, depth = 0;
    bool quoted = false;
    char *start = s;
    for (char *p = s;; p++) {
        if (*p == '"') quoted = !quoted;
        if (!quoted && (*p == '(' || *p == '[')) depth++;
        if (!quoted && (*p == ')' || *p == ']')) depth--;
        if (*p == '\0' || (!quoted && depth == 0 && *p == ',')) {
            bool end = *p == '\0';
            *p = '\0';
            while (*start == ' ')
                start++;
            if (*start && n < max) items[n++] = start;
            if (end) return n;
            start = p + 1;
        }
    }
}

/* The program of the case on `line` into text (empty before); false when the line is a comment
 * or no case. `line` is cut in place: it holds the operator's name afterwards. */
static inline bool rel_case_program(char *line, StrBuf *text) {
    char *arrow = strstr(line, " -> ");
    if (line[0] == '#' || arrow == NULL) return false;
    *arrow = '\0';
    char *open = strchr(line, '('), *close = strrchr(line, ')');
    if (open == NULL || close == NULL || close < open) return false;
    *open = '\0';
    *close = '\0';
    char *items[64];
    int n = rel_split_items(open + 1, items, 64);
    StrBuf params = {0}, args = {0};
    int n_params = 0;
    for (int i = 0; i < n; i++) {
        size_t id = strspn(items[i], "abcdefghijklmnopqrstuvwxyz_0123456789");
        if (id > 0 && items[i][id] == '=') { /* an attribute */
            sb_printf(&args, "%s%s", args.len ? ", " : "", items[i]);
            continue;
        }
        sb_printf(&params, "%s%%a%d: %s", n_params ? ", " : "", n_params, items[i]);
        sb_printf(&args, "%s%%a%d", args.len ? ", " : "", n_params++);
    }
    sb_printf(text, "#[version = \"0.0.5\"]\ndef @main(%s) {\n  %s(%s)\n}\n",
              params.len ? sb_cstr(&params) : "", line, args.len ? sb_cstr(&args) : "");
    sb_free(&params);
    sb_free(&args);
    return true;
}

#endif /* RLY_TESTS_REL_CASE_H */
