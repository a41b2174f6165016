/* help.c - the help of the `rly` tool: one table row per command (summary, usage, text, example,
 * options), printed by `rly --help`, `rly help CMD` and `rly CMD --help`; and the messages for
 * arguments it does not understand, with the closest command or option as a suggestion.
 * A new command is one row here and one dispatch line in main.c. */
#include <stdlib.h>
#include <string.h>

#include "cmds.h"

typedef struct CmdHelp {
    const char *name;
    const char *summary; /* one line in the overview */
    const char *usage;   /* the synopsis lines after "usage: " */
    const char *text;    /* what it does, then its options, indented by two */
    const char *example;
    const char *options; /* its options, space-separated; "=" after one that takes a value */
} CmdHelp;

/* Options `rly run` and `rly bench` share (run_option in main.c). */
#define RUN_INPUT_OPTIONS                                                                          \
    "--entry= --input= --inputs= --fill= --seed= --prelude --input-shapes= -O0 -O1 -O2 -O3 "       \
    "--profile= "

#define RUN_INPUT_HELP                                                                             \
    "  --entry NAME            run @NAME instead of @main\n"                                       \
    "  --input NAME=x.npy      the parameter NAME from a .npy file (repeatable)\n"                 \
    "  --inputs in.npz         parameters from the arrays of a .npz file, by name\n"               \
    "  --fill random|zeros|ones\n"                                                                 \
    "                          generate the parameters no file gives (otherwise an error)\n"       \
    "  --seed N                seed of --fill random (default 0)\n"                                \
    "  --prelude               make the standard library (List, Option, map, ...) visible\n"       \
    "  --input-shapes 'x:[1,3,224,224] ...'\n"                                                     \
    "                          concrete shapes for an ONNX model's inputs with unknown dims\n"     \
    "  -O0..3, -O N            optimization level\n"                                               \
    "  --profile out.json      write a Chrome trace of the operators (Perfetto,\n"                 \
    "                          chrome://tracing) and print the top operators on stderr\n"

