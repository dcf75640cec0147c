#!/usr/bin/perl
# POST /v1/chat/completions through the real nginx with the module: the
# chat.completion body and the chat.completion.chunk stream in vLLM's exact
# shape (key order, nulls, chunk sequence, [DONE]), usage, stop strings,
# logprobs, greedy determinism between the two modes.
#
# Anchored outside the module: the prompt is the model's chat template
# rendered by Python jinja2 (t/templates/render_ref.py, configured as
# transformers) and tokenized by Hugging Face's tokenizer
# (t/ref/hf_tokenize.js); the completions are token for token those of
# `llm generate` (the engine without nginx) on that prompt -- greedy,
# seeded, top-k/top-p and n = 3 (sample i = seed + i), bodies and streams.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Encode ();
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

my $b = NginxLLM::build_dir();
my $root = NginxLLM::root();
my $model = NginxLLM->model;

# the output of a command run without a shell (the prompt holds newlines
# and special tokens), exactly: no newline stripped
sub run_cmd {
    my (@cmd) = @_;
    local $ENV{NODE_PATH} = $ENV{NODE_PATH} || "$root/node_modules";
    open my $fh, '-|', @cmd or die "@cmd: $!";
    my $out = do { local $/; <$fh> };
    close $fh;
    is($?, 0, 'exit status 0: '
              . join(' ', map { m{([^/]+)$} } @cmd[0, 1]));
    return $out // '';
}

sub write_json {
    my ($name, $v) = @_;
    my $file = $t->dir . "/$name";
    open my $fh, '>', $file or die "$file: $!";
    print $fh NginxLLM::json()->encode($v);
    close $fh;
    return $file;
}

# the reference rendering: Python jinja2 set up as transformers, with the
# template and the BOS text from the model's tokenizer_config.json
sub jinja2_prompt {
    my ($dir, $messages) = @_;
    my $tc = NginxLLM::json()->decode(
        NginxLLM::slurp("$dir/tokenizer_config.json"));
    my $tpl = $t->dir . '/chat_template.jinja';
    open my $fh, '>:raw', $tpl or die;
    print $fh Encode::encode_utf8($tc->{chat_template});
    close $fh;
    my $bos = ref $tc->{bos_token} ? $tc->{bos_token}{content}
                                   : $tc->{bos_token};
    return run_cmd($ENV{LLM_PYTHON} || '/usr/bin/python3',
                   "$root/t/templates/render_ref.py", '--template', $tpl,
                   '--messages', write_json('messages.json', $messages),
                   '--add-generation-prompt', '--bos', $bos);
}

sub hf_ids {                    # Hugging Face's tokenizer, no BOS added
    my ($dir, $text) = @_;
    my $out = run_cmd('node', "$root/t/ref/hf_tokenize.js", $dir, $text,
                      'no-special');
    return NginxLLM::decode_json_safe($out) // [];
}

my $rendered = jinja2_prompt($model, \@msgs);
is(run_cmd("$b/llm", 'template', '--model', $model, '--messages',
           write_json('messages.json', \@msgs), '--add-generation-prompt'),
   $rendered, 'llm template renders the conversation as Python jinja2 does');
my $ref_ids = hf_ids($model, $rendered);
is_deeply(NginxLLM::decode_json_safe(
              run_cmd("$b/llm", 'tokenize', '--model', $model, $rendered)),
          $ref_ids, 'llm tokenize gives Hugging Face\'s ids');
my $n_prompt = @$ref_ids;
ok($n_prompt > 10, "reference prompt: $n_prompt tokens");
my $tok = $t->post('/v1/tokenize', { messages => \@msgs });
is_deeply($tok->{json}{tokens}, $ref_ids,
          '/v1/tokenize with messages: the reference ids');

# --- non-streaming ---

my $r = $t->post('/v1/chat/completions', { %greedy, model => 'tiny',
                                            max_tokens => 6 });
