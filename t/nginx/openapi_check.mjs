// Validates JSON documents against the component schemas of OpenAI's
// official OpenAPI spec with ajv (a validator we did not write).
//
// usage: node t/nginx/openapi_check.mjs SPEC.json < DOCS.jsonl > RESULTS.jsonl
//   each input line:  {"name": "...", "schema": "Response", "text": "<JSON>"}
//                     (the document as the server sent it, parsed here)
//   each output line: {"name", "schema", "ok", "errors": ["/path: message"]}
//   node t/nginx/openapi_check.mjs SPEC.json --compile-all
//     compiles every component schema and prints {"compiled": N}
//
// The spec says "openapi: 3.1.0" but still carries OpenAPI 3.0 keywords that
// JSON Schema does not have.  Rather than turning ajv's strict mode off (which
// would let any unknown keyword through, and any misread one validate nothing),
// the schemas are first translated into JSON Schema 2019-09, the draft whose
// keywords the spec uses ($recursiveRef), each OpenAPI keyword by its meaning:
//
//   nullable: true       {anyOf: [the schema, {type: "null"}]} (3.0's meaning:
//                        null is also valid, whatever else the schema says,
//                        enum and $ref included); nullable: false is dropped
//   exclusiveMinimum: true (3.0's boolean next to minimum)
//                        exclusiveMinimum: <minimum> (2019-09's number); the
//                        same for exclusiveMaximum
//   x-*                  extensions, annotations by definition: dropped
//   example, discriminator
//                        annotations (a discriminator names the property that
//                        picks the branch; the oneOf/anyOf it sits on still
//                        validates, and a document checked against a whole
//                        union is also checked against the branch its "type"
//                        picks, so that the errors are that branch's)
//   format               OpenAPI's formats: int32, int64, float, double, byte,
//                        binary, password (ajv-formats), and the spec's own
//                        unixtime: a non-negative number of seconds
//
//   required             listed once (the spec repeats some names, which
//                        2019-09's meta-schema refuses; the meaning is the
//                        same)
//
// The spec also misspells two keywords (min_items, max_items) and uses an
// "optional" that neither OpenAPI nor JSON Schema has; those are registered
// as annotations so that strict mode accepts them, which is what every
// non-strict validator does with them.  Every other unknown keyword stops the
// compilation (strict mode), so a keyword this file does not know about
// cannot silently validate nothing.  Two of ajv's strict lints are off, as
// matters of style the spec does not follow: "properties" without "type"
// (strictTypes) and required keys without a schema (strictRequired).  The
// full spec compiles too: node t/nginx/openapi_check.mjs
// ../shared/reference/openai-openapi.json --compile-all
//
// Differences kept on purpose (docs/api.md, "OpenAPI conformance") are
// written as widenings of named schemas in DEVIATIONS below, each with its
// reason; nothing else is relaxed.
import { createRequire } from 'module';
import fs from 'fs';
import path from 'path';
import readline from 'readline';
import url from 'url';

const modules = process.env.NODE_PATH || url.fileURLToPath(
    new URL('../../node_modules', import.meta.url));
const require = createRequire(path.join(path.resolve(modules), 'x.js'));
const Ajv2019 = require('ajv/dist/2019').default;
const addFormats = require('ajv-formats').default;

const BASE = 'https://openapi.invalid/schemas/';
const REF = '#/components/schemas/';

// Translates one OpenAPI schema object into JSON Schema 2019-09 (a copy).
function translate(s) {
    if (Array.isArray(s)) {
        return s.map(translate);
    }
    if (s === null || typeof s !== 'object') {
        return s;
    }
    let out = {};
    for (const [k, v] of Object.entries(s)) {
        if (k.startsWith('x-') || k === 'nullable') {
            continue;
        }
        if (k === 'enum' || k === 'const' || k === 'default'
            || k === 'example' || k === 'examples') {
            out[k] = v;                         /* values, not schemas */
        } else if (k === 'properties' || k === 'patternProperties'
                   || k === '$defs' || k === 'definitions'
                   || k === 'dependentSchemas') {
            out[k] = Object.fromEntries(Object.entries(v).map(
                ([p, ps]) => [p, translate(ps)]));
        } else if (k === 'required' && Array.isArray(v)) {
            out[k] = [...new Set(v)];           /* the spec repeats some */
        } else if (k === '$ref' && typeof v === 'string') {
            if (!v.startsWith(REF)) {
                throw new Error(`unexpected $ref ${v}`);
            }
            out[k] = v.slice(REF.length);       /* relative to BASE */
        } else {
            out[k] = translate(v);
        }
    }
    for (const [b, n] of [['exclusiveMinimum', 'minimum'],
                          ['exclusiveMaximum', 'maximum']]) {
        if (typeof out[b] === 'boolean') {
            if (out[b]) {
                if (typeof out[n] !== 'number') {
                    throw new Error(`${b}: true without ${n}`);
                }
                out[b] = out[n];
                delete out[n];
            } else {
                delete out[b];
            }
        }
    }
    if (s.nullable === true) {
        out = { anyOf: [out, { type: 'null' }] };
    }
    return out;
}

