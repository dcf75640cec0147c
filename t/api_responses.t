#!/usr/bin/perl
# POST /v1/responses: the official `openai` client (responses.create, plain
# and streamed, the responses.stream() helper, previous_response_id, an
# unknown id, responses.retrieve and responses.delete), the response
# object in vLLM's key order, status
# "incomplete" at max_output_tokens, usage, the event sequence with
# event:/data: framing and sequence numbers 0, 1, 2 ..., metrics at the top
# level and only in response.completed when streaming, input items,
# instructions, tools, logprobs, the store for previous_response_id and
# for GET and DELETE /v1/responses/{id} and POST .../cancel (the same bytes
# again, store false,
# unknown and deleted ids, 405, eviction by llm_responses_store's bounds),
# and the validation errors.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $model = NginxLLM->model(tie => 0);

my $t = NginxLLM->new(
    model => $model,
    http => 'llm_per_request_metrics on;',
    locations => <<'LOC');
        location /v1/ { llm_api; }
        location /off/v1/ { llm_api; llm_per_request_metrics off; }
        location = /health { llm_health; }
LOC
$t->start;

my $resp = '/v1/responses';
my $S = qr/"(?:[^"\\]|\\.)*"/;
my $NUM = qr/-?\d+(?:\.\d+)?(?:e[-+]\d+)?/;
my %greedy = (temperature => 0, max_output_tokens => 6);

sub count {
    my (@msgs) = @_;
    return $t->post('/v1/tokenize', { messages => \@msgs })->{json}{count};
}

sub text_of { $_[0]{output}[0]{content}[0]{text} }

# --- the official client ---

my ($rc, $out) = $t->node('responses_client.mjs', $t->url('/v1'), 'tiny');
is($rc, 0, 'the openai client ran without an exception') or diag($out);
my $o = NginxLLM::decode_json_safe($out) // {};

