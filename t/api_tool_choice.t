#!/usr/bin/perl
# tool_choice "required" and a named function (vLLM's way, for any model
# and without llm_tool_call_parser): the output is constrained to the
# tools' schemas, so it is always a call whose arguments validate.
#
#   * a model scripted to write vLLM's forms (NginxLLM->script_model) gets
#     them through the grammar: "required" an array of calls
#     [{"name", "parameters"}] -> message.tool_calls, finish_reason
#     "tool_calls"; a named function its arguments -> one call, finish_reason
#     "stop" (vLLM); streamed, the deltas add up to the same calls;
#     completion_tokens the call's tokens and the EOS;
#   * a model scripted to write plain text, and the random test model
#     sampled with seeds, still answer with valid calls (checked with ajv
#     against the tools' schemas): the grammar, not the model, decides;
#   * parallel_tool_calls false: one call, though the model writes two;
#   * $defs of the tools' parameters resolve; 20 tools work;
#   * the official openai client reads both forms, streamed and not; the
#     Vercel AI SDK's generateText and streamText with toolChoice 'required'
#     run the tool on the call; LangChain's bindTools and withStructuredOutput
#     (function calling, JSON schema) parse what they get;
#   * bad input: conflicting $defs, a keyword the compiler cannot honour,
#     combined with response_format: vLLM-style 400s with param.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use File::Temp;
use JSON::PP;
use Test::More;
use NginxLLM;

my $chat = '/v1/chat/completions';
my $J = JSON::PP->new->canonical;

my $REQ    = '[{"name": "get_weather", "parameters" :{"city":"Paris"}}]';
my $ARGS   = '{"city": "Rome"}';
my $PLAIN  = 'The sky is clear.';

my ($dir, $c) = NginxLLM->script_model($REQ, $PLAIN);
my ($req_ids, $plain_ids) = @$c;
my ($adir, $ac) = NginxLLM->script_model($ARGS);
my $args_ids = $ac->[0];

my @tools = ({ type => 'function', function => {
    name => 'get_weather', description => 'The weather in a city',
    parameters => { type => 'object', additionalProperties => JSON::PP::false,
                    properties => { city => { type => 'string',
                                              enum => [ 'Paris', 'Rome', 'Oslo' ] } },
                    required => ['city'] } } },
  { type => 'function', function => { name => 'search',
    parameters => { type => 'object', additionalProperties => JSON::PP::false,
                    properties => { query => { type => 'string', maxLength => 12 } },
                    required => ['query'] } } });
my @msgs = ({ role => 'user', content => 'Weather in Paris?' });
my $get_weather = { type => 'function', function => { name => 'get_weather' } };

sub req {
    my ($ids, %o) = @_;
    return { messages => \@msgs, tools => \@tools, temperature => 0, max_tokens => 64,
             ($ids ? (logit_bias => { $ids->[0] => 100 }) : ()), %o };
}

# each call's arguments against its function's parameters, with ajv
# (t/nginx/ajv_check.mjs); a name of no tool validates nothing
my %schema = map { $_->{function}{name} => $_->{function}{parameters} } @tools;

sub validate_calls {
    my ($what, $calls) = @_;
    my @docs = map { [ $schema{ $_->{function}{name} } // { not => {} },
                       $_->{function}{arguments} ] } @$calls;
    my $f = File::Temp->new;
    print $f $J->encode(\@docs);
    close $f;
    my ($rc, $out) = NginxLLM->node('ajv_check.mjs', $f->filename);
    is($rc, 0, "$what: every call's arguments validate against its tool (ajv)")
        or diag($out);
}

my $t = NginxLLM->new(model => $dir);
$t->start;

# --- "required": the scripted array -----------------------------------------
my $r = $t->post($chat, req($req_ids, tool_choice => 'required'));
is($r->{status}, 200, 'required: 200');
my $ch = $r->{json}{choices}[0];
is($ch->{message}{content}, undef, 'required: content null');
is(scalar @{ $ch->{message}{tool_calls} }, 1, 'required: one call');
my $tc = $ch->{message}{tool_calls}[0];
like($tc->{id}, qr/^chatcmpl-tool-[0-9a-f]{32}$/, 'required: vLLM\'s id');
is($tc->{function}{name}, 'get_weather', 'required: the name');
is($tc->{function}{arguments}, '{"city":"Paris"}', 'required: the arguments as written');
is($ch->{finish_reason}, 'tool_calls', 'required: finish_reason tool_calls');
is($r->{json}{usage}{completion_tokens}, @$req_ids + 1,
   'required: completion_tokens: the call\'s tokens and the EOS');