// Differences from the spec kept on purpose for vLLM's wire format (listed
// in docs/api.md).  Each widens what a schema accepts at one place, never
// more: (schema name, path of property names into it, change, reason).
const DEVIATIONS = [
    {
        schema: 'Error', at: ['code'],
        widen: (s) => ({ anyOf: [s, { type: 'integer' }] }),
        why: 'vLLM writes the HTTP status as error.code (an integer)',
    },
    {
        schema: 'ModelResponseProperties', at: ['temperature'],
        widen: (s) => ({ anyOf: [s, { type: 'number', minimum: 0 }] }),
        why: 'a Response shows the temperature it sampled with, and vLLM '
             + 'samples with any temperature >= 0 (OpenAI: at most 2)',
    },
    {
        schema: 'CreateCompletionResponse',
        at: ['choices', '[]', 'logprobs', 'token_logprobs', '[]'],
        widen: (s) => ({ anyOf: [s, { type: 'null' }] }),
        why: 'echo with logprobs: the first prompt token has no logprob '
             + '(null, as OpenAI\'s and vLLM\'s legacy completions write it)',
    },
    {
        schema: 'CreateCompletionResponse',
        at: ['choices', '[]', 'logprobs', 'top_logprobs', '[]'],
        widen: (s) => ({ anyOf: [s, { type: 'null' }] }),
        why: 'echo with logprobs: the first prompt token has no top logprobs',
    },
    {
        schema: 'CreateCompletionStreamResponse',
        from: 'CreateCompletionResponse',
        at: ['choices', '[]', 'finish_reason'],
        widen: (s) => ({ anyOf: [s, { type: 'null' }] }),
        why: 'the spec has no schema for completions stream chunks: they are '
             + 'CreateCompletionResponse objects whose finish_reason is null '
             + 'until a choice ends (OpenAI and vLLM alike)',
    },
    {
        schema: 'CreateCompletionStreamResponse', at: ['usage'],
        widen: (s) => ({ anyOf: [s, { type: 'null' }] }),
        why: 'a completions chunk\'s usage is null but in the last chunk, '
             + 'as CreateChatCompletionStreamResponse has it (vLLM writes '
             + 'the key in every chunk)',
    },
];

// The places (holder, key) of the schema at a path of property names ('[]':
// the array's items) inside holder[key], through anyOf/oneOf/allOf branches;
// $refs are not followed: a deviation names the schema that holds the place.
function places(holder, key, at) {
    const s = holder[key];
    if (at.length === 0) {
        return [{ holder, key }];
    }
    const [head, ...rest] = at;
    const found = [];
    if (head === '[]' && s.items) {
        found.push(...places(s, 'items', rest));
    }
    if (head !== '[]' && s.properties && s.properties[head]) {
        found.push(...places(s.properties, head, rest));
    }
    for (const k of ['anyOf', 'oneOf', 'allOf']) {
        (s[k] || []).forEach((b, i) => found.push(...places(s[k], i, at)));
    }
    return found;
}

function apply_deviations(schemas) {
    for (const d of DEVIATIONS) {
        if (d.from) {
            schemas[d.schema] = structuredClone(schemas[d.from]);
        }
        const hits = places(schemas, d.schema, d.at);
        if (hits.length === 0) {
            throw new Error(`deviation ${d.schema}.${d.at.join('.')}: `
                            + 'no such place in the spec');
        }
        for (const h of hits) {
            h.holder[h.key] = d.widen(h.holder[h.key]);
        }
    }
}

// The value at a JSON pointer of ajv's instancePath.
function at(doc, ptr) {
    let x = doc;
    for (const p of ptr.split('/').slice(1)) {
        x = x == null ? undefined
                      : x[p.replace(/~1/g, '/').replace(/~0/g, '~')];
    }
    return x;
}

