/* main.c - a program built against an installed rly (tests/install/test_install.sh): parses a
 * Relay program, runs it on the VM and prints the result, through the public API only. */
#include <stdio.h>
#include <string.h>

#include <rly/rly.h>

int main(void) {
    static const char src[] = "#[version = \"0.0.5\"]\n"
                              "def @main() { add(1f, 2f) }\n";
    rly_ctx *ctx;
    rly_module *mod;
    char *text = NULL;
    if (rly_ctx_new(&ctx) != RLY_STATUS_OK) return 1;
    rly_run_options o = {.opt_level = 0};
    if (rly_module_parse(ctx, src, strlen(src), "consumer.rly", &mod) != RLY_STATUS_OK ||
        rly_module_run(mod, &o, &text) != RLY_STATUS_OK) {
        fprintf(stderr, "consumer: %s\n", rly_last_error());
        rly_ctx_free(ctx);
        return 1;
    }
    printf("rly %s: %s\n", rly_version(), text);
    rly_free(text);
    rly_ctx_free(ctx);
    return 0;
}
