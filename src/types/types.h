/* types.h - type inference for the whole Relay language: unification over incomplete types, a
 * relation solver iterated to a fixpoint, let-polymorphism (explicit type parameters,
 * instantiated at each use), ADTs, match exhaustiveness, references, kind checking. The
 * interface of src/types/.
 *
 * Inference runs over a whole module at once, so global recursion and mutual recursion need no
 * annotations beyond what the program's own uses determine. Every error is reported (into
 * ctx->diags, located at the offending expression, with expected and actual types); a failed
 * node gets the error type, which unifies with anything, so one mistake does not cascade. */
#ifndef RLY_TYPES_H
#define RLY_TYPES_H

#include "ops/ops.h"

/* Infer and check every function of m (or its bare expression). Sets Expr.checked_type of every
 * reachable expression and Call.type_args of calls to polymorphic functions and constructors.
 * Returns false when any error was reported. */
bool ty_infer_module(Module *m);

/* The first missing case of a complete match over clauses[0..n), printed as a pattern
 * (`Cons(_, Nil)`), in the ctx arena; NULL when the match is exhaustive. */
const char *ty_match_missing(Ctx *ctx, const Match *m);

/* The standard library (List, Option, Tree, nat and their functions) as Relay module text
 * (src/types/prelude.rly, embedded at build time). */
const char *ty_prelude_text(void);

#endif /* RLY_TYPES_H */
