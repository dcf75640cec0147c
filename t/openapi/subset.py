#!/usr/bin/python3
"""Extracts from OpenAI's OpenAPI spec the component schemas the API of
ngx_llm answers with, and every schema they reach by $ref, unmodified:
t/openapi/openai-openapi.subset.json, which t/api_openapi_schema.t
validates against (a clean clone has no copy of the 3.4 MB spec).

usage: t/openapi/subset.py SPEC.json > t/openapi/openai-openapi.subset.json
"""
import json
import sys

ROOTS = ['CreateChatCompletionResponse', 'CreateChatCompletionStreamResponse',
         'CreateCompletionResponse', 'ListModelsResponse', 'Model',
         'Response', 'ResponseStreamEvent', 'ErrorResponse']
PREFIX = '#/components/schemas/'


def refs(x):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == '$ref':
                assert v.startswith(PREFIX), v
                yield v[len(PREFIX):]
            else:
                yield from refs(v)
    elif isinstance(x, list):
        for v in x:
            yield from refs(v)


def main():
    spec = json.load(open(sys.argv[1]))
    schemas = spec['components']['schemas']
    seen, todo = set(), list(ROOTS)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(refs(schemas[name]))
    out = {
        'openapi': spec['openapi'],
        'info': spec['info'],
        'x-subset': {
            'source': 'openai/openai-openapi openapi.json, commit f85dbe22',
            'roots': ROOTS,
            'made-by': 't/openapi/subset.py',
        },
        'components': {'schemas': {n: schemas[n] for n in sorted(seen)}},
    }
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write('\n')


main()
