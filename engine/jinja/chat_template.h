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

#include "llm.h"   /* llm_chat_template and its render API */

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

#endif /* LLM_CHAT_TEMPLATE_H */
