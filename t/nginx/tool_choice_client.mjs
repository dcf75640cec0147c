// tool_choice "required" and a named function through the official OpenAI
// client (npm `openai`), unmodified: each not streamed and streamed (the
// SDK's ChatCompletionStream accumulates the deltas).  Prints one JSON
// object; t/api_tool_choice.t checks it.
// usage: node t/nginx/tool_choice_client.mjs BASE_URL MODEL required|named FIRST
//   (FIRST: the first token of the script model's text)
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const { OpenAI } = require('openai');

const [baseURL, model, mode, first] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'sk-none', maxRetries: 0,
                            timeout: 60000 });

const tools = [{ type: 'function', function: {
    name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', additionalProperties: false,
                  properties: { city: { type: 'string',
                                        enum: ['Paris', 'Rome', 'Oslo'] } },
                  required: ['city'] } } }];
const messages = [{ role: 'user', content: 'Weather in Paris?' }];
const req = { model, messages, tools, temperature: 0, max_tokens: 64,
              logit_bias: { [first]: 100 },
              tool_choice: mode === 'required' ? 'required'
                  : { type: 'function', function: { name: 'get_weather' } } };
const out = {};

out.plain = await client.chat.completions.create(req);
out.stream = await client.chat.completions.stream(req).finalChatCompletion();

console.log(JSON.stringify(out));
