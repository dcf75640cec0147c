#!/usr/bin/perl
# Tool calls out of /v1/chat/completions (llm_tool_call_parser): models
# whose greedy output is a chosen text (NginxLLM->script_model: the default
# test model's tokenizer and template, weights that write the text) write
# a Hermes <tool_call>, a Llama 3.1 JSON call, a Mistral [TOOL_CALLS]
# array or plain text; the answer carries message.tool_calls (ids, type,
# name, arguments as the JSON text the model wrote), content null,
# finish_reason "tool_calls", usage unchanged; streams carry OpenAI's
# deltas and no markup as content.  The official openai client reads both
# and sends the result back; the OpenAI Agents SDK runs an agent with one
# tool to completion.  Then every bad input: tool_choice values,
# parallel_tool_calls, empty tools, tool messages without a call, "auto"
# without a parser, and nginx -t on the directive.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use JSON::PP;
use Test::More;
use NginxLLM;

my $chat = '/v1/chat/completions';

my $H = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\" "
      . ":{\"city\":\"Paris\"}}\n</tool_call>";
my $PLAIN = 'The sky is clear.';
my $L = '{"name": "get_weather", "parameters" :{"city":"Rome"}}';
my $M = '[TOOL_CALLS][{"name": "search", "arguments" :{"query":"nginx"}}]';

my ($hdir, $hc) = NginxLLM->script_model($H, $PLAIN);
my ($ldir, $lc) = NginxLLM->script_model($L);
my ($mdir, $mc) = NginxLLM->script_model($M);

my @tools = ({ type => 'function', function => {
    name => 'get_weather', description => 'The weather in a city',
    parameters => { type => 'object',
                    properties => { city => { type => 'string' } } } } },
  { type => 'function', function => { name => 'search',
    parameters => { type => 'object',
                    properties => { query => { type => 'string' } } } } });
my @msgs = ({ role => 'user', content => 'Weather in Paris?' });

# a request whose output is the text of chain $c
sub req {
    my ($c, %o) = @_;
    return { messages => \@msgs, tools => \@tools, temperature => 0,
             max_tokens => 64, logit_bias => { $c->[0] => 100 }, %o };
}

# --- hermes ---------------------------------------------------------------

my $t = NginxLLM->new(model => $hdir, http => 'llm_tool_call_parser hermes;');
$t->start;

my $r = $t->post($chat, req($hc->[0]));
is($r->{status}, 200, 'hermes: 200');
my $ch = $r->{json}{choices}[0];
my $m = $ch->{message};
is($m->{content}, undef, 'hermes: content null when only a call');
is(scalar @{ $m->{tool_calls} }, 1, 'hermes: one tool call');
my $tc = $m->{tool_calls}[0];
like($tc->{id}, qr/^chatcmpl-tool-[0-9a-f]{32}$/, 'hermes: vLLM\'s id');
is($tc->{type}, 'function', 'hermes: type function');
is($tc->{function}{name}, 'get_weather', 'hermes: the name');
is($tc->{function}{arguments}, '{"city":"Paris"}',
   'hermes: arguments, the JSON text the model wrote');
is_deeply(decode_json($tc->{function}{arguments}), { city => 'Paris' },
          'hermes: arguments parse');
