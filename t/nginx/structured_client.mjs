// Structured outputs through ngx_llm with real clients, unmodified: the
// official `openai` client's chat.completions.parse with a zod schema
// (zodResponseFormat), chat and completions with response_format
// json_schema, the Responses API's text.format json_schema, and vLLM's
// structured_outputs (choice, regex, json) as extra body fields.  Every
// output that ended is validated by ajv (with ajv-formats), a validator we
// did not write.  Prints one JSON object; t/api_json_schema.t checks it.
// usage: node t/nginx/structured_client.mjs BASE_URL MODEL
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const { OpenAI } = require('openai');
const { zodResponseFormat } = require('openai/helpers/zod');
const { z } = require('zod');
const Ajv = require('ajv');
const addFormats = require('ajv-formats');

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'sk-none', maxRetries: 0,
                            timeout: 120000 });
const ajv = new Ajv({ strict: false });
addFormats(ajv);
const out = {};

function check(schema, text, finish) {
    const r = { text, finish };
    try {
        r.value = JSON.parse(text);
        r.parsed = true;
    } catch (e) {
        r.parsed = false;
        return r;
    }
    const validate = ajv.compile(schema);
    r.valid = validate(r.value);
    if (!r.valid) {
        r.errors = validate.errors;
    }
    return r;
}

// a function-arguments schema as tools write them
const weather = {
    type: 'object',
    properties: {
        city: { type: 'string', maxLength: 12 },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        days: { type: 'integer', minimum: 1, maximum: 14 },
        when: { type: 'string', format: 'date' },
        hourly: { type: ['boolean', 'null'] },
    },
    required: ['city', 'unit', 'days', 'when', 'hourly'],
    additionalProperties: false,
};
const messages = [{ role: 'user', content: 'The weather in Paris, as JSON.' }];

out.chat = [];
for (let seed = 1; seed <= 6; seed++) {
    const r = await client.chat.completions.create({
        model, messages, temperature: 1, seed, max_tokens: 150,
        response_format: { type: 'json_schema',
                           json_schema: { name: 'weather', schema: weather,
                                          strict: true } } });
    out.chat.push(check(weather, r.choices[0].message.content,
                        r.choices[0].finish_reason));
}

const c = await client.completions.create({
    model, prompt: 'Weather report as JSON:', temperature: 1, seed: 7,
    max_tokens: 150,
    response_format: { type: 'json_schema',
                       json_schema: { name: 'weather', schema: weather } } });
out.completion = check(weather, c.choices[0].text, c.choices[0].finish_reason);

// zod: the schema the openai helper writes, and its parse
const Event = z.object({
    name: z.string().max(10),
    kind: z.enum(['meeting', 'call', 'lunch']),
    attendees: z.array(z.string().max(6)).max(2),
    priority: z.number().int().min(1).max(5),
    remote: z.boolean(),
    note: z.string().max(8).nullable(),
});
const fmt = zodResponseFormat(Event, 'event');
out.zod_schema = fmt.json_schema.schema;
out.parse = [];
for (let seed = 1; seed <= 3; seed++) {
    try {
        const p = await client.chat.completions.parse({
            model, messages: [{ role: 'user', content: 'An event, please.' }],
            temperature: 1, seed, max_tokens: 160, response_format: fmt });
        const m = p.choices[0].message;
        out.parse.push({ parsed: m.parsed, content: m.content,
                         finish: p.choices[0].finish_reason,
                         zod: Event.safeParse(m.parsed).success,
                         ajv: check(fmt.json_schema.schema, m.content).valid });
    } catch (e) {
        out.parse.push({ error: String(e), name: e.constructor.name });
    }
}

// the Responses API
const rs = await client.responses.create({
    model, input: 'The weather, as JSON.', temperature: 1, max_output_tokens: 150,
    text: { format: { type: 'json_schema', name: 'weather', schema: weather,
                      strict: true } } });
out.responses = check(weather, rs.output_text, rs.status);
out.responses.format = rs.text?.format;

// vLLM's structured_outputs
const ch = await client.chat.completions.create({
    model, messages, temperature: 1, seed: 3, max_tokens: 20,
    structured_outputs: { choice: ['sunny', 'rainy', 'partly cloudy'] } });
out.choice = ch.choices[0].message.content;
const rx = await client.completions.create({
    model, prompt: 'A phone number:', temperature: 1, seed: 4, max_tokens: 30,
    structured_outputs: { regex: '\\+1-[0-9]{3}-[0-9]{4}' } });
out.regex = rx.choices[0].text;
const js = await client.chat.completions.create({
    model, messages, temperature: 1, seed: 5, max_tokens: 150,
    structured_outputs: { json: JSON.stringify(weather) } });
out.so_json = check(weather, js.choices[0].message.content,
                    js.choices[0].finish_reason);

console.log(JSON.stringify(out));
