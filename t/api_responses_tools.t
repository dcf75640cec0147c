#!/usr/bin/perl
# Function calls in the Responses API (ngx_http_llm_responses_calls.c): a
# model scripted to write a Hermes <tool_call> (NginxLLM->script_model),
# with llm_tool_call_parser hermes, answers with a function_call output
# item (arguments, call_id, name, type, id, status); streamed, the item's
# output_item.added, function_call_arguments.delta/.done and
# output_item.done events, and response.completed holding the items as
# streamed; the call's output goes back as a function_call_output item,
# with previous_response_id or with the whole conversation as input;
# tool_choice "required" and {"type": "function", "name"} (the grammar:
# ngx_http_llm_tools_grammar.c) for a model that would write text; the
# OpenAI Agents SDK's default model (the Responses API) runs an agent with
# one tool to completion; and the 400s.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use JSON::PP;
use Test::More;
use NginxLLM;

my $resp = '/v1/responses';

my $H = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\" "
      . ":{\"city\":\"Paris\"}}\n</tool_call>";
my $PLAIN = 'The sky is clear.';
my ($dir, $c) = NginxLLM->script_model($H, $PLAIN);
my ($call_ids, $plain_ids) = @$c;

my $tool = { type => 'function', name => 'get_weather', description => 'The weather in a city',
             parameters => { type => 'object', additionalProperties => JSON::PP::false,
                             properties => { city => { type => 'string',
                                                       enum => [ 'Paris', 'Rome', 'Oslo' ] } },
                             required => ['city'] } };

sub req {
    my ($ids, %o) = @_;
    return { model => 'tiny', input => 'Weather in Paris?', tools => [$tool],
             temperature => 0, max_output_tokens => 120,
             logit_bias => { $ids->[0] => 100 }, %o };
}

my $t = NginxLLM->new(model => $dir, http => 'llm_tool_call_parser hermes;');
$t->start;

# --- a call, not streamed ------------------------------------------------------
my $r = $t->post($resp, req($call_ids));
is($r->{status}, 200, 'a call: 200');
my $out = $r->{json}{output} // [];
is(scalar @$out, 1, 'a call: one output item (no message: no content)');
my $fc = $out->[0] // {};
is($fc->{type}, 'function_call', 'a call: a function_call item');
is($fc->{name}, 'get_weather', 'a call: its name');
is($fc->{arguments}, '{"city":"Paris"}', 'a call: its arguments, as the model wrote them');
like($fc->{call_id}, qr/^call_[0-9a-f]{32}$/, 'a call: call_id');
like($fc->{id}, qr/^fc_[0-9a-f]{32}$/, 'a call: id');
is($fc->{status}, 'completed', 'a call: status completed');
like($r->{content}, qr/"output":\[\{"arguments":"[^"]*(?:\\"[^"]*)*","call_id":"call_[0-9a-f]+","name":"get_weather","type":"function_call","id":"fc_[0-9a-f]+","status":"completed"\}\]/,
     'a call: vLLM\'s key order');
is($r->{json}{status}, 'completed', 'a call: the response completed');
is($r->{json}{usage}{output_tokens}, @$call_ids + 1, 'a call: output_tokens, the call\'s and the EOS');

# plain text: a message, as before
$r = $t->post($resp, req($plain_ids));
is($r->{json}{output}[0]{type}, 'message', 'plain text: a message item');
is($r->{json}{output}[0]{content}[0]{text}, $PLAIN, 'plain text: its text');

# --- the call's output back ---------------------------------------------------------
$r = $t->post($resp, req($call_ids));
my $first = $r->{json};
my $call_id = $first->{output}[0]{call_id};
$r = $t->post($resp, req($plain_ids, previous_response_id => $first->{id},
                         input => [ { type => 'function_call_output', call_id => $call_id,
                                      output => 'sunny' } ]));
is($r->{status}, 200, 'function_call_output after previous_response_id: 200')
    or diag($r->{content});
is($r->{json}{output}[0]{content}[0]{text}, $PLAIN, '... and the answer');

$r = $t->post($resp, req($plain_ids, previous_response_id => $first->{id},
                         input => [ { type => 'function_call_output', call_id => 'call_nope',
                                      output => 'sunny' } ]));
is($r->{status}, 400, 'function_call_output naming no call of the response: 400');
like($r->{json}{error}{message} // '', qr/'tool_call_id' of 'call_nope' not found/,
     '... saying so');

$r = $t->post($resp, req($plain_ids, input => [
    { role => 'user', content => 'Weather in Paris?' },
    { type => 'function_call', call_id => 'call_1', name => 'get_weather',
      arguments => '{"city":"Paris"}' },
    { type => 'function_call_output', call_id => 'call_1', output => 'sunny' } ]));
is($r->{status}, 200, 'the conversation as input items: 200');
is($r->{json}{output}[0]{content}[0]{text}, $PLAIN, '... and the answer');

$r = $t->post($resp, req($plain_ids, input => [
    { role => 'user', content => 'Weather in Paris?' },
    { type => 'function_call_output', call_id => 'call_1', output => 'sunny' } ]));
