// hf_corpus_ids.js -- the tokenizer corpus (t/tokenizer/corpus.js) and Hugging Face's ids for
// it (npm tokenizers, the Rust library) from a model directory's tokenizer.json, with and
// without the special tokens the post-processor adds: the reference t/gguf.t holds the
// tokenizer a GGUF file carries to.  Invalid UTF-8 reaches HF as WHATWG's decoding, the rule
// the C tokenizer documents (as in t/tokenizer/reference.js).
// usage: NODE_PATH=node_modules node t/gguf/hf_corpus_ids.js MODEL_DIR
//        -> {"hex": [...], "ids": [[...]...], "ids_special": [[...]...]}
'use strict';
const path = require('path');
const { Tokenizer } = require('tokenizers');
const { build } = require('../tokenizer/corpus');

(async () => {
    const tok = Tokenizer.fromFile(path.join(process.argv[2], 'tokenizer.json'));
    const out = { hex: [], ids: [], ids_special: [] };
    for (const buf of build()) {
        const text = buf.toString('utf8');
        out.hex.push(buf.toString('hex'));
        out.ids.push(Array.from((await tok.encode(text, null, { addSpecialTokens: false })).getIds()));
        out.ids_special.push(Array.from((await tok.encode(text, null, { addSpecialTokens: true })).getIds()));
    }
    process.stdout.write(JSON.stringify(out) + '\n');
})().catch((e) => { console.error(`hf_corpus_ids: ${e.message}`); process.exit(1); });
