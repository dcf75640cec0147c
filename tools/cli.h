/*
 * cli.h -- the `llm` command-line tool: one function per subcommand, each in
 * tools/cmd_<name>.c.  Each returns the process exit status; errors are one
 * line on stderr naming the cause (SPEC section 3).
 */
#ifndef LLM_CLI_H
#define LLM_CLI_H

#include <stdint.h>

typedef int (*llm_cmd_fn)(int argc, char **argv);

int llm_cmd_make_model(int argc, char **argv);
int llm_cmd_tokenize(int argc, char **argv);
int llm_cmd_detokenize(int argc, char **argv);
int llm_cmd_template(int argc, char **argv);
int llm_cmd_logits(int argc, char **argv);
int llm_cmd_generate(int argc, char **argv);
int llm_cmd_bench(int argc, char **argv);
int llm_cmd_quantize(int argc, char **argv);

/* `llm quantize`'s work (cmd_quantize.c), also for make-model --quantize:
 * MODEL written as a GGUF file of TYPE at OUT; the exit status. */
int llm_cli_quantize(const char *model, const char *type, const char *out,
    int threads);

/* Prints "llm: <message>" to stderr and returns 1. */
int llm_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Finds "--name" in argv: returns its value (the next argument), or NULL. */
const char *llm_cli_opt(int argc, char **argv, const char *name);
/* 1 if the flag "--name" is present. */
int llm_cli_flag(int argc, char **argv, const char *name);

/* "1,2,3" -> malloc'd ids; returns the count, -1 on a malformed list. */
int llm_cli_parse_ids(const char *s, int32_t **ids);
/* --threads N, default: the number of online CPUs. */
int llm_cli_threads(int argc, char **argv);

#endif /* LLM_CLI_H */
