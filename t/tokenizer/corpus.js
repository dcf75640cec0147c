// corpus.js -- the texts the tokenizer is checked on, as Buffers (raw bytes,
// so invalid UTF-8 can be part of it).  Fixed cases for each feature, plus
// seeded random mixtures of all of them.
'use strict';

// Small deterministic PRNG (mulberry32), so every run checks the same texts.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const fixed = [
  // plain text, contractions (the (?i:'s|...) alternatives), punctuation
  'Hello, world!',
  'The quick brown fox jumps over the lazy dog.',
  "I'm sure you're right; they'll see we've done it, isn't it? I'D SAY SHE'S HERE.",
  "don't DON'T Don'T 'll 're 'S 's 'ſ 'K",
  'Hello world',
  '  leading spaces and trailing   ',
  'multiple     spaces\tand\ttabs\t\t\tend',
  'line one\nline two\r\nline three\rline four\n\n\n\nafter blank lines',
  ' \n \n\t \r\n  ',
  '\n', '\t', ' ', '  ', 'a', 'A', '.', '...', '?!', '—',
  '',
  // numbers and digit grouping (\p{N}{1,3} in Llama 3, single digits in Qwen)
  'Numbers: 0 7 42 123 1234 12345 1234567890 3.14159 -42 1,000,000 1e-9 0x1F',
  '2024-06-30T12:34:56Z, +1 (555) 010-9999, 99.9%',
  'Arabic-Indic ١٢٣٤٥, Devanagari ०१२३, fullwidth １２３４, circled ①②③, fractions ½¾, Roman Ⅻ',
  '11111111111111111111111111111111111111111111',
  // code
  'def f(x):\n    return x ** 2  # square\n\nprint(f(3))\n',
  'int main(void) {\n\tprintf("%d\\n", 42);\n\treturn 0;\n}\n',
  '{"key": [1, 2.5, true, null], "nested": {"a": "b\\u00e9"}}',
  '<div class="x">&amp; &lt;tag&gt;</div> <!-- comment -->',
  'SELECT * FROM users WHERE id = 1; -- sql',
  'x+=1;y-=2;z*=3;w/=4;a<<=1;b>>=2;c&&d||e!f',
  '    indented = True\n        more_indented = [\n            1,\n        ]',
  // scripts
  '你好，世界！这是一个测试。中文分词很重要。',
  'こんにちは世界、カタカナとひらがなと漢字。',
  '안녕하세요 세계! 한국어 텍스트입니다.',
  'مرحبا بالعالم، هذا اختبار للنص العربي.',
  'שלום עולם, זה מבחן.',
  'नमस्ते दुनिया, यह एक परीक्षण है।',
  'สวัสดีชาวโลก นี่คือการทดสอบ',
  'Привет, мир! Это тест. ЁЖИК ёжик',
  'Γειά σου κόσμε! ΣΊΣΥΦΟΣ σίσυφος τέλος',
  'გამარჯობა მსოფლიო', 'Բարեւ աշխարհ', 'ሰላም ለዓለም', 'வணக்கம் உலகம்', 'ওহে বিশ্ব',
  'Tiếng Việt có dấu: Nguyễn Thị Minh Khai, phở, đường',
  'Ünïcödé äöü ß ÄÖÜ ẞ façade naïve coöperate résumé Ångström',
  '∀x∈ℝ: x²≥0, ∑ᵢ aᵢ = ∞, √2 ≈ 1.414, ∂f/∂x',
  '┌──┬──┐\n│ab│cd│\n└──┴──┘ ⠓⠑⠇⠇⠕',
  // emoji, ZWJ sequences, flags, skin tones, keycaps, variation selectors
  '🦙🔥 emoji 😀😃😄 👍🏽 👋🏿',
  'family 👨‍👩‍👧‍👦 couple 👩‍❤️‍👨 rainbow flag 🏳️‍🌈 pirate 🏴‍☠️',
  'flags 🇫🇷🇩🇪🇯🇵🇺🇸 keycaps 1️⃣2️⃣#️⃣ ✔︎✔️',
  '🦙🦙🦙🦙🦙🦙🦙🦙🦙🦙',
  // combining marks and normalization (NFC in Qwen3)
  'e\u0301 vs \u00e9, a\u0308\u0301, o\u0302\u0323, \u212b vs \u00c5, \ufb01 ligature',
  '\u1100\u1161\u11a8 Hangul jamo, \u0928\u093f Devanagari, \u05e9\u05c1 Hebrew point',
  'Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333',
  '\u0301 leading combining mark',
  // unusual whitespace and invisible characters
  'nbsp\u00a0here, thin\u2009space, ideographic\u3000space, en\u2002em\u2003',
  'nel\u0085line sep\u2028para sep\u2029 mongolian\u180evowel',
  'zero\u200bwidth joiner\u200dnon\u200cjoiner bom\ufeffword soft\u00adhyphen',
  '\u00a0\u00a0\u00a0 \u3000\u3000 \t\u00a0\n\u2003',
  'control \u0001\u0002\u001b[31m\u007f chars',
  'replacement char \ufffd already here',
  'private use \ue000\uf8ff and astral \u{1d400}\u{1f600}\u{10ffff}',
  // special and added tokens inside text
  '<|begin_of_text|>Hello<|eot_id|>',
  '<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
  '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
  '<|endoftext|> <|endoftext|><|endoftext|>',
  '<s>Hello</s> <s> spaced </s>  <unk> unknown',
  '<s><s></s></s>',
  'partial <|im_start and <|im_end|| and <s and </s and <|eot_id',
  'nested <<s>> and <|<|eot_id|>|>',
  '<think>\nreasoning\n</think>\n\n<tool_call>\n{"name": "f"}\n</tool_call>',
  '<0x0A> literal byte token text <0xFF>',
  '[INST] question [/INST] answer',
  // very long words and runs
  'a'.repeat(3000),
  'supercalifragilisticexpialidocious'.repeat(40),
  '🦙'.repeat(300),
  '1'.repeat(1000),
  ' '.repeat(2000) + 'x',
  '\n'.repeat(500),
  '\t '.repeat(300),
  'ab'.repeat(1500) + ' ' + '的'.repeat(800),
  '-'.repeat(600) + '=' .repeat(600),
];

