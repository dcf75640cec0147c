// Counts the tokens Hugging Face's own tokenizer (npm `tokenizers`, the Rust
// library) makes of TEXT with special tokens added, as vLLM tokenizes a
// completions prompt: an independent check of usage.prompt_tokens.
// usage: node t/nginx/hf_count.mjs TOKENIZER_DIR TEXT   -> "<count>\n"
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const { Tokenizer } = require('tokenizers');

const [dir, text] = process.argv.slice(2);
const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
const enc = await tok.encode(text, null, { addSpecialTokens: true });
process.stdout.write(`${enc.getIds().length}\n`);