is($r->{status}, 400, 'a function_call_output without its call: 400');

# --- streamed -----------------------------------------------------------------------
$r = $t->stream($resp, { %{ req($call_ids) }, stream => JSON::PP::true });
is($r->{status}, 200, 'stream: 200');
my @ev;
for my $b (split /\n\n/, $r->{content}) {
    my ($type, $data) = $b =~ /^event: ([a-z._]+)\ndata: (\{.*\})\z/s or next;
    push @ev, decode_json($data);
}
my @types = map { $_->{type} } @ev;
my @delta = grep { $_->{type} eq 'response.function_call_arguments.delta' } @ev;
my @kinds = grep { $_ ne 'response.function_call_arguments.delta' } @types;
is_deeply(\@kinds, [ 'response.created', 'response.in_progress', 'response.output_item.added',
                     'response.function_call_arguments.done', 'response.output_item.done',
                     'response.completed' ],
          'stream: the events of a function_call item') or diag("@types");
ok(@delta >= 1, 'stream: argument deltas (' . scalar(@delta) . ')');
my ($added) = grep { $_->{type} eq 'response.output_item.added' } @ev;
my ($adone) = grep { $_->{type} eq 'response.function_call_arguments.done' } @ev;
my ($idone) = grep { $_->{type} eq 'response.output_item.done' } @ev;
my ($completed) = grep { $_->{type} eq 'response.completed' } @ev;
is($added->{item}{type}, 'function_call', 'stream: the item added is a function_call');
is($added->{item}{name}, 'get_weather', '... with its name');
is($added->{item}{arguments}, '', '... no arguments yet');
is($added->{item}{status}, 'in_progress', '... in progress');
is(join('', map { $_->{delta} } @delta), '{"city":"Paris"}', 'stream: the deltas add up');
ok(!grep({ $_->{item_id} ne $added->{item}{id} || $_->{output_index} != 0 } @delta),
   'stream: deltas name the item and its output_index');
is($adone->{arguments}, '{"city":"Paris"}', 'stream: arguments.done has them all');
is($adone->{name}, 'get_weather', 'stream: ... and the name');
is_deeply($idone->{item}, { %{ $added->{item} }, arguments => '{"city":"Paris"}',
                            status => 'completed' }, 'stream: output_item.done, the whole item');
is_deeply($completed->{response}{output}, [ $idone->{item} ],
          'stream: response.completed holds the item as streamed');
is_deeply([ map { $_->{sequence_number} } @ev ], [ 0 .. $#ev ], 'stream: sequence numbers');

# --- tool_choice: the grammar -----------------------------------------------------------
for my $choice ('required', { type => 'function', name => 'get_weather' }) {
    my $how = ref $choice ? 'named' : 'required';
    $r = $t->post($resp, req($plain_ids, tool_choice => $choice, max_output_tokens => 300,
                             parallel_tool_calls => JSON::PP::false));
    my $o = $r->{json}{output} // [];
    is(scalar(@$o), 1, "tool_choice $how, a model that writes text: one item")
        or diag($r->{content});
    is($o->[0]{type}, 'function_call', "tool_choice $how: a function_call all the same");
    like($o->[0]{arguments} // '', qr/^\{\s*"city"\s*:\s*"(Paris|Rome|Oslo)"\s*\}$/,
         "tool_choice $how: arguments valid under the tool's schema");
}

# --- the OpenAI Agents SDK, its default model: the Responses API -----------------------
{
    my ($rc, $o) = $t->node('agents_client.mjs', $t->url('/v1'), 'tiny', $plain_ids->[0],
                            'responses');
    is($rc, 0, 'Agents SDK (Responses) ran') or diag($o);
    my $a = eval { decode_json((grep { /^\{/ } split /\n/, $o)[-1]) } // {};
    for my $how ('run', 'stream') {
        my $x = $a->{$how} // {};
        is_deeply($x->{items}, [ 'tool_call_item', 'tool_call_output_item', 'message_output_item' ],
                  "Agents SDK (Responses) $how: a call, its output, the answer");
        like($x->{calls}[0]{arguments} // '', qr/^\{\s*"city"\s*:\s*"(Paris|Rome|Oslo)"\s*\}$/,
             "Agents SDK (Responses) $how: arguments valid under the tool's schema");
        is($x->{finalOutput}, $PLAIN, "Agents SDK (Responses) $how: the final output");
    }
}

# --- bad input ------------------------------------------------------------------------------
sub bad { $t->is_bad_request($resp, @_) }

bad('tool_choice of another type', req($plain_ids, tool_choice => { type => 'file_search' }),
    'tool_choice', qr/must be "none", "auto", "required" or \{"type": "function"/);
bad('tool_choice naming no tool', req($plain_ids, tool_choice => { type => 'function',
                                                                   name => 'nope' }),
    'tool_choice', qr/does not match any of the specified `tools`/);
bad('tool_choice without a name', req($plain_ids, tool_choice => { type => 'function' }),
    'tool_choice', qr/Expected field `name`/);
is($t->get('/health')->{status}, 200, 'the worker lives');

$t->done;
done_testing;
