// LangChain JS (npm `@langchain/openai`'s ChatOpenAI), unmodified, against
// ngx_llm: bindTools with tool_choice "any" (OpenAI's "required") and
// withStructuredOutput by function calling (a named tool_choice) and by
// JSON schema (response_format), each parsed by LangChain.  Prints one
// JSON object; t/api_tool_choice.t checks it.
// usage: node t/nginx/langchain_client.mjs BASE_URL MODEL FIRST
//   (FIRST: the first token of the script model's array of calls)
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const { ChatOpenAI } = require('@langchain/openai');

const [baseURL, model, first] = process.argv.slice(2);
const weather = {
    type: 'function',
    function: {
        name: 'get_weather', description: 'The weather in a city',
        parameters: { type: 'object', additionalProperties: false, required: ['city'],
                      properties: { city: { type: 'string',
                                            enum: ['Paris', 'Rome', 'Oslo'] } } },
    },
};
const chat = (bias) => new ChatOpenAI({
    model, apiKey: 'sk-none', configuration: { baseURL }, temperature: 0,
    maxTokens: 120, maxRetries: 0,
    modelKwargs: bias ? { logit_bias: { [first]: 100 } } : {},
});
const out = {};

const bound = chat(true).bindTools([weather], { tool_choice: 'any' });
const m = await bound.invoke('Weather in Paris?');
out.bindTools = { tool_calls: m.tool_calls.map((c) => ({ name: c.name, args: c.args })),
                  content: m.content };

for (const method of ['functionCalling', 'jsonSchema']) {
    const s = chat(false).withStructuredOutput(weather.function.parameters,
                                               { name: 'get_weather', method });
    out[method] = await s.invoke('Weather in Paris?');
}

console.log(JSON.stringify(out));
