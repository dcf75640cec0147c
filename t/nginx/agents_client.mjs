// The OpenAI Agents SDK (npm `@openai/agents`), unmodified, against
// ngx_llm through the Chat Completions API (OpenAIChatCompletionsModel) or
// the Responses API (OpenAIResponsesModel, the SDK's default):
// an agent with one function tool runs to completion, not streamed and
// streamed.  Its modelSettings ask tool_choice "required", so the first
// turn is a call whatever the model would write; the SDK runs the tool,
// sends its output back and (resetToolChoice) asks "auto" next, where the
// model's answer is the final output.  Prints one JSON object;
// t/api_tools.t and t/api_responses_tools.t check it.
// usage: node t/nginx/agents_client.mjs BASE_URL MODEL FIRST [chat|responses]
//   (FIRST: the first token of the script model's plain answer)
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const agents = require('@openai/agents');
// the OpenAI client the SDK itself depends on
const { OpenAI } = createRequire(require.resolve('@openai/agents-openai'))('openai');

const [baseURL, model, first, api = 'chat'] = process.argv.slice(2);
agents.setTracingDisabled(true);
const client = new OpenAI({ baseURL, apiKey: 'sk-none', maxRetries: 0,
                            timeout: 60000 });
const executed = [];
const getWeather = agents.tool({
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', additionalProperties: false, required: ['city'],
                  properties: { city: { type: 'string',
                                        enum: ['Paris', 'Rome', 'Oslo'] } } },
    strict: true,
    execute: async ({ city }) => {
        executed.push(city);
        return `It is sunny in ${city}.`;
    },
});
const agent = new agents.Agent({
    name: 'weather',
    instructions: 'Answer questions about the weather.',
    tools: [getWeather],
    model: api === 'responses' ? new agents.OpenAIResponsesModel(client, model)
                               : new agents.OpenAIChatCompletionsModel(client, model),
    modelSettings: { toolChoice: 'required', temperature: 0, maxTokens: 300,
                     parallelToolCalls: false,
                     providerData: { logit_bias: { [first]: 100 } } },
});
const pick = (r) => ({
    finalOutput: r.finalOutput,
    items: r.newItems.map((i) => i.type),
    calls: r.newItems.filter((i) => i.type === 'tool_call_item')
        .map((i) => ({ name: i.rawItem.name, arguments: i.rawItem.arguments })),
    outputs: r.newItems.filter((i) => i.type === 'tool_call_output_item')
        .map((i) => i.output),
});
const out = {};

out.run = pick(await agents.run(agent, 'Weather in Paris?', { maxTurns: 4 }));
const s = await agents.run(agent, 'Weather in Paris?', { maxTurns: 4, stream: true });
await s.completed;
out.stream = pick(s);
out.executed = executed;

console.log(JSON.stringify(out));
