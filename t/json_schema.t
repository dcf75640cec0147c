#!/usr/bin/node
// json_schema.t -- structured output's grammar (engine/grammar/) against
// ajv, a JSON Schema validator we did not write, on thousands of random
// schemas (seeded) within the supported subset (docs/api.md):
//   (a) completions sampled through the grammar (a random allowed byte at a
//       time until the text may end: build/t/test_json_schema check) all
//       parse and validate with ajv, and no walk gets stuck;
//   (b) random documents valid under each schema (made by a generator here,
//       checked by ajv), written in the forms the policies allow (schema
//       order, compact, ", "/": " spacing or 2-space indentation), are all
//       accepted byte by byte and complete.
// LLM_SCHEMA_CASES sets the number of schemas (default 2000).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const ROOT = process.env.LLM_ROOT || path.join(__dirname, '..');
const BUILD = process.env.LLM_BUILD || path.join(ROOT, 'build');
module.paths.unshift(path.join(ROOT, 'node_modules'));
const Ajv = require('ajv');
const addFormats = require('ajv-formats');

const N = Number(process.env.LLM_SCHEMA_CASES || 2000);
let seed = Number(process.env.LLM_SCHEMA_SEED || 20240514);
function rnd() {                       // mulberry32
    seed |= 0;
    seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const ri = (a, b) => a + Math.floor(rnd() * (b - a + 1));
const pick = (a) => a[Math.floor(rnd() * a.length)];
const AST = Symbol('ast');
const COMPACT = new WeakSet();     // enum and const values: written compactly

let n_test = 0;
function ok(cond, name) {
    n_test++;
    console.log(`${cond ? 'ok' : 'not ok'} ${n_test} - ${name}`);
}
const diag = (s) => console.log('# ' + String(s).replace(/\n/g, '\n# '));

// ---- random regexes: the pattern, and strings it matches ----

const SAFE = ['a', 'b', 'z', 'Q', '0', '7', ' ', '-', '.', '_', 'é', '中', '🦞'];
function genRe(d) {
    const k = ri(0, d > 1 ? 4 : 7);
    if (k === 0) return { re: 'ab', gen: () => 'ab' };
    if (k === 1) return { re: '[a-c]', gen: () => pick(['a', 'b', 'c']) };
    if (k === 2) return { re: '\\d', gen: () => String(ri(0, 9)) };
    if (k === 3) return { re: '\\.', gen: () => '.' };
    if (k === 4) return { re: 'é', gen: () => 'é' };
    if (k === 5) {
        const a = genRe(d + 1), b = genRe(d + 1);
        return { re: `(${a.re}|${b.re})`, gen: () => (rnd() < 0.5 ? a : b).gen() };
    }
    if (k === 6) {
        const a = genRe(d + 1), b = genRe(d + 1);
        return { re: a.re + b.re, gen: () => a.gen() + b.gen() };
    }
    const a = genRe(d + 1), lo = ri(0, 2), hi = lo + ri(0, 2);
    const q = pick(['{' + lo + ',' + hi + '}', '*', '+', '?']);
    const [mn, mx] = q === '*' ? [0, 3] : q === '+' ? [1, 3] : q === '?' ? [0, 1] : [lo, hi];
    return { re: `(?:${a.re})${q}`, gen: () => { let s = ''; const n = ri(mn, mx); for (let i = 0; i < n; i++) s += a.gen(); return s; } };
}

// ---- random schemas ----

const NAMES = ['a', 'b', 'id', 'n_1', 'b c', 'q"x', 'é', 'back\\slash', 'Z', 'kind'];
function genSchema(d, defs) {
    const k = ri(0, d >= 3 ? 6 : 13);
    switch (k) {
    case 0: {
        const s = { type: 'string' };
        const v = ri(0, 5);
        if (v === 1) { s.minLength = ri(0, 3); s.maxLength = s.minLength + ri(0, 4); }
        if (v === 2) { s.maxLength = ri(0, 5); }
        if (v === 3) { const r = genRe(0); const anch = rnd() < 0.7; s.pattern = anch ? `^${r.re}$` : r.re; s[AST] = { r, anch }; }
        if (v === 4) { s.format = pick(['date', 'time', 'date-time', 'email', 'uuid']); }
        return s;
    }
    case 1: {
        const s = { type: 'integer' };
        if (rnd() < 0.6) { s.minimum = ri(-50, 50); }
        if (rnd() < 0.6) { s.maximum = (s.minimum ?? -60) + ri(2, 100); }
        if (rnd() < 0.3 && s.minimum !== undefined) { s.exclusiveMinimum = s.minimum; delete s.minimum; }
        if (rnd() < 0.3 && s.maximum !== undefined) { s.exclusiveMaximum = s.maximum; delete s.maximum; }
        return s;
    }
    case 2: {
        const s = { type: 'number' };
        if (rnd() < 0.6) { s.minimum = ri(-500, 500) / 4; }
        if (rnd() < 0.6) { s.maximum = (s.minimum ?? -130) + ri(1, 400) / 8 + 1; }
        if (rnd() < 0.3 && s.minimum !== undefined) { s.exclusiveMinimum = s.minimum; delete s.minimum; }
        return s;
    }
    case 3: return { type: 'boolean' };
    case 4: return { type: 'null' };
    case 5: return { enum: pick([['red', 'green', 'blue'], [1, 12, 123], ['a', 1, null, true],
                                 ['x', { k: [1, 'y'] }, [1.5, -2]], ['', 'a"b', 'é\n']]) };
    case 6: return pick([{ const: 'fixed' }, { const: 42 }, { type: ['string', 'null'], maxLength: 3 },
                         { type: ['integer', 'null'], minimum: 0 }, {}]);
    case 7: case 8: case 9: {
        const s = { type: 'object', properties: {} };
        const names = NAMES.slice().sort(() => rnd() - 0.5).slice(0, ri(0, 4));
        for (const n of names) s.properties[n] = genSchema(d + 1, defs);
        s.required = names.filter(() => rnd() < 0.6);
        const a = ri(0, 5);
        if (a <= 2) s.additionalProperties = false;
        else if (a === 3) s.additionalProperties = true;
        else if (a === 4) s.additionalProperties = genSchema(d + 1, defs);
        return s;
    }
    case 10: case 11: {
        const s = { type: 'array', items: genSchema(d + 1, defs) };
        if (rnd() < 0.5) s.minItems = ri(0, 2);
        if (rnd() < 0.5) s.maxItems = (s.minItems || 0) + ri(0, 3);
        return s;
    }
    case 12: {
        const alts = [];
        for (let i = ri(2, 3); i > 0; i--) alts.push(genSchema(d + 1, defs));
        if (rnd() < 0.5) return { anyOf: alts };
        // oneOf of alternatives of distinct types: exactly one can match
        const types = ['string', 'boolean', 'null', 'integer'].sort(() => rnd() - 0.5).slice(0, 2);
        return { oneOf: types.map((t) => ({ type: t })) };
    }
    default: {
        const name = 'd' + Object.keys(defs).length;
        defs[name] = null;
        // sometimes recursive: a tree of these
        defs[name] = rnd() < 0.5 ? genSchema(d + 1, defs)
            : { type: 'object', properties: { v: { type: 'integer' },
                                               kids: { type: 'array', maxItems: 2, items: { $ref: '#/$defs/' + name } } },
                required: ['v'], additionalProperties: false };
        return { $ref: '#/$defs/' + name };
    }
    }
}

// ---- random valid documents, in the policies' form ----

function genString(s) {
    if (s.format) {
        const p2 = (n) => String(n).padStart(2, '0');
        const date = () => {
            const y = ri(0, 9999), m = ri(1, 12);
            const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
            const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1];
            return `${String(y).padStart(4, '0')}-${p2(m)}-${p2(ri(1, days))}`;
        };
        const time = () => `${p2(ri(0, 23))}:${p2(ri(0, 59))}:${p2(ri(0, 59))}`
            + (rnd() < 0.4 ? '.' + String(ri(0, 999)) : '')
            + (rnd() < 0.5 ? 'Z' : `${pick(['+', '-'])}${p2(ri(0, 23))}:${p2(ri(0, 59))}`);
        const hex = (n) => { let x = ''; for (let i = 0; i < n; i++) x += pick('0123456789abcdefABCDEF'.split('')); return x; };
        const word = (cs) => { let x = ''; for (let i = ri(1, 5); i > 0; i--) x += pick(cs); return x; };
        const label = () => word('abcxyz019'.split('')) + (rnd() < 0.3 ? '-' + word('kq7'.split('')) : '');
        switch (s.format) {
        case 'date': return date();
        case 'time': return time();
        case 'date-time': return date() + 'T' + time();
        case 'uuid': return `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`;
        default: return word("abcXYZ09!#$%&'*+/=?^_`{|}~-".split('')) + (rnd() < 0.3 ? '.' + word('ab'.split('')) : '')
            + '@' + label() + '.' + label();
        }
    }
    if (s[AST]) {
        const { r, anch } = s[AST];
        const side = () => (anch ? '' : Array.from({ length: ri(0, 2) }, () => pick(SAFE)).join(''));
        return side() + r.gen() + side();
    }
    const strict = s.minLength !== undefined || s.maxLength !== undefined;
    const alphabet = strict ? SAFE.concat(['"', '\\', '\n', '\t', '/'])
        : SAFE.concat(['"', '\\', '\n', '\u0001', '\u2028']);
    const lo = s.minLength || 0, hi = s.maxLength ?? lo + 6;
    let out = '';
    for (let n = ri(lo, hi); n > 0; n--) out += pick(alphabet);
    return out;
}

