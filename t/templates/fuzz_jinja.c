/*
 * fuzz_jinja.c -- libFuzzer target for the chat template engine: any bytes
 * as template source are parsed and, when they parse, rendered with a
 * conversation that has system, user, assistant, tool-call and tool
 * messages plus tool definitions.  Bytes after a NUL, if they are JSON,
 * replace the messages, so the fuzzer also varies the data.
 *
 * The render runs with small limits (steps, memory, recursion) so every
 * input finishes quickly; hitting a limit is an error message like any
 * other.  A crash, a sanitizer report, a leak or a timeout is a bug.
 *
 * Built and run by t/fuzz.sh (`make fuzz-jinja`, and for a bounded number of
 * inputs by t/templates.t); see docs/chat-templates.md.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_tree.h>

#include "jinja/chat_template.h"
#include "jinja/jinja.h"


static const char *const fuzz_messages =
    "[{\"role\":\"system\",\"content\":\"You are \\u00e9 helpful.\"},"
    "{\"role\":\"user\",\"content\":\"Hi\",\"name\":\"u\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
    "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":[1,2.5,true]}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"{\\\"r\\\": 1}\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}]";

static const char *const fuzz_tools =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\"}},"
    "\"required\":[\"a\"]}}}]";

static yajl_val  fuzz_default_messages, fuzz_tools_val;


static jv
fuzz_value(jinja_vm *vm, yajl_val v, int depth)
{
    jv      out;
    size_t  i;

    if (v == NULL || depth > 64) {
        return jv_none();
    }
    switch (v->type) {
    case yajl_t_string:
        if (!ju_valid(v->u.string, strlen(v->u.string))) {
            return jv_none();
        }
        return jv_str(v->u.string, strlen(v->u.string));
    case yajl_t_number:
        return YAJL_IS_INTEGER(v) ? jv_int(YAJL_GET_INTEGER(v))
                                  : jv_float(YAJL_GET_DOUBLE(v));
    case yajl_t_object:
        out = jv_dict_new(vm, v->u.object.len);
        for (i = 0; i < v->u.object.len; i++) {
            const char  *k = v->u.object.keys[i];

            if (ju_valid(k, strlen(k))) {
                jv_dict_set(vm, out, jv_str(k, strlen(k)),
                            fuzz_value(vm, v->u.object.values[i], depth + 1));
            }
        }
        return out;
    case yajl_t_array:
        out = jv_list_new(vm, v->u.array.len);
        for (i = 0; i < v->u.array.len; i++) {
            jv_list_push(vm, out, fuzz_value(vm, v->u.array.values[i], depth + 1));
        }
        return out;
    case yajl_t_true:
        return jv_bool(1);
    case yajl_t_false:
        return jv_bool(0);
    default:
        return jv_none();
    }
}


static void
fuzz_set(jinja_vm *vm, const char *name, jv val)
{
    jinja_scope_set(vm, vm->root, name, strlen(name),
                    jinja_name_hash(name, strlen(name)), val);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char      *src = (const char *) data;
    size_t           len = size, outlen;
    const char      *nul = memchr(data, 0, size);
    yajl_val         messages = NULL;
    jinja_template  *t;
    jinja_vm         vm;
    char             err[LLM_ERR_LEN], *json, *out;

    if (fuzz_default_messages == NULL) {
        fuzz_default_messages = yajl_tree_parse(fuzz_messages, NULL, 0);
        fuzz_tools_val = yajl_tree_parse(fuzz_tools, NULL, 0);
    }
    if (nul) {
        len = (size_t) (nul - src);
        json = malloc(size - len);
        memcpy(json, nul + 1, size - len - 1);
        json[size - len - 1] = '\0';
        messages = yajl_tree_parse(json, NULL, 0);
        free(json);
    }

    t = jinja_parse(src, len, err);
    if (t != NULL) {
        jinja_vm_init(&vm);
        vm.max_steps = 200000;
        vm.max_depth = 60;
        vm.arena.limit = (size_t) 64 << 20;
        vm.date = "2024-07-26";
        if (setjmp(vm.jmp) == 0) {
            vm.root = jinja_scope_new(&vm, NULL);
            fuzz_set(&vm, "messages",
                     fuzz_value(&vm, messages ? messages : fuzz_default_messages, 0));
            fuzz_set(&vm, "tools", fuzz_value(&vm, fuzz_tools_val, 0));
            fuzz_set(&vm, "documents", jv_none());
            fuzz_set(&vm, "add_generation_prompt", jv_bool(1));
            fuzz_set(&vm, "bos_token", jv_lit("<s>"));
            fuzz_set(&vm, "eos_token", jv_lit("</s>"));
            fuzz_set(&vm, "enable_thinking", jv_bool(1));
            out = jinja_render(t, &vm, &outlen);
            free(out);
        }
        jinja_vm_free(&vm);
        jinja_template_free(t);
    }
    yajl_tree_free(messages);
    return 0;
}
