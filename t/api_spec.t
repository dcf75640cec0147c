#!/usr/bin/perl
# Speculative decoding through nginx (issue 7): greedy output with
# llm_speculative is token for token the output without it, alone and in
# mixed batches, on a model whose drafts are accepted (tied embeddings
# repeat their input) and one whose drafts are rejected (untied);
# metrics.speculative_decoding as vLLM writes it (summary, detailed, in
# bodies and streams, with and without the timing metrics, the zero-step
# case; acceptance_histogram_by_draft_length against the other fields
# and the per-step lists); the per-request numbers sum to the Prometheus
# counters;
# $llm_spec_acceptance_length; llm_speculative's limits in nginx -t.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use List::Util qw(sum0);
use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;
use Prometheus;

my $K = 4;
my $NUM = qr/-?\d+(?:\.\d+)?(?:e[-+]\d+)?/;
my %greedy = (temperature => 0, ignore_eos => \1);

my $SPEC = <<"HTTP";
llm_speculative ngram tokens=$K lookup_min=1 lookup_max=4;
    llm_per_request_metrics on;
    llm_per_request_spec_decode_metrics summary;
HTTP

my $LOC = <<'LOC';
        location /v1/ { llm_api; }
        location /detailed/v1/ {
            llm_api;
            llm_per_request_spec_decode_metrics detailed;
        }
        location /notiming/v1/ { llm_api; llm_per_request_metrics off; }
        location /nospec/v1/ {
            llm_api;
            llm_per_request_spec_decode_metrics none;
        }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC

my $PLAIN_LOC = <<'LOC';
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC

sub log_fields {
    my ($line) = @_;
    return { map { /^(\w+)=(.*)$/ ? ($1, $2) : () } split / /, $line };
}

sub scrape {
    my ($t) = @_;
    return Prometheus::parse($t->get('/metrics')->{content});
}

# the prompts: repetitive text (drafts found and, on a tied model,
# accepted), and text with no repeated n-gram
my @prompts = (
    'the cat sat on the mat. the cat sat on the mat. the cat sat on the',
    'def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n',
    'one two three four five six seven eight nine ten eleven twelve',
    'Zebras quietly juggle orange umbrellas beneath volcanic meadows',
    'a a a a a a a a',
);

sub completion {
    my ($t, $path, $prompt, %o) = @_;
    return $t->post($path, { prompt => $prompt, max_tokens => 40,
                             logprobs => 0, %greedy, %o });
}

sub tokens {
    my ($r) = @_;
    return $r->{json}{choices}[0]{logprobs}{tokens} // ['<no tokens>'];
}

# every request to the speculating server through a location with spec
# metrics is remembered here, to be summed against Prometheus
my @spec_seen;
my $most_lengths = 0;               # the most draft lengths one request saw

