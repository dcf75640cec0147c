#!/usr/bin/perl
# Every body and stream event of the API validates against OpenAI's official
# OpenAPI schemas: real requests through nginx (chat, completions, Responses,
# models, errors; bodies, every SSE data event, stored responses), each
# checked with ajv (t/nginx/openapi_check.mjs) against the component schema
# OpenAI's spec gives for that answer (its paths' responses), the Responses
# events against the branch of ResponseStreamEvent their "type" names.
# The spec is t/openapi/openai-openapi.subset.json (the schemas it reaches,
# unmodified); the differences kept on purpose are the checker's DEVIATIONS,
# listed in docs/api.md.
#
# The checker itself is checked: every component schema compiles in ajv's
# strict mode (no keyword it does not know about), and documents that break
# the spec in known ways (nulls where an array is wanted, a missing key, a
# null that nullable does not allow, an unknown event type) fail.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $ROOT = NginxLLM::root();
my $SPEC = "$ROOT/t/openapi/openai-openapi.subset.json";
my $CHECK = "$ROOT/t/nginx/openapi_check.mjs";
my $J = NginxLLM::json();
my $EOS = 128009;                       # <|eot_id|>

my $t = NginxLLM->new(http => 'llm_per_request_metrics on;');
$t->start;

my @docs;                               # { name, schema, text, expect }

