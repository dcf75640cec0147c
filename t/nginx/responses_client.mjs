// Drives POST /v1/responses with the official OpenAI client (npm `openai`),
// unmodified: responses.create (plain and streamed), the responses.stream()
// helper's final response, a continuation by previous_response_id, an
// unknown previous_response_id, responses.retrieve of a plain and of a
// streamed response, responses.cancel of a finished and of an unknown one,
// and responses.delete (then retrieve, delete and previous_response_id of
// the deleted id).  Prints one JSON object with
// what the client returned; t/api_responses.t checks it.
// usage: node t/nginx/responses_client.mjs BASE_URL MODEL
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(path.join(process.env.NODE_PATH || '.', 'x.js'));
const { OpenAI } = require('openai');

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'sk-none', maxRetries: 0,
                            timeout: 60000 });
const params = { model, input: 'Tell me a story.', instructions: 'Be brief.',
                 max_output_tokens: 6, temperature: 0 };
const out = {};

out.plain = await client.responses.create(params);
out.plain_output_text = out.plain.output_text;

const stream = await client.responses.create({ ...params, stream: true });
const events = [];
for await (const e of stream) {
    events.push(e);
}
out.stream = {
    types: events.map((e) => e.type),
    sequence: events.map((e) => e.sequence_number),
    text: events.filter((e) => e.type === 'response.output_text.delta')
                .map((e) => e.delta).join(''),
    completed: events.at(-1).response,
    with_metrics: events.filter((e) => e.response
                                       && e.response.metrics !== undefined)
                        .map((e) => e.type),
};

const helper = client.responses.stream({ ...params, max_output_tokens: 4 });
const final = await helper.finalResponse();
out.helper = { output_text: final.output_text, status: final.status,
               usage: final.usage };

out.next = await client.responses.create({
    model, input: 'And then?', previous_response_id: out.plain.id,
    max_output_tokens: 3, temperature: 0 });

// the client's error, as the test wants to see it
async function failure(call) {
    try {
        await call();
        return null;
    } catch (e) {
        return { status: e.status, type: e.type, param: e.param,
                 message: e.message, name: e.constructor.name };
    }
}

out.error = await failure(() => client.responses.create({
    model, input: 'x', previous_response_id: 'resp_nope' }));

out.retrieved = await client.responses.retrieve(out.plain.id);
out.retrieved_stream = await client.responses.retrieve(out.stream.completed.id);
out.cancel = await failure(() => client.responses.cancel(out.plain.id));
out.cancel_unknown = await failure(() => client.responses.cancel('resp_nope'));
out.deleted = await client.responses.delete(out.next.id) ?? null;
out.after_delete = {
    retrieve: await failure(() => client.responses.retrieve(out.next.id)),
    delete: await failure(() => client.responses.delete(out.next.id)),
    previous: await failure(() => client.responses.create({
        model, input: 'x', previous_response_id: out.next.id })),
};
out.retrieve_unknown = await failure(
    () => client.responses.retrieve('resp_nope'));

process.stdout.write(JSON.stringify(out) + '\n');
