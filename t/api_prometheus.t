#!/usr/bin/perl
# llm_prometheus (SPEC section 7): vLLM's names, types, labels, buckets and
# float formatting; promtool accepts the text with only the two lints
# vLLM's own names draw; the counters and histograms equal the sums of the
# per-request usage of a test run (an aborted stream included); gauges go
# back to 0 after a cancellation; prefix-cache hits (identical output,
# cached_tokens, fewer computed tokens, $llm_cached_tokens); queue time and
# the waiting gauge with llm_max_num_seqs 1; waiting by reason under load
# with two workers; prompt tokens by source, cached, computed in prefill;
# the longest of n samples; vllm:cache_config_info and the engine's
# blocks; 503 while no model serves.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;
use Prometheus;

my $LOC = <<'LOC';
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC

my %greedy = (temperature => 0, ignore_eos => \1);

sub log_fields {
    my ($line) = @_;
    return { map { /^(\w+)=(.*)$/ ? ($1, $2) : () } split / /, $line };
}

sub scrape {
    my ($t) = @_;
    my $r = $t->get('/metrics');
    die "GET /metrics: $r->{status}\n" unless $r->{status} == 200;
    return check_reasons(Prometheus::parse($r->{content}));
}

# every scrape of this file: the reasons sum to the waiting gauge in each
my ($n_scrapes, @unsummed) = (0);