static const CmdHelp k_cmds[] = {
    {"print", "parse a module or expression, check it, print canonical text",
     "rly print FILE|- [-o OUT.rly]",
     "Parse FILE (- reads standard input), check that it is well formed, and print it in\n"
     "canonical form.\n\n"
     "  -o OUT.rly              write OUT.rly instead, plus OUT.npz with the tensor constants\n",
     "rly print examples/demo.rly -o /tmp/demo.rly", "-o="},
    {"check", "infer and check types; print the module with its types",
     "rly check FILE|- [--prelude]",
     "Infer the types of FILE and print it with /*ty=...*/ annotations, or every type error\n"
     "(exit status 1).\n\n"
     "  --prelude               make the standard library (List, Option, Tree, map, foldl,\n"
     "                          ...) visible\n",
     "rly check examples/demo.rly", "--prelude"},
    {"run", "run a program (VM or interpreter) and print or save its result",
     "rly run FILE|MODEL.onnx|MODEL.rlyx [options]",
     "Type-check FILE and run its @main on the VM (compiled in memory; the default) or in the\n"
     "reference interpreter; print the result, or write it to a .npz file as output_0,\n"
     "output_1, ... (tuples flattened depth-first; an ONNX model's arrays take its output\n"
     "names). A compiled MODEL.rlyx runs on the VM.\n\n" RUN_INPUT_HELP
     "  --output out.npz        write the result instead of printing it\n"
     "  --engine vm|interp      the VM (default) or the reference interpreter\n"
     "  --threads N             worker threads (0: the default)\n"
     "  --max-memory BYTES      limit on live values (K/M/G/T suffixes; default RAM/4)\n"
     "  --timeout SECONDS       wall-clock limit (default none)\n"
     "  --max-depth N           Relay call depth limit (default 10^7); 'none' lifts a limit\n"
     "  --check-numerics        stop at the first operator (or fused group) whose output holds\n"
     "                          NaN or Inf while its inputs did not; name it and its inputs\n"
     "Default -O3 on the VM, -O0 in the interpreter.\n",
     "rly run model.rly --fill random --seed 1 --output out.npz",
     RUN_INPUT_OPTIONS "--output= --engine= --threads= --max-memory= --timeout= --max-depth= "
                       "--check-numerics"},
    {"compile", "optimize and compile for the VM into an .rlyx executable",
     "rly compile FILE|MODEL.onnx [options] -o OUT.rlyx",
     "Optimize (default -O3) and compile for the VM; write the executable OUT.rlyx (which\n"
     "librly_runtime loads), with the weights also in the layouts this machine's kernels use.\n"
     "Given an .rlyx, describe (or copy) it.\n\n"
     "  -o OUT.rlyx             the executable to write\n"
     "  -O0..3, -O N            optimization level (default 3)\n"
     "  --entry NAME            compile @NAME as the entry (default @main)\n"
     "  --prelude               make the standard library visible\n"
     "  --input-shapes 'x:[1,3,224,224] ...'\n"
     "                          concrete shapes for an ONNX model's inputs\n"
     "  --no-prepack            keep the weights only as given (packed at first use)\n"
     "  --stats                 print counts: functions, instructions, packed, constant bytes\n"
     "  --disasm                print the bytecode\n",
     "rly compile model.onnx -o model.rlyx --stats",
     "-o= -O0 -O1 -O2 -O3 --entry= --prelude --input-shapes= --no-prepack --stats --disasm"},
    {"bench", "time runs of a program: compile time, then min/median/p90 per run",
     "rly bench FILE|MODEL.rlyx [inputs as for run] [options]",
     "Time rly_session_run alone on FILE (an .rlyx, or compiled first, default -O3): the load\n"
     "or compile time, then min / median / p90 / mean per run over the timed runs, after the\n"
     "warmup runs. A progress bar shows on a terminal.\n\n" RUN_INPUT_HELP
     "  --threads N             worker threads (0: the default)\n"
     "  --warmup N              untimed runs first (default 1)\n"
     "  --repeat N              timed runs\n"
     "  --min-time SECONDS      run for at least this long, at least 10 runs (default 1)\n"
     "  -q                      no progress bar\n",
     "rly bench model.onnx --fill random --repeat 100",
     RUN_INPUT_OPTIONS "--threads= --warmup= --repeat= --min-time= -q"},
    {"grad", "reverse-mode automatic differentiation of a function",
     "rly grad FILE|MODEL.onnx [options]",
     "Print the module with @main (or @G) defined as the gradient of @main (or @NAME):\n"
     "fn(T1..Tn) -> (R, (T1..Tn)), the result and the gradient of the sum of its elements\n"
     "for every input. `rly run` executes it (output_0 the value, output_1.. the gradients).\n\n"
     "  --entry NAME            differentiate @NAME (default @main)\n"
     "  --name G                define the gradient as @G (default @main)\n"
     "  --mode higher|first     higher: the whole language (default); first: dataflow\n"
     "                          programs, straight-line output\n"
     "  --prelude               make the standard library visible\n"
     "  --input-shapes 'x:[2,3] ...'\n"
     "                          concrete shapes for an ONNX model's inputs (gradients of\n"
     "                          some operators need static shapes)\n"
     "  -o OUT.rly              write OUT.rly (and OUT.npz) instead of printing\n",
     "rly grad examples/mlp_loss.rly --mode first -o /tmp/grad.rly",
     "--entry= --name= --mode= --prelude --input-shapes= -o="},
    {"opt", "optimize: a pipeline of passes, printing the result",
     "rly opt FILE|MODEL.onnx [options]",
     "Run the default pipeline of the opt level (default -O3), or the passes given, in order;\n"
     "print the result (or write OUT.rly).\n\n"
     "  -O0..3, -O N            optimization level\n"
     "  --passes 'A,B(k=v,...)' run exactly these passes\n"
     "  --required A,B          passes to run whatever the level\n"
     "  --disabled A,B          passes not to run\n"
     "  --print-ir-after NAME|all\n"
     "                          print the module after the pass (on stderr)\n"
     "  --time-passes           print the time of every pass\n"
     "  --verify                re-infer types after each pass and check every type\n"
     "  --list                  list the passes\n"
     "  --prelude               make the standard library visible\n"
     "  --input-shapes 'x:[1,3,224,224] ...'\n"
     "                          concrete shapes for an ONNX model's inputs\n"
     "  -o OUT.rly              write OUT.rly (and OUT.npz) instead of printing\n",
     "rly opt examples/demo.rly --passes 'FoldConstant,FuseOps(fuse_opt_level=2)'",
     "-O0 -O1 -O2 -O3 --passes= --required= --disabled= --print-ir-after= --time-passes "
     "--verify --list --prelude --input-shapes= -o="},
    {"equal", "compare two modules up to renaming (alpha-equivalence)",
     "rly equal A.rly B.rly [--prelude]",
     "Exit 0 when the modules are alpha-equivalent; otherwise show where they first differ, in\n"
     "both files, and exit 1.\n\n"
     "  --prelude               make the standard library visible\n",
     "rly equal before.rly after.rly", "--prelude"},
    {"import", "import an ONNX model as Relay text",
     "rly import MODEL.onnx [-o OUT.rly] [--input-shapes ...] [--params-as-inputs]",
     "Import an ONNX model; print its Relay text, or write OUT.rly and OUT.npz with the\n"
     "weights.\n\n"
     "  -o OUT.rly              write OUT.rly and OUT.npz instead of printing\n"
     "  --input-shapes 'x:[1,3,224,224] ...'\n"
     "                          concrete shapes for inputs with unknown dims\n"
     "  --params-as-inputs      make the weights parameters of @main instead of constants\n",
     "rly import resnet.onnx -o resnet.rly --input-shapes 'data:[1,3,224,224]'",
     "-o= --input-shapes= --params-as-inputs"},
    {"info", "describe an ONNX model: opsets, inputs, outputs, operators", "rly info MODEL.onnx",
     "Describe an ONNX model: IR version, opsets, inputs, outputs, operator histogram and the\n"
     "operators rly does not support.\n",
     "rly info model.onnx", ""},
    {"test", "run ONNX test-case folders (model.onnx, test_data_set_*/)",
     "rly test DIR... [--exclude FILE] [-O0..3] [--engine vm|interp|rlyx] [-q|-v]",
     "Run ONNX test-case folders: a line per failure (and per skipped case), then\n"
     "'N passed, N failed, N skipped'. A progress bar shows on a terminal.\n\n"
     "  --exclude FILE          case names to skip, one a line, each with its reason\n"
     "  -O0..3, -O N            optimize each model first (default -O0)\n"
     "  --engine vm|interp|rlyx as for run (rlyx: the VM through a saved and reloaded\n"
     "                          executable)\n"
     "  -q                      only failures and the summary\n"
     "  -v                      also a line per passing case, with its time\n",
     "rly test -q /usr/share/libonnx-testdata/data/node/*/",
     "--exclude= -O0 -O1 -O2 -O3 --engine= -q -v"},
    {"ops", "list the operator table, or describe one operator", "rly ops [NAME]",
     "List the operator table (or one operator): arguments, fusion pattern, doc, attributes\n"
     "with types and defaults.\n",
     "rly ops nn.conv2d", ""},
    {"repl", "Relay REPL: definitions and expressions line by line", "rly repl [FILE]",
     "Relay REPL: definitions and expressions line by line (multi-line input until brackets\n"
     "balance); each expression is type-checked and run. FILE is loaded first.\n\n"
     "  :type EXPR              the type of EXPR\n"
     "  :print NAME             the definition of @NAME\n"
     "  :load FILE              load the definitions of FILE\n"
     "  :opt [-O N]             optimize the definitions so far\n"
     "  :time EXPR              run EXPR and print how long it took\n"
     "  :quit                   leave (also end of input)\n",
     "rly repl examples/demo.rly", ""},
    {"debug", "step debugger on the interpreter",
     "rly debug FILE [--entry NAME] [inputs as for run]",
     "A step debugger on the reference interpreter, commands read from standard input:\n\n"
     "  break LINE|@global      stop at a source line or on entering a function\n"
     "  step, next, finish      into calls, over them, out of the current one\n"
     "  continue                run to the next breakpoint\n"
     "  print %var              a value (tensors summarized: shape, dtype, min/max/mean,\n"
     "                          NaN/Inf count)\n"
     "  backtrace               the Relay frames, with their source lines\n"
     "  list                    the source around the current point\n",
     "rly debug model.rly --fill random", "--entry= --input= --inputs= --fill= --seed= --prelude"},
    {"viz", "draw the dataflow graph (DOT, SVG or HTML)",
     "rly viz FILE|MODEL.onnx [-O N] [-o out.dot|out.svg|out.html]",
     "Draw the dataflow graph: fused groups as clusters, shapes on edges, control flow and\n"
     "calls visible. SVG needs Graphviz's dot; the HTML view (pan/zoom) needs nothing.\n\n"
     "  -O0..3, -O N            optimize first\n"
     "  -o out.dot|out.svg|out.html\n"
     "                          the output file; its extension picks the format\n",
     "rly viz model.onnx -O3 -o model.html", "-O0 -O1 -O2 -O3 -o= --input-shapes= --prelude"},
    {"demo", "run the bundled example model and print its result", "rly demo",
     "Run the bundled example model (examples/demo.rly: a small CNN with generated weights\n"
     "and input, a List map and a closure) on the VM and print its result.\n",
     "rly demo", ""},
    {"help", "help on a command", "rly help [COMMAND]",
     "Print the help of COMMAND (the same as `rly COMMAND --help`), or the list of commands.\n",
     "rly help run", ""},
    {"version", "print the version", "rly version (or rly --version)", "Print the version.\n",
     "rly --version", ""},
};
enum { N_CMDS = (int)(sizeof k_cmds / sizeof k_cmds[0]) };

