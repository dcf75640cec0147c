// The official OpenAI client (npm `openai`) reading prompt logprobs: a
// completion with echo and logprobs, plain and streamed, and vLLM's
// prompt_logprobs extension passed through as an extra body field.
// Prints one JSON object; t/api_prompt_logprobs.t checks it.
// usage: node t/nginx/openai_echo.mjs BASE_URL MODEL PROMPT
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const { OpenAI } = require('openai');

const [baseURL, model, prompt] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'sk-none', maxRetries: 0,
                            timeout: 60000 });
const out = {};

out.echo = await client.completions.create({
    model, prompt, max_tokens: 4, temperature: 0, echo: true, logprobs: 2 });

const stream = await client.completions.create({
    model, prompt, max_tokens: 4, temperature: 0, echo: true, logprobs: 2,
    stream: true });
out.echo_stream = { text: '', tokens: [], token_logprobs: [], chunks: 0 };
for await (const c of stream) {
    const ch = c.choices[0];
    if (!ch) {
        continue;
    }
    out.echo_stream.chunks++;
    out.echo_stream.text += ch.text;
    out.echo_stream.tokens.push(...(ch.logprobs?.tokens ?? []));
    out.echo_stream.token_logprobs.push(...(ch.logprobs?.token_logprobs ?? []));
}

out.prompt_logprobs = await client.completions.create({
    model, prompt, max_tokens: 2, temperature: 0, prompt_logprobs: 1 });

process.stdout.write(JSON.stringify(out) + '\n');
