/* text.h - the Relay text format (TVM's `#[version = "0.0.5"]`): lexer and parser.
 * The printer lives in src/ir/printer.c (it needs nothing from here). */
#ifndef RLY_TEXT_H
#define RLY_TEXT_H

#include "ir/ir.h"

/* Parse `text` (registered as source file `name` in ctx->diags). A text that starts, after
 * whitespace and comments, with a `#[version = "..."]` header is a module; any other text is a
 * bare expression (Module.is_expr, Module.expr). `meta` (may be NULL when n_meta is 0) gives the
 * tensors that meta[relay.Constant][i] refers to; the same Constant node is returned for every
 * reference to index i. Stops at the first error: returns NULL with one error in ctx->diags. */
Module *text_parse(Ctx *ctx, const char *name, const char *text, size_t len, Constant *const *meta,
                   uint32_t n_meta);

/* Like text_parse, but adds the definitions to `into` (whose globals, types and constructors
 * the text may use), e.g. a module holding the prelude. Meta constants are appended to its
 * table. On error `into` may keep some of the text's definitions. */
Module *text_parse_into(Ctx *ctx, Module *into, const char *name, const char *text, size_t len,
                        Constant *const *meta, uint32_t n_meta);

/* Deepest syntactic nesting (parentheses, blocks, nested functions, patterns, types) the parser
 * accepts; deeper input is a located error, never a C stack overflow. Sequences (let chains,
 * graph bindings, binary operator chains, curried calls, projections) are parsed iteratively
 * and have no such limit. */
#define TEXT_MAX_NESTING 1000

/* Decode TVM's `#[metadata]` JSON (text[off, len)) into the Constants that
 * meta[relay.Constant][i] refers to, appended to consts in index order. On malformed input
 * reports a located error in ctx->diags and returns false. */
bool text_metadata_decode(Ctx *ctx, uint32_t file, const char *text, uint32_t off, uint32_t len,
                          PtrVec *consts);

#endif