my $p = $o->{plain} // {};
like($p->{id} // '', qr/^resp_[0-9a-f]{32}$/, 'create: id resp_...');
is($p->{object}, 'response', 'create: object');
is($p->{status}, 'incomplete', 'create: max_output_tokens reached: incomplete');
is_deeply($p->{incomplete_details}, { reason => 'max_output_tokens' },
          'create: incomplete_details.reason');
is($p->{instructions}, 'Be brief.', 'create: instructions echoed');
is($p->{usage}{output_tokens}, 6, 'create: usage.output_tokens');
is($p->{usage}{input_tokens},
   count({ role => 'system', content => 'Be brief.' },
         { role => 'user', content => 'Tell me a story.' }),
   'create: input_tokens = the chat prompt of instructions + input');
is($p->{usage}{total_tokens}, $p->{usage}{input_tokens} + 6, 'create: total');
is(ref $p->{metrics}, 'HASH', 'create: metrics at the top level');
ok(length $o->{plain_output_text}, 'create: output_text (the SDK\'s join)');
is($o->{plain_output_text}, text_of($p), 'output_text = the message text');

my $s = $o->{stream} // {};
is_deeply([ grep { $_ ne 'response.output_text.delta' } @{ $s->{types} } ],
          [ qw(response.created response.in_progress
               response.output_item.added response.content_part.added
               response.output_text.done response.content_part.done
               response.output_item.done response.completed) ],
          'stream: the event sequence');
ok(scalar(grep { $_ eq 'response.output_text.delta' } @{ $s->{types} }) >= 1,
   'stream: text deltas');
is_deeply($s->{sequence}, [ 0 .. $#{ $s->{sequence} } ],
          'stream: sequence_number 0, 1, 2, ...');
is($s->{text}, $o->{plain_output_text}, 'stream: deltas = the plain text');
is(text_of($s->{completed}), $s->{text}, 'stream: completed has the text');
is_deeply($s->{with_metrics}, ['response.completed'],
          'stream: metrics only in response.completed');
is(ref $s->{completed}{metrics}, 'HASH', 'stream: completed.response.metrics');
is($s->{completed}{usage}{output_tokens}, 6, 'stream: usage in completed');

is($o->{helper}{status}, 'incomplete', 'responses.stream(): final response');
is($o->{helper}{usage}{output_tokens}, 4, 'responses.stream(): usage');

my $n = $o->{next} // {};
is($n->{previous_response_id}, $p->{id}, 'continuation: previous_response_id');
is($n->{instructions}, undef, 'continuation: instructions do not carry over');
is($n->{usage}{input_tokens},
   count({ role => 'user', content => 'Tell me a story.' },
         { role => 'assistant', content => text_of($p) },
         { role => 'user', content => 'And then?' }),
   'continuation: the stored conversation, without the system message');

my $e = $o->{error} // {};
is($e->{status}, 404, 'unknown previous_response_id: 404');
is($e->{name}, 'NotFoundError', 'the client raises NotFoundError');
is($e->{param}, 'previous_response_id', 'error.param');
like($e->{message} // '', qr/Response with id 'resp_nope' not found\./,
     'error.message');

# responses.retrieve: the object create returned (the SDK adds output_text
# to both); the streamed one as response.completed carried it
is_deeply($o->{retrieved}, $p, 'retrieve: the plain response, metrics too');
my %completed = %{ $s->{completed} };
my %again = %{ $o->{retrieved_stream} // {} };
delete $again{output_text};
is_deeply(\%again, \%completed, 'retrieve: the streamed response.completed');
is_deeply($o->{deleted}, { id => $n->{id}, object => 'response',
                           deleted => JSON::PP::true },
          'delete: {id, object: "response", deleted: true}');
my $ad = $o->{after_delete} // {};
for my $call (qw(retrieve delete)) {
    is($ad->{$call}{status}, 404, "$call after delete: 404");
    is($ad->{$call}{name}, 'NotFoundError', "$call: the client's NotFoundError");
    is($ad->{$call}{param}, 'response_id', "$call: error.param response_id");
    like($ad->{$call}{message} // '', qr/Response with id '\Q$n->{id}\E' not/,
         "$call: the message names the id");
}
is($ad->{previous}{status}, 404, 'previous_response_id of a deleted id: 404');
is($ad->{previous}{param}, 'previous_response_id',
   'previous_response_id of a deleted id: refused as an unknown one');
is($o->{retrieve_unknown}{status}, 404, 'retrieve of an unknown id: 404');
is($o->{cancel}{status}, 400, 'cancel of a finished response: 400');
is($o->{cancel}{name}, 'BadRequestError', 'cancel: the client\'s BadRequestError');
is($o->{cancel}{message}, '400 Cannot cancel a synchronous response.',
   'cancel: vLLM\'s message');
is($o->{cancel_unknown}{status}, 404, 'cancel of an unknown id: 404');
is($o->{cancel_unknown}{param}, 'response_id', 'cancel of an unknown id: param');

# --- the body: vLLM's key order, nulls included ---

my $r = $t->post($resp, { %greedy, input => 'Hello', user => 'u1',
                          metadata => { k => 'v' } });
is($r->{status}, 200, 'body: 200');
like($r->{content},
     qr/^\{"id":"resp_[0-9a-f]{32}","created_at":\d+,"error":null,
        "incomplete_details":\{"reason":"max_output_tokens"\},
        "instructions":null,"metadata":\{"k":"v"\},"model":"tiny",
        "object":"response","output":\[\{"id":"msg_[0-9a-f]{32}",
        "content":\[\{"annotations":\[\],"text":$S,"type":"output_text",
        "logprobs":\[\]\}\],"role":"assistant","status":"completed",
        "type":"message"\}\],"parallel_tool_calls":true,"temperature":0\.0,
        "tool_choice":"auto","tools":\[\],"top_p":1\.0,"background":false,
        "max_output_tokens":6,"max_tool_calls":null,
        "previous_response_id":null,"prompt":null,"reasoning":null,
        "service_tier":"auto","status":"incomplete",
        "text":\{"format":\{"type":"text"\}\},
        "top_logprobs":null,"truncation":"disabled",
        "usage":\{"input_tokens":\d+,"input_tokens_details":
        \{"cached_tokens":\d+,"cache_write_tokens":0\},"output_tokens":6,
        "output_tokens_details":
        \{"reasoning_tokens":0\},"total_tokens":\d+\},"user":"u1",
        "input_messages":null,"output_messages":null,
        "metrics":\{"time_to_first_token_ms":$NUM,"generation_time_ms":$NUM,
        "queue_time_ms":$NUM,"mean_itl_ms":$NUM,"tokens_per_second":$NUM\}\}$/x,
     'body: every key in vLLM\'s order, metrics last');

$r = $t->post($resp, { input => 'Hello', temperature => 0.7, top_p => 0.9,
                       max_output_tokens => 2, seed => 1 });
is($r->{json}{temperature}, 0.7, 'temperature: the value sent');
like($r->{content}, qr/"top_p":0\.9,/, 'top_p: as sent, not as a float32');

# the answer stops before max_output_tokens: completed
$r = $t->post($resp, { input => 'Hello', max_output_tokens => 5,
                       logit_bias => { 128009 => 100 } });
is($r->{json}{status}, 'completed', 'EOS: status completed');
is($r->{json}{incomplete_details}, undef, 'EOS: incomplete_details null');
is_deeply($r->{json}{output}, [], 'no text: no output item (vLLM)');

# a prompt of 250 tokens leaves 6: max_output_tokens shows what is left
$r = $t->post($resp, { input => 'word ' x 230, max_output_tokens => 100 });
is($r->{json}{max_output_tokens}, 256 - $r->{json}{usage}{input_tokens},
   'max_output_tokens: capped to what fits, as vLLM shows it');

# --- metrics off ---

$r = $t->post("/off$resp", { %greedy, input => 'Hello' });
like($r->{content}, qr/,"metrics":null\}$/, 'off: "metrics": null');
my $st = $t->stream("/off$resp", { %greedy, input => 'Hello', stream => \1 });
like($st->{content}, qr/"metrics":null\},"sequence_number":\d+,
                        "type":"response\.completed"\}\n\n\z/x,
     'off, stream: "metrics": null in response.completed');

