/* pass_check.h - what the optimizer's unit tests (tests/unit/test_passes_*.c) share:
 *   - the differential check: @main of a program run in the interpreter on random inputs
 *     (seeded) before and after a pipeline, the outputs compared: integers and bools exactly,
 *     floats within 1e-5 of the tensor's largest magnitude (|a - b| <= 1e-5 * max|b|), NaN where
 *     the other has NaN; for one program (pc_differ) or every case of a golden folder
 *     (pc_golden_differential);
 *   - chain programs of n links, parsed, optimized and timed (pc_chain_time);
 *   - a monotonic clock (pc_now).
 * The helpers CHECK as the tests do; their counts join the test's in pc_summary(), which prints
 * the closing `N passed, N failed` in place of check_summary(). */
#ifndef RLY_TESTS_PASS_CHECK_H
#define RLY_TESTS_PASS_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "../check.h"
#include "rly/rly.h"

/* Seconds on the monotonic clock. */
double pc_now(void);

/* For the differential check: the seed from RLY_SEED (else the time), printed as `seed N
 * (RLY_SEED=N replays it)`, and two temporary .npz paths named after the test. must_load: a
 * program that does not load is a failure; otherwise it only counts as a case that cannot run. */
void pc_init(const char *test, bool must_load);

/* A module from text, or from the file at path (.rly; an .onnx file is imported), after the
 * prelude when prelude is set; NULL when it does not load (rly_last_error() says why). */
rly_module *pc_load_text(rly_ctx *ctx, const char *text, bool prelude);
rly_module *pc_load_path(rly_ctx *ctx, const char *path, bool prelude);

/* The calls of operator `op` in m's printed text. */
size_t pc_count_op(rly_module *m, const char *op);

/* The differential check of @main of text (or of the file at path when text is NULL) before and
 * after `passes`, the failures named by `what`. max_xforms >= 0: at most that many
 * layout_transforms may be left after the passes. False when @main cannot run on generated
 * inputs (a parameter --fill cannot make: a function, a reference, an ADT). */
bool pc_differ(const char *text, const char *path, bool prelude, const char *passes,
               const char *what, int max_xforms);

/* The differential check of every case of ROOT/PASS (NAME.rly with its directives `// passes:`
 * and `// prelude`, as tests/golden/passes.c reads them), at opt level 3; prints how many ran,
 * and fails when fewer than min_run could. */
void pc_golden_differential(const char *root, const char *pass, size_t min_run);

/* The largest |a - b| / max|b| the differential checks have seen. */
double pc_largest_diff(void);

/* A chain program of n links: head, then one binding per link (its `$` replaced by the previous
 * value, start for the first), graph form (%k = ...) or let form (let %vk = ...), then tail (its
 * `$` the last value). A test that checks more of a chain embeds this as its first member. */
typedef struct PcChain {
    const char *name, *passes, *head, *start, *link, *tail;
    bool lets;
} PcChain;

/* Parse the chain of n links, run its passes (every type verified after each pass when verify)
 * and, when they succeed, hand the result to check (when not NULL). The seconds the pipeline took
 * (inference once, then the passes), or -1 after a failure. */
double pc_chain_time(const PcChain *c, size_t n, bool verify,
                     void (*check)(const PcChain *c, rly_module *m));

/* Remove the temporary outputs; add the helpers' CHECK counts to *n_pass and *n_fail. */
void pc_finish(int *pass, int *fail);

/* The closing `N passed, N failed` over the test's CHECKs and the helpers'; the exit status. */
static inline int pc_summary(void) {
    pc_finish(&n_pass, &n_fail);
    return check_summary();
}

#endif
