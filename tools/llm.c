/*
 * llm.c -- entry point of the `llm` CLI: the engine without nginx.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"


static const struct {
    const char  *name;
    llm_cmd_fn   fn;
    const char  *usage;
} llm_commands[] = {
    /* one line per subcommand, added as tools/cmd_<name>.c lands */
    { "make-model", llm_cmd_make_model,
      "--tokenizer DIR --out DIR [--arch llama|qwen2|qwen3|mistral] [--layers N --hidden N --heads N --kv-heads N --intermediate N --dtype bf16|f16|f32 --seed N --tie --rope-llama3 --shards N --quantize TYPE]" },
    { "quantize", llm_cmd_quantize,
      "--model DIR|FILE.gguf --type q8_0|q4_0|q4_k|f32|f16|bf16 --out FILE.gguf [--threads N]" },
    { "tokenize", llm_cmd_tokenize,
      "--model DIR [--special] TEXT | --file PATH" },
    { "detokenize", llm_cmd_detokenize,
      "--model DIR [--skip-special] ID..." },
    { "template", llm_cmd_template,
      "--model DIR --messages FILE [--tools FILE] [--documents FILE] [--add-generation-prompt] [--kwargs JSON]" },
    { "logits", llm_cmd_logits,
      "--model DIR --ids 1,2,3 --out FILE [--threads N --device cpu|auto|cuda:N]" },
    { "generate", llm_cmd_generate,
      "--model DIR --prompt TEXT [--max-tokens N --temperature T --top-p P --top-k K --seed S --threads N --device cpu|auto|cuda:N --json]" },
    { "bench", llm_cmd_bench,
      "--model DIR [--prompt-len P --gen-len G --batch B --threads T --reps R --device cpu|auto|cuda:N] [--json]" },
    { NULL, NULL, NULL }
};


int
llm_cli_fail(const char *fmt, ...)
{
    va_list  ap;

    fputs("llm: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}


const char *
llm_cli_opt(int argc, char **argv, const char *name)
{
    int  i;

    for (i = 1; i < argc - 1; i++) {
        if (strcmp(argv[i], name) == 0) {
            return argv[i + 1];
        }
    }
    return NULL;
}


int
llm_cli_flag(int argc, char **argv, const char *name)
{
    int  i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}


static int
llm_usage(void)
{
    int  i;

    fputs("usage: llm COMMAND [options]\n", stderr);
    for (i = 0; llm_commands[i].name; i++) {
        fprintf(stderr, "  llm %s %s\n", llm_commands[i].name,
                llm_commands[i].usage);
    }
    return 2;
}


int
main(int argc, char **argv)
{
    int  i;

    if (argc < 2) {
        return llm_usage();
    }
    for (i = 0; llm_commands[i].name; i++) {
        if (strcmp(argv[1], llm_commands[i].name) == 0) {
            return llm_commands[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "llm: unknown command '%s'\n", argv[1]);
    return llm_usage();
}
