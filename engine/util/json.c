/*
 * json.c -- the one lookup of a key in a yajl JSON object (llm.h).
 */
#include <string.h>
#include <yajl/yajl_tree.h>

#include "llm.h"


yajl_val
llm_json_get(yajl_val obj, const char *key)
{
    size_t  i;

    if (obj == NULL || !YAJL_IS_OBJECT(obj)) {
        return NULL;
    }
    /* a key given twice: the last one wins, as in Python's json */
    for (i = obj->u.object.len; i > 0; i--) {
        if (strcmp(obj->u.object.keys[i - 1], key) == 0) {
            return obj->u.object.values[i - 1];
        }
    }
    return NULL;
}
