/* opt.c - the optimizer and module comparison in the public API: rly_module_optimize runs a
 * pass pipeline (src/passes), rly_module_compare says whether two modules are alpha-equivalent
 * and where they first differ. */
#include <string.h>

#include "api/api.h"
#include "passes/passes.h"

RLY_API rly_status rly_module_optimize(rly_module *mod, const rly_opt_options *opts,
                                       char **report) {
    if (mod == NULL || opts == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_optimize: NULL argument");
    if (report) *report = NULL;
    if (opts->opt_level < 0 || opts->opt_level > 3)
        return api_fail(RLY_STATUS_INVALID, "rly_module_optimize: opt level %d is not 0..3",
                        opts->opt_level);
    StrBuf rep = {0};
    PassOptions o = {.opt_level = opts->opt_level,
                     .passes = opts->passes,
                     .required = opts->required_passes,
                     .disabled = opts->disabled_passes,
                     .print_after = opts->print_ir_after,
                     .time_passes = opts->time_passes != 0,
                     .verify_types = opts->verify_types != 0,
                     .report = &rep};
    RLY_TRY;
    bool ok = ir_well_formed(mod) && pass_run(mod, &o);
    RLY_END_TRY;
    if (report && rep.len) *report = strdup(sb_cstr(&rep));
    sb_free(&rep);
    return ok ? RLY_STATUS_OK : api_fail_diags(mod->ctx);
}

RLY_API rly_status rly_module_compare(rly_module *a, rly_module *b, int *equal) {
    if (a == NULL || b == NULL || equal == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_compare: NULL argument");
    if (a->ctx != b->ctx)
        return api_fail(RLY_STATUS_INVALID,
                        "rly_module_compare: the modules must belong to one context");
    IrDiff d;
    RLY_TRY;
    *equal = ir_module_equal_diff(a, b, &d);
    RLY_END_TRY;
    if (*equal) return RLY_STATUS_OK;
    Diags *ds = &a->ctx->diags;
    diag_error(ds, d.a, "the modules differ: %s", d.what);
    diag_note(ds, d.b, "the second module, at the same place");
    api_fail_diags(a->ctx);
    return RLY_STATUS_OK;
}

RLY_API rly_status rly_passes_describe(char **out) {
    if (out == NULL) return api_fail(RLY_STATUS_INVALID, "rly_passes_describe: NULL argument");
    StrBuf sb = {0};
    for (size_t i = 0; i < pass_count(); i++) {
        const PassDef *d = pass_at(i);
        sb_printf(&sb, "%-26s -O%d  %s pass  %s\n", d->name, d->opt_level,
                  d->kind == PASS_MODULE ? "module" : "function", d->doc);
        if (d->params[0]) sb_printf(&sb, "%-26s      parameters: %s\n", "", d->params);
    }
    sb_printf(&sb, "default pipeline: %s\n", pass_default_pipeline());
    *out = strdup(sb_cstr(&sb));
    sb_free(&sb);
    return RLY_STATUS_OK;
}