# --- the stream on the wire ---

$st = $t->stream($resp, { %greedy, input => 'Hello', stream => \1 });
is($st->{headers}{'content-type'}, 'text/event-stream; charset=utf-8',
   'stream: text/event-stream');
my @blocks = split /\n\n/, $st->{content};
my $framed = grep { /^event: ([a-z._]+)\ndata: (\{.*\})\z/s
                    && (NginxLLM::decode_json_safe($2) // {})->{type} eq $1 }
             @blocks;
is($framed, scalar @blocks, 'every event: "event: <type>" and its data');
unlike($st->{content}, qr/\[DONE\]/, 'no [DONE]');
my @ev = map { /^data: (.*)\z/m ? NginxLLM::decode_json_safe($1) : undef }
         @blocks;
is($ev[0]{response}{status}, 'in_progress', 'created: status in_progress');
is_deeply($ev[0]{response}{output}, [], 'created: no output yet');
ok(!exists $ev[0]{response}{metrics} && !exists $ev[1]{response}{metrics},
   'created, in_progress: no metrics key');
is($ev[2]{item}{status}, 'in_progress', 'output_item.added: in progress');
is($ev[3]{part}{text}, '', 'content_part.added: an empty part');
my @deltas = grep { $_->{type} eq 'response.output_text.delta' } @ev;
my ($done) = grep { $_->{type} eq 'response.output_text.done' } @ev;
is(join('', map { $_->{delta} } @deltas), $done->{text},
   'deltas = output_text.done');
ok(!grep({ $_->{item_id} && $_->{item_id} ne $ev[2]{item}{id} } @ev),
   'one item id throughout');
is(text_of($ev[-1]{response}), $done->{text}, 'completed: the same text');
my $nonstream = $t->post($resp, { %greedy, input => 'Hello' });
is($done->{text}, text_of($nonstream->{json}), 'greedy: stream = body');
is(scalar(grep { ref $_->{response} eq 'HASH'
                 && exists $_->{response}{metrics} } @ev), 1,
   'exactly one event carries metrics');
is(ref $ev[-1]{response}{metrics}, 'HASH', 'it is response.completed');

# --- input items, tools, logprobs ---

my @conv = ({ role => 'system', content => 'Sys.' },
            { role => 'user', content => "Part one\nPart two" },
            { role => 'assistant', content => 'An answer.' },
            { role => 'user', content => 'More.' });
$r = $t->post($resp, { %greedy, max_output_tokens => 1, input => [
    { role => 'system', content => 'Sys.' },
    { type => 'message', role => 'user', content => [
        { type => 'input_text', text => 'Part one' },
        { type => 'input_text', text => 'Part two' } ] },
    { type => 'message', role => 'assistant', id => 'msg_x',
      status => 'completed', content => [
        { type => 'output_text', text => 'An answer.', annotations => [] } ] },
    { role => 'user', content => 'More.' } ] });
is($r->{status}, 200, 'input items: 200');
is($r->{json}{usage}{input_tokens}, count(@conv),
   'input items: the chat messages vLLM makes of them');

my @tool_conv = (
    { role => 'user', content => 'Weather?' },
    { role => 'assistant', tool_calls => [ { id => 'call_1',
      type => 'function', function => { name => 'get_weather',
                                        arguments => '{"city":"Paris"}' } } ] },
    { role => 'tool', content => 'sunny', tool_call_id => 'call_1' });
$r = $t->post($resp, { %greedy, max_output_tokens => 1, input => [
    { role => 'user', content => 'Weather?' },
    { type => 'function_call', call_id => 'call_1', name => 'get_weather',
      arguments => '{"city":"Paris"}' },
    { type => 'function_call_output', call_id => 'call_1',
      output => 'sunny' } ] });
is($r->{json}{usage}{input_tokens}, count(@tool_conv),
   'function_call and function_call_output: assistant tool call, tool');

my $tool = { type => 'function', name => 'get_weather',
             description => 'Weather of a city',
             parameters => { type => 'object', properties => {
                 city => { type => 'string' } } } };
$r = $t->post($resp, { %greedy, max_output_tokens => 1, input => 'Weather?',
                       tools => [ $tool ] });
my $tk = $t->post('/v1/tokenize', { messages => [ { role => 'user',
    content => 'Weather?' } ], tools => [ { type => 'function', function => {
        name => 'get_weather', description => 'Weather of a city',
        parameters => $tool->{parameters} } } ] });
is($r->{json}{usage}{input_tokens}, $tk->{json}{count},
   'function tools: rendered as the chat tools they are');
is_deeply($r->{json}{tools}, [ { %$tool, strict => undef } ],
          'tools echoed, with FunctionTool\'s "strict" null when not sent');

# logprobs: include message.output_text.logprobs, as chat computes them
$r = $t->post($resp, { %greedy, max_output_tokens => 3, input => 'Hello',
                       include => [ 'message.output_text.logprobs' ],
                       top_logprobs => 2 });
my $c = $t->post('/v1/chat/completions', { temperature => 0, max_tokens => 3,
    messages => [ { role => 'user', content => 'Hello' } ],
    logprobs => \1, top_logprobs => 2 });
is_deeply($r->{json}{output}[0]{content}[0]{logprobs},
          $c->{json}{choices}[0]{logprobs}{content},
          'logprobs: the entries chat gives for the same prompt');
is($r->{json}{top_logprobs}, 2, 'top_logprobs echoed');
$st = $t->stream($resp, { %greedy, max_output_tokens => 3, input => 'Hello',
                          include => [ 'message.output_text.logprobs' ],
                          top_logprobs => 2, stream => \1 });
@ev = map { /^data: (.*)\z/m ? NginxLLM::decode_json_safe($1) : undef }
      split /\n\n/, $st->{content};
my @streamed = map { @{ $_->{logprobs} } }
               grep { $_->{type} eq 'response.output_text.delta' } @ev;
is_deeply([ map { $_->{logprob} } @streamed ],
          [ map { $_->{logprob} } @{ $c->{json}{choices}[0]{logprobs}{content} } ],
          'stream: the deltas carry the logprobs of their tokens');
ok(!grep({ exists $_->{bytes} } @streamed), 'delta logprobs have no bytes');

# --- the store ---

my $r1 = $t->post($resp, { %greedy, input => 'One', instructions => 'Sys.' });
my $r2 = $t->post($resp, { %greedy, input => 'Two',
                           previous_response_id => $r1->{json}{id} });
my $r3 = $t->post($resp, { %greedy, input => 'Three',
                           previous_response_id => $r2->{json}{id} });
is($r3->{json}{usage}{input_tokens},
   count({ role => 'user', content => 'One' },
         { role => 'assistant', content => text_of($r1->{json}) },
         { role => 'user', content => 'Two' },
         { role => 'assistant', content => text_of($r2->{json}) },
         { role => 'user', content => 'Three' }),
   'a chain of three: the whole conversation');
$st = $t->stream($resp, { %greedy, input => 'Four', stream => \1,
                          previous_response_id => $r3->{json}{id} });
my ($sid) = $st->{content} =~ /"id":"(resp_[0-9a-f]{32})"/;
$r = $t->post($resp, { %greedy, input => 'Five', max_output_tokens => 1,
                       previous_response_id => $sid });
is($r->{status}, 200, 'a streamed response is stored too');
my $ns = $t->post($resp, { %greedy, input => 'x', store => \0 });
$r = $t->post($resp, { input => 'y', previous_response_id => $ns->{json}{id} });
is($r->{status}, 404, 'store: false: not kept');

# --- GET and DELETE /v1/responses/{id} ---

$r = $t->get("$resp/$r1->{json}{id}");
is($r->{status}, 200, 'GET: 200');
is($r->{headers}{'content-type'}, 'application/json', 'GET: application/json');
is($r->{content}, $r1->{content}, 'GET: the bytes of the body, metrics too');
$r = $t->get("$resp/$r3->{json}{id}");
is($r->{content}, $r3->{content}, 'GET: a continuation as it was sent');
my ($obj) = (split /\n\n/, $st->{content})[-1]
    =~ /^event:[ ]response\.completed\ndata:[ ]\{"response":(\{.*\}),
        "sequence_number":\d+,"type":"response\.completed"\}\z/sx;
$r = $t->get("$resp/$sid");
ok(defined $obj && $obj =~ /"metrics":\{/, 'the stream\'s completed response');
is($r->{content}, $obj, 'GET of a stream: the bytes of response.completed');
$r = $t->request('HEAD', "$resp/$sid");
is($r->{status}, 200, 'HEAD: 200');
is($r->{headers}{'content-length'}, length $obj, 'HEAD: its length');
$r = $t->get("$resp/$ns->{json}{id}");
is($r->{status}, 404, 'GET: store false: 404');
is_deeply($r->{json}, { error => { message => "Response with id "
    . "'$ns->{json}{id}' not found.", type => 'NotFoundError',
    param => 'response_id', code => 404 } },
    'GET: the error object names the id');
$r = $t->get("$resp/resp_0123");
is($r->{status}, 404, 'GET: an unknown id: 404');
$r = $t->get("$resp/$r1->{json}{id}?stream=true");
is($r->{status}, 400, 'GET ?stream=true: 400');
is($r->{json}{error}{param}, 'stream', 'GET ?stream=true: param stream');
$r = $t->post("$resp/$r1->{json}{id}", { input => 'x' });
is($r->{status}, 405, 'POST to a stored response: 405');
is($r->{headers}{allow}, 'GET, HEAD, DELETE', 'Allow: GET, HEAD, DELETE');
$r = $t->request('PUT', "$resp/$r1->{json}{id}", {});
is($r->{status}, 405, 'PUT: 405');
$r = $t->post($resp, { %greedy, input => 'x' });
is($r->{status}, 200, 'POST /v1/responses itself is still POST');
$r = $t->get($resp);
is($r->{headers}{allow}, 'POST', 'GET /v1/responses: 405, Allow: POST');
$r = $t->post("$resp/$r1->{json}{id}/cancel", {});
is($r->{status}, 400, 'POST .../{id}/cancel of a finished response: 400');
is($r->{json}{error}{type}, 'invalid_request_error', 'cancel: vLLM\'s type');
$r = $t->get("$resp/$r1->{json}{id}/cancel");
is($r->{status}, 405, 'GET .../cancel: 405');
is($r->{headers}{allow}, 'POST', 'GET .../cancel: Allow: POST');
$r = $t->post("$resp/$r1->{json}{id}/input_items", {});
is($r->{status}, 404, '.../{id}/input_items: no such endpoint');
like($r->{json}{error}{message} // '', qr/no API endpoint/,
     '.../{id}/input_items: the 404 of unknown paths');

$r = $t->request('DELETE', "$resp/$r2->{json}{id}");
is($r->{status}, 200, 'DELETE: 200');
is($r->{content}, qq({"id":"$r2->{json}{id}","object":"response",)
                  . '"deleted":true}', 'DELETE: the deletion object');
is($t->get("$resp/$r2->{json}{id}")->{status}, 404, 'GET after DELETE: 404');
$r = $t->request('DELETE', "$resp/$r2->{json}{id}");
is($r->{status}, 404, 'DELETE again: 404');
is($r->{json}{error}{param}, 'response_id', 'DELETE again: param');
$r = $t->post($resp, { input => 'y', previous_response_id => $r2->{json}{id} });
is($r->{status}, 404, 'previous_response_id of a deleted id: 404');
like($r->{json}{error}{message} // '', qr/^Response with id '\Q$r2->{json}{id}\E'/,
     'previous_response_id of a deleted id: the unknown id\'s message');
$r = $t->post($resp, { %greedy, input => 'y', max_output_tokens => 1,
                       previous_response_id => $r3->{json}{id} });
is($r->{status}, 200, 'a response after the deleted one still continues');
is($t->get("$resp/$r1->{json}{id}")->{content}, $r1->{content},
   'the others stay');

# --- the access log bills it ---

my $line = $t->wait_log_line(qr{^/v1/responses 200 .*completion=1 });
like($line // '', qr/id=resp_[0-9a-f]{32} .*finish=length/,
     'log: $llm_request_id resp_..., $llm_finish_reason');

# --- validation ---

sub bad {
    my ($name, $body, $status, $param, $msg) = @_;
    my $x = $t->post($resp, $body);
    subtest $name => sub {
        is($x->{status}, $status, "status $status");
        is($x->{json}{error}{param}, $param, 'param ' . ($param // 'null'));
        like($x->{json}{error}{message} // '', $msg, 'message');
    };
}

bad('no input', { max_output_tokens => 2 }, 400, 'input',
    qr/`input` is required/);
bad('input a number', { input => 5 }, 400, 'input', qr/got a number/);
bad('an empty input list', { input => [] }, 400, 'input',
    qr/at least one item/);
bad('an item that is not an object', { input => [ 'hi' ] }, 400, 'input',
    qr/input\[0\] must be an object/);
bad('an unknown role', { input => [ { role => 'robot', content => 'x' } ] },
    400, 'input', qr/input\[0\]\.role must be/);
bad('an image part', { input => [ { role => 'user', content => [
    { type => 'input_image', image_url => 'x' } ] } ] }, 400, 'input',
    qr/only "input_text" and "output_text" parts/);
bad('a bare string part', { input => [ { role => 'user', content => [
    { type => 'input_text', text => 'a' }, 'b' ] } ] }, 400, 'input',
    qr/^input\[0\]\.content\[1\]: only /);
bad('a built-in tool item', { input => [ { type => 'web_search_call',
    id => 'x' } ] }, 400, 'input', qr/"web_search_call" are not supported/);
bad('a function_call without a name', { input => [ { type => 'function_call',
    call_id => 'c' } ] }, 400, 'input', qr/needs "call_id" and "name"/);
bad('background', { input => 'x', background => \1 }, 400, 'background',
    qr/background mode is not supported/);
bad('a prompt template', { input => 'x', prompt => { id => 'p' } }, 400,
    'prompt', qr/^prompt template is not supported$/);
bad('truncation auto', { input => 'x', truncation => 'auto' }, 400,
    'truncation', qr/only `truncation` "disabled"/);
bad('a JSON schema keyword not supported', { input => 'x', text => { format => {
    type => 'json_schema', name => 'n', schema => { type => 'number',
    multipleOf => 2 } } } }, 400, 'text.format',
    qr/^`text\.format`: the JSON Schema keyword 'multipleOf' is not supported/);
bad('a web search tool', { input => 'x', tools => [ { type => 'web_search' } ] },
    400, 'tools', qr/only function tools/);
bad('max_output_tokens 0', { input => 'x', max_output_tokens => 0 }, 400,
    'max_output_tokens', qr/^max_output_tokens must be at least 1, got 0\.$/);
bad('temperature -1', { input => 'x', temperature => -1 }, 400,
    'temperature', qr/^temperature must be non-negative, got -1\.0\.$/);
bad('top_p 2', { input => 'x', top_p => 2 }, 400, 'top_p',
    qr/^top_p must be in \(0, 1\], got 2\.0\.$/);
bad('top_logprobs 21', { input => 'x', top_logprobs => 21,
    include => [ 'message.output_text.logprobs' ] }, 400, 'top_logprobs',
    qr/greater than max allowed: 20/);
bad('include not a list', { input => 'x', include => 'x' }, 400, 'include',
    qr/must be a list of strings/);
bad('previous_response_id a number', { input => 'x',
    previous_response_id => 5 }, 400, 'previous_response_id',
    qr/must be a string/);
bad('an input longer than llm_max_model_len', { input => 'word ' x 400 },
    400, 'input', qr/maximum context length is 256 tokens/);
bad('an unknown model', { input => 'x', model => 'gpt-4' }, 404, 'model',
    qr/The model `gpt-4` does not exist/);

$t->done;

# --- llm_responses_store: the bounds ---

my $b = NginxLLM->new(model => $model, http => 'llm_responses_store 3 8000;');

# nginx -t, not under AddressSanitizer (nginx -t runs without it)
for (NginxLLM::asan() ? () : ([ 'x', qr/invalid number of responses "x"/ ],
                              [ '-1', qr/invalid number of responses "-1"/ ],
                              [ '3 lots', qr/invalid size "lots"/ ]))
{
    my ($rc, $out) = $b->test_config(http => "llm_responses_store $_->[0];");
    isnt($rc, 0, "llm_responses_store $_->[0]: nginx -t fails");
    like($out, qr/\[emerg\] "llm_responses_store": .*$_->[1]/,
         "llm_responses_store $_->[0]: the [emerg] names it");
}

$b->start;

my @ids = map { $b->post($resp, { input => "n$_", max_output_tokens => 1 })
                  ->{json}{id} } 1 .. 4;
is_deeply([ map { $b->get("$resp/$_")->{status} } @ids ], [ 404, 200, 200, 200 ],
          'entries: the 4th of 3 drops the oldest');
is($b->post($resp, { input => 'x', previous_response_id => $ids[0] })->{status},
   404, 'an evicted id cannot be continued');

# one response of about 7.4 kB: with it the bytes keep only itself
my $big = $b->post($resp, { input => 'big', max_output_tokens => 1,
                            user => 'x' x 6300 });
is($b->get("$resp/$big->{json}{id}")->{content}, $big->{content},
   'bytes: a large response is kept');
is_deeply([ map { $b->get("$resp/$_")->{status} } @ids[2, 3] ], [ 404, 404 ],
          'bytes: the older ones go to make room, though 3 entries would fit');
my $huge = $b->post($resp, { input => 'huge', max_output_tokens => 1,
                             user => 'x' x 9000 });
is($huge->{status}, 200, 'a response larger than the store is answered');
is($b->get("$resp/$huge->{json}{id}")->{status}, 404, '... but not kept');
is($b->get("$resp/$big->{json}{id}")->{status}, 200, '... nor evicts any');
like($b->error_log, qr/response "\Q$huge->{json}{id}\E" not stored: larger/,
     '... and the log says why');

$b->done;

my $z = NginxLLM->new(model => $model, http => 'llm_responses_store 0;');
$z->start;
$r = $z->post($resp, { input => 'x', max_output_tokens => 1 });
is($r->{status}, 200, 'llm_responses_store 0: answered');
is($z->get("$resp/$r->{json}{id}")->{status}, 404, '... and not kept');
$z->done;

done_testing();