sub doc {
    my ($name, $schema, $text, $expect) = @_;
    push @docs, { name => $name, schema => $schema, text => $text,
                  expect => $expect // 1 };
}

# a body: the status, then the document against the schema
sub body {
    my ($name, $schema, $r, $status) = @_;
    is($r->{status}, $status // 200, "$name: status")
        or diag($r->{content});
    doc($name, $schema, $r->{content});
    return $r;
}

# chat and completions streams: every data event but [DONE]
sub sse_data {
    my ($name, $schema, $path, $req, $server) = @_;
    my $r = ($server // $t)->stream($path, $req);
    is($r->{status}, 200, "$name: status");
    my @blocks = split /\n\n/, $r->{content};
    my $n = 0;
    for my $b (@blocks) {
        like($b, qr/^data: /, "$name: an SSE data event") or next;
        (my $data = $b) =~ s/^data: //;
        next if $data eq '[DONE]';
        doc("$name, chunk " . $n++, $schema, $data);
    }
    is($blocks[-1], 'data: [DONE]', "$name: ends with [DONE]");
    ok($n > 1, "$name: $n chunks");
    return $r;
}

# a Responses stream: every event, its "event:" line its data's type
sub responses_stream {
    my ($name, $req, $server) = @_;
    my $r = ($server // $t)->stream('/v1/responses', { %$req, stream => \1 });
    is($r->{status}, 200, "$name: status");
    my (@types, @data, $last);
    for my $b (split /\n\n/, $r->{content}) {
        my ($event, $data) = $b =~ /^event: ([a-z._]+)\ndata: (\{.*\})\z/s;
        ok(defined $data, "$name: an event: and data: block") or next;
        my $v = $last = NginxLLM::decode_json_safe($data) // {};
        is($v->{type}, $event, "$name: $event, its data's type");
        push @types, $event;
        push @data, $v;
        doc("$name, $event #" . scalar(@types), 'ResponseStreamEvent', $data);
    }
    $r->{types} = \@types;
    $r->{data} = \@data;
    is($types[-1], 'response.completed', "$name: ends with response.completed");
    $r->{completed} = $last->{response};
    return $r;
}

my @msgs = ({ role => 'system', content => 'You are terse.' },
            { role => 'user', content => 'Say something.' });
my %chat = (model => 'tiny', messages => \@msgs, max_tokens => 5, seed => 11);

# --- chat completions ---

body('chat', 'CreateChatCompletionResponse',
     $t->post('/v1/chat/completions', { %chat, temperature => 0 }));
my $chat_lp = body('chat, logprobs and top_logprobs',
                   'CreateChatCompletionResponse',
                   $t->post('/v1/chat/completions',
                            { %chat, logprobs => \1, top_logprobs => 3 }));
body('chat, n = 2', 'CreateChatCompletionResponse',
     $t->post('/v1/chat/completions', { %chat, n => 2, seed => 1 }));
my $eos = body('chat, EOS at once (stop, empty content)',
               'CreateChatCompletionResponse',
               $t->post('/v1/chat/completions',
                        { %chat, logit_bias => { $EOS => 100 } }));
is($eos->{json}{choices}[0]{message}{content}, '', 'chat: empty content');
# a stop string: the greedy answer's first character (the tiny model's
# answers are mostly the same token again and again)
my $greedy = $t->post('/v1/chat/completions', { %chat, temperature => 0 });
my $first = substr($greedy->{json}{choices}[0]{message}{content} // 'x', 0, 1);
my $stop = body('chat, a stop string', 'CreateChatCompletionResponse',
                $t->post('/v1/chat/completions',
                         { %chat, temperature => 0, stop => [$first] }));
is($stop->{json}{choices}[0]{finish_reason}, 'stop', 'chat: stopped');
ok(defined $stop->{json}{choices}[0]{stop_reason}, 'chat: a stop_reason');
body('chat, vLLM extras (token ids, prompt logprobs)',
     'CreateChatCompletionResponse',
     $t->post('/v1/chat/completions',
              { %chat, return_token_ids => \1, prompt_logprobs => 2 }));
body('chat, tools (none chosen)', 'CreateChatCompletionResponse',
     $t->post('/v1/chat/completions',
              { %chat, tool_choice => 'none',
                tools => [{ type => 'function',
                            function => { name => 'get_weather',
                                          parameters => { type => 'object' }
                                        } }] }));
body('chat, JSON mode', 'CreateChatCompletionResponse',
     $t->post('/v1/chat/completions',
              { %chat, response_format => { type => 'json_object' } }));
sse_data('chat stream, usage and logprobs',
         'CreateChatCompletionStreamResponse', '/v1/chat/completions',
         { %chat, stream => \1, stream_options => { include_usage => \1 },
           logprobs => \1, top_logprobs => 2 });
sse_data('chat stream, n = 2, continuous usage',
         'CreateChatCompletionStreamResponse', '/v1/chat/completions',
         { %chat, stream => \1, n => 2, seed => 3,
           stream_options => { include_usage => \1,
                               continuous_usage_stats => \1 } });
sse_data('chat stream, token ids', 'CreateChatCompletionStreamResponse',
         '/v1/chat/completions',
         { %chat, stream => \1, return_token_ids => \1 });

# --- completions ---

my %cmpl = (model => 'tiny', prompt => 'Once upon a time', max_tokens => 5,
            seed => 11);
body('completions', 'CreateCompletionResponse',
     $t->post('/v1/completions', { %cmpl, temperature => 0 }));
body('completions, logprobs', 'CreateCompletionResponse',
     $t->post('/v1/completions', { %cmpl, logprobs => 3 }));
body('completions, echo and logprobs', 'CreateCompletionResponse',
     $t->post('/v1/completions', { %cmpl, echo => \1, logprobs => 2 }));
body('completions, echo, max_tokens 0', 'CreateCompletionResponse',
     $t->post('/v1/completions', { %cmpl, echo => \1, max_tokens => 0,
                                   logprobs => 1 }));
body('completions, two prompts, n = 2', 'CreateCompletionResponse',
     $t->post('/v1/completions', { %cmpl, prompt => ['A', [9906, 1917]],
                                   n => 2, seed => 5 }));
body('completions, vLLM extras', 'CreateCompletionResponse',
     $t->post('/v1/completions', { %cmpl, return_token_ids => \1,
                                   prompt_logprobs => 1 }));
sse_data('completions stream, usage and logprobs',
         'CreateCompletionStreamResponse', '/v1/completions',
         { %cmpl, stream => \1, logprobs => 2,
           stream_options => { include_usage => \1 } });
sse_data('completions stream, echo', 'CreateCompletionStreamResponse',
         '/v1/completions',
         { %cmpl, stream => \1, echo => \1, logprobs => 1, n => 2, seed => 2,
           return_token_ids => \1,
           stream_options => { include_usage => \1,
                               continuous_usage_stats => \1 } });

# --- Responses ---

my %resp = (model => 'tiny', input => 'Tell me a story.',
            instructions => 'Be brief.', max_output_tokens => 5, seed => 11);
my $plain = body('responses', 'Response',
                 $t->post('/v1/responses', { %resp, temperature => 0 }));
my $done = body('responses, completed (EOS after text)', 'Response',
                $t->post('/v1/responses',
                         { %resp, min_tokens => 2,
                           logit_bias => { $EOS => 100 } }));
is($done->{json}{status}, 'completed', 'responses: status completed');
is($plain->{json}{status}, 'incomplete', 'responses: status incomplete');
my $none = body('responses, no text (output [])', 'Response',
                $t->post('/v1/responses',
                         { %resp, logit_bias => { $EOS => 100 } }));
is_deeply($none->{json}{output}, [], 'responses: output []');
body('responses, temperature above 2 (vLLM takes any)', 'Response',
     $t->post('/v1/responses', { %resp, temperature => 2.5 }));
body('responses, logprobs', 'Response',
     $t->post('/v1/responses',
              { %resp, include => ['message.output_text.logprobs'],
                top_logprobs => 2 }));
my $tool = { type => 'function', name => 'get_weather',
             description => 'The weather in a city.',
             parameters => { type => 'object',
                             properties => { city => { type => 'string' } },
                             required => ['city'] } };
body('responses, echoes (tools, tool_choice, text, metadata, user)',
     'Response',
     $t->post('/v1/responses',
              { %resp, tools => [$tool], tool_choice => 'none',
                text => { format => { type => 'json_object' } },
                metadata => { k => 'v' }, user => 'u-1',
                parallel_tool_calls => \0, reasoning => { effort => 'low' },
                service_tier => 'auto', store => \0 }));
body('responses, a function tool without strict', 'Response',
     $t->post('/v1/responses',
              { %resp, tools => [{ type => 'function', name => 'f' }],
                tool_choice => 'none', store => \0 }));
body('responses, input items', 'Response',
     $t->post('/v1/responses',
              { %resp, input => [
                  { role => 'user', content => 'Weather in Paris?' },
                  { type => 'function_call', call_id => 'call_1',
                    name => 'get_weather', arguments => '{"city":"Paris"}' },
                  { type => 'function_call_output', call_id => 'call_1',
                    output => 'sunny' } ],
                tools => [$tool], tool_choice => 'none' }));
my $next = body('responses, previous_response_id', 'Response',
                $t->post('/v1/responses',
                         { %resp, input => 'And then?',
                           previous_response_id => $plain->{json}{id} }));

# a function call: tool_choice naming the function (the grammar makes the
# random model write one)
my %fcall = (%resp, max_output_tokens => 120, temperature => 0, store => \0,
             tools => [ { type => 'function', name => 'get_weather',
                          parameters => { type => 'object', additionalProperties => \0,
                                          properties => { city => { enum => [ 'Paris', 'Rome' ] } },
                                          required => ['city'] } } ],
             tool_choice => { type => 'function', name => 'get_weather' });
my $fcb = body('responses, a function_call item', 'Response', $t->post('/v1/responses', \%fcall));
is($fcb->{json}{output}[-1]{type}, 'function_call', 'responses: the function_call item')
    or diag($fcb->{content});
my $fcs = responses_stream('responses stream, a function_call item', \%fcall);
ok(scalar(grep { $_ eq 'response.function_call_arguments.done' } @{ $fcs->{types} }),
   'responses stream: function_call_arguments events');
my $st = responses_stream('responses stream', { %resp, temperature => 0 });
is_deeply([ grep { !/delta/ } @{ $st->{types} } ],
          [qw(response.created response.in_progress response.output_item.added
              response.content_part.added response.output_text.done
              response.content_part.done response.output_item.done
              response.completed)],
          'responses stream: every event type of an answer with text');
$st = responses_stream('responses stream, logprobs',
                       { %resp, include => ['message.output_text.logprobs'],
                         top_logprobs => 2 });
my ($part) = grep { $_->{type} eq 'response.content_part.done' }
             @{ $st->{data} };
is(scalar @{ $part->{part}{logprobs} // [] }, 5,
   'responses stream: content_part.done carries the logprobs');
responses_stream('responses stream, no text',
                 { %resp, logit_bias => { $EOS => 100 } });
$st = responses_stream('responses stream, completed',
                       { %resp, min_tokens => 2,
                         logit_bias => { $EOS => 100 } });
is($st->{completed}{status}, 'completed', 'responses stream: completed');

# the store: GET of a plain and of a streamed response, DELETE
body('GET responses/{id}', 'Response',
     $t->get("/v1/responses/$plain->{json}{id}"));
body('GET responses/{id} of a stream', 'Response',
     $t->get("/v1/responses/$st->{completed}{id}"));
my $del = $t->request('DELETE', "/v1/responses/$next->{json}{id}");
is($del->{status}, 200, 'DELETE responses/{id}: status');
# the spec gives DELETE no schema; OpenAI's answer and the SDK's
# ResponseDeleted type
is_deeply($del->{json}, { id => $next->{json}{id}, object => 'response',
                          deleted => \1 },
          'DELETE responses/{id}: {id, object, deleted}');

# --- models ---

body('models', 'ListModelsResponse', $t->get('/v1/models'));
body('models/{id}', 'Model', $t->get('/v1/models/tiny'));

# --- errors ---

body('400, a bad value', 'ErrorResponse',
     $t->post('/v1/chat/completions', { %chat, temperature => -1 }), 400);
body('400, not JSON', 'ErrorResponse',
     $t->post('/v1/completions', '{"prompt": '), 400);
body('404, unknown model', 'ErrorResponse',
     $t->post('/v1/completions', { %cmpl, model => 'nope' }), 404);
body('404, unknown route', 'ErrorResponse', $t->get('/v1/nope'), 404);
body('404, unknown model id', 'ErrorResponse', $t->get('/v1/models/x'), 404);
body('404, unknown response id', 'ErrorResponse',
     $t->get('/v1/responses/resp_nope'), 404);
body('404, previous_response_id unknown', 'ErrorResponse',
     $t->post('/v1/responses', { %resp, previous_response_id => 'resp_x' }),
     404);
body('400, cancel of a finished response', 'ErrorResponse',
     $t->post("/v1/responses/$plain->{json}{id}/cancel", {}), 400);
body('405', 'ErrorResponse', $t->request('PUT', '/v1/models'), 405);
body('413, nginx\'s own error', 'ErrorResponse',
     $t->post('/v1/completions', { %cmpl, prompt => 'x' x (1 << 20) }), 413);

# --- tool calls: a model that writes a Hermes call (t/api_tools.t) ---

my ($hdir, $hc) = NginxLLM->script_model(
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\" "
    . ":{\"city\":\"Paris\"}}\n</tool_call>");
my $tt = NginxLLM->new(model => $hdir, http => 'llm_tool_call_parser hermes;');
$tt->start;
my %call = (messages => [ { role => 'user', content => 'Weather in Paris?' } ],
            tools => [{ type => 'function',
                        function => { name => 'get_weather',
                                      parameters => { type => 'object' } } }],
            temperature => 0, max_tokens => 64,
            logit_bias => { $hc->[0][0] => 100 });
my $called = body('chat, a tool call', 'CreateChatCompletionResponse',
                  $tt->post('/v1/chat/completions', \%call));
is($called->{json}{choices}[0]{finish_reason}, 'tool_calls',
   'chat: finish_reason tool_calls');
sse_data('chat stream, a tool call', 'CreateChatCompletionStreamResponse',
         '/v1/chat/completions',
         { %call, stream => \1, stream_options => { include_usage => \1 } },
         $tt);
$tt->done;

# --- the checker rejects what breaks the spec ---

sub broken {
    my ($name, $schema, $r, $edit) = @_;
    my $v = $J->decode($r->{content});
    $edit->($v);
    doc("broken on purpose: $name", $schema, $J->encode($v), 0);
}
broken('chat message.annotations null', 'CreateChatCompletionResponse',
       $chat_lp, sub { $_[0]{choices}[0]{message}{annotations} = undef });
broken('chat logprobs without refusal', 'CreateChatCompletionResponse',
       $chat_lp, sub { delete $_[0]{choices}[0]{logprobs}{refusal} });
broken('chat system_fingerprint null', 'CreateChatCompletionResponse',
       $chat_lp, sub { $_[0]{system_fingerprint} = undef });
broken('Response without error', 'Response', $plain,
       sub { delete $_[0]{error} });
broken('Response text null', 'Response', $plain,
       sub { $_[0]{text} = undef });
broken('Response usage without cache_write_tokens', 'Response', $plain,
       sub { delete $_[0]{usage}{input_tokens_details}{cache_write_tokens} });
broken('output_text logprobs null', 'Response', $plain,
       sub { $_[0]{output}[0]{content}[0]{logprobs} = undef });
broken('error without code', 'ErrorResponse',
       $t->get('/v1/nope'), sub { delete $_[0]{error}{code} });
broken('error code a float', 'ErrorResponse',
       $t->get('/v1/nope'), sub { $_[0]{error}{code} = 4.5 });
doc('broken on purpose: an event type the spec has not',
    'ResponseStreamEvent', '{"type": "response.nope", "sequence_number": 0}',
    0);
doc('broken on purpose: finish_reason null in a completions body',
    'CreateCompletionResponse',
    '{"id": "x", "object": "text_completion", "created": 1, "model": "m",'
    . ' "choices": [{"index": 0, "text": "", "logprobs": null,'
    . ' "finish_reason": null}]}', 0);
doc('nullable: a chunk\'s logprobs null', 'CreateChatCompletionStreamResponse',
    '{"id": "x", "object": "chat.completion.chunk", "created": 1,'
    . ' "model": "m", "choices": [{"index": 0, "delta": {},'
    . ' "logprobs": null, "finish_reason": null}]}');
doc('broken on purpose: nullable does not admit a string',
    'CreateChatCompletionStreamResponse',
    '{"id": "x", "object": "chat.completion.chunk", "created": 1,'
    . ' "model": "m", "choices": [{"index": 0, "delta": {},'
    . ' "logprobs": "x", "finish_reason": null}]}', 0);

# --- a reasoning model (llm_reasoning_parser): message.reasoning,
#     delta.reasoning, reasoning_tokens, the reasoning item and its events ---

my ($rdir, $rchain) = NginxLLM->script_model_of('qwen3', [198],
    "Let me think about it.</think> The answer is four");
my $rt = NginxLLM->new(model => $rdir,
                       http => "llm_reasoning_parser qwen3;\n"
                               . "    llm_per_request_output_token_metrics on;");
$rt->start;
my %think = (messages => \@msgs, temperature => 0,
             logit_bias => { $rchain->[0][0] => 100 });
my $rb = body('chat, reasoning', 'CreateChatCompletionResponse',
              $rt->post('/v1/chat/completions', \%think));
is($rb->{json}{choices}[0]{message}{reasoning}, 'Let me think about it.',
   'chat, reasoning: the reasoning split off');
sse_data('chat stream, reasoning', 'CreateChatCompletionStreamResponse',
         '/v1/chat/completions',
         { %think, stream => \1, stream_options => { include_usage => \1 } },
         $rt);
my $rr = body('Responses, reasoning', 'Response',
              $rt->post('/v1/responses', { input => 'Hi', temperature => 0,
                  logit_bias => { $rchain->[0][0] => 100 } }));
is($rr->{json}{output}[0]{type}, 'reasoning', 'Responses: a reasoning item');
my $rs = responses_stream('Responses stream, reasoning',
                          { input => 'Hi', temperature => 0,
                            logit_bias => { $rchain->[0][0] => 100 } }, $rt);
ok(grep({ $_ eq 'response.reasoning_text.delta' } @{ $rs->{types} }),
   'Responses stream: reasoning_text deltas');
$rt->done;

# --- validate ---

my ($rc, $out) = $t->node('openapi_check.mjs', $SPEC, '--compile-all');
is($rc, 0, 'every component schema of the spec compiles in strict mode')
    or diag($out);
like($out, qr/^\{"compiled":\d{3}\}$/m, 'compiled: the subset\'s schemas');

my $in = $t->dir . '/docs.jsonl';
open my $fh, '>', $in or die "$in: $!";
print $fh $J->encode({ name => $_->{name}, schema => $_->{schema},
                       text => $_->{text} }), "\n" for @docs;
close $fh;
$out = `NODE_PATH='$ROOT/node_modules' node '$CHECK' '$SPEC' < '$in' 2>&1`;
is($? >> 8, 0, 'the checker ran') or diag($out);
my @res = map { NginxLLM::decode_json_safe($_) } split /\n/, $out;
is(scalar @res, scalar @docs, 'a result for every document');
for my $i (0 .. $#docs) {
    my ($d, $r) = ($docs[$i], $res[$i] // {});
    is($r->{name}, $d->{name}, "result $i is the document's");
    if ($d->{expect}) {
        ok($r->{ok}, "$d->{name}: valid $d->{schema}")
            or diag(join "\n", @{ $r->{errors} // [$out] });
    } else {
        ok(!$r->{ok} && @{ $r->{errors} }, "$d->{name}: rejected")
            or diag($d->{text});
    }
}

$t->done;
done_testing;