// Invalid UTF-8 and other raw-byte cases (hex).
const rawHex = [
  'ff',
  'c3',
  '616263e282',               // "abc" + truncated €
  'e282ac',                   // a valid € for contrast
  'eda080',                   // a surrogate, encoded
  'f4908080',                 // above U+10FFFF
  'c0af',                     // overlong "/"
  'e080af',                   // overlong, 3 bytes
  '8080',                     // lone continuation bytes
  'f09fa6',                   // truncated 🦙 at the end
  '48656c6c6fff776f726c64',   // "Hello" 0xFF "world"
  'e4bda0e5a5bdff80e4b896e7958c', // 你好 + junk + 世界
  'fe',
  'c3a9c3',                   // é then a truncated é
  '613c7ce28080',             // "a<|" + truncated
  '610062',                   // NUL inside
  'f8888080',                 // 5-byte form
  '3c737ce2',                 // "<s|" + truncated
  '3c733ec0',                 // "<s>" + invalid
];

function pick(r, arr) { return arr[Math.floor(r() * arr.length)]; }

function randomText(r) {
  const pool = [
    'hello', ' world', 'The', ' ', '  ', '\n', '\t', '\r\n', ',', '.', "'s", "'LL",
    '123', '4567', '3.14', '你好', '世界', 'こんにちは', '안녕', 'Привет', 'مرحبا',
    'नमस्ते', 'ไทย', '🦙', '👨‍👩‍👧', '🇫🇷', 'é', 'e\u0301', '\u00a0', '\u3000',
    '\u200b', '<|im_start|>', '<|im_end|>', '<|eot_id|>', '<|begin_of_text|>',
    '<s>', '</s>', '<unk>', '<|endoftext|>', '<think>', '{', '}', '()', '=>', '#',
    'MiXeD', 'mixed', 'foo', ' foo', 'foobar', '[SEP]', ' [SEP] ', 'ﬁne', 'FINE',
    '<tool_call>', ' <tool_call>', '</tool_call> ', 'x', 'ABC', '_', '--', '...',
  ];
  const ranges = [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff],
    [0x590, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff],
    [0x2000, 0x206f], [0x3040, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3],
    [0x1f300, 0x1faff], [0x300, 0x36f]];
  let s = '';
  const n = 1 + Math.floor(r() * 12);
  for (let i = 0; i < n; i++) {
    if (r() < 0.7) {
      s += pick(r, pool);
    } else {
      const [lo, hi] = pick(r, ranges);
      const k = 1 + Math.floor(r() * 4);
      for (let j = 0; j < k; j++) {
        s += String.fromCodePoint(lo + Math.floor(r() * (hi - lo + 1)));
      }
    }
  }
  return s;
}

function randomBytes(r) {
  // valid text with a few bytes flipped or cut: invalid UTF-8 in context
  const b = Buffer.from(randomText(r), 'utf8');
  const out = Buffer.from(b);
  const k = 1 + Math.floor(r() * 3);
  for (let i = 0; i < k && out.length > 0; i++) {
    out[Math.floor(r() * out.length)] = 0x80 + Math.floor(r() * 0x80);
  }
  return out;
}

function build() {
  const r = rng(20240630);
  const out = fixed.map((s) => Buffer.from(s, 'utf8'));
  for (const h of rawHex) out.push(Buffer.from(h, 'hex'));
  for (let i = 0; i < 160; i++) out.push(Buffer.from(randomText(r), 'utf8'));
  for (let i = 0; i < 40; i++) out.push(randomBytes(r));
  return out;
}

module.exports = { build, rng };
