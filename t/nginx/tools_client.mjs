// Tool calls through the official OpenAI client (npm `openai`), unmodified:
// a chat with a function tool, not streamed and streamed (the deltas
// accumulated the way the SDK's own ChatCompletionStream does, and by
// hand), then the tool's result sent back.  Prints one JSON object;
// t/api_tools.t checks it.
// usage: node t/nginx/tools_client.mjs BASE_URL MODEL FIRST_TOKEN_ID
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const { OpenAI } = require('openai');

const [baseURL, model, first] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'sk-none', maxRetries: 0,
                            timeout: 60000 });
const tools = [{ type: 'function', function: {
    name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } },
                  required: ['city'] } } }];
const messages = [{ role: 'user', content: 'Weather in Paris?' }];
// the script model writes the tool call when its first token is favoured
const req = { model, messages, tools, temperature: 0, max_tokens: 64,
              logit_bias: { [first]: 100 } };
const out = {};

out.chat = await client.chat.completions.create(req);

// the SDK's helper: it accumulates tool-call deltas into the final message
const helper = client.chat.completions.stream({
    ...req, stream_options: { include_usage: true } });
out.helper = await helper.finalChatCompletion();

// by hand: what a client loop sees
const stream = await client.chat.completions.create({ ...req, stream: true });
const calls = [];
let content = '';
const finish = [];
for await (const c of stream) {
    const d = c.choices[0]?.delta ?? {};
    content += d.content ?? '';
    for (const tc of d.tool_calls ?? []) {
        calls[tc.index] ??= { id: null, type: null, name: '', arguments: '',
                              first: tc };
        if (tc.id) calls[tc.index].id = tc.id;
        if (tc.type) calls[tc.index].type = tc.type;
        calls[tc.index].name += tc.function?.name ?? '';
        calls[tc.index].arguments += tc.function?.arguments ?? '';
    }
    if (c.choices[0]?.finish_reason) finish.push(c.choices[0].finish_reason);
}
out.stream = { content, calls, finish };

// the next turn: the call and its result go back
const call = out.chat.choices[0].message.tool_calls[0];
out.next = await client.chat.completions.create({
    model, tools, temperature: 0, max_tokens: 8,
    messages: [...messages, out.chat.choices[0].message,
               { role: 'tool', tool_call_id: call.id,
                 content: JSON.stringify({ sky: 'clear' }) }] });

console.log(JSON.stringify(out));
