// Token ids from Hugging Face's own tokenizer (npm `tokenizers`, the Rust library), with the
// tokenizer's special tokens added (HF add_special_tokens=True): the reference for the prompt
// ids `llm generate` reports.  With a third argument `no-special`: add_special_tokens=False,
// the ids of a rendered chat prompt (vLLM's chat default: the template writes the BOS).
// usage: NODE_PATH=node_modules node t/ref/hf_tokenize.js MODEL_DIR TEXT [no-special]
//        -> JSON array
const { Tokenizer } = require('tokenizers');
const path = require('path');

(async () => {
    const [dir, text, mode] = process.argv.slice(2);
    if (mode !== undefined && mode !== 'no-special') {
        throw new Error(`unknown mode '${mode}' (no-special or nothing)`);
    }
    const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
    const enc = await tok.encode(text, null, { addSpecialTokens: mode !== 'no-special' });
    process.stdout.write(JSON.stringify(Array.from(enc.getIds())) + '\n');
})().catch((e) => { console.error(`hf_tokenize: ${e.message}`); process.exit(1); });