function genAny(d) {
    const k = ri(0, d > 1 ? 3 : 5);
    if (k === 0) return pick([true, false, null]);
    if (k === 1) return ri(-1000, 1000);
    if (k === 2) return ri(-100000, 100000) / 100;
    if (k === 3) return genString({});
    if (k === 4) return Array.from({ length: ri(0, 2) }, () => genAny(d + 1));
    const o = {};
    for (let i = ri(0, 2); i > 0; i--) o[pick(['x', 'y z', 'é'])] = genAny(d + 1);
    return o;
}

function genDoc(s, defs, d) {
    if (s === true || Object.keys(s).length === 0) return genAny(d);
    if (s.$ref) return genDoc(defs[s.$ref.split('/').pop()], defs, d);
    if (s.anyOf || s.oneOf) return genDoc(pick(s.anyOf || s.oneOf), defs, d);
    if (s.enum || 'const' in s) {
        const v = JSON.parse(JSON.stringify(s.enum ? pick(s.enum) : s.const));
        if (v !== null && typeof v === 'object') COMPACT.add(v);
        return v;
    }
    let type = s.type;
    if (Array.isArray(type)) type = pick(type);
    switch (type) {
    case 'null': return null;
    case 'boolean': return rnd() < 0.5;
    case 'string': return genString(s);
    case 'integer': {
        let lo = s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : -100000);
        let hi = s.maximum ?? (s.exclusiveMaximum !== undefined ? s.exclusiveMaximum - 1 : 100000);
        return ri(lo, hi);
    }
    case 'number': {
        const lo = s.minimum ?? s.exclusiveMinimum ?? -1000, hi = s.maximum ?? s.exclusiveMaximum ?? 1000;
        for (;;) {
            const v = Math.round((lo + rnd() * (hi - lo)) * 100) / 100;
            if (v < lo || v > hi || v === s.exclusiveMinimum || v === s.exclusiveMaximum) continue;
            return v;
        }
    }
    case 'array': {
        const n = ri(s.minItems || 0, s.maxItems ?? (s.minItems || 0) + 2);
        return Array.from({ length: d > 4 ? (s.minItems || 0) : n }, () => genDoc(s.items, defs, d + 1));
    }
    default: {
        const o = {};
        for (const [k, v] of Object.entries(s.properties || {})) {
            if ((s.required || []).includes(k) || (rnd() < 0.5 && d < 5)) o[k] = genDoc(v, defs, d + 1);
        }
        const add = s.additionalProperties;
        if (add === true || typeof add === 'object' || !s.properties) {
            for (let i = ri(0, 2); i > 0; i--) {
                const k = pick(['extra', 'x-1', 'more stuff']);
                if (!(k in (s.properties || {})) && !(k in o)) {
                    o[k] = add === true || add === undefined ? genAny(d + 1) : genDoc(add, defs, d + 1);
                }
            }
        }
        return o;
    }
    }
}