static const CmdHelp *find(const char *name) {
    for (int i = 0; i < N_CMDS; i++)
        if (strcmp(k_cmds[i].name, name) == 0) return &k_cmds[i];
    return NULL;
}

bool cli_is_command(const char *cmd) { return find(cmd) != NULL; }

void cli_help_overview(FILE *f) {
    fputs("usage: rly <command> [args]    (rly <command> --help: its options)\n\ncommands:\n", f);
    for (int i = 0; i < N_CMDS; i++)
        fprintf(f, "  %-10s %s\n", k_cmds[i].name, k_cmds[i].summary);
    fputs("\nexample: rly run examples/demo.rly --fill random\n", f);
}

bool cli_help_command(const char *cmd, FILE *f) {
    const CmdHelp *h = find(cmd);
    if (h == NULL) return false;
    fprintf(f, "usage: %s\n\n%s\nexample: %s\n", h->usage, h->text, h->example);
    return true;
}

/* Levenshtein distance of a and b, two rows at a time; words here are short (options and
 * command names), so the rows are bounded and on the stack. */
static int edit_distance(const char *a, const char *b) {
    enum { MAX = 64 };
    size_t na = strlen(a), nb = strlen(b);
    if (na >= MAX || nb >= MAX) return MAX;
    int row0[MAX], row1[MAX];
    int *prev = row0, *cur = row1;
    for (size_t j = 0; j <= nb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        int *t = prev;
        prev = cur;
        cur = t;
    }
    return prev[nb];
}

