#!/usr/bin/perl
# POST /v1/chat/completions through the real nginx with the module: the
# chat.completion body and the chat.completion.chunk stream in vLLM's exact
# shape (key order, nulls, chunk sequence, [DONE]), usage, stop strings,
# logprobs, greedy determinism between the two modes.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $t = NginxLLM->new;
$t->start;

my $S = qr/"(?:[^"\\]|\\.)*"/;                # a JSON string
my $ID = qr/"chatcmpl-[0-9a-f]{32}"/;
my @msgs = ({ role => 'system', content => 'You are terse.' },
            { role => 'user', content => 'Say something, anything.' });
my %greedy = (messages => \@msgs, temperature => 0, ignore_eos => \1);

# --- prompt: the model's template, no BOS added on top (vLLM's default) ---

my $tmpl_file = $t->dir . '/messages.json';
open my $fh, '>', $tmpl_file or die;
print $fh NginxLLM::json()->encode(\@msgs);
close $fh;
my $b = NginxLLM::build_dir();
my $model = NginxLLM->model;
my $rendered = `$b/llm template --model $model --messages $tmpl_file --add-generation-prompt`;
open my $tk, '-|', "$b/llm", 'tokenize', '--model', $model, $rendered or die;
my $ids = do { local $/; <$tk> };
close $tk;
my $n_prompt = () = $ids =~ /\d+/g;
ok($n_prompt > 10, "reference prompt: $n_prompt tokens from llm template + tokenize");

# --- non-streaming ---

my $r = $t->post('/v1/chat/completions', { %greedy, model => 'tiny',
                                            max_tokens => 6 });
is($r->{status}, 200, 'chat: 200');
is($r->{headers}{'content-type'}, 'application/json', 'chat: JSON');
like($r->{content},
     qr/^\{"id":$ID,"object":"chat\.completion","created":\d+,"model":"tiny",
        "choices":\[\{"index":0,"message":\{"role":"assistant","content":$S,
        "refusal":null,"annotations":null,"audio":null,"function_call":null,
        "tool_calls":\[\],"reasoning":null\},"logprobs":null,
        "finish_reason":"length","stop_reason":null,"token_ids":null\}\],
        "service_tier":null,"system_fingerprint":null,
        "usage":\{"prompt_tokens":\d+,"total_tokens":\d+,
        "completion_tokens":6,"prompt_tokens_details":\{"cached_tokens":\d+\}\},
        "prompt_logprobs":null,"prompt_token_ids":null,
        "kv_transfer_params":null,"metrics":null\}$/x,
     'chat: vLLM key order and nulls, "metrics": null when off');
my $u = $r->{json}{usage};
is($u->{prompt_tokens}, $n_prompt, 'usage.prompt_tokens = rendered template, tokenized');
is($u->{total_tokens}, $u->{prompt_tokens} + 6, 'usage.total_tokens');
my $text = $r->{json}{choices}[0]{message}{content};
ok(length $text, 'generated text is not empty');

# no model field: the default (vLLM serves the only model)
$r = $t->post('/v1/chat/completions', { %greedy, max_tokens => 6 });
is($r->{json}{choices}[0]{message}{content}, $text,
   'greedy: same text again, "model" may be omitted');

# max_completion_tokens wins over max_tokens
$r = $t->post('/v1/chat/completions', { %greedy, max_tokens => 6,
                                        max_completion_tokens => 2 });
is($r->{json}{usage}{completion_tokens}, 2, 'max_completion_tokens wins');

# content as a list of text parts is joined into one string first
$r = $t->post('/v1/chat/completions', { %greedy, max_tokens => 1,
    messages => [ $msgs[0], { role => 'user', content => [
        { type => 'text', text => 'Say something,' },
        { type => 'text', text => 'anything.' } ] } ] });
my $r2 = $t->post('/v1/chat/completions', { %greedy, max_tokens => 1,
    messages => [ $msgs[0], { role => 'user',
                              content => "Say something,\nanything." } ] });
is($r->{status}, 200, 'content parts: 200');
is($r->{json}{usage}{prompt_tokens}, $r2->{json}{usage}{prompt_tokens},
   'content parts are joined with "\n" before templating');

# --- streaming, without usage ---

$r = $t->stream('/v1/chat/completions', { %greedy, max_tokens => 6,
                                          stream => \1 });
is($r->{status}, 200, 'stream: 200');
is($r->{headers}{'content-type'}, 'text/event-stream; charset=utf-8',
   'stream: text/event-stream');
my @ev = @{ $r->{events} };
is($ev[-1], '[DONE]', 'stream ends with data: [DONE]');
like($r->{content}, qr/\A(data: [^\n]+\n\n)+\z/, 'stream: only data: events');
like((split /\n\n/, $r->{content})[0],
     qr/^data:[ ]\{"id":$ID,"object":"chat\.completion\.chunk","created":\d+,
        "model":"tiny","choices":\[\{"index":0,"delta":\{"role":"assistant",
        "content":""\},"logprobs":null,"finish_reason":null\}\],
        "prompt_token_ids":null\}$/x,
     'first chunk: the role, as vLLM sends it');
my @chunks = grep { ref } @ev;
my %ids = map { $_->{id} => 1 } @chunks;
is(scalar keys %ids, 1, 'one id for every chunk');
is(scalar(grep { exists $_->{usage} } @chunks), 0,
   'no usage without stream_options.include_usage');