# acceptance_histogram_by_draft_length: rows of observed draft lengths
# 1..K only (a step without drafts is no verify step, and nothing
# invalidates drafts here) up to k, k' + 1 counts each, no empty row; the rows
# add up to the histogram, the steps, the accepted and the drafted tokens
sub by_length_ok {
    my ($sd) = @_;
    my $by = $sd->{acceptance_histogram_by_draft_length};
    return 0 unless ref $by eq 'HASH';
    my ($steps, $acc, $dr, @col) = (0, 0, 0);
    for my $k (keys %$by) {
        my $row = $by->{$k};
        return 0 unless $k =~ /^[1-9]\d*$/ && $k <= $sd->{num_spec_tokens}
                        && ref $row eq 'ARRAY'
                        && @$row == $k + 1 && sum0(@$row) > 0;
        $steps += sum0(@$row);
        $acc += sum0(map { $_ * $row->[$_] } 0 .. $k);
        $dr += $k * sum0(@$row);
        $col[$_] += $row->[$_] for 0 .. $k;
    }
    $most_lengths = keys %$by if keys %$by > $most_lengths;
    my $h = $sd->{acceptance_histogram};
    return $steps == $sd->{num_spec_steps}
        && $acc == $sd->{num_accepted_draft_tokens}
        && $dr == $sd->{num_draft_tokens}
        && !grep { ($col[$_] // 0) != $h->[$_] } 0 .. $#$h;
}

# the rows the test counts itself from the per-step lists (detailed)
sub by_length_from_steps {
    my ($sd) = @_;
    my ($pa, $pd) = @$sd{qw(per_step_accepted per_step_drafted)};
    my %by;
    for my $i (0 .. $#$pd) {
        $by{ $pd->[$i] } //= [ (0) x ($pd->[$i] + 1) ];
        $by{ $pd->[$i] }[ $pa->[$i] ]++;
    }
    return \%by;
}

# the keys as written: ascending numbers (a JSON object's order is lost
# once decoded)
sub by_length_keys_sorted {
    my ($raw) = @_;
    my @maps = $raw =~ /"acceptance_histogram_by_draft_length":\{([^}]*)\}/g;
    return 0 unless @maps;
    for my $m (@maps) {
        my @k = $m =~ /"(\d+)":/g;
        return 0 if join(',', @k) ne join(',', sort { $a <=> $b } @k);
    }
    return scalar @maps;
}

sub check_spec {
    my ($sd, $name, %o) = @_;
    my $h = $sd->{acceptance_histogram} // [];
    my $steps = $sd->{num_spec_steps};
    my $acc = $sd->{num_accepted_draft_tokens};
    my $dr = $sd->{num_draft_tokens};
    my $ok = @$h == $K + 1
        && $sd->{num_spec_tokens} == $K
        && sum0(@$h) == $steps
        && sum0(map { $_ * $h->[$_] } 0 .. $#$h) == $acc
        && $dr >= $acc && $dr <= $K * $steps && ($steps == 0 || $dr >= $steps)
        && $sd->{mean_acceptance_length}
           == ($steps ? 1 + $acc / $steps : 1.0)
        && $sd->{draft_acceptance_rate} == ($dr ? $acc / $dr : 0.0);
    if ($o{detailed}) {
        my ($pa, $pd) = @$sd{qw(per_step_accepted per_step_drafted)};
        $ok &&= ref $pa eq 'ARRAY' && @$pa == $steps && @$pd == $steps
            && sum0(@$pa) == $acc && sum0(@$pd) == $dr
            && !grep({ $pa->[$_] > $pd->[$_] || $pd->[$_] < 1
                       || $pd->[$_] > $K } 0 .. $#$pa);
        $ok &&= NginxLLM::json()->encode(by_length_from_steps($sd))
                eq NginxLLM::json()->encode(
                       $sd->{acceptance_histogram_by_draft_length});
    }
    $ok &&= by_length_ok($sd);
    $ok &&= by_length_keys_sorted($o{raw}) if defined $o{raw};
    ok($ok, "$name: the invariants hold (steps $steps, drafted $dr, "
            . "accepted $acc, histogram [@$h], by draft length "
            . NginxLLM::json()->encode(
                  $sd->{acceptance_histogram_by_draft_length}) . ')')
        or diag(NginxLLM::json()->encode($sd));
    push @spec_seen, $sd;
}

# --- the servers: speculating and plain, on the tied model ---

my $t = NginxLLM->new(http => $SPEC, locations => $LOC);
$t->start;
my $p = NginxLLM->new(http => 'llm_per_request_metrics on;',
                      locations => $PLAIN_LOC);
$p->start;

my $before = scrape($t);
my $m = $before;
ok(defined $m->value('vllm:spec_decode_num_drafts_total'),
   '/metrics: the spec-decode counters with llm_speculative');
is_deeply([ map { $_->[0]{position} } @{
              $m->series('vllm:spec_decode_num_accepted_tokens_per_pos_total')
          } ], [ 0 .. $K - 1 ], "per-position counter: position 0..$K-1");

# --- greedy output: identical with and without speculation ---

my (%plain, $accepted_any, $sd);
for my $i (0 .. $#prompts) {
    my $a = completion($p, '/v1/completions', $prompts[$i]);
    my $b = completion($t, '/v1/completions', $prompts[$i]);
    $plain{$i} = $a;
    is_deeply(tokens($b), tokens($a),
              "tied model, prompt $i: the same 40 tokens with speculation");
    check_spec($b->{json}{metrics}{speculative_decoding}, "prompt $i",
               raw => $b->{content});
    $accepted_any += $b->{json}{metrics}{speculative_decoding}
                     {num_accepted_draft_tokens};
}
ok($accepted_any > 0, "the tied model accepts drafts ($accepted_any)");

# penalties push the tied model off its repetition: drafts get rejected
my ($pen_drafted, $pen_accepted) = (0, 0);
for my $i (0 .. $#prompts) {
    my %pen = (frequency_penalty => 1.0, presence_penalty => 0.5);
    my $a = completion($p, '/v1/completions', $prompts[$i], %pen);
    my $b = completion($t, '/v1/completions', $prompts[$i], %pen);
    is_deeply(tokens($b), tokens($a),
              "penalties, prompt $i: the same 40 tokens");
    $sd = $b->{json}{metrics}{speculative_decoding};
    check_spec($sd, "penalties, prompt $i", raw => $b->{content});
    $pen_drafted += $sd->{num_draft_tokens};
    $pen_accepted += $sd->{num_accepted_draft_tokens};
}
ok($pen_drafted > $pen_accepted,
   "penalties: drafts rejected ($pen_accepted of $pen_drafted accepted)");

# the same prompts at once: sequences with and without drafts in one batch
my @bg = map { $t->bg_request('POST', '/v1/completions', {
    prompt => $prompts[$_], max_tokens => 40, logprobs => 0, %greedy }) }
    0 .. $#prompts;
my $same = 0;
for my $i (0 .. $#prompts) {
    my $r = $t->wait_bg($bg[$i]);
    $same++ if NginxLLM::json()->encode(tokens($r))
               eq NginxLLM::json()->encode(tokens($plain{$i}));
    push @spec_seen, $r->{json}{metrics}{speculative_decoding};
}
is($same, scalar @prompts, 'mixed batch: every output identical to plain');

# chat, with a long repetitive answer
my $chat = { messages => [{ role => 'user', content => 'Repeat: ab ab ab' }],
             max_tokens => 60, %greedy };
my @steps = map { scrape($_)->value('vllm:iteration_tokens_total_count') }
            $p, $t;
my $ca = $p->post('/v1/chat/completions', $chat);
my $cb = $t->post('/v1/chat/completions', $chat);
$steps[0] = scrape($p)->value('vllm:iteration_tokens_total_count') - $steps[0];
$steps[1] = scrape($t)->value('vllm:iteration_tokens_total_count') - $steps[1];
is($cb->{json}{choices}[0]{message}{content},
   $ca->{json}{choices}[0]{message}{content}, 'chat: the same answer');
$sd = $cb->{json}{metrics}{speculative_decoding};
check_spec($sd, 'chat', raw => $cb->{content});
ok($sd->{mean_acceptance_length} > 1.5,
   "chat: mean acceptance length $sd->{mean_acceptance_length} > 1.5");
is($steps[0], 60, 'chat without speculation: 60 engine steps for 60 tokens');
is($steps[1], 60 - $sd->{num_accepted_draft_tokens},
   "chat with speculation: $steps[1] steps, one fewer per accepted draft");
diag(sprintf 'chat: mean ITL %.3f ms with speculation, %.3f ms without',
             $cb->{json}{metrics}{mean_itl_ms},
             $ca->{json}{metrics}{mean_itl_ms});

# --- the JSON, as vLLM writes it ---

like($cb->{content},
     qr/"tokens_per_second":$NUM,"speculative_decoding":\{
        "mean_acceptance_length":$NUM,"draft_acceptance_rate":$NUM,
        "acceptance_histogram":\[\d+(?:,\d+){$K}\],
        "acceptance_histogram_by_draft_length":\{"\d+":\[[\d,]+\]
            (?:,"\d+":\[[\d,]+\])*\},"num_spec_steps":\d+,
        "num_accepted_draft_tokens":\d+,"num_draft_tokens":\d+,
        "num_spec_tokens":$K,"per_step_accepted":null,
        "per_step_drafted":null\}\}\}$/x,
     'summary: vLLM\'s keys in order, after the timing keys; per-step '
     . 'lists null');

my $r = $t->post('/detailed/v1/chat/completions', $chat);
check_spec($r->{json}{metrics}{speculative_decoding}, 'detailed',
           detailed => 1, raw => $r->{content});
# the same 60 tokens as the summary request, so the same steps
is_deeply($r->{json}{metrics}{speculative_decoding}
          {acceptance_histogram_by_draft_length},
          $cb->{json}{metrics}{speculative_decoding}
          {acceptance_histogram_by_draft_length},
          'summary and detailed: the same histogram by draft length');
for my $i (0 .. $#prompts) {
    my $d = completion($t, '/detailed/v1/completions', $prompts[$i]);
    check_spec($d->{json}{metrics}{speculative_decoding},
               "detailed, prompt $i", detailed => 1, raw => $d->{content});
}
like($r->{content}, qr/"per_step_accepted":\[\d+(?:,\d+)*\],
                       "per_step_drafted":\[\d+(?:,\d+)*\]\}\}\}$/x,
     'detailed: the per-step lists');