const char *cli_closest(const char *word, const char *const *cands, int n) {
    const char *best = NULL;
    int best_d = 0;
    size_t wl = strlen(word);
    for (int i = 0; i < n; i++) {
        int d = edit_distance(word, cands[i]);
        if (best == NULL || d < best_d) {
            best = cands[i];
            best_d = d;
        }
    }
    /* close enough to be a typo: at most a third of the word's letters (at least one, at most
     * three) differ; a prefix of a longer option also counts (--inp for --inputs) */
    int limit = (int)(wl / 3);
    limit = limit < 1 ? 1 : limit > 3 ? 3 : limit;
    if (best != NULL && best_d <= limit) return best;
    for (int i = 0; i < n; i++)
        if (wl >= 4 && strncmp(cands[i], word, wl) == 0) return cands[i];
    return NULL;
}

int cli_unknown_command(const char *cmd) {
    const char *names[N_CMDS];
    for (int i = 0; i < N_CMDS; i++)
        names[i] = k_cmds[i].name;
    const char *s = cli_closest(cmd, names, N_CMDS);
    if (s)
        fprintf(stderr, "rly: error: unknown command '%s'; did you mean '%s'?\n", cmd, s);
    else
        fprintf(stderr, "rly: error: unknown command '%s' (rly --help lists the commands)\n", cmd);
    return 2;
}

int cli_bad_argument(const char *cmd, const char *arg) {
    const CmdHelp *h = find(cmd);
    /* the command's options, split at spaces, without their "=" marks */
    char buf[1024];
    const char *opts[64];
    bool takes_value[64];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", h ? h->options : "");
    for (char *p = strtok(buf, " "); p && n < 64; p = strtok(NULL, " ")) {
        size_t l = strlen(p);
        takes_value[n] = l > 0 && p[l - 1] == '=';
        if (takes_value[n]) p[l - 1] = '\0';
        opts[n++] = p;
    }
    if (arg[0] != '-' || strcmp(arg, "-") == 0) {
        fprintf(stderr, "rly: error: %s: unexpected argument '%s' (see rly %s --help)\n", cmd, arg,
                cmd);
        return 2;
    }
    for (int i = 0; i < n; i++)
        if (strcmp(opts[i], arg) == 0) {
            fprintf(stderr, "rly: error: %s: option '%s' %s\n", cmd, arg,
                    takes_value[i] ? "needs a value" : "is not accepted here");
            return 2;
        }
    /* --name=value: suggest for the name */
    char name[128];
    snprintf(name, sizeof name, "%s", arg);
    char *eq = strchr(name, '=');
    if (eq) *eq = '\0';
    const char *s = cli_closest(name, opts, n);
    if (s)
        fprintf(stderr, "rly: error: %s: unknown option '%s'; did you mean '%s'?\n", cmd, name, s);
    else
        fprintf(stderr, "rly: error: %s: unknown option '%s' (see rly %s --help)\n", cmd, name,
                cmd);
    return 2;
}