is($ch->{finish_reason}, 'tool_calls', 'hermes: finish_reason tool_calls');
is($r->{json}{usage}{completion_tokens}, scalar(@{ $hc->[0] }) + 1, 'hermes: completion_tokens: the call\'s tokens and the EOS');
like($r->{content}, qr/"tool_calls":\[\{"id":"chatcmpl-tool-[0-9a-f]+","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":\\"Paris\\"\}"\}\}\]/,
     'hermes: vLLM\'s key order');

my $second = $t->post($chat, req($hc->[0]));
isnt($second->{json}{choices}[0]{message}{tool_calls}[0]{id}, $tc->{id},
     'ids differ between requests');

# the plain chain: no call
$r = $t->post($chat, req($hc->[1]));
$m = $r->{json}{choices}[0]{message};
is($m->{content}, $PLAIN, 'plain text with tools: the content');
is_deeply($m->{tool_calls}, [], 'plain text: tool_calls []');
is($r->{json}{choices}[0]{finish_reason}, 'stop', 'plain text: stop');

# streamed
$r = $t->stream($chat, req($hc->[0], stream => JSON::PP::true,
                           stream_options => { include_usage => JSON::PP::true }));
is($r->{status}, 200, 'hermes stream: 200');
my $s = NginxLLM::add_up_tool_stream($r);
is($s->{content}, '', 'hermes stream: no content, no markup');
unlike($r->{content}, qr/tool_call>|\\u003ctool/, 'hermes stream: no tag in any event');
is(scalar @{ $s->{calls} }, 1, 'hermes stream: one call');
my $first = $s->{calls}[0]{first};
like($first->{id}, qr/^chatcmpl-tool-[0-9a-f]{32}$/, 'hermes stream: the first delta has the id');
is($first->{type}, 'function', '... type');
is($first->{function}{name}, 'get_weather', '... name');
ok(defined $first->{function}{arguments}, '... and arguments');
is($s->{calls}[0]{arguments}, '{"city":"Paris"}', 'hermes stream: the fragments add up');
is_deeply($s->{finish}, ['tool_calls'], 'hermes stream: finish_reason tool_calls, once');
is($s->{usage}{completion_tokens}, scalar(@{ $hc->[0] }) + 1,
   'hermes stream: completion_tokens as not streamed');
is($r->{events}[-1], '[DONE]', 'hermes stream: [DONE]');

# later deltas carry only index and function.arguments.  How many there
# are depends on how the engine's tokens fall into chunks (a busy worker
# reads several at once), so this checks those there are; every split of
# the text is t/unit/test_tool_parser.c's
my @later = grep { !$_->{id} } map { @{ $_->{choices}[0]{delta}{tool_calls} // [] } }
            grep { ref $_ && @{ $_->{choices} // [] } } @{ $r->{events} };
is(scalar(@later), $s->{calls}[0]{deltas} - 1,
   'hermes stream: one delta with the id, the others without');
ok(!grep({ join(',', sort keys %$_) ne 'function,index'
           || join(',', keys %{ $_->{function} }) ne 'arguments' } @later),
   'hermes stream: later deltas: index and function.arguments');

# cut by max_tokens: no call, the text as content (vLLM)
$r = $t->post($chat, req($hc->[0], max_tokens => 10));
$m = $r->{json}{choices}[0]{message};
is_deeply($m->{tool_calls}, [], 'cut by max_tokens: no call');
like($m->{content}, qr/^<tool_call>\n\{"name/, 'cut by max_tokens: the text is content');
is($r->{json}{choices}[0]{finish_reason}, 'length', 'cut by max_tokens: length');

# tool_choice none: nothing parsed
$r = $t->post($chat, req($hc->[0], tool_choice => 'none'));
$m = $r->{json}{choices}[0]{message};
is($m->{content}, $H, 'tool_choice none: the markup is content');
is_deeply($m->{tool_calls}, [], 'tool_choice none: no call');
is($r->{json}{choices}[0]{finish_reason}, 'stop', 'tool_choice none: stop');

# n = 2: each choice parsed
# sampled (n > 1 is not greedy): the chain leads by hundreds of logits
$r = $t->post($chat, req($hc->[0], n => 2, temperature => 1));
is(scalar(grep { $_->{finish_reason} eq 'tool_calls'
                 && $_->{message}{tool_calls}[0]{function}{name} eq 'get_weather' }
       @{ $r->{json}{choices} }), 2, 'n = 2: both choices have the call');

# the access log: the engine's reason and the tokens, as for any generation
my $log = $t->wait_access_log(qr/completion=\d+ /);
ok(scalar(grep { /completion=@{[ scalar(@{ $hc->[0] }) + 1 ]} .*finish=stop/ } @{ $t->access_log }),
   '$llm_completion_tokens and $llm_finish_reason (stop) as for any generation');

# the official client
my ($rc, $out) = $t->node('tools_client.mjs', $t->url('/v1'), 'tiny', $hc->[0][0]);
is($rc, 0, 'openai client ran') or diag($out);
my $o = eval { decode_json((grep { /^\{/ } split /\n/, $out)[-1]) } // {};
my $oc = $o->{chat}{choices}[0]{message}{tool_calls}[0];
is($oc->{function}{name}, 'get_weather', 'openai client: the call');
is($oc->{function}{arguments}, '{"city":"Paris"}', 'openai client: its arguments');
my $hm = $o->{helper}{choices}[0]{message};
is($hm->{tool_calls}[0]{function}{arguments}, '{"city":"Paris"}',
   'openai client: ChatCompletionStream accumulates the call');
like($hm->{tool_calls}[0]{id}, qr/^chatcmpl-tool-/, '... with its id');
is($o->{helper}{choices}[0]{finish_reason}, 'tool_calls', '... and finish_reason');
is($o->{stream}{content}, '', 'openai client stream: no content');
is($o->{stream}{calls}[0]{name}, 'get_weather', 'openai client stream: the name');
is($o->{stream}{calls}[0]{arguments}, '{"city":"Paris"}', 'openai client stream: the arguments');
is_deeply($o->{stream}{finish}, ['tool_calls'], 'openai client stream: finish');
ok($o->{next}{choices}[0]{message}, 'openai client: the tool result goes back (200)');

# the OpenAI Agents SDK through Chat Completions: tool_choice "required" on
# the first turn (the grammar makes it a call, though the bias favours the
# plain text), the tool's output back, then "auto" (the SDK's
# resetToolChoice) and the plain text as the final output
($rc, $out) = $t->node('agents_client.mjs', $t->url('/v1'), 'tiny', $hc->[1][0]);
is($rc, 0, 'Agents SDK ran') or diag($out);
my $a = eval { decode_json((grep { /^\{/ } split /\n/, $out)[-1]) } // {};
for my $how ('run', 'stream') {
    my $x = $a->{$how} // {};
    is_deeply($x->{items}, [ 'tool_call_item', 'tool_call_output_item', 'message_output_item' ],
              "Agents SDK $how: a call, its output, the answer");
    is($x->{calls}[0]{name}, 'get_weather', "Agents SDK $how: the call");
    like($x->{calls}[0]{arguments} // '', qr/^\{\s*"city"\s*:\s*"(Paris|Rome|Oslo)"\s*\}$/,
         "Agents SDK $how: arguments valid under the tool's schema");
    is($x->{outputs}[0] // '', "It is sunny in $1.", "Agents SDK $how: the tool ran on them")
        if ($x->{calls}[0]{arguments} // '') =~ /"(\w+)"\s*\}$/;
    is($x->{finalOutput}, $PLAIN, "Agents SDK $how: the final output");
}
is(scalar @{ $a->{executed} // [] }, 2, 'Agents SDK: the tool ran once a run');

# --- bad input ---------------------------------------------------------------

sub bad { $t->is_bad_request($chat, @_) }

my %base = (messages => \@msgs, tools => \@tools, max_tokens => 4);
bad('tool_choice naming an unknown function', { %base, tool_choice =>
    { type => 'function', function => { name => 'nope' } } },
    'tool_choice', qr/^The tool specified in `tool_choice` does not match any of the specified `tools`$/);
bad('tool_choice without tools', { messages => \@msgs, tool_choice => 'auto' },
    'tool_choice', qr/^When using `tool_choice`, `tools` must be set\.$/);
bad('tool_choice another string', { %base, tool_choice => 'always' },
    'tool_choice', qr/^Invalid value for `tool_choice`: always! Only named tools/);
bad('tool_choice a number', { %base, tool_choice => 3 },
    'tool_choice', qr/Invalid value for `tool_choice`/);
bad('tool_choice function not an object', { %base, tool_choice =>
    { type => 'function', function => 'search' } },
    'tool_choice', qr/^Invalid value for `function`: .* Correct usage/);
bad('tool_choice function without a name', { %base, tool_choice =>
    { type => 'function', function => {} } },
    'tool_choice', qr/^Expected field `name` in `function` in `tool_choice`!/);
bad('tool_choice function with an empty name', { %base, tool_choice =>
    { type => 'function', function => { name => '' } } },
    'tool_choice', qr/^Invalid `name` in `function`/);
bad('parallel_tool_calls not a boolean', { %base, parallel_tool_calls => 'yes' },
    'parallel_tool_calls', qr/parallel_tool_calls/);
bad('tools empty', { %base, tools => [] }, 'tools', qr/must not be an empty array/);
bad('a tool message without a call', { %base, messages => [ @msgs,
    { role => 'tool', tool_call_id => 'x', content => 'sunny' } ] },
    'messages.[1].role', qr/role 'tool' must be a response to a preceeding message with 'tool_calls'/);
bad('a tool message after a plain assistant message', { %base, messages => [ @msgs,
    { role => 'assistant', content => 'Hi' },
    { role => 'tool', tool_call_id => 'x', content => 'sunny' } ] },
    'messages.[2].role', qr/role 'tool' must be a response/);
bad('a tool message answering another call', { %base, messages => [ @msgs,
    { role => 'assistant', content => undef, tool_calls => [ { id => 'call_1',
      type => 'function', function => { name => 'search', arguments => '{}' } } ] },
    { role => 'tool', tool_call_id => 'call_2', content => 'sunny' } ] },
    'messages.[2].tool_call_id', qr/'tool_call_id' of 'call_2' not found in 'tool_calls' of previous message/);

# a good round trip: two results for two calls
$r = $t->post($chat, { %base, messages => [ @msgs,
    { role => 'assistant', content => undef, tool_calls => [
      { id => 'call_1', type => 'function', function => { name => 'search', arguments => '{}' } },
      { id => 'call_2', type => 'function', function => { name => 'search', arguments => '{}' } } ] },
    { role => 'tool', tool_call_id => 'call_1', content => 'a' },
    { role => 'tool', tool_call_id => 'call_2', content => 'b' } ] });
is($r->{status}, 200, 'tool results answering the calls before them: 200');
$r = $t->post($chat, { %base, parallel_tool_calls => JSON::PP::false });
is($r->{status}, 200, 'parallel_tool_calls false: 200');

$t->done;

# --- llama3_json, mistral ---------------------------------------------------

$t = NginxLLM->new(model => $ldir, http => 'llm_tool_call_parser llama3_json;');
$t->start;
$r = $t->post($chat, req($lc->[0]));
$m = $r->{json}{choices}[0]{message};
is($m->{tool_calls}[0]{function}{name}, 'get_weather', 'llama3_json: the name');
is($m->{tool_calls}[0]{function}{arguments}, '{"city":"Rome"}', 'llama3_json: "parameters" as arguments');
is($m->{content}, undef, 'llama3_json: content null');
is($r->{json}{choices}[0]{finish_reason}, 'tool_calls', 'llama3_json: tool_calls');
$r = $t->stream($chat, req($lc->[0], stream => JSON::PP::true));
$s = NginxLLM::add_up_tool_stream($r);
is($s->{content}, '', 'llama3_json stream: no content');
is($s->{calls}[0]{arguments}, '{"city":"Rome"}', 'llama3_json stream: the arguments');
is_deeply($s->{finish}, ['tool_calls'], 'llama3_json stream: finish');
$t->done;

$t = NginxLLM->new(model => $mdir, http => 'llm_tool_call_parser mistral;');
$t->start;
$r = $t->post($chat, req($mc->[0]));
$m = $r->{json}{choices}[0]{message};
like($m->{tool_calls}[0]{id}, qr/^[A-Za-z0-9]{9}$/, 'mistral: a 9-character id');
is($m->{tool_calls}[0]{function}{name}, 'search', 'mistral: the name');
is($m->{tool_calls}[0]{function}{arguments}, '{"query":"nginx"}', 'mistral: the arguments');
$r = $t->stream($chat, req($mc->[0], stream => JSON::PP::true));
$s = NginxLLM::add_up_tool_stream($r);
like($s->{calls}[0]{first}{id}, qr/^[A-Za-z0-9]{9}$/, 'mistral stream: the id');
is($s->{calls}[0]{arguments}, '{"query":"nginx"}', 'mistral stream: the arguments');
is($s->{content}, '', 'mistral stream: no [TOOL_CALLS] as content');
$t->done;

# --- without a parser, and auto ------------------------------------------------

$t = NginxLLM->new(model => $hdir);
$t->start;
$r = $t->post($chat, { %base });
is($r->{status}, 400, 'tools without llm_tool_call_parser: 400 (tool_choice defaults to auto)');
like($r->{json}{error}{message}, qr/^"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set/,
     '... vLLM\'s message');
is($r->{json}{error}{param}, 'tool_choice', '... param tool_choice');
$r = $t->post($chat, req($hc->[0], tool_choice => 'none'));
is($r->{json}{choices}[0]{message}{content}, $H, 'tool_choice none without a parser: 200, the text');
$t->done;

$t = NginxLLM->new(model => $hdir, http => 'llm_tool_call_parser auto;');
$t->start;
$r = $t->post($chat, { %base });
is($r->{status}, 400, 'auto with a template that teaches no tool markup: 400');
like($r->{json}{error}{message}, qr/"llm_tool_call_parser auto" found no parser/, '... says why');
$t->done;

# nginx -t, not under AddressSanitizer (t/api_asan.t: nginx -t runs without
# its runtime); the plain run checks these
unless (NginxLLM::asan()) {
    my ($st, $txt) = $t->test_config(http => 'llm_tool_call_parser json;');
    isnt($st, 0, 'nginx -t: an unknown parser fails');
    like($txt, qr/\[emerg\].*"llm_tool_call_parser": unknown parser "json"/,
         '... naming the directive');
    ($st, $txt) = $t->test_config(http => "llm_tool_call_parser hermes;\n"
                                          . "    llm_tool_call_parser auto;");
    like($txt, qr/\[emerg\].*"llm_tool_call_parser" directive is duplicate/,
         'nginx -t: a duplicate');
}

done_testing;
