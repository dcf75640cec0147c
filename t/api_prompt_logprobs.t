#!/usr/bin/perl
# Prompt logprobs through the API: completions' echo with logprobs (the
# prompt's tokens first, the first with null), max_tokens 0, the stream's
# first chunk, vLLM's prompt_logprobs in completions (per choice, n > 1 and
# several prompts) and chat (top level), the values against log-softmax of
# the float32 torch reference (t/ref/ref_torch.py), usage and metrics
# unchanged, every validation error, and the openai npm client reading it.
# The engine prefills in 16-token chunks here, so the prompt's rows come
# from several steps.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use List::Util qw(sum);
use Test::More;
use NginxLLM;

my $t = NginxLLM->new(http => 'llm_per_request_metrics on;',
                      engine => <<'ENGINE');
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 256;
    llm_kv_cache_size 16m;
    llm_max_num_batched_tokens 16;
    llm_thread_pool llm;
ENGINE
$t->start;

my $S = qr/"(?:[^"\\]|\\.)*"/;
my $N = qr/-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?/;
my $cmpl = '/v1/completions';
my $chat = '/v1/chat/completions';
my $prompt = 'Once upon a time, in a land far away, there lived a llama '
           . 'who counted: 1, 2, 3, and then it ate the grass.';
my %greedy = (model => 'tiny', prompt => $prompt, temperature => 0,
              ignore_eos => \1);

# the prompt's ids and strings as the engine's CLI tokenizes them
my $build = NginxLLM::build_dir();
my $model = NginxLLM->model;
open my $g, '-|', "$build/llm", 'generate', '--model', $model, '--prompt',
    $prompt, '--max-tokens', '1', '--temperature', '0', '--json' or die;