sub check_reasons {
    my ($m) = @_;
    my $cap = $m->value('vllm:num_requests_waiting_by_reason',
                        reason => 'capacity');
    my $def = $m->value('vllm:num_requests_waiting_by_reason',
                        reason => 'deferred');
    my $w = $m->value('vllm:num_requests_waiting');
    $n_scrapes++;
    push @unsummed, sprintf('%s + %s != %s', $cap // 'none', $def // 'none',
                            $w // 'none')
        unless defined $cap && defined $def && defined $w
               && $cap + $def == $w;
    return $m;
}

# polls /metrics until cond($m) holds (the engine publishes once per step)
sub scrape_until {
    my ($t, $cond, $timeout) = @_;
    my $deadline = time + ($timeout // 10);
    my $m;
    while (time < $deadline) {
        $m = scrape($t);
        return $m if $cond->($m);
        sleep 0.02;
    }
    return $m;
}

sub sum_of { my $s = 0; $s += $_ for @_; return $s }

# reads SSE from a raw socket until n events arrived
sub read_events {
    my ($s, $n) = @_;
    my $buf = '';
    my $deadline = time + 30;
    while (time < $deadline) {
        my $got = sysread($s, my $chunk, 65536);
        last unless $got;
        $buf .= $chunk;
        my $count = () = $buf =~ /data: /g;
        return $buf if $count >= $n || $buf =~ /data: \[DONE\]/;
    }
    return $buf;
}

my $t = NginxLLM->new(http => 'llm_per_request_metrics on;',
                      locations => $LOC);
$t->start;

# --- the text before any request ---

my $r = $t->get('/metrics');
is($r->{status}, 200, 'GET /metrics: 200');
is($r->{headers}{'content-type'}, 'text/plain; version=0.0.4; charset=utf-8',
   'the Content-Type of prometheus_client');
my $m = Prometheus::parse($r->{content});
my $text = $r->{content};

my %types = (
    'vllm:num_requests_running' => 'gauge',
    'vllm:num_requests_waiting' => 'gauge',
    'vllm:num_requests_waiting_by_reason' => 'gauge',
    'vllm:kv_cache_usage_perc' => 'gauge',
    'vllm:prompt_tokens_total' => 'counter',
    'vllm:prompt_tokens_by_source_total' => 'counter',
    'vllm:prompt_tokens_cached_total' => 'counter',
    'vllm:cache_config_info' => 'gauge',
    'vllm:generation_tokens_total' => 'counter',
    'vllm:request_success_total' => 'counter',
    'vllm:num_preemptions_total' => 'counter',
    'vllm:prefix_cache_queries_total' => 'counter',
    'vllm:prefix_cache_hits_total' => 'counter',
    map({ ("vllm:$_" => 'histogram') } qw(
        time_to_first_token_seconds inter_token_latency_seconds
        request_time_per_output_token_seconds e2e_request_latency_seconds
        request_queue_time_seconds request_prefill_time_seconds
        request_decode_time_seconds request_inference_time_seconds
        request_prompt_tokens request_generation_tokens request_params_n
        request_params_max_tokens iteration_tokens_total
        request_prefill_kv_computed_tokens
        request_max_num_generation_tokens)),
);
is_deeply({ map { ($_ => $m->{type}{$_}) } keys %types }, \%types,
          'every metric of SPEC section 7 with its type');
is(scalar(grep { !$types{$_} } keys %{ $m->{type} }), 0,
   'and nothing else (no spec-decode counters without llm_speculative)');
ok(!grep({ !defined $m->{help}{$_} } keys %types), 'each has a # HELP line');

my @unsorted = grep {
    my @k = map { $_->[0] } @{ $_->{labels} };
    join(',', @k) ne join(',', sort @k)
} $m->samples;
is(scalar @unsorted, 0, 'labels in alphabetical order')
    or diag($unsorted[0]{line});
ok(!grep({ my %l = map { @$_ } @{ $_->{labels} };
           ($l{engine} // '') ne '0' || ($l{model_name} // '') ne 'tiny' }
         $m->samples),
   'every series has engine="0" and model_name="tiny"');
ok(!grep({ $_->{raw} !~ /^\d+\.\d+$/ } $m->samples),
   'values are written as Python floats (0.0)');
is_deeply([ map { $_->[0]{finished_reason} }
            @{ $m->series('vllm:request_success_total') } ],
          [qw(stop length abort error repetition)],
          'request_success_total: the five reasons pre-created');
like($text, qr/^vllm:time_to_first_token_seconds_bucket\{engine="0",le="0\.001",model_name="tiny"\} 0\.0$/m,
     'bucket bounds as floats: le="0.001"');
like($text, qr/^vllm:inter_token_latency_seconds_bucket\{engine="0",le="1\.0",model_name="tiny"\} 0\.0$/m,
     'le="1.0"');
like($text, qr/^vllm:e2e_request_latency_seconds_bucket\{engine="0",le="\+Inf",model_name="tiny"\} 0\.0$/m,
     'le="+Inf"');
is_deeply([ map { $_->[2] } grep { $_->[0]{le} ne '+Inf' }
            @{ $m->series('vllm:time_to_first_token_seconds_bucket') } ],
          [ ('0.0') x 22 ], 'TTFT: vLLM\'s 22 buckets');
is(join(',', map { $_->[0]{le} }
             @{ $m->series('vllm:request_queue_time_seconds_bucket') }),
   '0.3,0.5,0.8,1.0,1.5,2.0,2.5,5.0,10.0,15.0,20.0,30.0,40.0,50.0,60.0,'
   . '120.0,240.0,480.0,960.0,1920.0,7680.0,+Inf',
   'request phase buckets: vLLM\'s');
is(join(',', map { $_->[0]{le} }
             @{ $m->series('vllm:request_prompt_tokens_bucket') }),
   '1.0,2.0,5.0,10.0,20.0,50.0,100.0,200.0,+Inf',
   'token buckets: 1-2-5 up to llm_max_model_len 256');
is(join(',', map { $_->[0]{le} }
             @{ $m->series('vllm:request_params_n_bucket') }),
   '1.0,2.0,5.0,10.0,20.0,+Inf', 'request_params_n buckets');
for my $h (qw(request_prefill_kv_computed_tokens
              request_max_num_generation_tokens)) {
    is(join(',', map { $_->[0]{le} } @{ $m->series("vllm:${h}_bucket") }),
       '1.0,2.0,5.0,10.0,20.0,50.0,100.0,200.0,+Inf',
       "$h: 1-2-5 buckets up to llm_max_model_len, as prompt tokens");
}

# the newer series: vLLM's HELP texts, their labels, all pre-created
my %help = (
    'vllm:num_requests_waiting_by_reason' => "Number of waiting requests by "
        . "reason. Reason labels: 'capacity' = waiting for scheduling "
        . "capacity; 'deferred' = deferred by transient constraints (LoRA "
        . "budget, KV transfer, blocked status). Sum of all reasons equals "
        . 'vllm:num_requests_waiting.',
    'vllm:prompt_tokens_by_source_total' => 'Number of prompt tokens by '
        . 'source.',
    'vllm:prompt_tokens_cached_total' => 'Number of cached prompt tokens '
        . '(local + external).',
    'vllm:request_prefill_kv_computed_tokens' => 'Histogram of new KV tokens '
        . 'computed during prefill (excluding cached tokens).',
    'vllm:request_max_num_generation_tokens' => 'Histogram of maximum number '
        . 'of requested generation tokens.',
    'vllm:cache_config_info' => 'Information of the LLMEngine CacheConfig',
);
is_deeply({ map { ($_ => $m->{help}{$_}) } keys %help }, \%help,
          'the newer series have vLLM\'s HELP texts');
is_deeply([ map { [ $_->[0]{reason}, $_->[2] ] }
            @{ $m->series('vllm:num_requests_waiting_by_reason') } ],
          [ [ 'capacity', '0.0' ], [ 'deferred', '0.0' ] ],
          'num_requests_waiting_by_reason: capacity and deferred, both 0');
is_deeply([ map { [ $_->[0]{source}, $_->[2] ] }
            @{ $m->series('vllm:prompt_tokens_by_source_total') } ],
          [ [ 'local_compute', '0.0' ], [ 'local_cache_hit', '0.0' ],
            [ 'external_kv_transfer', '0.0' ] ],
          'prompt_tokens_by_source: vLLM\'s three sources, all 0');
is($m->value('vllm:prompt_tokens_cached_total'), 0, 'prompt_tokens_cached 0');

# cache_config_info: the engine's blocks, as llm_kv_cache_size 16m makes
# them of the model's layers, K/V heads and head size (f32 on the CPU),
# and as the engine logged them when it was ready
{
    my $cfg = NginxLLM::json()->decode(
        NginxLLM::slurp(NginxLLM->model . '/config.json'));
    my $hd = $cfg->{head_dim}
             // $cfg->{hidden_size} / $cfg->{num_attention_heads};
    my $per_block = $cfg->{num_hidden_layers} * 2
                    * $cfg->{num_key_value_heads} * $hd * 4 * 16;
    my $want = int(16 * 1024 * 1024 / $per_block);
    my ($logged) = $t->error_log =~ /engine ready on .*, KV cache (\d+) blocks of 16 tokens/;
    my $info = $m->series('vllm:cache_config_info');
    is(scalar @$info, 1, 'cache_config_info: one series');
    is_deeply($info->[0][0], {
        block_size => 16, cache_dtype => 'auto',
        enable_prefix_caching => 'True', engine => '0',
        gpu_memory_utilization => '0.9', model_name => 'tiny',
        num_gpu_blocks => $want }, "cache_config_info: block_size 16, "
        . "num_gpu_blocks $want (16 MiB / $per_block bytes a block), the "
        . 'cache\'s settings as Python prints them');
    is($logged, $want, 'the engine logged the same block count when ready');
    is($info->[0][2], '1.0', 'an info gauge: 1.0');
}

# promtool: nothing but the two lints vLLM's names draw
SKIP: {
    skip 'promtool is not installed (tools/install_deps.sh)', 2
        unless -x '/usr/bin/promtool';
    my $file = $t->dir . '/metrics.txt';
    open my $fh, '>', $file or die;
    print $fh $text;
    close $fh;
    my $out = `promtool check metrics < $file 2>&1`;
    my $rc = $? >> 8;
    my @other = grep {
        !/ metric names should not contain ':'$/
        && !/^vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix$/
    } split /\n/, $out;
    ok($rc == 0 || $rc == 3, "promtool exit status $rc (0, or 3 for lints)");
    is(scalar @other, 0, 'promtool: only the two known lints')
        or diag(join "\n", @other);
}

# --- a run: counters = sums of per-request usage ---

my $before = scrape($t);
my (@usage, %finish);
my $prompt_sum = 0;
my $completion_sum = 0;
my $max_tokens_sum = 0;

# length, non-streaming chat
$r = $t->post('/v1/chat/completions', {
    messages => [{ role => 'user', content => 'Count the sheep.' }],
    max_tokens => 5, %greedy });
is($r->{json}{choices}[0]{finish_reason}, 'length', 'run: a length finish');
my $first_text = $r->{json}{choices}[0]{message}{content};
push @usage, $r->{json}{usage};
$max_tokens_sum += 5;
$finish{length}++;

# stop: a stop string that the greedy answer contains
$r = $t->post('/v1/chat/completions', {
    messages => [{ role => 'user', content => 'Count the sheep.' }],
    max_tokens => 5, stop => [ substr($first_text, 0, 1) ], %greedy });
is($r->{json}{choices}[0]{finish_reason}, 'stop', 'run: a stop finish');
push @usage, $r->{json}{usage};
$max_tokens_sum += 5;
$finish{stop}++;

# completions, streamed with usage
$r = $t->stream('/v1/completions', { prompt => 'Once upon a time',
    max_tokens => 7, stream => \1, stream_options => { include_usage => \1 },
    %greedy });
my ($last) = grep { ref && $_->{usage} } @{ $r->{events} };
is($last->{usage}{completion_tokens}, 7, 'run: a stream with usage');
push @usage, $last->{usage};
$max_tokens_sum += 7;
$finish{length}++;

# a long prompt twice: the second takes the first's blocks from the cache
for (1 .. 2) {
    $r = $t->post('/v1/completions', {
        prompt => join(' ', map { "sheep$_" } 1 .. 40), max_tokens => 3,
        %greedy });
    push @usage, $r->{json}{usage};
    $max_tokens_sum += 3;
    $finish{length}++;
}

# a validation error never reaches the engine
$r = $t->post('/v1/completions', { prompt => 'x', temperature => -1 });
is($r->{status}, 400, 'run: a 400 (not counted)');

# an aborted stream: billed in the access log
my $s = $t->raw_socket('POST', '/v1/chat/completions', {
    messages => [{ role => 'user', content => 'Go on and on.' }],
    max_tokens => 200, stream => \1, %greedy });
read_events($s, 3);
close $s;
my $f = log_fields($t->wait_log_line(qr/finish=abort/) // '');
ok($f->{completion} >= 1, "run: an aborted stream ($f->{completion} tokens)");
my $aborted = { prompt_tokens => $f->{prompt},
                completion_tokens => $f->{completion} };
$max_tokens_sum += 200;
$finish{abort}++;

# gauges back to 0 once the engine let go of the aborted request
my $after = scrape_until($t, sub {
    my ($m) = @_;
    ($m->value('vllm:request_success_total', finished_reason => 'abort')
     // 0) == 1 && $m->value('vllm:num_requests_running') == 0
    && $m->value('vllm:kv_cache_usage_perc') == 0 });
is($after->value('vllm:num_requests_running'), 0,
   'after the abort: vllm:num_requests_running 0');
is($after->value('vllm:num_requests_waiting'), 0,
   'vllm:num_requests_waiting 0');
is($after->value('vllm:kv_cache_usage_perc'), 0,
   'vllm:kv_cache_usage_perc 0: the cancelled request\'s blocks are free');

sub delta {
    my ($name, @l) = @_;
    return ($after->value($name, @l) // 0) - ($before->value($name, @l) // 0);
}

$prompt_sum += $_->{prompt_tokens} for @usage, $aborted;
$completion_sum += $_->{completion_tokens} for @usage;
my $n = @usage + 1;

is(delta('vllm:prompt_tokens_total'), $prompt_sum,
   "prompt_tokens_total = sum of usage.prompt_tokens ($prompt_sum)");

# The aborted stream's log line bills what the engine generated until the
# cancel, which is exactly what it counted: no token is kept after it.
my $abort_tokens = delta('vllm:generation_tokens_total') - $completion_sum;
is($abort_tokens, $aborted->{completion_tokens},
   "generation_tokens_total = sum of completion_tokens ($completion_sum) "
   . "+ the aborted stream's, as billed ($abort_tokens)");
$completion_sum += $abort_tokens;
for my $why (qw(stop length abort error repetition)) {
    is(delta('vllm:request_success_total', finished_reason => $why),
       $finish{$why} // 0, "request_success_total{finished_reason=\"$why\"}");
}
is(delta('vllm:num_preemptions_total'), 0, 'no preemptions');

# where the prompt tokens came from: the cache (usage's cached_tokens; the
# long prompt's second request) or computed
my $cached_sum = sum_of(map { $_->{prompt_tokens_details}{cached_tokens} }
                        @usage) + $f->{cached};
ok($usage[-1]{prompt_tokens_details}{cached_tokens} > 0,
   "the run has prefix-cache hits ($cached_sum tokens)");
is(delta('vllm:prompt_tokens_by_source_total', source => 'local_cache_hit'),
   $cached_sum, 'prompt_tokens_by_source{local_cache_hit} = sum of '
   . "cached_tokens ($cached_sum)");
is(delta('vllm:prompt_tokens_by_source_total', source => 'local_compute'),
   $prompt_sum - $cached_sum, 'prompt_tokens_by_source{local_compute} = '
   . 'sum of prompt_tokens - cached_tokens (' . ($prompt_sum - $cached_sum)
   . ')');
is(delta('vllm:prompt_tokens_by_source_total',
         source => 'external_kv_transfer'), 0,
   'prompt_tokens_by_source{external_kv_transfer}: 0, no KV transfer');
is(delta('vllm:prompt_tokens_by_source_total', source => 'local_compute')
   + delta('vllm:prompt_tokens_by_source_total', source => 'local_cache_hit'),
   delta('vllm:prompt_tokens_total'),
   'local_compute + local_cache_hit = prompt_tokens_total');
is(delta('vllm:prompt_tokens_cached_total'), $cached_sum,
   'prompt_tokens_cached = local_cache_hit');
is(delta('vllm:request_prefill_kv_computed_tokens_sum'),
   $prompt_sum - $cached_sum,
   'request_prefill_kv_computed_tokens_sum = sum of prompt - cached');

for my $h (qw(e2e_request_latency_seconds request_queue_time_seconds
              request_inference_time_seconds request_prefill_time_seconds
              request_decode_time_seconds time_to_first_token_seconds
              request_time_per_output_token_seconds request_prompt_tokens
              request_generation_tokens request_params_n
              request_params_max_tokens request_prefill_kv_computed_tokens
              request_max_num_generation_tokens)) {
    is(delta("vllm:${h}_count"), $n,
       "$h: one observation per request ($n, the abort included)");
}
is(delta('vllm:request_prompt_tokens_sum'), $prompt_sum,
   'request_prompt_tokens_sum = sum of prompt tokens');
is(delta('vllm:request_generation_tokens_sum'), $completion_sum,
   'request_generation_tokens_sum = sum of completion tokens');
is(delta('vllm:request_params_max_tokens_sum'), $max_tokens_sum,
   'request_params_max_tokens_sum = sum of max_tokens');
is(delta('vllm:request_params_n_sum'), $n, 'request_params_n_sum: n = 1');
is(delta('vllm:request_max_num_generation_tokens_sum'), $completion_sum,
   'request_max_num_generation_tokens_sum: n = 1, each request\'s '
   . 'completion tokens');
is(delta('vllm:inter_token_latency_seconds_count'), $completion_sum - $n,
   'inter_token_latency: one observation per token after the first');

# every histogram: cumulative buckets, +Inf = _count
my @bad;
for my $name (grep { $after->{type}{$_} eq 'histogram' }
              keys %{ $after->{type} }) {
    my $b = $after->series("${name}_bucket");
    my $prev = 0;
    for (@$b) {
        push @bad, "$name le=$_->[0]{le}" if $_->[1] < $prev;
        $prev = $_->[1];
    }
    push @bad, "$name +Inf != count"
        if $b->[-1][0]{le} ne '+Inf'
           || $b->[-1][1] != $after->value("${name}_count");
}
is(scalar @bad, 0, 'histograms: cumulative buckets, +Inf = _count')
    or diag(join ', ', @bad);

# the sums are the per-request metrics' own intervals (seconds)
my $ttft_sum = 0;
$r = $t->post('/v1/completions', { prompt => 'Timing', max_tokens => 4,
                                   %greedy });
my $m0 = $after;
$after = scrape($t);
my $rm = $r->{json}{metrics};
my $dp = $after->value('vllm:request_prefill_time_seconds_sum')
         - $m0->value('vllm:request_prefill_time_seconds_sum');
my $dd = $after->value('vllm:request_decode_time_seconds_sum')
         - $m0->value('vllm:request_decode_time_seconds_sum');
ok(abs($dp * 1000 - $rm->{time_to_first_token_ms}) < 1e-6,
   'request_prefill_time_seconds observes time_to_first_token_ms / 1000');
ok(abs($dd * 1000 - $rm->{generation_time_ms}) < 1e-6,
   'request_decode_time_seconds observes generation_time_ms / 1000');
my $dt = $after->value('vllm:time_to_first_token_seconds_sum')
         - $m0->value('vllm:time_to_first_token_seconds_sum');
my $de = $after->value('vllm:e2e_request_latency_seconds_sum')
         - $m0->value('vllm:e2e_request_latency_seconds_sum');
ok($dt > $dp && $dt < $dp + 5,
   'time_to_first_token_seconds starts earlier, when nginx had the body '
   . sprintf('(%.3f ms before scheduling)', ($dt - $dp) * 1000));
ok($de >= $dt + $dd - 1e-9, 'e2e_request_latency >= TTFT + decode');

# --- prefix caching: identical output, cached tokens, less computed ---

my $long = join ' ', map { "word$_" } 1 .. 60;
my %req = (prompt => $long, max_tokens => 6, %greedy);
$before = scrape($t);
my $cold = $t->post('/v1/completions', \%req);
my $mid = scrape($t);
my $warm = $t->post('/v1/completions', \%req);
$after = scrape($t);
my ($uc, $uw) = ($cold->{json}{usage}, $warm->{json}{usage});
my $cached = $uw->{prompt_tokens_details}{cached_tokens};
is($cold->{json}{choices}[0]{text}, $warm->{json}{choices}[0]{text},
   'prefix cache: the same greedy output');
is($uc->{prompt_tokens_details}{cached_tokens}, 0, 'the first: 0 cached');
ok($cached > 0 && $cached % 16 == 0 && $cached < $uw->{prompt_tokens},
   "the second: $cached of $uw->{prompt_tokens} prompt tokens cached "
   . '(whole 16-token blocks, never the last token)');
is($warm->{json}{usage}{prompt_tokens}, $uc->{prompt_tokens},
   'prompt_tokens counts cached tokens too');
is($mid->value('vllm:prefix_cache_hits_total')
   - $before->value('vllm:prefix_cache_hits_total'), 0,
   'prefix_cache_hits_total: +0 for the first');
is($after->value('vllm:prefix_cache_hits_total')
   - $mid->value('vllm:prefix_cache_hits_total'), $cached,
   'prefix_cache_hits_total: +cached_tokens for the second');
is($after->value('vllm:prefix_cache_queries_total')
   - $mid->value('vllm:prefix_cache_queries_total'), $uw->{prompt_tokens},
   'prefix_cache_queries_total: +prompt_tokens');
my $computed_cold = $mid->value('vllm:iteration_tokens_total_sum')
                    - $before->value('vllm:iteration_tokens_total_sum');
my $computed_warm = $after->value('vllm:iteration_tokens_total_sum')
                    - $mid->value('vllm:iteration_tokens_total_sum');
is($computed_cold, $uc->{prompt_tokens} + 6 - 1,
   "computed tokens, cold: prompt + 5 decodes ($computed_cold)");
is($computed_warm, $computed_cold - $cached,
   "computed tokens, warm: $cached fewer ($computed_warm)");
sub diff2 {
    my ($a, $b, $name, @l) = @_;
    return $b->value($name, @l) - $a->value($name, @l);
}
is(diff2($mid, $after, 'vllm:prompt_tokens_by_source_total',
         source => 'local_cache_hit'), $cached,
   "warm: local_cache_hit +$cached");
is(diff2($mid, $after, 'vllm:prompt_tokens_by_source_total',
         source => 'local_compute'), $uw->{prompt_tokens} - $cached,
   'warm: local_compute +' . ($uw->{prompt_tokens} - $cached));
is(diff2($before, $mid, 'vllm:prompt_tokens_by_source_total',
         source => 'local_compute'), $uc->{prompt_tokens},
   "cold: local_compute +$uc->{prompt_tokens}, nothing cached");
is(diff2($mid, $after, 'vllm:prompt_tokens_cached_total'), $cached,
   "warm: prompt_tokens_cached +$cached");
is(diff2($before, $after, 'vllm:request_prefill_kv_computed_tokens_sum'),
   2 * $uc->{prompt_tokens} - $cached,
   'request_prefill_kv_computed_tokens: the cold prompt, then the warm one '
   . 'less its cached tokens');
my $warm_kv = $uw->{prompt_tokens} - $cached;
my @kv_bad = grep {
    my $le = $_->[0]{le};
    diff2($mid, $after, 'vllm:request_prefill_kv_computed_tokens_bucket',
          le => $le) != (($le eq '+Inf' || $warm_kv <= $le) ? 1 : 0)
} @{ $after->series('vllm:request_prefill_kv_computed_tokens_bucket') };
is(scalar @kv_bad, 0, "the warm one's $warm_kv computed tokens: in every "
   . 'cumulative bucket from the first bound above it');
diag(sprintf 'TTFT %.3f ms cached vs %.3f ms cold (timing: not checked)',
            $warm->{json}{metrics}{time_to_first_token_ms},
            $cold->{json}{metrics}{time_to_first_token_ms});
my $line = $t->wait_log_line(qr/cached=[1-9]/);
is(log_fields($line // '')->{cached}, $cached,
   '$llm_cached_tokens = usage.prompt_tokens_details.cached_tokens');

$r = $t->stream('/v1/completions', { %req, stream => \1,
    stream_options => { include_usage => \1 } });
($last) = grep { ref && $_->{usage} } @{ $r->{events} };
is($last->{usage}{prompt_tokens_details}{cached_tokens}, $cached,
   'stream: cached_tokens in the final usage chunk');
ok(!grep({ ref && @{ $_->{choices} } && $_->{usage} } @{ $r->{events} }),
   'stream: no usage on content chunks');

# n > 1: vLLM observes the longest of a prompt's samples once, when they
# all ended (two prompts of three samples: two observations)
$before = scrape($t);
$r = $t->post('/v1/completions', { prompt => [ 'One', 'Two words' ],
                                   n => 3, max_tokens => 4, ignore_eos => \1,
                                   temperature => 1.0, seed => 3 });
is(scalar @{ $r->{json}{choices} // [] }, 6, 'two prompts, n = 3: six choices');
$after = scrape_until($t, sub {
    $_[0]->value('vllm:request_max_num_generation_tokens_count')
    - $before->value('vllm:request_max_num_generation_tokens_count') >= 2 });
is(diff2($before, $after, 'vllm:request_generation_tokens_count'), 6,
   'request_generation_tokens: six sequences');
is(diff2($before, $after, 'vllm:request_max_num_generation_tokens_count'), 2,
   'request_max_num_generation_tokens: once per prompt');
is(diff2($before, $after, 'vllm:request_max_num_generation_tokens_sum'), 8,
   'the longest of each prompt\'s three: 4 and 4');

# HEAD and a wrong method
$r = $t->request('HEAD', '/metrics');
is($r->{status}, 200, 'HEAD /metrics: 200');
$r = $t->post('/metrics', {});
is($r->{status}, 405, 'POST /metrics: 405');

$t->done;

# --- llm_enable_prefix_caching off: no details, no queries ---

my $nc = NginxLLM->new(http => 'llm_enable_prefix_caching off;',
                       locations => $LOC);
$nc->start;
$nc->post('/v1/completions', \%req);
$r = $nc->post('/v1/completions', \%req);
like($r->{content}, qr/"prompt_tokens_details":null/,
     'prefix caching off: "prompt_tokens_details": null');
$m = scrape($nc);
is($m->value('vllm:prefix_cache_queries_total'), 0,
   'prefix caching off: no queries counted');
$nc->done;

# --- llm_max_num_seqs 1: the waiting gauge and queue time ---

my $q = NginxLLM->new(http => "llm_per_request_metrics on;\n"
                              . "    llm_max_num_seqs 1;",
                      engine => <<'ENGINE', locations => $LOC);
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 2048;
    llm_kv_cache_size 32m;
    llm_thread_pool llm;
ENGINE
$q->start;
$s = $q->raw_socket('POST', '/v1/chat/completions', {
    messages => [{ role => 'user', content => 'A long answer.' }],
    max_tokens => 2000, stream => \1, %greedy });
read_events($s, 2);
# (a raw socket, not bg_request: a forked child would keep $s open)
my $s2 = $q->raw_socket('POST', '/v1/chat/completions', {
    messages => [{ role => 'user', content => 'Me next.' }],
    max_tokens => 2, %greedy });
$m = scrape_until($q, sub {
    ($_[0]->value('vllm:num_requests_waiting') // 0) == 1 });
is($m->value('vllm:num_requests_waiting'), 1,
   'llm_max_num_seqs 1: the second request waits (gauge 1)');
is($m->value('vllm:num_requests_waiting_by_reason', reason => 'capacity'), 1,
   'it waits for capacity');
is($m->value('vllm:num_requests_running'), 1, 'one runs');
ok($m->value('vllm:kv_cache_usage_perc') > 0,
   'kv_cache_usage_perc > 0 while it runs');
# the second was seen waiting before this sleep, and cannot be scheduled
# before the first ends; the first (2000 tokens) ends when its client
# leaves -- it is billed as an abort -- so the second waits 0.5 s at least
sleep 0.5;
close $s;
my $resp = do { local $/; <$s2> } // '';
close $s2;
my ($status) = $resp =~ m{^HTTP/1\.1 (\d+)};
is($status, 200, 'the second request completes once the first left');
my ($body) = $resp =~ /\r\n\r\n(.*)\z/s;
my $qt = (NginxLLM::decode_json_safe($body // '') // {})->{metrics}
         {queue_time_ms} // 0;
$m = scrape_until($q, sub {
    $_[0]->value('vllm:request_queue_time_seconds_count') == 2
    && $_[0]->value('vllm:kv_cache_usage_perc') == 0 });
$f = log_fields($q->wait_log_line(qr/finish=abort/, 60) // '');
is($f->{finish}, 'abort', 'the first ran until its client left (finish=abort)');
ok($qt > 400, "so the second's queue_time_ms is $qt (the first ran 0.5 s more)");
ok(abs($m->value('vllm:request_queue_time_seconds_sum') * 1000
       - ($qt + $f->{queue})) < 0.01,
   'request_queue_time_seconds_sum = the two queue times');
is($m->value("vllm:request_queue_time_seconds_bucket", le => "0.3"), 1,
   'the waiting one lands above 0.3 s');
is($m->value('vllm:kv_cache_usage_perc'), 0, 'idle: kv_cache_usage_perc 0');
$q->done;

# --- two workers, one engine, saturated: waiting by reason ---

my $sat = NginxLLM->new(workers => 2, http => 'llm_max_num_seqs 2;',
                        engine => <<'ENGINE', locations => $LOC);
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 2048;
    llm_kv_cache_size 32m;
    llm_thread_pool llm;
ENGINE
$sat->start;
my @long = map { $sat->raw_socket('POST', '/v1/chat/completions', {
    messages => [{ role => 'user', content => "Long answer $_." }],
    max_tokens => 2000, stream => \1, %greedy }) } 1 .. 2;
read_events($_, 2) for @long;
my @short = map { $sat->raw_socket('POST', '/v1/completions', {
    prompt => "Short $_", max_tokens => 2, %greedy }) } 1 .. 3;
$m = scrape_until($sat, sub {
    ($_[0]->value('vllm:num_requests_waiting') // 0) == 3 });
is($m->value('vllm:num_requests_running'), 2,
   'two workers, llm_max_num_seqs 2: two run');
is($m->value('vllm:num_requests_waiting'), 3, 'three wait');
is_deeply([ map { $_->[1] }
            @{ $m->series('vllm:num_requests_waiting_by_reason') } ],
          [ 3, 0 ], 'all three for capacity, none deferred');
# every scrape through either worker: the same snapshot, the same sum
scrape($sat) for 1 .. 10;
close $_ for @long;
my $ok_short = 0;
for my $sk (@short) {
    my $resp = do { local $/; <$sk> } // '';
    close $sk;
    $ok_short++ if $resp =~ m{^HTTP/1\.1 200 };
}
is($ok_short, 3, 'the three complete once the long ones left');
$m = scrape_until($sat, sub {
    $_[0]->value('vllm:num_requests_running') == 0
    && $_[0]->value('vllm:num_requests_waiting') == 0 });
is_deeply([ map { $_->[1] }
            @{ $m->series('vllm:num_requests_waiting_by_reason') } ],
          [ 0, 0 ], 'idle again: 0 and 0');
$sat->done;

is(scalar @unsummed, 0, "in every one of $n_scrapes scrapes, capacity + "
   . 'deferred = vllm:num_requests_waiting') or diag(join '; ', @unsummed);

# --- no model: 503 like the API ---

my $bad = NginxLLM->new(model => '/nonexistent/model', locations => $LOC);
$bad->start(wait => 0);
my $deadline = time + 10;
do {
    $r = $bad->get('/metrics');
    sleep 0.05;
} while ($r->{json} && $r->{json}{error}{message} =~ /loading/
         && time < $deadline);
is($r->{status}, 503, 'a model that failed to load: /metrics answers 503');
like($r->{json}{error}{message} // '', qr/model not loaded: /,
     'with the reason, as the API');
$bad->done;

# --- nginx -t (not under AddressSanitizer: nginx -t runs without it) ---

if (!NginxLLM::asan()) {
    my $c = NginxLLM->new(model => '', locations => <<'LOC');
        location = /metrics { llm_prometheus; }
LOC
    my ($rc, $out) = $c->test_config;
    isnt($rc, 0, 'nginx -t: llm_prometheus without llm_model fails');
    like($out, qr/\[emerg\] "llm_prometheus" requires "llm_model"/,
         'with an [emerg] naming it');
}

done_testing();
