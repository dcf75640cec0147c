/*
 * chat_template.h -- renders a model's own Jinja chat_template, byte for byte
 * as Python jinja2 does when configured the way Hugging Face configures it
 * (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
 * tojson with ensure_ascii=False, raise_exception, strftime_now).
 */
#ifndef LLM_CHAT_TEMPLATE_H
#define LLM_CHAT_TEMPLATE_H

#include <stddef.h>
#include <yajl/yajl_tree.h>

typedef struct llm_chat_template llm_chat_template;

/* Loads the template of a model directory: DIR/chat_template.jinja, else
 * tokenizer_config.json "chat_template" (a string, or a list of
 * {"name","template"} where "default" is used).  bos_token and eos_token come
 * from tokenizer_config.json.  Returns NULL with err[0] == '\0' when the
 * model has no template, NULL with a message in err (LLM_ERR_LEN bytes) when
 * the template cannot be read or parsed. */
llm_chat_template *llm_chat_template_load(const char *dir, char *err);

/* Parses template source directly (tests, `llm template`). */
llm_chat_template *llm_chat_template_parse(const char *src, size_t len,
    const char *bos_token, const char *eos_token, char *err);

void llm_chat_template_free(llm_chat_template *t);

/* Renders with messages (a JSON array), tools (array or NULL), documents
 * (array or NULL), add_generation_prompt, and extra kwargs (an object whose
 * keys become template variables, e.g. enable_thinking; NULL for none).
 * Returns a malloc'd string (length in *len), or NULL with the reason in err
 * (a raise_exception() message is passed through verbatim). */
char *llm_chat_template_render(const llm_chat_template *t, yajl_val messages,
    yajl_val tools, yajl_val documents, int add_generation_prompt,
    yajl_val kwargs, size_t *len, char *err);

/* Flags of llm_chat_template_render_flags(). */
#define LLM_CHAT_TOOL_ARGS_JSON  0x01   /* what vLLM does to OpenAI requests
    before rendering: in assistant messages, tool_calls[].function.arguments
    given as a JSON string is parsed into its value (missing, null or ""
    become {}), because chat templates expect objects there; a string that
    is not JSON is an error */

/* llm_chat_template_render() with flags (0 is exactly the function above). */
char *llm_chat_template_render_flags(const llm_chat_template *t,
    yajl_val messages, yajl_val tools, yajl_val documents,
    int add_generation_prompt, yajl_val kwargs, unsigned flags, size_t *len,
    char *err);

#endif /* LLM_CHAT_TEMPLATE_H */