// JSON text with the separators the grammar's whitespace policy allows
function dump(v, mode, ind) {
    ind = ind || '';
    if (v === null || typeof v !== 'object' || COMPACT.has(v)) return JSON.stringify(v);
    const nl = mode === 2 ? '\n' + ind + '  ' : '', end = mode === 2 ? '\n' + ind : '';
    const sep = mode === 1 ? ', ' : ',', col = mode === 0 ? ':' : ': ';
    if (Array.isArray(v)) {
        if (v.length === 0) return '[]';
        return '[' + v.map((x) => nl + dump(x, mode, ind + '  ')).join(sep === ', ' ? ', ' : ',') + end + ']';
    }
    const ks = Object.keys(v);
    if (ks.length === 0) return '{}';
    return '{' + ks.map((k) => nl + JSON.stringify(k) + col + dump(v[k], mode, ind + '  ')).join(sep) + end + '}';
}

// ---- the run ----

const ajv = new Ajv({ strict: false, allErrors: false });
addFormats(ajv);
const cases = [], lines = [];
let genBad = 0;
for (let i = 0; i < N; i++) {
    const defs = {};
    const schema = genSchema(0, defs);
    const root = Object.keys(defs).length ? Object.assign({ $defs: defs }, schema) : schema;
    const validate = ajv.compile(root);
    const docs = [];
    for (let j = 0; j < 4; j++) {
        const v = genDoc(schema, defs, 0);
        if (!validate(v)) {
            if (genBad++ < 3) diag(`generator bug: ${JSON.stringify(root)} -> ${JSON.stringify(v)}: ${ajv.errorsText(validate.errors)}`);
            continue;
        }
        docs.push(dump(v, j % 3));
    }
    cases.push({ root, validate, docs });
    lines.push(JSON.stringify({ spec: { schema: root }, docs, samples: 2, seed: i + 1 }));
}
ok(genBad === 0, `the document generator made only valid documents (${genBad} bad)`);

