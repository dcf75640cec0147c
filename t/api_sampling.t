#!/usr/bin/perl
# n > 1, several completions prompts and the sampling surface (SPEC section
# 8) through nginx: distinct seeded samples with vLLM's per-sample seeds,
# exact usage (every prompt once, every sample's tokens), choice indices,
# interleaved streams with one final usage chunk, the metrics null rules
# (SPEC section 6) and the access-log variables for each case; logprobs
# equal to log-softmax of the reference logits (llm logits); stop strings
# across token boundaries in streams; stop_token_ids with min_tokens,
# ignore_eos, logit_bias; and vLLM's validation errors.
#
# The model has untied embeddings: a tied random model mostly repeats one
# token, an untied one samples varied text, which these checks need.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use List::Util qw(max sum);
use Test::More;
use NginxLLM;
use Prometheus;

my $model = NginxLLM->model(tie => 0);
my $build = NginxLLM::build_dir();

my $t = NginxLLM->new(model => $model, http => 'llm_per_request_metrics on;',
                      locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC
$t->start;

my $chat = '/v1/chat/completions';
my $cmpl = '/v1/completions';
my @msgs = ({ role => 'user', content => 'Tell me a story.' });
my %samp = (temperature => 1.0, ignore_eos => \1);

sub texts { [ map { $_->{text} // $_->{message}{content} }
              @{ $_[0]{json}{choices} } ] }

sub log_fields {
    my ($line) = @_;
    return { map { /^(\w+)=(.*)$/ ? ($1, $2) : () } split / /, $line };
}

sub cli_json {
    my (@cmd) = @_;
    open my $fh, '-|', "$build/llm", @cmd or die "llm @cmd: $!";
    my $out = do { local $/; <$fh> };
    close $fh;
    return NginxLLM::decode_json_safe($out);
}

# --- n = 3: distinct seeded samples, exact usage, metrics null ---

my $one = $t->post($cmpl, { %samp, prompt => 'Once upon a time',
                            max_tokens => 6, seed => 11 });
my $n_prompt = $one->{json}{usage}{prompt_tokens};
my $r = $t->post($cmpl, { %samp, prompt => 'Once upon a time',
                          max_tokens => 6, seed => 11, n => 3 });
is($r->{status}, 200, 'completions n=3: 200');
my $c = $r->{json}{choices};
is_deeply([ map { $_->{index} } @$c ], [0, 1, 2], 'n=3: indices 0, 1, 2');
my %distinct = map { $_ => 1 } @{ texts($r) };
is(scalar keys %distinct, 3, 'n=3: three different samples');
is_deeply($r->{json}{usage}, { prompt_tokens => $n_prompt,
                               completion_tokens => 18,
                               total_tokens => $n_prompt + 18,
                               prompt_tokens_details =>
                                   { cached_tokens => 0 } },
          'n=3: usage counts the prompt once and every sample');
like($r->{content}, qr/"metrics":null\}$/,
     'n=3: "metrics": null although llm_per_request_metrics is on');
is($c->[0]{text}, $one->{json}{choices}[0]{text},
   'sample 0 is the n=1 sample of the same seed');
my $s1 = $t->post($cmpl, { %samp, prompt => 'Once upon a time',
                           max_tokens => 6, seed => 12 });
is($c->[1]{text}, $s1->{json}{choices}[0]{text},
   'sample i uses seed + i (vLLM\'s parallel sampling)');
my $again = $t->post($cmpl, { %samp, prompt => 'Once upon a time',
                              max_tokens => 6, seed => 11, n => 3 });
is_deeply(texts($again), texts($r), 'the same seed gives the same samples');
is(ref $one->{json}{metrics}, 'HASH', 'n=1: the metrics object');

$r = $t->post($chat, { %samp, messages => \@msgs, max_tokens => 5,
                       seed => 3, n => 3 });
my $chat1 = $t->post($chat, { %samp, messages => \@msgs, max_tokens => 5,
                              seed => 3 });
is(scalar @{ $r->{json}{choices} }, 3, 'chat n=3: three choices');
%distinct = map { $_ => 1 } @{ texts($r) };
is(scalar keys %distinct, 3, 'chat n=3: three different samples');
is($r->{json}{usage}{prompt_tokens}, $chat1->{json}{usage}{prompt_tokens},
   'chat n=3: prompt tokens once');
is($r->{json}{usage}{completion_tokens}, 15,
   'chat n=3: completion tokens of all samples');
ok(exists $r->{json}{metrics} && !defined $r->{json}{metrics},
   'chat n=3: "metrics": null');

# the access log bills every token of every sample
my $line = $t->wait_log_line(qr{^/v1/chat/completions 200 .*completion=15 });
my $f = log_fields($line // '');
is($f->{prompt}, $r->{json}{usage}{prompt_tokens},
   'log, n=3: $llm_prompt_tokens counts the prompt once');
is($f->{total}, $r->{json}{usage}{total_tokens}, 'log, n=3: $llm_total_tokens');
is($f->{finish}, 'length', 'log, n=3: $llm_finish_reason');
like($f->{ttft}, qr/^\d+\.\d{3}$/, 'log, n=3: timing of the whole request');

# --- streams with n > 1: role chunks first, choices interleaved, one
#     final usage chunk with the sums, no metrics ---

my $sr = $t->stream($chat, { %samp, messages => \@msgs, max_tokens => 5,
                             seed => 3, n => 3, stream => \1,
                             stream_options => { include_usage => \1 } });
my @ev = @{ $sr->{events} };
is($ev[-1], '[DONE]', 'stream n=3: [DONE]');
my @chunks = grep { ref } @ev;
is_deeply([ map { $_->{choices}[0]{index} } @chunks[0 .. 2] ], [0, 1, 2],
          'stream n=3: the role of every choice first');
ok(!grep({ !exists $_->{choices}[0]{delta}{role} } @chunks[0 .. 2]),
   'stream n=3: they carry the role');
my %streamed;
my %finish;
for my $ch (@chunks) {
    next unless @{ $ch->{choices} };
    my $cc = $ch->{choices}[0];
    $streamed{ $cc->{index} } .= $cc->{delta}{content} // '';
    $finish{ $cc->{index} }++ if defined $cc->{finish_reason};
}
is_deeply([ map { $streamed{$_} } 0 .. 2 ], texts($r),
          'stream n=3: each choice\'s deltas spell its non-streamed text');
is_deeply(\%finish, { 0 => 1, 1 => 1, 2 => 1 },
          'stream n=3: one finish_reason per choice');
my $last = $chunks[-1];
is_deeply($last->{choices}, [], 'stream n=3: the usage chunk has no choices');
is($last->{usage}{completion_tokens}, 15, 'stream n=3: usage sums the samples');
is($last->{usage}{prompt_tokens}, $r->{json}{usage}{prompt_tokens},
   'stream n=3: prompt tokens once');
ok(!grep({ exists $_->{metrics} } @chunks),
   'stream n=3: no metrics anywhere (vLLM: None, dropped)');

# a client that leaves cancels every sample; the log bills what they made
my $sock = $t->raw_socket('POST', $chat, { %samp, messages => \@msgs, n => 3,
                                          max_tokens => 200, seed => 9,
                                          stream => \1 });
my $got = '';
while (sysread($sock, my $buf, 65536)) {
    $got .= $buf;
    last if (() = $got =~ /"content":"[^"]/g) >= 6;
}
close $sock;
$f = log_fields($t->wait_log_line(qr{^/v1/chat/completions 200 .*finish=abort})
                // '');
is($f->{finish}, 'abort', 'n=3, client gone: finish abort');
ok($f->{completion} >= 3 && $f->{completion} < 600,
   "n=3, client gone: the tokens of all samples so far ($f->{completion})");

# --- several prompts: index = prompt * n + i, usage exact ---

my @prompts = ('Once upon a time', 'The weather today');
my @single = map { $t->post($cmpl, { %samp, prompt => $_, max_tokens => 4,
                                     seed => 5, n => 2 }) } @prompts;
$r = $t->post($cmpl, { %samp, prompt => \@prompts, max_tokens => 4,
                       seed => 5, n => 2 });
is($r->{status}, 200, 'two prompts, n=2: 200');
is_deeply([ map { $_->{index} } @{ $r->{json}{choices} } ], [0, 1, 2, 3],
          'two prompts, n=2: four choices');
is_deeply(texts($r), [ map { @{ texts($_) } } @single ],
          'choice p * n + i is sample i of prompt p');
is($r->{json}{usage}{prompt_tokens},
   sum(map { $_->{json}{usage}{prompt_tokens} } @single),
   'usage: every prompt counted once');
is($r->{json}{usage}{completion_tokens}, 16, 'usage: every sample\'s tokens');
like($r->{content}, qr/"metrics":null\}$/, 'several prompts: "metrics": null');

# Prometheus counts every sequence as the engine request it is: its
# tokens, its prompt (as vLLM, whose samples are child requests), its
# finish, and request_params_n once per prompt
my $before = Prometheus::parse($t->get('/metrics')->{content});
$r = $t->post($cmpl, { %samp, prompt => \@prompts, max_tokens => 4,
                       seed => 5, n => 2 });
my $after = Prometheus::parse($t->get('/metrics')->{content});
my $delta = sub {
    my ($name, @l) = @_;
    return ($after->value($name, @l) // 0) - ($before->value($name, @l) // 0);
};
is($delta->('vllm:generation_tokens_total'), 16,
   'Prometheus: the tokens of every sample');
is($delta->('vllm:prompt_tokens_total'), 2 * $r->{json}{usage}{prompt_tokens},
   'Prometheus: every sequence\'s prompt (usage counts each prompt once)');
is($delta->('vllm:request_success_total', finished_reason => 'length'), 4,
   'Prometheus: four finished engine requests');
is($delta->('vllm:request_params_n_count'), 2,
   'Prometheus: request_params_n observed once per prompt');
is($delta->('vllm:request_params_n_sum'), 4, 'Prometheus: with n = 2');

# token-id prompts: a list of lists of ints is several prompts
my @ids = map { cli_json('tokenize', '--model', $model, '--special', $_) }
          @prompts;
my $ri = $t->post($cmpl, { %samp, prompt => \@ids, max_tokens => 4, seed => 5,
                           n => 2 });
is_deeply(texts($ri), texts($r), 'prompts as lists of token ids: the same');
$ri = $t->post($cmpl, { %samp, prompt => $ids[1], max_tokens => 4, seed => 5 });
is($ri->{json}{choices}[0]{text}, $single[1]{json}{choices}[0]{text},
   'a list of ints is one prompt');
is(ref $ri->{json}{metrics}, 'HASH', 'one token-id prompt, n=1: metrics');
$ri = $t->post($cmpl, { %samp, prompt => [ $ids[0] ], max_tokens => 2,
                        seed => 5 });
is(ref $ri->{json}{metrics}, 'HASH', 'a list with one prompt: metrics');

# streaming several prompts with running usage per choice
$sr = $t->stream($cmpl, { %samp, prompt => \@prompts, max_tokens => 4,
                          seed => 5, n => 2, stream => \1,
                          stream_options => { include_usage => \1,
                                              continuous_usage_stats => \1 } });
@chunks = grep { ref } @{ $sr->{events} };
%streamed = ();
my %running;
for my $ch (@chunks) {
    next unless @{ $ch->{choices} };
    my $cc = $ch->{choices}[0];
    $streamed{ $cc->{index} } .= $cc->{text};
    $running{ $cc->{index} } = $ch->{usage};
}
is_deeply([ map { $streamed{$_} } 0 .. 3 ], texts($r),
          'stream, two prompts: each choice\'s text');
is_deeply([ map { $running{$_}{completion_tokens} } 0 .. 3 ], [4, 4, 4, 4],
          'continuous usage: each choice counts its own tokens');
is($running{3}{prompt_tokens}, $single[1]{json}{usage}{prompt_tokens},
   'continuous usage: and its own prompt');
is_deeply($chunks[-1]{usage},
          { prompt_tokens => $r->{json}{usage}{prompt_tokens},
            completion_tokens => 16,
            total_tokens => $r->{json}{usage}{total_tokens},
            prompt_tokens_details => { cached_tokens =>
                $chunks[-1]{usage}{prompt_tokens_details}{cached_tokens} } },
          'final usage chunk: the sums');
ok(!exists $chunks[-1]{metrics}, 'final usage chunk: no metrics');

# --- logprobs = log-softmax of the reference logits ---

# the logits of every position of ids, one row per position
sub logits_rows {
    my ($ids) = @_;
    my $file = $t->dir . '/logits.bin';
    system("$build/llm", 'logits', '--model', $model, '--ids', join(',', @$ids),
           '--out', $file) == 0 or die "llm logits failed";
    my $raw = NginxLLM::slurp($file);
    return ($raw, length($raw) / 4 / @$ids);
}

sub log_softmax {
    my ($raw, $vocab, $row) = @_;
    my @x = unpack 'f<*', substr($raw, $row * $vocab * 4, $vocab * 4);
    my $m = max(@x);
    my $s = 0;
    $s += exp($_ - $m) for @x;
    my $lse = $m + log($s);
    return [ map { $_ - $lse } @x ];
}

sub near {
    my ($got, $want) = @_;
    return defined $got && abs($got - $want) <= 1e-4;
}

# sampled tokens: the CLI runs the engine with the same seed, its ids are
# the ids the server sampled (the texts agree)
my $lp_req = { %samp, prompt => 'Once upon a time', max_tokens => 6,
               logprobs => 5, seed => 21, n => 2 };
$r = $t->post($cmpl, $lp_req);
for my $i (0, 1) {
    my $g = cli_json('generate', '--model', $model, '--prompt',
                     'Once upon a time', '--max-tokens', 6, '--temperature',
                     1, '--seed', 21 + $i, '--json');
    my $choice = $r->{json}{choices}[$i];
    is($choice->{text}, $g->{text}, "sample $i: the text of llm generate --seed "
                                    . (21 + $i));
    my @all = (@{ $g->{prompt_ids} }, @{ $g->{ids} });
    my ($raw, $vocab) = logits_rows([ @all[0 .. $#all - 1] ]);
    my ($bad, $badtop) = (0, 0);
    for my $k (0 .. $#{ $g->{ids} }) {
        my $ls = log_softmax($raw, $vocab, @{ $g->{prompt_ids} } - 1 + $k);
        $bad++ unless near($choice->{logprobs}{token_logprobs}[$k],
                           $ls->[ $g->{ids}[$k] ]);
        # the sampled token and the 5 most likely (OpenAI: up to N + 1);
        # tokens that decode alike (a lone byte is "\x{fffd}") share a key
        my %want = map { $_ => $ls->[$_] }
                   $g->{ids}[$k], (sort { $ls->[$b] <=> $ls->[$a] }
                                   0 .. $#$ls)[0 .. 4];
        my @top = sort { $b <=> $a } values %want;
        my @got = sort { $b <=> $a }
                  values %{ $choice->{logprobs}{top_logprobs}[$k] };
        my @outside = grep { my $v = $_; !grep { near($v, $_) } @top } @got;
        my @differ = @got < @top ? ()
                     : grep { !near($got[$_], $top[$_]) } 0 .. $#top;
        $badtop++ unless @got && near($got[0], $top[0]) && !@outside
                         && !@differ
                         && exists $choice->{logprobs}{top_logprobs}[$k]
                                   { $choice->{logprobs}{tokens}[$k] };
    }
    is($bad, 0, "sample $i: every token's logprob = log-softmax of its row, "
                . '+-1e-4');
    is($badtop, 0, "sample $i: top_logprobs = the sampled token and the "
                   . "row's 5 largest");
}

# chat, greedy: the prompt from /tokenize, each token the argmax of its row
$r = $t->post($chat, { messages => \@msgs, temperature => 0, max_tokens => 3,
                       logprobs => \1, top_logprobs => 3 });
my $tok = $t->post('/v1/tokenize', { messages => \@msgs });
is($tok->{json}{count}, $r->{json}{usage}{prompt_tokens},
   '/tokenize with messages counts what chat bills');
my @seq = @{ $tok->{json}{tokens} };
my ($bad, $badtop, $badstr) = (0, 0, 0);
for my $entry (@{ $r->{json}{choices}[0]{logprobs}{content} }) {
    my ($raw, $vocab) = logits_rows(\@seq);
    my $ls = log_softmax($raw, $vocab, $#seq);
    my ($best) = sort { $ls->[$b] <=> $ls->[$a] } 0 .. $#$ls;
    $bad++ unless near($entry->{logprob}, $ls->[$best]);
    my @top = (sort { $b <=> $a } @$ls)[0 .. 2];
    my @got = map { $_->{logprob} } @{ $entry->{top_logprobs} };
    $badtop++ unless @got == 3 && !grep { !near($got[$_], $top[$_]) } 0 .. 2;
    my $d = $t->post('/v1/detokenize', { tokens => [$best] });
    $badstr++ unless $d->{json}{prompt} eq $entry->{token};
    push @seq, $best;
}
is(scalar @{ $r->{json}{choices}[0]{logprobs}{content} }, 3,
   'chat logprobs: one entry per token');
is($bad, 0, 'chat greedy: logprob = the row\'s largest log-softmax');
is($badtop, 0, 'chat: top_logprobs = the row\'s 3 largest, in order');
is($badstr, 0, 'chat: each token is the string of the argmax id');

# --- stop strings across token boundaries, in streams ---

# A seeded text over four tokens of four characters, a space and three
# letters (allowed_token_ids): whatever the sample, the string from the
# third character of the first token to the second of the next spans two
# tokens, the one from the fourth character to the first of the third
# token spans three, and neither occurs earlier (a space sits inside
# them, and tokens have theirs only in front).
my @words = (' cat', ' dog', ' sun', ' red');
my @word_ids = map {
    $t->post('/v1/tokenize', { prompt => $_, add_special_tokens => \0 })
      ->{json}{tokens}
} @words;
is_deeply([ map { scalar @$_ } @word_ids ], [ 1, 1, 1, 1 ],
          join(', ', map { "'$_'" } @words) . ' are one token each');
my %is_word = map { $_ => 1 } @words;
my $stop_body = { %samp, prompt => 'Once upon a time', max_tokens => 12,
                  seed => 1, allowed_token_ids => [ map { @$_ } @word_ids ] };
my $x = $t->post($cmpl, { %$stop_body, logprobs => 0 });
my $text = $x->{json}{choices}[0]{text};
my @tk = @{ $x->{json}{choices}[0]{logprobs}{tokens} };
ok(@tk == 12 && !grep({ !$is_word{$_} } @tk),
   "the seeded text: 12 of those tokens ($text)");
$stop_body->{stop} = [ substr($text, 2, 4), substr($text, 3, 6) ];
is_deeply([ map { index($text, $_) } @{ $stop_body->{stop} } ], [ 2, 3 ],
          "stop strings '$stop_body->{stop}[0]' and '$stop_body->{stop}[1]' "
          . 'first occur across the first tokens');

for my $case ([ $stop_body->{stop}[0], 'two tokens' ],
              [ $stop_body->{stop}[1], 'three tokens' ]) {
    my ($stop, $name) = @$case;
    my $want = substr($text, 0, index($text, $stop));
    $sr = $t->stream($cmpl, { %$stop_body, stop => [$stop], stream => \1 });
    @chunks = grep { ref } @{ $sr->{events} };
    my $got = join '', map { $_->{choices}[0]{text} } @chunks;
    is($got, $want, "stream, a stop string across $name: the text "
                    . "before it ('$want'), none of the string");
    is($chunks[-1]{choices}[0]{finish_reason}, 'stop',
       "stream, across $name: finish_reason stop");
    is($chunks[-1]{choices}[0]{stop_reason}, $stop,
       "stream, across $name: stop_reason is the string");
}

# chat streams too: a stop string from the last character of the first
# token to the second of the next
$r = $t->post($chat, { %samp, messages => \@msgs, max_tokens => 10, seed => 4,
                       allowed_token_ids => $stop_body->{allowed_token_ids},
                       logprobs => \1 });
my @ct = map { $_->{token} } @{ $r->{json}{choices}[0]{logprobs}{content} };
my $ctext = $r->{json}{choices}[0]{message}{content};
ok(@ct == 10 && !grep({ !$is_word{$_} } @ct),
   "the seeded chat text: 10 of those tokens ($ctext)");
my $cstop = substr($ctext, 3, 3);
is(index($ctext, $cstop), 3, "'$cstop' first occurs across the first two tokens");
$sr = $t->stream($chat, { %samp, messages => \@msgs, max_tokens => 10,
                          seed => 4, stop => $cstop, stream => \1,
                          allowed_token_ids => $stop_body->{allowed_token_ids} });
@chunks = grep { ref } @{ $sr->{events} };
is(join('', map { $_->{choices}[0]{delta}{content} // '' } @chunks),
   substr($ctext, 0, 3), 'chat stream, stop across a boundary');
is($chunks[-1]{choices}[0]{stop_reason}, $cstop, 'chat stream: stop_reason');

# --- stop_token_ids with min_tokens, ignore_eos, logit_bias, seed ---

my %greedy = (prompt => 'Once upon a time', temperature => 0,
              max_tokens => 5, ignore_eos => \1);
my $g = cli_json('generate', '--model', $model, '--prompt', 'Once upon a time',
                 '--max-tokens', 5, '--temperature', 0, '--json');
my $first = $g->{ids}[0];
$r = $t->post($cmpl, { %greedy, stop_token_ids => [$first] });
is($r->{json}{usage}{completion_tokens}, 1, 'stop_token_ids: stops at once');
is($r->{json}{choices}[0]{stop_reason}, $first, 'stop_reason: the id');
$r = $t->post($cmpl, { %greedy, stop_token_ids => [$first], min_tokens => 3,
                       logprobs => 0 });
ok($r->{json}{usage}{completion_tokens} >= 3,
   'min_tokens: no stop before 3 tokens');
isnt($r->{json}{choices}[0]{logprobs}{tokens}[0],
     $t->post('/v1/detokenize', { tokens => [$first] })->{json}{prompt},
     'min_tokens: the stop id cannot be sampled before that (vLLM masks it)');

my $eos = 128009;   # <|eot_id|>, one of the model's EOS ids
$r = $t->post($cmpl, { %greedy, ignore_eos => \0,
                       logit_bias => { $eos => 100 } });
is($r->{json}{usage}{completion_tokens}, 1, 'logit_bias +100 on EOS: EOS');
is($r->{json}{choices}[0]{finish_reason}, 'stop', 'EOS: finish_reason stop');
ok(exists $r->{json}{choices}[0]{stop_reason}
   && !defined $r->{json}{choices}[0]{stop_reason}, 'EOS: stop_reason null');
$r = $t->post($cmpl, { %greedy, logit_bias => { $eos => 100 } });
is($r->{json}{choices}[0]{finish_reason}, 'length',
   'ignore_eos: EOS does not stop');
is($r->{json}{usage}{completion_tokens}, 5, 'ignore_eos: max_tokens tokens');
$r = $t->post($cmpl, { %greedy, logit_bias => { 9906 => 100 } });
is($r->{json}{choices}[0]{text}, 'Hello' x 5, 'logit_bias +100: that token');
$r = $t->post($cmpl, { %greedy, logit_bias => { $first => -100 },
                       logprobs => 0 });
isnt($r->{json}{choices}[0]{logprobs}{tokens}[0],
     $t->post('/v1/detokenize', { tokens => [$first] })->{json}{prompt},
     'logit_bias -100: the greedy token is avoided');
my $sa = $t->post($cmpl, { %samp, prompt => 'Hi', max_tokens => 8, seed => 1 });
my $sb = $t->post($cmpl, { %samp, prompt => 'Hi', max_tokens => 8, seed => 2 });
isnt($sa->{json}{choices}[0]{text}, $sb->{json}{choices}[0]{text},
     'another seed, another sample');

# --- vLLM's include_stop_str_in_output, skip_special_tokens,
#     allowed_token_ids and truncate_prompt_tokens ---

{
    my $stop = $stop_body->{stop}[1];
    my $want = substr($text, 0, index($text, $stop) + length($stop));
    $r = $t->post($cmpl, { %$stop_body, stop => [$stop],
                           include_stop_str_in_output => \1 });
    is($r->{json}{choices}[0]{text}, $want,
       'include_stop_str_in_output: the text ends with the stop string');
    $sr = $t->stream($cmpl, { %$stop_body, stop => [$stop], stream => \1,
                              include_stop_str_in_output => \1 });
    @chunks = grep { ref } @{ $sr->{events} };
    is(join('', map { $_->{choices}[0]{text} } @chunks), $want,
       'include_stop_str_in_output, streamed: the same text');
}
my $first_text = $t->post('/v1/detokenize', { tokens => [$first] })->{json}{prompt};
$r = $t->post($cmpl, { %greedy, stop_token_ids => [$first] });
is($r->{json}{choices}[0]{text}, '', 'a stop token\'s text is not shown');
$r = $t->post($cmpl, { %greedy, stop_token_ids => [$first],
                       include_stop_str_in_output => \1 });
is($r->{json}{choices}[0]{text}, $first_text,
   'include_stop_str_in_output: the stop token\'s text is shown');
is($r->{json}{choices}[0]{stop_reason}, $first, 'and stop_reason is its id');
$r = $t->post($cmpl, { %greedy, ignore_eos => \0, logit_bias => { $eos => 100 },
                       include_stop_str_in_output => \1 });
is($r->{json}{choices}[0]{text}, '',
   'include_stop_str_in_output: EOS is a special token, skipped');
$r = $t->post($cmpl, { %greedy, ignore_eos => \0, logit_bias => { $eos => 100 },
                       include_stop_str_in_output => \1,
                       skip_special_tokens => \0 });
is($r->{json}{choices}[0]{text}, '<|eot_id|>',
   'with skip_special_tokens false: EOS is shown');

my $bot = 128000;   # <|begin_of_text|>, special, not EOS
$r = $t->post($cmpl, { %greedy, logit_bias => { $bot => 100 } });
is($r->{json}{choices}[0]{text}, '', 'special tokens are skipped by default');
is($r->{json}{usage}{completion_tokens}, 5, 'though generated and counted');
$sr = $t->stream($cmpl, { %greedy, logit_bias => { $bot => 100 },
                          skip_special_tokens => \0, stream => \1 });
@chunks = grep { ref } @{ $sr->{events} };
is(join('', map { $_->{choices}[0]{text} } @chunks), '<|begin_of_text|>' x 5,
   'skip_special_tokens false, streamed: each shown');
$r = $t->post($chat, { messages => \@msgs, temperature => 0, max_tokens => 3,
                       ignore_eos => \1, logit_bias => { $bot => 100 },
                       skip_special_tokens => \0 });
is($r->{json}{choices}[0]{message}{content}, '<|begin_of_text|>' x 3,
   'skip_special_tokens false in chat');

my @allowed = (9906, 1917, 13, 279);    # Hello, " world", ".", " the"
my %allowed_text = map {
    ($t->post('/v1/detokenize', { tokens => [$_] })->{json}{prompt}, 1)
} @allowed;
for my $case ([ 'sampled', { %samp, seed => 5 } ],
              [ 'greedy', { temperature => 0, ignore_eos => \1 } ])
{
    my ($name, $extra) = @$case;
    $r = $t->post($cmpl, { %$extra, prompt => 'Once upon a time',
                           max_tokens => 12, logprobs => 1,
                           allowed_token_ids => \@allowed });
    my $lp = $r->{json}{choices}[0]{logprobs};
    my @out = grep { !$allowed_text{$_} } @{ $lp->{tokens} };
    ok(@{ $lp->{tokens} } == 12 && !@out,
       "allowed_token_ids, $name: 12 tokens, each one of the four")
        or diag explain $lp->{tokens};
}
$r = $t->post($cmpl, { %samp, prompt => 'Once upon a time', max_tokens => 12,
                       seed => 5, allowed_token_ids => \@allowed, n => 2 });
ok(!grep({ my $x = $_; $x =~ s/Hello| world|\.| the//g; $x ne '' }
         @{ texts($r) }), 'allowed_token_ids with n=2: both samples');

my @twelve = (1000 .. 1011);
my $full = $t->post($cmpl, { %greedy, prompt => [ @twelve[8 .. 11] ] });
$r = $t->post($cmpl, { %greedy, prompt => \@twelve, truncate_prompt_tokens => 4 });
is($r->{json}{usage}{prompt_tokens}, 4,
   'truncate_prompt_tokens 4: four prompt tokens');
is($r->{json}{choices}[0]{text}, $full->{json}{choices}[0]{text},
   'truncate_prompt_tokens 4: the output of the last four alone');
$r = $t->post($cmpl, { %greedy, prompt => \@twelve, truncate_prompt_tokens => -1 });
is($r->{json}{usage}{prompt_tokens}, 12, 'truncate_prompt_tokens -1: no cut');
my $chat_full = $t->post($chat, { messages => \@msgs, max_tokens => 1 });
$r = $t->post($chat, { messages => \@msgs, max_tokens => 1,
                       truncate_prompt_tokens => 3 });
ok($chat_full->{json}{usage}{prompt_tokens} > 3
   && $r->{json}{usage}{prompt_tokens} == 3, 'truncate_prompt_tokens in chat');

# --- vLLM's return_token_ids ---

my $prompt_ids = $t->post('/v1/tokenize',
                          { prompt => 'Once upon a time' })->{json}{tokens};
$r = $t->post($cmpl, { %greedy, return_token_ids => \1 });
is_deeply($r->{json}{choices}[0]{token_ids}, $g->{ids},
          'return_token_ids: the choice\'s token_ids are the generated ids');
is_deeply($r->{json}{choices}[0]{prompt_token_ids}, $prompt_ids,
          'return_token_ids: prompt_token_ids are the prompt\'s');
$r = $t->post($cmpl, { %greedy });
ok(exists $r->{json}{choices}[0]{token_ids}
   && !defined $r->{json}{choices}[0]{token_ids}, 'without it: null');
$sr = $t->stream($cmpl, { %greedy, return_token_ids => \1, stream => \1 });
@chunks = grep { ref && @{ $_->{choices} } } @{ $sr->{events} };
is_deeply([ map { @{ $_->{choices}[0]{token_ids} } } @chunks ], $g->{ids},
          'return_token_ids, streamed: the chunks\' token_ids add up');
is_deeply($chunks[0]{choices}[0]{prompt_token_ids}, $prompt_ids,
          'streamed: prompt_token_ids in the first chunk');
ok(!grep({ defined $_->{choices}[0]{prompt_token_ids} } @chunks[1 .. $#chunks]),
   'streamed: and only there');
my $chat_ids = $t->post('/v1/tokenize', { messages => \@msgs })->{json}{tokens};
$r = $t->post($chat, { messages => \@msgs, temperature => 0, max_tokens => 4,
                       ignore_eos => \1, return_token_ids => \1, n => 1 });
is_deeply($r->{json}{prompt_token_ids}, $chat_ids,
          'chat: prompt_token_ids at the top level');
is(scalar @{ $r->{json}{choices}[0]{token_ids} }, 4, 'chat: four token_ids');
$sr = $t->stream($chat, { messages => \@msgs, temperature => 0, max_tokens => 4,
                          ignore_eos => \1, return_token_ids => \1,
                          stream => \1 });
@chunks = grep { ref && @{ $_->{choices} } } @{ $sr->{events} };
is_deeply($chunks[0]{prompt_token_ids}, $chat_ids,
          'chat stream: prompt_token_ids in the role chunk');
is_deeply([ map { @{ $_->{choices}[0]{token_ids} // [] } } @chunks[1 .. $#chunks] ],
          $r->{json}{choices}[0]{token_ids},
          'chat stream: the chunks\' token_ids add up to the body\'s');

# --- vLLM's bad_words ---

my %g12 = (%greedy, max_tokens => 12, return_token_ids => \1);
my $base = $t->post($cmpl, \%g12)->{json}{choices}[0]{token_ids};
sub detok { $t->post('/v1/detokenize', { tokens => [@_] })->{json}{prompt} }
sub tok { $t->post('/v1/tokenize', { prompt => $_[0],
                                     add_special_tokens => \0 })->{json}{tokens} }
my $w1 = detok($base->[0]);
$w1 =~ s/^\s+//;
$r = $t->post($cmpl, { %g12, bad_words => [$w1] });
my $bw = $r->{json}{choices}[0]{token_ids};
isnt($bw->[0], $base->[0], "bad_words [\"$w1\"]: the greedy first token is avoided");
ok(!grep({ my $i = $_; grep { $_ == $i } @{ tok($w1) }, @{ tok(" $w1") } }
         @$bw) || @{ tok($w1) } > 1,
   'and neither spelling of the word appears');
# a two-token word: with "Hello" pushed by logit_bias the greedy text is
# "HelloHello..."; banning "HelloHello" leaves every first Hello, never a
# second one right after it
is("@{ tok('HelloHello') }", '9906 9906', 'HelloHello is two Hello tokens');
{
    $r = $t->post($cmpl, { %g12, logit_bias => { 9906 => 100 } });
    is_deeply($r->{json}{choices}[0]{token_ids}, [ (9906) x 12 ],
              'logit_bias +100 on Hello: Hello twelve times');
    $r = $t->post($cmpl, { %g12, logit_bias => { 9906 => 100 },
                           bad_words => ['HelloHello'] });
    $bw = $r->{json}{choices}[0]{token_ids};
    is_deeply([ @$bw[grep { $_ % 2 == 0 } 0 .. 11] ], [ (9906) x 6 ],
              'bad_words ["HelloHello"]: Hello at every other token');
    ok(!grep({ $bw->[$_] == 9906 } grep { $_ % 2 } 0 .. 11),
       'never twice in a row');
}

# --- vLLM's cache_salt: the prefix cache is shared within a salt only ---

my @long = (2000 .. 2049);      # 50 tokens: three full blocks can be hits
sub cached {
    my (%extra) = @_;
    my $x = $t->post($cmpl, { %greedy, prompt => \@long, max_tokens => 1,
                              %extra });
    return $x->{json}{usage}{prompt_tokens_details}{cached_tokens};
}
is(cached(cache_salt => 'tenant-a'), 0, 'cache_salt a: a first prompt, no hit');
is(cached(cache_salt => 'tenant-a'), 48, 'cache_salt a again: 48 tokens hit');
is(cached(cache_salt => 'tenant-b'), 0, 'cache_salt b: the same prompt, no hit');
is(cached(), 0, 'no salt: no hit on the salted blocks');
is(cached(), 48, 'no salt again: a hit');
is(cached(cache_salt => 'tenant-b'), 48, 'cache_salt b again: its own hit');
$r = $t->post($cmpl, { %samp, prompt => \@long, max_tokens => 2, n => 2,
                       seed => 1, cache_salt => 'tenant-a' });
is($r->{json}{usage}{prompt_tokens_details}{cached_tokens}, 48,
   'cache_salt with n=2: the salt\'s hit, the samples share the prompt');

# --- validation: 400 naming the parameter ---

sub bad {
    my ($name, $path, $body, $param, $msg) = @_;
    my $x = $t->post($path, $body);
    subtest $name => sub {
        is($x->{status}, 400, 'status 400');
        is($x->{json}{error}{param}, $param, "param $param");
        like($x->{json}{error}{message} // '', $msg, 'message');
    };
}

my %m = (messages => \@msgs);
bad('n 0', $chat, { %m, n => 0 }, 'n', qr/^n must be at least 1, got 0\.$/);
bad('n above the limit', $chat, { %m, n => 257 }, 'n',
    qr/^n must be at most 256, got 257\.$/);
bad('n as a string', $chat, { %m, n => '2' }, 'n', qr/must be an integer/);
bad('n 2 with greedy sampling', $cmpl, { prompt => 'a', n => 2,
    temperature => 0 }, 'n', qr/^n must be 1 when using greedy sampling, got 2\.$/);
bad('best_of other than n', $cmpl, { prompt => 'a', best_of => 3 },
    'best_of', qr/best_of is not supported/);
bad('too many sequences', $cmpl, { prompt => [ ('a') x 9 ], n => 30 },
    'prompt', qr/make 270 sequences, at most 256/);
bad('completions logprobs 21', $cmpl, { prompt => 'a', logprobs => 21 },
    'logprobs', qr/^Requested sample logprobs of 21, which is greater than max allowed: 20$/);
bad('completions logprobs -1', $cmpl, { prompt => 'a', logprobs => -1 },
    'logprobs', qr/must be a positive value/);
bad('top_logprobs -2', $chat, { %m, logprobs => \1, top_logprobs => -2 },
    'top_logprobs', qr/positive value or -1/);
bad('logprobs not a boolean in chat', $chat, { %m, logprobs => 2 },
    'logprobs', qr/must be a boolean/);
bad('stop_token_ids out of the vocabulary', $cmpl, { prompt => 'a',
    stop_token_ids => [ 999999 ] }, 'stop_token_ids', qr/out-of-vocab/);
bad('stop_token_ids not ids', $cmpl, { prompt => 'a',
    stop_token_ids => [ 'x' ] }, 'stop_token_ids', qr/list of token ids/);
bad('min_tokens -1', $cmpl, { prompt => 'a', min_tokens => -1 },
    'min_tokens', qr/^min_tokens must be greater than or equal to 0, got -1\.$/);
bad('min_tokens above a prompt\'s capped max_tokens', $cmpl,
    { prompt => [ 'a', [ (1000) x 250 ] ], max_tokens => 10, min_tokens => 8 },
    'min_tokens', qr/^min_tokens must be less than or equal to max_tokens=6, got 8\.$/);
bad('ignore_eos not a boolean', $cmpl, { prompt => 'a', ignore_eos => 1 },
    'ignore_eos', qr/must be a boolean/);
bad('seed a string', $cmpl, { prompt => 'a', seed => 'x' }, 'seed',
    qr/must be an integer/);
bad('logit_bias value not a number', $cmpl, { prompt => 'a',
    logit_bias => { 5 => 'x' } }, 'logit_bias', qr/values must be numbers/);
bad('max_completion_tokens 0', $chat, { %m, max_completion_tokens => 0 },
    'max_completion_tokens', qr/^max_completion_tokens must be at least 1, got 0\.$/);
bad('a prompt list mixing in a number', $cmpl, { prompt => [ 'a', 5 ] },
    'prompt', qr/prompt\[1\] must be a non-empty string or a non-empty list/);
bad('an empty token list in the prompts', $cmpl, { prompt => [ [1], [] ] },
    'prompt', qr/prompt\[1\] .*an empty list/);
bad('allowed_token_ids empty', $cmpl, { prompt => 'a', allowed_token_ids => [] },
    'allowed_token_ids', qr/^allowed_token_ids is not None and empty!$/);
bad('allowed_token_ids out of the vocabulary', $cmpl, { prompt => 'a',
    allowed_token_ids => [ 5, 999999 ] }, 'allowed_token_ids',
    qr/^allowed_token_ids contains out-of-vocab token id!$/);
bad('allowed_token_ids not a list', $cmpl, { prompt => 'a',
    allowed_token_ids => 5 }, 'allowed_token_ids', qr/must be a list of integers/);
bad('skip_special_tokens not a boolean', $cmpl, { prompt => 'a',
    skip_special_tokens => 0 }, 'skip_special_tokens', qr/must be a boolean/);
bad('include_stop_str_in_output not a boolean', $chat, { %m,
    include_stop_str_in_output => 'yes' }, 'include_stop_str_in_output',
    qr/must be a boolean/);
bad('bad_words a string', $cmpl, { prompt => 'a', bad_words => 'x' },
    'bad_words', qr/must be a list of strings/);
bad('bad_words with a number', $cmpl, { prompt => 'a', bad_words => [ 'x', 1 ] },
    'bad_words', qr/must be a list of strings/);
bad('cache_salt empty', $cmpl, { prompt => 'a', cache_salt => '' },
    'cache_salt', qr/^Parameter 'cache_salt' must be a non-empty string if provided\.$/);
bad('cache_salt a number', $chat, { %m, cache_salt => 5 },
    'cache_salt', qr/^Parameter 'cache_salt' must be a non-empty string if provided\.$/);
bad('return_token_ids not a boolean', $cmpl, { prompt => 'a',
    return_token_ids => 1 }, 'return_token_ids', qr/must be a boolean/);
bad('truncate_prompt_tokens -2', $cmpl, { prompt => 'a',
    truncate_prompt_tokens => -2 }, 'truncate_prompt_tokens',
    qr/greater than or equal to -1/);
bad('truncate_prompt_tokens above max_model_len', $chat, { %m,
    truncate_prompt_tokens => 100000 }, 'truncate_prompt_tokens',
    qr/^truncate_prompt_tokens value \(100000\) is greater than max_model_len \(\d+\)\. Please, select a smaller truncation size\.$/);

$t->done;
done_testing();