$r = $t->post('/notiming/v1/chat/completions', $chat);
like($r->{content},
     qr/"metrics":\{"time_to_first_token_ms":null,"generation_time_ms":null,
        "queue_time_ms":null,"mean_itl_ms":null,"tokens_per_second":null,
        "speculative_decoding":\{"mean_acceptance_length"/x,
     'llm_per_request_metrics off: timing keys null, speculative_decoding '
     . 'present');
check_spec($r->{json}{metrics}{speculative_decoding}, 'no timing',
           raw => $r->{content});

# zero steps: a one-token answer never verifies drafts
$r = $t->post('/detailed/v1/completions', { prompt => $prompts[0],
                                            max_tokens => 1, %greedy });
like($r->{content},
     qr/"speculative_decoding":\{"mean_acceptance_length":1\.0,
        "draft_acceptance_rate":0\.0,"acceptance_histogram":\[0(?:,0){$K}\],
        "acceptance_histogram_by_draft_length":\{\},"num_spec_steps":0,"num_accepted_draft_tokens":0,
        "num_draft_tokens":0,"num_spec_tokens":$K,
        "per_step_accepted":\[\],"per_step_drafted":\[\]\}/x,
     'zero steps: 1.0, 0.0, a histogram of zeros, no draft length, empty '
     . 'lists');
push @spec_seen, $r->{json}{metrics}{speculative_decoding};

# streams: on the final usage chunk only, null keys dropped
$r = $t->stream('/v1/chat/completions', { %$chat, stream => \1,
    stream_options => { include_usage => \1 } });
my @chunks = grep { ref } @{ $r->{events} };
is(scalar(grep { exists $_->{metrics} } @chunks), 1,
   'stream: one chunk has metrics');
$sd = $chunks[-1]{metrics}{speculative_decoding};
check_spec($sd, 'stream', raw => $r->{content});
ok(keys %{ $sd->{acceptance_histogram_by_draft_length} },
   'stream, summary: the histogram by draft length is in the usage chunk');
ok(!exists $sd->{per_step_accepted} && !exists $sd->{per_step_drafted},
   'stream, summary: the null per-step lists are dropped');
ok(exists $chunks[-1]{metrics}{time_to_first_token_ms},
   'stream: with the timing keys');

$r = $t->stream('/notiming/v1/completions', { prompt => $prompts[4],
    max_tokens => 20, stream => \1, stream_options => { include_usage => \1 },
    %greedy });
@chunks = grep { ref } @{ $r->{events} };
is_deeply([ keys %{ $chunks[-1]{metrics} } ], ['speculative_decoding'],
          'stream, timing off: the metrics object holds only '
          . 'speculative_decoding');
check_spec($chunks[-1]{metrics}{speculative_decoding}, 'stream, no timing',
           raw => $r->{content});

$r = $t->stream('/detailed/v1/completions', { prompt => $prompts[4],
    max_tokens => 20, stream => \1, stream_options => { include_usage => \1 },
    %greedy });
@chunks = grep { ref } @{ $r->{events} };
check_spec($chunks[-1]{metrics}{speculative_decoding}, 'stream, detailed',
           detailed => 1, raw => $r->{content});
ok($most_lengths > 1, "a request whose steps drafted different lengths "
   . "(up to $most_lengths rows in one map)");

# --- per-request numbers sum to the Prometheus counters ---

my $after;
my $deadline = time + 5;
do {
    $after = scrape($t);
} while ($after->value('vllm:num_requests_running') && time < $deadline);

sub delta {
    my ($name, @l) = @_;
    return $after->value($name, @l) - $before->value($name, @l);
}

is(delta('vllm:spec_decode_num_drafts_total'),
   sum0(map { $_->{num_spec_steps} } @spec_seen),
   'spec_decode_num_drafts_total = sum of num_spec_steps');
is(delta('vllm:spec_decode_num_draft_tokens_total'),
   sum0(map { $_->{num_draft_tokens} } @spec_seen),
   'spec_decode_num_draft_tokens_total = sum of num_draft_tokens');
is(delta('vllm:spec_decode_num_accepted_tokens_total'),
   sum0(map { $_->{num_accepted_draft_tokens} } @spec_seen),
   'spec_decode_num_accepted_tokens_total = sum of '
   . 'num_accepted_draft_tokens');
is(delta('vllm:spec_decode_num_draft_tokens_total'),
   sum0(map { my $by = $_->{acceptance_histogram_by_draft_length};
              sum0(map { $_ * sum0(@{ $by->{$_} }) } keys %$by) }
        @spec_seen),
   'spec_decode_num_draft_tokens_total = sum over the requests\' rows of '
   . "k' x steps");
my @pos = map {
    my $i = $_;
    sum0(map { my $h = $_->{acceptance_histogram};
               sum0(@$h[$i + 1 .. $K]) } @spec_seen)
} 0 .. $K - 1;
is_deeply([ map { delta('vllm:spec_decode_num_accepted_tokens_per_pos_total',
                        position => $_) } 0 .. $K - 1 ], \@pos,
          "accepted per position = steps that accepted more than it (@pos)");

# --- $llm_spec_acceptance_length ---

my ($line) = grep { m{^/v1/chat/completions } } @{ $t->wait_access_log(1) };
my @logged = map { log_fields($_)->{spec} }
             grep { m{^/v1/chat/completions } } @{ $t->access_log };
is($logged[0], sprintf('%.3f', $cb->{json}{metrics}{speculative_decoding}
                                {mean_acceptance_length}),
   '$llm_spec_acceptance_length = mean_acceptance_length, three decimals');
$line = $t->wait_log_line(qr{^/detailed/v1/completions .*completion=1 });
is(log_fields($line // '')->{spec}, '1.000',
   '$llm_spec_acceptance_length: 1.000 when nothing was drafted');
($line) = grep { m{^/v1/} } @{ $p->access_log };
is(log_fields($line // '')->{spec}, '-', 'without llm_speculative: "-"');

# with llm_speculative, requests the engine never saw (refused, /tokenize)
# have no value either: "-", nginx's not found, not an empty string
$t->post('/v1/completions', { prompt => 'x', max_tokens => 0 });
$t->post('/v1/tokenize', { prompt => 'x' });
for my $req ('/v1/completions 400', '/v1/tokenize 200') {
    $line = $t->wait_log_line(qr{^\Q$req\E });
    is(log_fields($line // '')->{spec}, '-',
       "\$llm_spec_acceptance_length with llm_speculative, $req: \"-\"");
}

# --- spec metrics none (a location): the timing object only ---

$r = $t->post('/nospec/v1/completions', { prompt => 'x', max_tokens => 3,
                                          %greedy });
is(scalar keys %{ $r->{json}{metrics} }, 5,
   'llm_per_request_spec_decode_metrics none: no speculative_decoding');

# --- n > 1: the metrics object is null (vLLM: one sequence only) ---

my %two = (prompt => $prompts[0], max_tokens => 8, n => 2,
           temperature => 1.0, seed => 5);
$r = $t->post('/v1/completions', \%two);
is($r->{status}, 200, 'n = 2: 200');
like($r->{content}, qr/"metrics":null\}$/, 'n = 2: "metrics": null');
$r = $t->stream('/v1/completions', { %two, stream => \1,
    stream_options => { include_usage => \1 } });
@chunks = grep { ref } @{ $r->{events} };
ok($chunks[-1]{usage} && !exists $chunks[-1]{metrics},
   'n = 2, stream: the usage chunk has no metrics');

$t->done;
$p->done;

# --- 12 draft tokens: the keys "10" and over after "9", as numbers ---

my $t12 = NginxLLM->new(locations => $PLAIN_LOC, http => <<'HTTP');
llm_speculative ngram tokens=12 lookup_min=1 lookup_max=4;
    llm_per_request_spec_decode_metrics summary;
HTTP
$t12->start;
$r = $t12->post('/v1/completions', { prompt => $prompts[4], max_tokens => 80,
                                     %greedy });
$sd = $r->{json}{metrics}{speculative_decoding};
my @lengths = map { $_ + 0 }
              ($r->{content} =~ /"acceptance_histogram_by_draft_length":\{([^}]*)\}/)[0]
              =~ /"(\d+)":/g;
ok(by_length_ok($sd) && @{ $sd->{acceptance_histogram} } == 13,
   'tokens=12: the invariants hold (' . NginxLLM::json()->encode(
       $sd->{acceptance_histogram_by_draft_length}) . ')');
ok((grep { $_ >= 10 } @lengths) && (grep { $_ < 10 } @lengths)
   && join(',', @lengths) eq join(',', sort { $a <=> $b } @lengths),
   "the keys in numeric order, not as strings: @lengths");
$t12->done;

# --- an untied model: drafts are proposed and rejected ---

my $untied = NginxLLM->model(tie => 0);
$t = NginxLLM->new(http => $SPEC, locations => $LOC, model => $untied);
$t->start;
$p = NginxLLM->new(http => 'llm_per_request_metrics on;',
                   locations => $PLAIN_LOC, model => $untied);
$p->start;
my $drafted = 0;
for my $i (0 .. $#prompts) {
    my $a = completion($p, '/v1/completions', $prompts[$i]);
    my $b = completion($t, '/v1/completions', $prompts[$i]);
    is_deeply(tokens($b), tokens($a),
              "untied model, prompt $i: the same tokens with speculation");
    $sd = $b->{json}{metrics}{speculative_decoding};
    check_spec($sd, "untied, prompt $i");
    $drafted += $sd->{num_draft_tokens};
}
diag("untied model: $drafted draft tokens in all (its output never "
     . 'repeats a token, so the n-gram lookup rarely finds one)');
$t->done;
$p->done;

# --- nginx -t: the engine verifies at most 15 drafts a step (not under
#     AddressSanitizer: nginx -t runs without it) ---

if (!NginxLLM::asan()) {
    my $c = NginxLLM->new;
    my ($rc, $out) = $c->test_config(
        http => 'llm_speculative ngram tokens=16;');
    my $msg = 'invalid value in "tokens=16", must be an integer from 1 to 15';
    like($out, qr/\[emerg\] "llm_speculative": \Q$msg\E/,
         'nginx -t: tokens=16 is refused');
    ($rc, $out) = $c->test_config(http => "llm_speculative ngram tokens=15;\n"
        . '    llm_per_request_spec_decode_metrics detailed;');
    is($rc, 0, 'nginx -t: tokens=15 with detailed spec metrics is accepted')
        or diag($out);
}

done_testing();