const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'llm-schema-')), 'cases.jsonl');
fs.writeFileSync(file, lines.join('\n') + '\n');
const t0 = Date.now();
const res = execFileSync(path.join(BUILD, 't', 'test_json_schema'), ['check', file],
                         { maxBuffer: 1 << 28 }).toString().trim().split('\n').map((l) => JSON.parse(l));
fs.rmSync(path.dirname(file), { recursive: true });
diag(`${N} schemas through the grammar in ${Date.now() - t0} ms`);

let compileErr = 0, refused = 0, nDocs = 0, invalid = 0, nSamples = 0, stuck = 0, unfinished = 0;
res.forEach((r, i) => {
    const c = cases[i];
    if (r.error) {
        if (compileErr++ < 3) diag(`compile: ${JSON.stringify(c.root)}: ${r.error}`);
        return;
    }
    r.docs.forEach((v, j) => {
        nDocs++;
        if (v !== 1 && refused++ < 5) diag(`refused (${v}) ${c.docs[j]} under ${JSON.stringify(c.root)}`);
    });
    for (const text of r.samples) {
        nSamples++;
        let value, good = false;
        try { value = JSON.parse(text); good = c.validate(value); } catch (e) { good = false; }
        if (!good && invalid++ < 5) diag(`invalid sample ${JSON.stringify(text)} under ${JSON.stringify(c.root)}`);
    }
    stuck += r.stuck;
    unfinished += r.unfinished;
});
ok(res.length === N, `a verdict for each of the ${N} schemas`);
ok(compileErr === 0, `every schema of the subset compiles (${compileErr} did not)`);
ok(refused === 0, `all ${nDocs} valid documents accepted byte by byte and complete (${refused} not)`);
ok(invalid === 0, `all ${nSamples} sampled completions parse and validate with ajv (${invalid} not)`);
ok(stuck === 0, `no sampling walk got stuck before the text could end (${stuck})`);
ok(unfinished <= N * 2 * 0.05, `at most 5% of the walks ran past 4 KB (${unfinished})`);
ok(nSamples >= N, `${nSamples} completions checked`);
console.log(`1..${n_test}`);