// ajv's errors as lines, less those of the branches of a union that the
// object's "type" does not select (a OutputItem that fails lists all 28
// branches otherwise); whether the document is valid is ajv's answer alone.
function explain(errors, doc) {
    const other = (e, ptr) => {
        const o = at(doc, ptr);
        const t = e.parentSchema && e.parentSchema.properties
                  && e.parentSchema.properties.type;
        return o && typeof o === 'object' && t && Array.isArray(t.enum)
               && !t.enum.includes(o.type);
    };
    const unions = new Set(errors.filter(
        (e) => e.keyword === 'oneOf' || e.keyword === 'anyOf')
        .map((e) => e.instancePath));
    const kept = errors.filter((e) => {
        if (other(e, e.instancePath)) {
            return false;
        }
        if (e.keyword === 'enum' && e.instancePath.endsWith('/type')
            && unions.has(e.instancePath.slice(0, -5))) {
            return false;
        }
        return true;
    });
    return kept.map((e) => `${e.instancePath || '/'}: ${e.message}`
                           + (e.params && Object.keys(e.params).length
                              ? ' ' + JSON.stringify(e.params) : ''));
}

export function load(specFile) {
    const spec = JSON.parse(fs.readFileSync(specFile, 'utf8'));
    const schemas = {};
    for (const [name, s] of Object.entries(spec.components.schemas)) {
        schemas[name] = translate(s);
    }
    apply_deviations(schemas);

    const ajv = new Ajv2019({
        strict: true,
        // OpenAPI schemas often give "properties" without "type": "object"
        // (Model, OutputTextContent); JSON Schema allows that, ajv's
        // strictTypes would refuse it as a style matter.
        strictTypes: false,
        // and require keys they do not describe (request_id in
        // ConversationItemMCPApprovalResponseResource): JSON Schema's meaning
        // (the key must be there, any value) stands, ajv's lint is off.
        strictRequired: false,
        allErrors: true,
        verbose: true,
        validateSchema: true,
    });
    addFormats(ajv);
    ajv.addVocabulary(['example', 'discriminator',
                       'min_items', 'max_items', 'optional']);
    ajv.addFormat('unixtime', {
        type: 'number', validate: (x) => Number.isFinite(x) && x >= 0 });

    for (const [name, s] of Object.entries(schemas)) {
        try {
            ajv.addSchema({ ...s, $id: BASE + name });
        } catch (e) {
            throw new Error(`${name}: ${e.message}`);
        }
    }

    // the branches of a discriminated union, by the discriminator's value
    function branches(name) {
        const s = spec.components.schemas[name];
        if (!s || !s.discriminator) {
            return null;
        }
        const key = s.discriminator.propertyName;
        const map = {};
        for (const b of s.oneOf || s.anyOf || []) {
            if (!b.$ref) {
                continue;
            }
            const bn = b.$ref.slice(REF.length);
            const p = schemas[bn].properties && schemas[bn].properties[key];
            for (const v of (p && (p.enum || [p.const])) || []) {
                map[v] = bn;
            }
        }
        return { key, map };
    }

    function check(name, doc) {
        const v = ajv.getSchema(BASE + name);
        if (!v) {
            return [`no component schema ${name}`];
        }
        const errors = [];
        if (!v(doc)) {
            errors.push(...explain(v.errors, doc));
        }
        // a discriminated union: the document is the branch its
        // discriminator names (an anyOf's errors list every branch's)
        const u = branches(name);
        if (u && doc && typeof doc === 'object') {
            const bn = u.map[doc[u.key]];
            if (!bn) {
                return [`/${u.key}: ${JSON.stringify(doc[u.key])} `
                        + `is none of ${name}'s branches`, ...errors];
            }
            const be = check(bn, doc);
            if (be.length) {
                return [`(${name} with ${u.key} ${doc[u.key]}: ${bn})`, ...be];
            }
        }
        return errors;
    }

    return { check, schemas, ajv };
}

async function main() {
    const [specFile, mode] = process.argv.slice(2);
    const v = load(specFile);
    if (mode === '--compile-all') {
        let n = 0;
        for (const name of Object.keys(v.schemas)) {
            try {
                v.ajv.getSchema(BASE + name);
            } catch (e) {
                throw new Error(`${name}: ${e.message}`);
            }
            n++;
        }
        process.stdout.write(JSON.stringify({ compiled: n }) + '\n');
        return;
    }
    const rl = readline.createInterface({ input: process.stdin });
    for await (const line of rl) {
        if (!line.trim()) {
            continue;
        }
        const { name, schema, text } = JSON.parse(line);
        let errors;
        try {
            errors = v.check(schema, JSON.parse(text));
        } catch (e) {
            errors = [`not JSON: ${e.message}`];
        }
        process.stdout.write(JSON.stringify(
            { name, schema, ok: errors.length === 0, errors }) + '\n');
    }
}

if (import.meta.url === url.pathToFileURL(process.argv[1]).href) {
    await main();
}
