// hf_encode.js -- HF tokenizers' ids and decode for a list of texts, for
// t/tokenizer.t to compare `llm tokenize` / `llm detokenize` with.
//   node t/tokenizer/hf_encode.js MODEL_DIR TEXTS.json
// TEXTS.json is a JSON array of hex strings (raw bytes; invalid UTF-8 is
// decoded WHATWG-style, each maximal ill-formed subpart -> U+FFFD).
// Prints one JSON array: [{ "ids": [...], "ids_special": [...],
// "decode": hex of decode(ids_special, skip_special=false) }, ...].
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

(async () => {
  const [dir, file] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
  const td = new TextDecoder('utf-8', { fatal: false });
  const texts = JSON.parse(fs.readFileSync(file, 'utf8')).map((h) => td.decode(Buffer.from(h, 'hex')));
  const plain = await tok.encodeBatch(texts, { addSpecialTokens: false });
  const special = await tok.encodeBatch(texts, { addSpecialTokens: true });
  const dec = await tok.decodeBatch(special.map((e) => e.getIds()), false);
  process.stdout.write(JSON.stringify(texts.map((_, i) => ({
    ids: plain[i].getIds(), ids_special: special[i].getIds(),
    decode: Buffer.from(dec[i], 'utf8').toString('hex'),
  }))) + '\n');
})().catch((e) => { console.error(`hf_encode: ${e.message}`); process.exit(1); });