is($r->{status}, 200, 'chat: 200');
is($r->{headers}{'content-type'}, 'application/json', 'chat: JSON');
like($r->{content},
     qr/^\{"id":$ID,"object":"chat\.completion","created":\d+,"model":"tiny",
        "choices":\[\{"index":0,"message":\{"role":"assistant","content":$S,
        "refusal":null,"annotations":\[\],"audio":null,
        "tool_calls":\[\],"reasoning":null\},"logprobs":null,
        "finish_reason":"length","stop_reason":null,"token_ids":null\}\],
        "service_tier":null,
        "usage":\{"prompt_tokens":\d+,"total_tokens":\d+,
        "completion_tokens":6,"prompt_tokens_details":\{"cached_tokens":\d+\}\},
        "prompt_logprobs":null,"prompt_token_ids":null,
        "kv_transfer_params":null,"metrics":null\}$/x,
     'chat: vLLM key order and nulls, "metrics": null when off (less '
     . 'what OpenAI\'s schema refuses: docs/api.md)');
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

# seeded sampling: the same text for the same seed
my %seeded = (%greedy, temperature => 1.0, seed => 1234);
$r = $t->post('/v1/chat/completions', { %seeded, max_tokens => 12 });
my $full = $r->{json}{choices}[0]{message}{content};
$r = $t->post('/v1/chat/completions', { %seeded, max_tokens => 12 });
is($r->{json}{choices}[0]{message}{content}, $full,
   'seeded sampling: the same text for the same seed');

# a text that holds the stop string by construction: logit_bias +100 on
# "Hello" makes every token Hello, whatever the random weights say; the
# stop string "loHel" spans two tokens, "oHelloH" three
my $hello = $t->post('/v1/tokenize', { prompt => 'Hello',
                                       add_special_tokens => \0 })->{json}{tokens};
is(scalar @$hello, 1, 'Hello is one token');
my %hellos = (%seeded, max_tokens => 12, logit_bias => { $hello->[0] => 100 });
$r = $t->post('/v1/chat/completions', \%hellos);
is($r->{json}{choices}[0]{message}{content}, 'Hello' x 12,
   'logit_bias +100: twelve Hellos');
