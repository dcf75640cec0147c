// The Vercel AI SDK (npm `ai` with `@ai-sdk/openai-compatible`), unmodified,
// against ngx_llm: generateText with a function tool and toolChoice
// 'required', not streamed, then streamText the same way; the tool's
// execute() runs on the call the SDK parsed.  Prints one JSON object;
// t/api_tool_choice.t checks it.
// usage: node t/nginx/ai_sdk_client.mjs BASE_URL MODEL FIRST
//   (FIRST: the first token of the script model's array of calls)
import { createRequire } from 'module';
import path from 'path';
import { pathToFileURL } from 'url';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const load = (name) => import(pathToFileURL(require.resolve(name)).href);
const { generateText, streamText, tool, jsonSchema } = await load('ai');
const { createOpenAICompatible } = await load('@ai-sdk/openai-compatible');

const [baseURL, model, first] = process.argv.slice(2);
const provider = createOpenAICompatible({ name: 'ngx_llm', baseURL,
                                          apiKey: 'sk-none', includeUsage: true });
const executed = [];
const tools = {
    get_weather: tool({
        description: 'The weather in a city',
        inputSchema: jsonSchema({
            type: 'object', additionalProperties: false, required: ['city'],
            properties: { city: { type: 'string',
                                  enum: ['Paris', 'Rome', 'Oslo'] } } }),
        execute: async ({ city }) => {
            executed.push(city);
            return { city, sky: 'clear' };
        },
    }),
};
const req = {
    model: provider.chatModel(model), tools, toolChoice: 'required',
    prompt: 'Weather in Paris?', temperature: 0, maxOutputTokens: 64,
    maxRetries: 0,
    // vLLM's extra fields pass through as the provider's options
    providerOptions: { ngxLlm: { logit_bias: { [first]: 100 } } },
};
const pick = (r) => ({
    finishReason: r.finishReason,
    toolCalls: r.toolCalls.map((c) => ({ toolName: c.toolName, input: c.input })),
    toolResults: r.toolResults.map((c) => ({ toolName: c.toolName, output: c.output })),
    usage: { inputTokens: r.usage.inputTokens, outputTokens: r.usage.outputTokens },
});
const out = {};

out.generate = pick(await generateText(req));
const s = streamText(req);
out.stream = pick({ finishReason: await s.finishReason, toolCalls: await s.toolCalls,
                    toolResults: await s.toolResults, usage: await s.usage });
out.executed = executed;

console.log(JSON.stringify(out));