my $last = $chunks[-1];
is($last->{choices}[0]{finish_reason}, 'length', 'last chunk: finish_reason');
ok(exists $last->{choices}[0]{stop_reason} && !defined $last->{choices}[0]{stop_reason},
   'last chunk: stop_reason null');
my @mid = @chunks[1 .. $#chunks - 1];
ok(!grep({ exists $_->{choices}[0]{stop_reason} } @mid),
   'content chunks carry no stop_reason (vLLM: exclude_unset)');
ok(!grep({ defined $_->{choices}[0]{finish_reason} } @mid),
   'content chunks: finish_reason null');
my $streamed = join '', map { $_->{choices}[0]{delta}{content} // '' } @chunks;
is($streamed, $text, 'streamed deltas = the non-streamed text');

# --- streaming with usage ---

$r = $t->stream('/v1/chat/completions', { %greedy, max_tokens => 4,
    stream => \1, stream_options => { include_usage => \1 } });
@ev = @{ $r->{events} };
@chunks = grep { ref } @ev;
my @usage = grep { $_->{usage} } @chunks;
is(scalar @usage, 1, 'include_usage: one usage chunk');
is($chunks[-1], $usage[0], 'the usage chunk is the last before [DONE]');
like((split /\n\n/, $r->{content})[-2],
     qr/^data:[ ]\{"id":$ID,"object":"chat\.completion\.chunk","created":\d+,
        "model":"tiny","choices":\[\],"usage":\{"prompt_tokens":\d+,
        "total_tokens":\d+,"completion_tokens":4,
        "prompt_tokens_details":\{"cached_tokens":\d+\}\}\}$/x,
     'usage chunk: choices [], nulls dropped, cached tokens, no metrics '
     . 'when off');

# stream_options {} means include_usage (StreamOptions default)
$r = $t->stream('/v1/chat/completions', { %greedy, max_tokens => 2,
    stream => \1, stream_options => {} });
is(scalar(grep { ref && $_->{usage} } @{ $r->{events} }), 1,
   'stream_options {}: usage chunk');

# continuous usage: every chunk
$r = $t->stream('/v1/chat/completions', { %greedy, max_tokens => 3,
    stream => \1, stream_options => { include_usage => \1,
                                      continuous_usage_stats => \1 } });
@chunks = grep { ref } @{ $r->{events} };
ok(!grep({ !$_->{usage} } @chunks), 'continuous_usage_stats: usage on every chunk');
is($chunks[0]{usage}{completion_tokens}, 0, 'role chunk: 0 completion tokens');

# --- stop strings: the text before the match, stop_reason = the string ---

# seeded sampling: varied text (greedy text from a random model repeats),
# the same for the same seed
my %seeded = (%greedy, temperature => 1.0, seed => 1234);
$r = $t->post('/v1/chat/completions', { %seeded, max_tokens => 12 });
my $full = $r->{json}{choices}[0]{message}{content};
$r = $t->post('/v1/chat/completions', { %seeded, max_tokens => 12 });
is($r->{json}{choices}[0]{message}{content}, $full,
   'seeded sampling: the same text for the same seed');
my $stop;
for my $k (2 .. length($full) - 3) {
    my $cand = substr($full, $k, 2);
    next if $cand =~ /^\s|\s$/;
    if (index($full, $cand) == $k) { $stop = $cand; last }
}
SKIP: {
    skip 'no usable stop string in the generated text', 4 unless defined $stop;
    $r = $t->post('/v1/chat/completions', { %seeded, max_tokens => 12,
                                            stop => [ $stop ] });
    my $c = $r->{json}{choices}[0];
    is($c->{finish_reason}, 'stop', 'stop string: finish_reason stop');
    is($c->{stop_reason}, $stop, 'stop string: stop_reason is the string');
    is($c->{message}{content}, substr($full, 0, index($full, $stop)),
       'stop string: text up to the match, the match not included');
    $r = $t->stream('/v1/chat/completions', { %seeded, max_tokens => 12,
                                              stop => $stop, stream => \1 });
    my @c = grep { ref } @{ $r->{events} };
    is($c[-1]{choices}[0]{stop_reason}, $stop, 'stream: stop_reason on the last chunk');
}

# --- logprobs ---

$r = $t->post('/v1/chat/completions', { %greedy, max_tokens => 3,
                                        logprobs => \1, top_logprobs => 2 });
my $lp = $r->{json}{choices}[0]{logprobs};
is(ref $lp->{content}, 'ARRAY', 'logprobs.content');
is(scalar @{ $lp->{content} }, 3, 'one logprob entry per token');
my $e0 = $lp->{content}[0];
ok(defined $e0->{token} && $e0->{logprob} <= 0 && ref $e0->{bytes} eq 'ARRAY',
   'entry: token, logprob <= 0, bytes');
is(scalar @{ $e0->{top_logprobs} }, 2, 'top_logprobs: 2 alternatives');
SKIP: {
    my $c = $r->{json}{choices}[0]{message}{content};
    skip 'a token split a UTF-8 sequence', 1 if $c =~ /[^\x00-\x7f]/;
    is(join('', map { $_->{token} } @{ $lp->{content} }), $c,
       'the tokens spell the text');
}

$t->done;
done_testing();