for my $stop ('loHel', 'oHelloH') {
    my $want = substr('Hello' x 12, 0, index('Hello' x 12, $stop));
    $r = $t->post('/v1/chat/completions', { %hellos, stop => [ $stop ] });
    my $c = $r->{json}{choices}[0];
    is($c->{finish_reason}, 'stop', "stop $stop: finish_reason stop");
    is($c->{stop_reason}, $stop, "stop $stop: stop_reason is the string");
    is($c->{message}{content}, $want,
       "stop $stop: the text up to the match ('$want'), the match not included");
    $r = $t->stream('/v1/chat/completions', { %hellos, stop => $stop,
                                              stream => \1 });
    my @c = grep { ref } @{ $r->{events} };
    is($c[-1]{choices}[0]{stop_reason}, $stop,
       "stream, stop $stop: stop_reason on the last chunk");
    is(join('', map { $_->{choices}[0]{delta}{content} // '' } @c), $want,
       "stream, stop $stop: the deltas hold nothing of the match");
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
# a token may end inside a UTF-8 sequence (its string then shows U+FFFD),
# but the bytes of the tokens always add up to the text's
is(join('', map { pack 'C*', @{ $_->{bytes} } } @{ $lp->{content} }),
   Encode::encode_utf8($r->{json}{choices}[0]{message}{content}),
   'the tokens\' bytes spell the text');

# --- the same tokens as llm generate, the engine without nginx ---

# An untied random model (varied text, not one token repeated), served
# with the same settings the CLI uses (one thread).  The rendered prompt
# starts with the BOS text; `llm generate` tokenizes with the special
# tokens added (HF add_special_tokens=True), so it gets the prompt without
# that text, and its prompt_ids must be the reference ids.
my $umodel = NginxLLM->model(tie => 0);
my $ut = NginxLLM->new(model => $umodel);
$ut->start;
my $urendered = jinja2_prompt($umodel, \@msgs);
my $uref = hf_ids($umodel, $urendered);
my $bos_text = '<|begin_of_text|>';
is(substr($urendered, 0, length $bos_text), $bos_text,
   'the rendered prompt starts with the BOS text');
my $cli_prompt = substr($urendered, length $bos_text);

sub cli_generate {
    my (%o) = @_;
    my $out = run_cmd("$b/llm", 'generate', '--model', $umodel, '--prompt',
                      $cli_prompt, '--threads', 1, '--json', '--ignore-eos',
                      map { ("--$_", $o{$_}) } sort keys %o);
    return NginxLLM::decode_json_safe($out) // {};
}

for my $case (
    [ 'greedy', { temperature => 0 }, { temperature => 0 } ],
    [ 'seeded, temperature 1', { temperature => 1.0, seed => 1234 },
      { temperature => 1, seed => 1234 } ],
    [ 'seeded, top-k 40, top-p 0.9, temperature 0.8',
      { temperature => 0.8, top_k => 40, top_p => 0.9, seed => 7 },
      { temperature => 0.8, 'top-k' => 40, 'top-p' => 0.9, seed => 7 } ])
{
    my ($name, $api, $cli) = @$case;
    my $g = cli_generate(%$cli, 'max-tokens' => 12);
    is_deeply($g->{prompt_ids}, $uref,
              "$name: llm generate's prompt ids are the reference ids");
    is(scalar @{ $g->{ids} // [] }, 12, "$name: llm generate made 12 tokens");
    my %body = (messages => \@msgs, max_tokens => 12, ignore_eos => \1,
                return_token_ids => \1, %$api);
    $r = $ut->post('/v1/chat/completions', \%body);
    my $c = $r->{json}{choices}[0];
    is_deeply($r->{json}{prompt_token_ids}, $uref,
              "$name: prompt_token_ids = the reference ids");
    is_deeply($c->{token_ids}, $g->{ids}, "$name: token_ids = llm generate's");
    is($c->{message}{content}, $g->{text}, "$name: the text = llm generate's");
    is($c->{finish_reason}, $g->{finish_reason},
       "$name: finish_reason = llm generate's ($g->{finish_reason})");

    $r = $ut->stream('/v1/chat/completions', { %body, stream => \1 });
    my @c = grep { ref && @{ $_->{choices} } } @{ $r->{events} };
    is_deeply($c[0]{prompt_token_ids}, $uref,
              "$name, streamed: prompt_token_ids in the role chunk");
    is_deeply([ map { @{ $_->{choices}[0]{token_ids} // [] } } @c ], $g->{ids},
              "$name, streamed: the chunks' token_ids = llm generate's");
    is(join('', map { $_->{choices}[0]{delta}{content} // '' } @c), $g->{text},
       "$name, streamed: the deltas = llm generate's text");
}

# n = 3: sample i is llm generate with seed + i (vLLM's rule)
my @gen = map { cli_generate(temperature => 1, seed => 99 + $_,
                             'max-tokens' => 8) } 0 .. 2;
my %distinct_ids = map { ("@{ $_->{ids} // [] }" => 1) } @gen;
is(scalar keys %distinct_ids, 3, 'llm generate: three seeds, three samples');
my %n3 = (messages => \@msgs, max_tokens => 8, ignore_eos => \1,
          return_token_ids => \1, temperature => 1.0, seed => 99, n => 3);
$r = $ut->post('/v1/chat/completions', \%n3);
is_deeply([ map { $_->{token_ids} } @{ $r->{json}{choices} } ],
          [ map { $_->{ids} } @gen ], 'n = 3: choice i = llm generate --seed 99+i');
is_deeply([ map { $_->{message}{content} } @{ $r->{json}{choices} } ],
          [ map { $_->{text} } @gen ], 'n = 3: and their texts');
$r = $ut->stream('/v1/chat/completions', { %n3, stream => \1 });
my (%sids, %stext);
for my $ch (grep { ref && @{ $_->{choices} } } @{ $r->{events} }) {
    my $cc = $ch->{choices}[0];
    push @{ $sids{ $cc->{index} } }, @{ $cc->{token_ids} // [] };
    $stext{ $cc->{index} } .= $cc->{delta}{content} // '';
}
is_deeply([ map { $sids{$_} } 0 .. 2 ], [ map { $_->{ids} } @gen ],
          'n = 3, streamed: each choice\'s token_ids = llm generate\'s');
is_deeply([ map { $stext{$_} } 0 .. 2 ], [ map { $_->{text} } @gen ],
          'n = 3, streamed: each choice\'s text');
$ut->done;

$t->done;
done_testing();
