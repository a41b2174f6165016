/* print.h - the text of a runtime value, as `rly run` prints results: tensors summarized as
 * numpy does (at most max_elems elements before eliding with "..."), scalars as Relay literals
 * (3, 2.5f, 7i64, True), tuples as (a, b), constructor values as Cons(1, Nil), closures as
 * <closure>, references as ref(v). Iterative: deep lists print without recursion. A value that
 * shares parts prints as the tree it stands for, which can be exponentially larger, so printing
 * stops with "..." once the text passes RT_PRINT_MAX bytes. Each executor names its
 * constructors (RtAdt.ctor is its own handle) through ctor_name. */
#ifndef RLY_RUNTIME_PRINT_H
#define RLY_RUNTIME_PRINT_H

#include "runtime/value.h"

#define RT_PRINT_MAX (4u << 20)

/* The name of the constructor whose executor handle is `ctor` (NULL: print "?"). */
typedef const char *(*RtCtorName)(const void *ctor, const void *ud);

void rt_print_value(const Value *v, size_t max_elems, RtCtorName ctor_name, const void *ud,
                    StrBuf *out);

#endif /* RLY_RUNTIME_PRINT_H */