my $cli = NginxLLM::decode_json_safe(do { local $/; <$g> });
close $g;
my @ids = @{ $cli->{prompt_ids} // [] };
my $P = @ids;
ok($P > 16, "the prompt has $P tokens: more than one prefill chunk");

# --- echo with logprobs, non-streaming ---

my $plain = $t->post($cmpl, { %greedy, max_tokens => 4, logprobs => 2 });
my $r = $t->post($cmpl, { %greedy, max_tokens => 4, logprobs => 2,
                          echo => \1 });
is($r->{status}, 200, 'echo + logprobs: 200 (no longer refused)');
like($r->{content},
     qr/"choices":\[\{"index":0,"text":$S,"logprobs":\{"text_offset":\[0,\d+,
        [\d,]+\],"token_logprobs":\[null,$N,[^\]]+\],"tokens":\[$S,
        [^\]]+\],"top_logprobs":\[null,\{$S:$N/x,
     'echo: the lists start with the first prompt token, null for it');
my $c = $r->{json}{choices}[0];
my $lp = $c->{logprobs};
my $pl = $plain->{json}{choices}[0]{logprobs};
is($c->{text}, $prompt . $plain->{json}{choices}[0]{text},
   'echo: text = prompt + completion');
is(scalar @{ $lp->{tokens} }, $P + 4, 'echo: prompt tokens + 4 generated');
ok(!defined $lp->{token_logprobs}[0] && !defined $lp->{top_logprobs}[0],
   'echo: the first token has null logprob and null top_logprobs');
is($lp->{tokens}[0], '<|begin_of_text|>', 'echo: the first token is BOS');
is_deeply([ @{ $lp->{tokens} }[$P .. $P + 3] ], $pl->{tokens},
          'echo: the generated tokens follow');
is_deeply([ @{ $lp->{token_logprobs} }[$P .. $P + 3] ],
          $pl->{token_logprobs}, 'echo: with the same logprobs');
is(join('', @{ $lp->{tokens} }[1 .. $P - 1]), $prompt,
   'echo: the prompt tokens spell the prompt');
{
    my ($ok, $off) = (1, 0);
    for my $i (0 .. $#{ $lp->{tokens} }) {
        $ok &&= $lp->{text_offset}[$i] == $off;
        $off += length $lp->{tokens}[$i];
    }
    ok($ok, 'echo: text_offset counts characters over prompt and output');
}
{
    my $ok = 1;
    for my $i (1 .. $P - 1) {
        my $d = $lp->{top_logprobs}[$i];
        $ok &&= ref $d eq 'HASH' && keys %$d >= 1 && keys %$d <= 3
                && exists $d->{ $lp->{tokens}[$i] }
                && abs($d->{ $lp->{tokens}[$i] } - $lp->{token_logprobs}[$i])
                   < 1e-6
                && $lp->{token_logprobs}[$i] <= 0;
    }
    ok($ok, 'echo: each prompt position has its token and the 2 most '
            . 'likely (2 or 3 entries)');
}
is(ref $c->{prompt_logprobs}, 'ARRAY',
   'echo + logprobs: prompt_logprobs is set too (vLLM)');
is(scalar @{ $c->{prompt_logprobs} }, $P, 'one entry per prompt token');
{
    my $ok = !defined $c->{prompt_logprobs}[0];
    for my $i (1 .. $P - 1) {
        my $e = $c->{prompt_logprobs}[$i]{ $ids[$i] };
        $ok &&= $e && abs($e->{logprob} - $lp->{token_logprobs}[$i]) < 1e-6
                && $e->{decoded_token} eq $lp->{tokens}[$i]
                && $e->{rank} >= 1;
    }
    ok($ok, 'prompt_logprobs agree with the echoed token_logprobs');
}
is_deeply([ map { $r->{json}{usage}{$_} } qw(prompt_tokens completion_tokens
                                              total_tokens) ],
          [ map { $plain->{json}{usage}{$_} } qw(prompt_tokens
                                                 completion_tokens
                                                 total_tokens) ],
          'usage is unchanged by prompt logprobs');
is_deeply([ sort keys %{ $r->{json}{metrics} } ],
          [ sort keys %{ $plain->{json}{metrics} } ],
          'the metrics object is unchanged by prompt logprobs');

# echo with max_tokens 0: only the prompt
$r = $t->post($cmpl, { %greedy, max_tokens => 0, logprobs => 1,
                       echo => \1 });
$c = $r->{json}{choices}[0];
is($c->{text}, $prompt, 'max_tokens 0: the prompt only');
is(scalar @{ $c->{logprobs}{tokens} }, $P,
   'max_tokens 0: logprobs of the prompt tokens only');
is_deeply([ @{ $c->{logprobs}{token_logprobs} }[1 .. $P - 1] ],
          [ @{ $lp->{token_logprobs} }[1 .. $P - 1] ],
          'max_tokens 0: the same prompt logprobs');
my $u0 = $t->post($cmpl, { %greedy, max_tokens => 0, echo => \1 });
is_deeply([ @{ $r->{json}{usage} }{qw(prompt_tokens completion_tokens
                                      total_tokens)} ],
          [ @{ $u0->{json}{usage} }{qw(prompt_tokens completion_tokens
                                       total_tokens)} ],
          'max_tokens 0: usage as without logprobs');
is($r->{json}{usage}{prompt_tokens_details}{cached_tokens}, 0,
   'the prompt is computed, not taken from the prefix cache (vLLM)');

# two prompts, n 2: every choice echoes its own prompt's tokens
$r = $t->post($cmpl, { model => 'tiny', prompt => [ $prompt, 'Hello there' ],
                       n => 2, temperature => 1, seed => 5, max_tokens => 2,
                       logprobs => 0, echo => \1 });
{
    my @ch = @{ $r->{json}{choices} // [] };
    my @n = map { scalar @{ $_->{logprobs}{tokens} } } @ch;
    ok(@ch == 4 && $n[0] == $P + 2 && $n[1] == $P + 2 && $n[2] == $n[3]
       && $n[2] < $P, 'echo with two prompts and n 2: each choice starts '
                      . "with its prompt (@n tokens)");
    # batched with the other prompt: equal up to f32 summation order
    my ($x, $y) = ($ch[1]{logprobs}{token_logprobs}, $lp->{token_logprobs});
    ok(!defined $x->[0] && !grep({ abs($x->[$_] - $y->[$_]) > 1e-5 }
                                 1 .. $P - 1),
       'the second sample of a prompt has its prompt logprobs too');
    is(join('', @{ $ch[3]{logprobs}{tokens} }[1 .. $n[3] - 3]),
       'Hello there', 'the second prompt\'s tokens spell it');
}

# --- echo with logprobs, streaming ---

$r = $t->stream($cmpl, { %greedy, max_tokens => 4, logprobs => 2,
                         echo => \1, stream => \1 });
my @chunks = grep { ref && @{ $_->{choices} } } @{ $r->{events} };
my $first = $chunks[0]{choices}[0];
like($first->{text}, qr/^\Q$prompt\E/, 'stream: the first chunk echoes');
# the first generated token at least: a busy worker may take several of
# the engine's tokens into one chunk (the whole stream is compared below)
my $nf = scalar @{ $first->{logprobs}{tokens} };
ok($nf > $P && $nf <= $P + 4,
   "stream: its logprobs cover the prompt and the first token ($nf of "
   . ($P + 4) . ')');
ok(!defined $first->{logprobs}{token_logprobs}[0]
   && !defined $first->{logprobs}{top_logprobs}[0],
   'stream: the first prompt token has nulls');
ok(!exists $first->{prompt_logprobs},
   'stream: chunks carry no prompt_logprobs key (vLLM\'s stream choice)');
is_deeply([ map { @{ $_->{choices}[0]{logprobs}{tokens} } } @chunks ],
          $lp->{tokens}, 'stream: all tokens = the body\'s');
is_deeply([ map { @{ $_->{choices}[0]{logprobs}{token_logprobs} } } @chunks ],
          $lp->{token_logprobs}, 'stream: all logprobs = the body\'s');
is_deeply([ map { @{ $_->{choices}[0]{logprobs}{text_offset} } } @chunks ],
          $lp->{text_offset}, 'stream: offsets run on as in the body');

$r = $t->stream($cmpl, { %greedy, max_tokens => 0, logprobs => 1,
                         echo => \1, stream => \1 });
@chunks = grep { ref && @{ $_->{choices} } } @{ $r->{events} };
is(join('', map { $_->{choices}[0]{text} } @chunks), $prompt,
   'stream, max_tokens 0: the prompt only');
is(sum(map { scalar @{ $_->{choices}[0]{logprobs}{tokens} } } @chunks), $P,
   'stream, max_tokens 0: the prompt\'s logprobs only');

# --- prompt_logprobs: completions ---

$r = $t->post($cmpl, { %greedy, max_tokens => 4, prompt_logprobs => 3 });
is($r->{status}, 200, 'prompt_logprobs 3: 200');
like($r->{content},
     qr/"logprobs":null,"finish_reason":"length","stop_reason":null,
        "token_ids":null,"prompt_logprobs":\[null,\{"\d+":\{"logprob":$N,
        "rank":\d+,"decoded_token":$S\}/x,
     'prompt_logprobs: vLLM\'s shape, [null, {"id": {logprob, rank, '
     . 'decoded_token}}]');
$c = $r->{json}{choices}[0];
is($c->{text}, $plain->{json}{choices}[0]{text},
   'prompt_logprobs change no generated token');
{
    my $ok = @{ $c->{prompt_logprobs} } == $P;
    for my $i (1 .. $P - 1) {
        my $d = $c->{prompt_logprobs}[$i];
        my @r = sort { $a <=> $b } map { $_->{rank} } values %$d;
        my $in = grep { $_->{rank} <= 3 } values %$d;
        $ok &&= exists $d->{ $ids[$i] } && (keys %$d == 3 || keys %$d == 4)
                && $in == 3 && "@r[0 .. 2]" eq '1 2 3';
    }
    ok($ok, 'prompt_logprobs 3: the prompt token and ranks 1..3');
}
is_deeply([ map { $r->{json}{usage}{$_} } qw(prompt_tokens completion_tokens) ],
          [ map { $plain->{json}{usage}{$_} } qw(prompt_tokens
                                                 completion_tokens) ],
          'prompt_logprobs: usage unchanged');

# against the torch reference: log-softmax of its float32 logits
{
    my $py = $ENV{LLM_PYTHON} || '/usr/bin/python3';
    my $root = NginxLLM::root();
    my $code = <<'PY';
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1] + '/t/ref')
import ref_torch
ids = [int(x) for x in sys.argv[3].split(',')]
lg = np.asarray(ref_torch.RefModel(sys.argv[2]).logits(ids), dtype=np.float64)
lp = lg - lg.max(axis=1, keepdims=True)
lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))
tol = 2e-4
out = []
for i in range(len(ids) - 1):
    row, v = lp[i], lp[i][ids[i + 1]]
    top = np.argsort(-row, kind='stable')[:5]
    out.append({'lp': v, 'lo': int((row >= v + tol).sum()),
                'hi': int((row >= v - tol).sum()),
                'top': [[int(k), float(row[k])] for k in top]})
print(json.dumps(out))
PY
    my $ids = join ',', @ids;
    my $file = $t->dir . '/ref.py';
    open my $fh, '>', $file or die "$file: $!";
    print $fh $code;
    close $fh;
    my $json = `'$py' '$file' '$root' '$model' '$ids' 2>&1`;
    my $ref = NginxLLM::decode_json_safe($json);
    ok($ref && @$ref == $P - 1, 'torch reference ran') or diag($json);
    $r = $t->post($cmpl, { model => 'tiny', prompt => \@ids, max_tokens => 1,
                           prompt_logprobs => 5 });
    my $got = $r->{json}{choices}[0]{prompt_logprobs};
    my ($worst, $ok) = (0, 1);
    for my $i (1 .. $P - 1) {
        my ($d, $x) = ($got->[$i], $ref->[$i - 1]);
        my $e = $d->{ $ids[$i] };
        my $dd = abs($e->{logprob} - $x->{lp});
        $worst = $dd if $dd > $worst;
        $ok &&= $e->{rank} >= $x->{lo} && $e->{rank} <= $x->{hi};
        my %rank = map { $d->{$_}{rank} => $d->{$_}{logprob} } keys %$d;
        for my $k (0 .. 4) {
            my $v = $rank{ $k + 1 };
            $ok &&= defined $v && abs($v - $x->{top}[$k][1]) < 2e-4;
        }
    }
    ok($ok && $worst < 2e-4,
       sprintf('prompt logprobs, ranks and top 5 = torch log-softmax '
               . '(worst |delta| %.2g)', $worst));
}

# n > 1 and several prompts: every choice of a prompt gets them
$r = $t->post($cmpl, { model => 'tiny', prompt => [ $prompt, 'Hello there' ],
                       n => 2, temperature => 1, seed => 3, max_tokens => 3,
                       prompt_logprobs => 1 });
my @pl = map { $_->{prompt_logprobs} } @{ $r->{json}{choices} };
ok(@pl == 4 && @{ $pl[0] } == $P, 'n 2 x 2 prompts: four choices');
is_deeply($pl[1], $pl[0], 'both samples of prompt 0 have its logprobs');
is_deeply($pl[3], $pl[2], 'both samples of prompt 1 have its logprobs');
ok(@{ $pl[2] } != @{ $pl[0] }, 'each prompt has its own');

# --- prompt_logprobs: chat (top level) ---

$r = $t->post($chat, { model => 'tiny', temperature => 0, max_tokens => 2,
                       messages => [ { role => 'user', content => 'Hi!' } ],
                       prompt_logprobs => 2 });
is($r->{status}, 200, 'chat prompt_logprobs: 200');
like($r->{content}, qr/"prompt_logprobs":\[null,\{"\d+":\{"logprob":/,
     'chat: top-level prompt_logprobs');
is(scalar @{ $r->{json}{prompt_logprobs} // [] },
   $r->{json}{usage}{prompt_tokens}, 'chat: one entry per prompt token');
$r = $t->post($chat, { model => 'tiny', max_tokens => 2, stream => \1,
                       messages => [ { role => 'user', content => 'Hi!' } ],
                       prompt_logprobs => 0 });
is($r->{status}, 200, 'stream with prompt_logprobs 0 is allowed (vLLM)');

# --- validation: 400 naming the parameter ---

sub bad {
    my ($name, $path, $body, $param, $msg) = @_;
    my $x = $t->post($path, $body);
    subtest $name => sub {
        is($x->{status}, 400, 'status 400');
        is($x->{json}{error}{type}, 'BadRequestError', 'BadRequestError');
        is($x->{json}{error}{param}, $param, "param $param");
        like($x->{json}{error}{message} // '', $msg, 'message');
    };
}

my @m = (messages => [ { role => 'user', content => 'Hi' } ]);
for my $p ([ 'completions', $cmpl, prompt => 'a' ], [ 'chat', $chat, @m ]) {
    my ($what, $path, @body) = @$p;
    bad("$what: prompt_logprobs -2", $path, { @body, prompt_logprobs => -2 },
        'prompt_logprobs', qr/^`prompt_logprobs` must be a positive value or -1\.$/);
    bad("$what: prompt_logprobs 21", $path, { @body, prompt_logprobs => 21 },
        'prompt_logprobs', qr/^Requested prompt logprobs of 21, which is greater than max allowed: 20$/);
    bad("$what: prompt_logprobs -1 (the whole vocabulary)", $path,
        { @body, prompt_logprobs => -1 }, 'prompt_logprobs',
        qr/^Requested prompt logprobs of 128256, which is greater than max allowed: 20$/);
    bad("$what: prompt_logprobs with stream", $path,
        { @body, prompt_logprobs => 1, stream => \1 }, 'prompt_logprobs',
        qr/^`prompt_logprobs` are not available when `stream=True`\.$/);
    bad("$what: prompt_logprobs a string", $path,
        { @body, prompt_logprobs => '1' }, 'prompt_logprobs',
        qr/must be an integer/);
}
bad('responses: prompt_logprobs', '/v1/responses',
    { model => 'tiny', input => 'Hi', prompt_logprobs => 1 },
    'prompt_logprobs', qr/not supported by \/v1\/responses/);
bad('echo with logprobs 21', $cmpl,
    { prompt => 'a', echo => \1, logprobs => 21 }, 'logprobs',
    qr/^Requested sample logprobs of 21/);

# --- the openai npm client ---

my ($rc, $out) = $t->node('openai_echo.mjs', $t->url('/v1'), 'tiny', $prompt);
is($rc, 0, 'the openai client ran') or diag($out);
my $o = NginxLLM::decode_json_safe($out) // {};
is_deeply($o->{echo}{choices}[0]{logprobs}{tokens}, $lp->{tokens},
          'openai client: echo tokens');
ok(exists $o->{echo}{choices}[0]{logprobs}{token_logprobs}[0]
   && !defined $o->{echo}{choices}[0]{logprobs}{token_logprobs}[0],
   'openai client: the first token_logprob is null');
is($o->{echo_stream}{text}, $o->{echo}{choices}[0]{text},
   'openai client stream: the same text');
is_deeply($o->{echo_stream}{tokens}, $lp->{tokens},
          'openai client stream: the same tokens');
is(scalar @{ $o->{prompt_logprobs}{choices}[0]{prompt_logprobs} // [] }, $P,
   'openai client: prompt_logprobs as an extra field');

$t->done;
done_testing();
