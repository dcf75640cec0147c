// Drives ngx_llm with the official OpenAI client (npm `openai`), unmodified:
// models.list/retrieve, chat (plain and streamed with usage), completions
// (plain with logprobs, streamed), and an error.  Prints one JSON object
// with what the client returned; t/api_openai.t checks it.
// usage: node t/nginx/openai_client.mjs BASE_URL MODEL
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const { OpenAI } = require('openai');

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'sk-none', maxRetries: 0,
                            timeout: 60000 });
const messages = [{ role: 'user', content: 'Hello!' }];
const out = {};

out.models = (await client.models.list()).data.map((m) => m.id);
out.model = await client.models.retrieve(model);

out.chat = await client.chat.completions.create({
    model, messages, max_tokens: 8, temperature: 0 });

let stream = await client.chat.completions.create({
    model, messages, max_tokens: 8, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
const chunks = [];
for await (const c of stream) {
    chunks.push(c);
}
out.chat_stream = {
    chunks: chunks.length,
    text: chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''),
    finish: chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean),
    last: chunks.at(-1),
};

out.completion = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0,
    logprobs: 2 });

stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0,
    stream: true });
let text = '';
for await (const c of stream) {
    text += c.choices[0]?.text ?? '';
}
out.completion_stream = { text };

try {
    await client.chat.completions.create({ model: 'no-such-model', messages });
    out.error = null;
} catch (e) {
    out.error = { status: e.status, type: e.type, param: e.param,
                  code: e.code, message: e.message,
                  name: e.constructor.name };
}

process.stdout.write(JSON.stringify(out) + '\n');
