// Token ids from Hugging Face's own tokenizer (npm `tokenizers`, the Rust library), with the
// tokenizer's special tokens added (HF add_special_tokens=True): the reference for the prompt
// ids `llm generate` reports.
// usage: NODE_PATH=node_modules node t/ref/hf_tokenize.js MODEL_DIR TEXT   -> JSON array
const { Tokenizer } = require('tokenizers');
const path = require('path');

(async () => {
    const [dir, text] = process.argv.slice(2);
    const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
    const enc = await tok.encode(text, null, { addSpecialTokens: true });
    process.stdout.write(JSON.stringify(Array.from(enc.getIds())) + '\n');
})().catch((e) => { console.error(`hf_tokenize: ${e.message}`); process.exit(1); });
