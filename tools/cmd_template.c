/*
 * cmd_template.c -- `llm template`: renders a model's chat template.
 *
 *   llm template --model DIR --messages FILE [--tools FILE]
 *       [--documents FILE] [--add-generation-prompt] [--kwargs JSON]
 *       [--tool-arguments-json]
 *
 * --tool-arguments-json parses OpenAI-style string tool-call arguments into
 * objects first, as vLLM does (LLM_CHAT_TOOL_ARGS_JSON).
 * Prints the prompt exactly, with no newline added (SPEC section 3).
 * strftime_now() uses the current date unless LLM_TEMPLATE_DATE pins it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_tree.h>

#include "jinja/chat_template.h"
#include "model/model.h"
#include "cli.h"
#include "llm.h"
#include "util/util.h"


/* Parses a JSON file (or, for --kwargs, a JSON text) into *out. */
static int
llm_template_json(const char *what, const char *text, const char *file,
    yajl_val *out)
{
    char   err[LLM_ERR_LEN], yerr[256];
    char  *buf = NULL;

    if (file) {
        buf = llm_read_file(file, NULL, err);
        if (buf == NULL) {
            return llm_cli_fail("%s", err);
        }
        text = buf;
    }
    *out = yajl_tree_parse(text, yerr, sizeof(yerr));
    free(buf);
    if (*out == NULL) {
        char  *nl = strchr(yerr, '\n');

        if (nl) {
            *nl = '\0';
        }
        return llm_cli_fail("%s%s%s: invalid JSON: %s", what, file ? " " : "",
                            file ? file : "", yerr);
    }
    return 0;
}


int
llm_cmd_template(int argc, char **argv)
{
    const char         *model = llm_cli_opt(argc, argv, "--model");
    const char         *msgs = llm_cli_opt(argc, argv, "--messages");
    const char         *tools_file = llm_cli_opt(argc, argv, "--tools");
    const char         *docs_file = llm_cli_opt(argc, argv, "--documents");
    const char         *kw_text = llm_cli_opt(argc, argv, "--kwargs");
    int                 agp = llm_cli_flag(argc, argv, "--add-generation-prompt");
    unsigned            flags = llm_cli_flag(argc, argv, "--tool-arguments-json")
                                ? LLM_CHAT_TOOL_ARGS_JSON : 0;
    yajl_val            messages = NULL, tools = NULL, docs = NULL, kwargs = NULL;
    llm_chat_template  *t;
    char                err[LLM_ERR_LEN], *out;
    size_t              len;
    int                 rc = 1;

    if (model == NULL || msgs == NULL) {
        return llm_cli_fail("usage: llm template --model DIR --messages FILE "
                            "[--tools FILE] [--documents FILE] "
                            "[--add-generation-prompt] [--kwargs JSON] "
                            "[--tool-arguments-json]");
    }
    if (llm_template_json("--messages", NULL, msgs, &messages)
        || (tools_file && llm_template_json("--tools", NULL, tools_file, &tools))
        || (docs_file && llm_template_json("--documents", NULL, docs_file, &docs))
        || (kw_text && llm_template_json("--kwargs", kw_text, NULL, &kwargs)))
    {
        goto done;
    }
    if (llm_model_text_load(model, NULL, &t, err) != 0) {
        llm_cli_fail("%s", err);
        goto done;
    }
    if (t == NULL) {
        if (err[0] == '\0') {
            llm_cli_fail("%s: the model has no chat template "
                         "(%s)", model, llm_model_path_is_gguf(model)
                         ? "no tokenizer.chat_template"
                         : "no chat_template.jinja, no \"chat_template\" "
                           "in tokenizer_config.json");
        } else {
            llm_cli_fail("%s", err);
        }
        goto done;
    }
    out = llm_chat_template_render_flags(t, messages, tools, docs, agp, kwargs, flags,
                                         &len, err);
    llm_chat_template_free(t);
    if (out == NULL) {
        llm_cli_fail("%s", err);
        goto done;
    }
    if (fwrite(out, 1, len, stdout) != len || fflush(stdout) != 0) {
        free(out);
        llm_cli_fail("writing the prompt failed");
        goto done;
    }
    free(out);
    rc = 0;

done:
    yajl_tree_free(messages);
    yajl_tree_free(tools);
    yajl_tree_free(docs);
    yajl_tree_free(kwargs);
    return rc;
}