$r = $t->stream($chat, req($req_ids, tool_choice => 'required', stream => JSON::PP::true,
                           stream_options => { include_usage => JSON::PP::true }));
my $s = NginxLLM::add_up_tool_stream($r);
is($s->{content}, '', 'required stream: no content');
is(scalar @{ $s->{calls} }, 1, 'required stream: one call');
is($s->{calls}[0]{first}{function}{name}, 'get_weather', 'required stream: the name first');
like($s->{calls}[0]{first}{id}, qr/^chatcmpl-tool-/, 'required stream: ... with the id');
is($s->{calls}[0]{arguments}, '{"city":"Paris"}', 'required stream: the fragments add up');
is_deeply($s->{finish}, ['tool_calls'], 'required stream: finish_reason tool_calls');
is($s->{usage}{completion_tokens}, @$req_ids + 1, 'required stream: completion_tokens');
unlike($r->{content}, qr/"content":"\[/, 'required stream: the array is no content');

# the official client, unmodified, streamed (ChatCompletionStream) and not
sub is_client {
    my ($mode, $ids, $args, $finish) = @_;
    my ($rc, $out) = $t->node('tool_choice_client.mjs', $t->url('/v1'), 'tiny', $mode,
                              $ids->[0]);
    is($rc, 0, "openai client, $mode: ran") or diag($out);
    my $o = eval { decode_json((grep { /^\{/ } split /\n/, $out)[-1]) } // {};
    for my $how ('plain', 'stream') {
        my $ch = $o->{$how}{choices}[0];
        is($ch->{message}{tool_calls}[0]{function}{arguments}, $args,
           "openai client, $mode, $how: the call");
        is($ch->{finish_reason}, $finish, "openai client, $mode, $how: $finish");
    }
}
is_client('required', $req_ids, '{"city":"Paris"}', 'tool_calls');

# the Vercel AI SDK, unmodified: generateText and streamText with
# toolChoice 'required'; the SDK runs the tool on the call it parsed
{
    my ($rc, $out) = $t->node('ai_sdk_client.mjs', $t->url('/v1'), 'tiny', $req_ids->[0]);
    is($rc, 0, 'AI SDK: ran') or diag($out);
    my $o = eval { decode_json((grep { /^\{/ } split /\n/, $out)[-1]) } // {};
    for my $how ('generate', 'stream') {
        my $x = $o->{$how} // {};
        is($x->{finishReason}, 'tool-calls', "AI SDK $how: finishReason tool-calls");
        is_deeply($x->{toolCalls}, [ { toolName => 'get_weather', input => { city => 'Paris' } } ],
                  "AI SDK $how: the call, its input parsed");
        is_deeply($x->{toolResults}, [ { toolName => 'get_weather',
                                         output => { city => 'Paris', sky => 'clear' } } ],
                  "AI SDK $how: the tool ran on it");
        is($x->{usage}{outputTokens}, @$req_ids + 1, "AI SDK $how: outputTokens");
    }
    is_deeply($o->{executed}, [ 'Paris', 'Paris' ], 'AI SDK: execute() called once a request');
}

# LangChain JS, unmodified: ChatOpenAI.bindTools with tool_choice "any"
# ("required"), withStructuredOutput by function calling (a named function)
# and by JSON schema (response_format), parsed by LangChain
{
    my ($rc, $out) = $t->node('langchain_client.mjs', $t->url('/v1'), 'tiny', $req_ids->[0]);
    is($rc, 0, 'LangChain: ran') or diag($out);
    my $o = eval { decode_json((grep { /^\{/ } split /\n/, $out)[-1]) } // {};
    is_deeply($o->{bindTools}{tool_calls}, [ { name => 'get_weather', args => { city => 'Paris' } } ],
              'LangChain bindTools, tool_choice any: the call, its args parsed');
    for my $method ('functionCalling', 'jsonSchema') {
        like($o->{$method}{city} // '', qr/^(Paris|Rome|Oslo)$/,
             "LangChain withStructuredOutput ($method): an object of the schema");
        is(scalar keys %{ $o->{$method} // {} }, 1, "... and nothing else");
    }
}

# --- the model would rather write text: still calls ---------------------------
for my $choice ('required', $get_weather) {
    my $how = ref $choice ? 'named' : 'required';
    $r = $t->post($chat, req($plain_ids, tool_choice => $choice, max_tokens => 200));
    $ch = $r->{json}{choices}[0];
    ok(@{ $ch->{message}{tool_calls} // [] } >= 1,
       "$how, a model that writes text: a call all the same")
        or diag($r->{content});
    validate_calls("$how, a model that writes text", $ch->{message}{tool_calls} // []);
}

# the random test model, sampled: every answer that ends is a valid call.
# (Left alone it may not end: it favours the widest whitespace the grammar
# allows, and under "required" call after call; max_tokens cuts those,
# and a cut answer is text, as vLLM's.)  parallel_tool_calls false, one call.
{
    my $rt = NginxLLM->new;
    $rt->start;
    my (@calls, %ended);
    my $ok = 1;
    for my $seed (1 .. 6) {
        for my $choice ('required', $get_weather) {
            my $how = ref $choice ? 'named' : 'required';
            my $rr = $rt->post($chat, { messages => \@msgs, tools => \@tools,
                                        tool_choice => $choice, temperature => 1,
                                        parallel_tool_calls => JSON::PP::false,
                                        seed => $seed, max_tokens => 300 });
            my $ch = $rr->{json}{choices}[0];
            next if $rr->{status} == 200 && $ch->{finish_reason} eq 'length';
            $ended{$how}++;
            my $m = $ch->{message};
            $ok &&= $rr->{status} == 200 && @{ $m->{tool_calls} // [] } == 1
                    && !defined $m->{content};
            diag($rr->{content}) unless $ok;
            push @calls, @{ $m->{tool_calls} // [] };
        }
    }
    ok($ok && $ended{required} && $ended{named},
       "random model, 12 samples: those that ended (required $ended{required}, "
       . "named $ended{named}) are one call, content null");
    validate_calls('random model, 12 samples', \@calls);

    # parallel_tool_calls: with "," favoured, the model would write calls
    # without end (cut by max_tokens, no call); false allows one
    my $comma = NginxLLM::decode_json_safe(`$ENV{LLM_BUILD}/llm tokenize --model ${\ NginxLLM->model} ','`)->[0];
    my %favour = (messages => \@msgs, tools => \@tools, tool_choice => 'required',
                  temperature => 0, max_tokens => 120, logit_bias => { $comma => 100 });
    my $rr = $rt->post($chat, { %favour });
    like($rr->{json}{choices}[0]{message}{content} // '', qr/^\[\s*\{.*\},\s*\{/s,
         'required, "," favoured: the model writes call after call');
    $rr = $rt->post($chat, { %favour, parallel_tool_calls => JSON::PP::false });
    my $ch = $rr->{json}{choices}[0];
    is(scalar @{ $ch->{message}{tool_calls} // [] }, 1,
       'required, "," favoured, parallel_tool_calls false: one call') or diag($rr->{content});
    is($ch->{finish_reason}, 'tool_calls', '... finish_reason tool_calls');
    $rt->done;
}

# --- $defs, and many tools --------------------------------------------------------
my @deftools = map { { type => 'function', function => { name => "t$_",
    parameters => { type => 'object', additionalProperties => JSON::PP::false,
                    '$defs' => { unit => { enum => [ 'c', 'f' ] } },
                    properties => { u => { '$ref' => '#/$defs/unit' } },
                    required => ['u'] } } } } 1 .. 2;
my %one = (temperature => 0, max_tokens => 400, parallel_tool_calls => JSON::PP::false);
$r = $t->post($chat, { messages => \@msgs, tools => \@deftools, tool_choice => 'required',
                       %one });
my $calls = $r->{json}{choices}[0]{message}{tool_calls} // [];
ok(@$calls >= 1 && !grep({ $_->{function}{arguments} !~ /^\{\s*"u"\s*:\s*"[cf]"\s*\}$/ } @$calls),
   'required: the tools\' $defs resolve (arguments {"u": "c" or "f"})') or diag($r->{content});
$r = $t->post($chat, { messages => \@msgs, tools => \@deftools, tool_choice =>
                       { type => 'function', function => { name => 't2' } }, %one });
like($r->{json}{choices}[0]{message}{tool_calls}[0]{function}{arguments} // '',
     qr/^\{\s*"u"\s*:\s*"[cf]"\s*\}$/, 'named: its $defs resolve');

my @many = map { { type => 'function', function => { name => "tool_$_",
    parameters => { type => 'object', properties => { n => { type => 'integer',
                    minimum => 0, maximum => 9 } }, required => ['n'] } } } } 1 .. 20;
$r = $t->post($chat, { messages => \@msgs, tools => \@many, tool_choice => 'required',
                       %one });
$calls = $r->{json}{choices}[0]{message}{tool_calls} // [];
ok($r->{status} == 200 && @$calls >= 1
   && !grep({ $_->{function}{name} !~ /^tool_([1-9]|1\d|20)$/ } @$calls),
   '20 tools, required: calls of them') or diag($r->{content});

# --- a named function: the scripted arguments ----------------------------------
$t->done;
$t = NginxLLM->new(model => $adir);
$t->start;
$r = $t->post($chat, req($args_ids, tool_choice => $get_weather));
is($r->{status}, 200, 'named: 200');
$ch = $r->{json}{choices}[0];
is($ch->{message}{content}, undef, 'named: content null');
is(scalar @{ $ch->{message}{tool_calls} }, 1, 'named: one call');
is($ch->{message}{tool_calls}[0]{function}{name}, 'get_weather', 'named: the function');
is($ch->{message}{tool_calls}[0]{function}{arguments}, $ARGS, 'named: the output is the arguments');
is($ch->{finish_reason}, 'stop', 'named: finish_reason stop (vLLM)');

$r = $t->stream($chat, req($args_ids, tool_choice => $get_weather, stream => JSON::PP::true));
$s = NginxLLM::add_up_tool_stream($r);
is($s->{content}, '', 'named stream: no content');
is($s->{calls}[0]{first}{function}{name}, 'get_weather', 'named stream: the name first');
is($s->{calls}[0]{arguments}, $ARGS, 'named stream: the fragments add up');
is_deeply($s->{finish}, ['stop'], 'named stream: finish_reason stop');


is_client('named', $args_ids, $ARGS, 'stop');

# --- bad input ------------------------------------------------------------------------
sub bad { $t->is_bad_request($chat, @_) }

my @conflict = @deftools;
$conflict[1] = $J->decode($J->encode($deftools[1]));
$conflict[1]{function}{parameters}{'$defs'}{unit} = { enum => ['k'] };
bad('required, two tools defining one name differently',
    { messages => \@msgs, tools => \@conflict, tool_choice => 'required' },
    'tools', qr/^Tool definition 'unit' has multiple schemas/);
bad('named, parameters the compiler cannot honour',
    { messages => \@msgs, tool_choice => $get_weather, tools => [ { type => 'function',
      function => { name => 'get_weather', parameters => { type => 'object',
      patternProperties => { x => {} } } } } ] },
    'tools', qr/patternProperties/);
bad('required, 70 tools whose names begin alike',
    { messages => \@msgs, tool_choice => 'required', tools => [ map { { type => 'function',
      function => { name => "tool_$_" } } } 1 .. 70 ] },
    'tools', qr/more than 64 alternatives could be open at once/);
bad('required with response_format',
    { messages => \@msgs, tools => \@tools, tool_choice => 'required',
      response_format => { type => 'json_object' } },
    'tool_choice', qr/cannot be combined with response_format/);
is($t->get('/health')->{status}, 200, 'the worker lives');

$t->done;
done_testing;
