#!/usr/bin/perl
# Per-request metrics (SPEC section 6) and the $llm_* variables (section 5):
# the five fields and their null rules, their arithmetic, where they appear
# in bodies and streams, llm_force_include_usage, queue time behind another
# request, access-log lines for completed and aborted streams, cancellation
# on disconnect, and llm_log_stats off.
#
# The timings are bound by the client's own clock (CLOCK_MONOTONIC, the
# engine's clock): the engine stamps `queued` after the client started
# sending and the first token before the client can receive it, so
# queue + ttft <= the client's time to the first chunk with a token id and
# queue + ttft + generation <= the client's time to the last byte.  No
# check races a clock: a request that must wait is made to wait (it is
# seen waiting on /metrics before the one ahead of it may end), and a
# client that leaves does so after its stream started.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use Time::HiRes qw(sleep time clock_gettime CLOCK_MONOTONIC);
use NginxLLM;
use Prometheus;

my $NUM = qr/-?\d+(?:\.\d+)?(?:e[-+]\d+)?/;
my @msgs = ({ role => 'user', content => 'Tell me a story.' });
my %greedy = (messages => \@msgs, temperature => 0, ignore_eos => \1);

sub close_to {
    my ($got, $want, $name) = @_;
    my $ok = defined $got && defined $want
             && abs($got - $want) <= 1e-9 * (abs($want) + 1e-9) + 1e-9;
    ok($ok, $name) or diag("got " . ($got // 'undef') . ", want "
                           . ($want // 'undef'));
}

sub log_fields {
    my ($line) = @_;
    return { map { /^(\w+)=(.*)$/ ? ($1, $2) : () } split / /, $line };
}

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

# the request's id, from the first chunk of a stream
sub stream_id { ($_[0] =~ /"id":"(chatcmpl-[0-9a-f]+)"/)[0] // 'none' }

sub mono { clock_gettime(CLOCK_MONOTONIC) }

# A POST timed on the client: t0 before connecting, t_token once the first
# chunk with a generated token id (return_token_ids) was read, t_end after
# the last byte.  Returns the decoded body (or the stream's usage chunk)
# and the two intervals in ms.
sub timed_post {
    my ($srv, $path, $body) = @_;
    my ($raw, $t_token) = ('');
    my $t0 = mono();
    my $r = $srv->request('POST', $path, { %$body, return_token_ids => \1 },
        data_callback => sub {
            $raw .= $_[0];
            $t_token //= mono()
                if $body->{stream} && $raw =~ /"token_ids":\[\d/;
        });
    my $t_end = mono();
    my $json = NginxLLM::decode_json_safe($raw);
    if ($body->{stream}) {
        ($json) = grep { ref && $_->{usage} }
                  map { NginxLLM::decode_json_safe($_) }
                  map { /^data: (.*)$/s ? $1 : () } split /\n\n/, $raw;
    }
    return ($json // {}, defined $t_token ? 1000 * ($t_token - $t0) : undef,
            1000 * ($t_end - $t0));
}

# the bounds by the client's clock; 1e-6 ms for the sums' rounding
sub within_client_clock {
    my ($name, $m, $to_token, $to_end) = @_;
    my $start = ($m->{queue_time_ms} // 0) + ($m->{time_to_first_token_ms} // 0);
    my $all = $start + ($m->{generation_time_ms} // 0);
    ok(defined $m->{time_to_first_token_ms} && defined $m->{queue_time_ms}
       && defined $m->{generation_time_ms}
       && $all <= $to_end + 1e-6,
       sprintf("$name: queue + ttft + generation (%.3f ms) <= the client's "
               . 'time to the last byte (%.3f ms)', $all, $to_end));
    return unless $name =~ /stream/;
    ok(defined $to_token && $m->{time_to_first_token_ms} <= $start + 1e-6
       && $start <= $to_token + 1e-6,
       sprintf("$name: ttft (%.3f ms) <= queue + ttft (%.3f ms) <= the "
               . 'client\'s time to the first token chunk (%s ms)',
               $m->{time_to_first_token_ms} // -1, $start,
               defined $to_token ? sprintf('%.3f', $to_token) : 'none'));
}

# a max_model_len that lets a stream run for seconds: one that must be
# cancelled cannot end by itself first
my $LONG = <<'ENGINE';
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 4096;
    llm_kv_cache_size 16m;
    llm_thread_pool llm;
ENGINE

my $t = NginxLLM->new(
    http => 'llm_per_request_metrics on;',
    engine => $LONG,
    locations => <<'LOC');
        location /v1/ { llm_api; }
        location /off/v1/ { llm_api; llm_per_request_metrics off; }
        location /forced/v1/ { llm_api; llm_force_include_usage on; }
        location = /health { llm_health; }
LOC
$t->start;

# --- the metrics object in a body: five keys, vLLM's order ---

my $r = $t->post('/v1/chat/completions', { %greedy, max_tokens => 8 });
like($r->{content},
     qr/"kv_transfer_params":null,"metrics":\{"time_to_first_token_ms":$NUM,
        "generation_time_ms":$NUM,"queue_time_ms":$NUM,"mean_itl_ms":$NUM,
        "tokens_per_second":$NUM\}\}$/x,
     'metrics: the five fields in vLLM\'s order, last in the body');
my $m = $r->{json}{metrics};
my $n = $r->{json}{usage}{completion_tokens};
is($n, 8, 'N = completion_tokens = 8');
ok($m->{time_to_first_token_ms} > 0, 'ttft > 0');
ok($m->{generation_time_ms} > 0, 'generation time > 0 for 8 tokens');
ok($m->{queue_time_ms} >= 0, 'queue time >= 0');
close_to($m->{tokens_per_second},
         $n / (($m->{time_to_first_token_ms} + $m->{generation_time_ms})
               / 1000),
         'tokens_per_second = N / ((ttft + generation) / 1000)');
close_to($m->{mean_itl_ms}, $m->{generation_time_ms} / ($n - 1),
         'mean_itl_ms = generation / (N - 1)');
my $itl = $m->{mean_itl_ms};
my $chat_metrics = $m;

# N = 1: one step makes the first and the last token
$r = $t->post('/v1/chat/completions', { %greedy, max_tokens => 1 });
$m = $r->{json}{metrics};
ok(exists $m->{mean_itl_ms} && !defined $m->{mean_itl_ms},
   'N = 1: mean_itl_ms null (the key stays)');
is($m->{generation_time_ms}, 0, 'N = 1: generation_time_ms 0.0');
close_to($m->{tokens_per_second}, 1 / ($m->{time_to_first_token_ms} / 1000),
         'N = 1: tokens_per_second = 1 / ttft');
like($r->{content}, qr/"generation_time_ms":0\.0,/,
     'a float is written as a float (0.0)');

# completions carry them too
$r = $t->post('/v1/completions', { prompt => 'Hello', max_tokens => 3,
                                   temperature => 0, ignore_eos => \1 });
is(ref $r->{json}{metrics}, 'HASH', 'completions: metrics object');
is(scalar keys %{ $r->{json}{metrics} }, 5, 'completions: five fields');

# --- streams: only on the final usage chunk, null keys dropped ---

$r = $t->stream('/v1/chat/completions', { %greedy, max_tokens => 1,
    stream => \1, stream_options => { include_usage => \1 } });
my @chunks = grep { ref } @{ $r->{events} };
is(scalar(grep { exists $_->{metrics} } @chunks), 1,
   'stream: exactly one chunk has metrics');
ok(exists $chunks[-1]{metrics}, 'stream: it is the last chunk before [DONE]');
like((split /\n\n/, $r->{content})[-2],
     qr/"usage":\{[^{}]*(?:\{[^{}]*\})?\},"metrics":\{"time_to_first_token_ms":$NUM,
        "generation_time_ms":$NUM,"queue_time_ms":$NUM,
        "tokens_per_second":$NUM\}\}$/x,
     'stream: null mean_itl_ms dropped (exclude_none)');

$r = $t->stream('/v1/chat/completions', { %greedy, max_tokens => 4,
                                          stream => \1 });
ok(!grep({ ref && exists $_->{metrics} } @{ $r->{events} }),
   'stream without include_usage: no metrics anywhere');

$r = $t->stream('/v1/completions', { prompt => 'Hello', max_tokens => 4,
    temperature => 0, ignore_eos => \1, stream => \1,
    stream_options => { include_usage => \1 } });
@chunks = grep { ref } @{ $r->{events} };
is(scalar keys %{ $chunks[-1]{metrics} // {} }, 5,
   'completions stream: metrics on the usage chunk');

# --- bound by the client's clock ---

for my $case (
    [ 'chat body', '/v1/chat/completions', { %greedy, max_tokens => 8 } ],
    [ 'chat body, N = 1', '/v1/chat/completions', { %greedy, max_tokens => 1 } ],
    [ 'completions body', '/v1/completions',
      { prompt => 'Hello', max_tokens => 6, temperature => 0,
        ignore_eos => \1 } ],
    [ 'chat stream', '/v1/chat/completions',
      { %greedy, max_tokens => 12, stream => \1,
        stream_options => { include_usage => \1 } } ],
    [ 'chat stream, N = 1', '/v1/chat/completions',
      { %greedy, max_tokens => 1, stream => \1,
        stream_options => { include_usage => \1 } } ],
    [ 'completions stream', '/v1/completions',
      { prompt => 'Hello', max_tokens => 12, temperature => 0,
        ignore_eos => \1, stream => \1,
        stream_options => { include_usage => \1 } } ])
{
    my ($name, $path, $body) = @$case;
    my ($j, $to_token, $to_end) = timed_post($t, $path, $body);
    is($j->{usage}{completion_tokens}, $body->{max_tokens},
       "$name: $body->{max_tokens} tokens");
    within_client_clock($name, $j->{metrics} // {}, $to_token, $to_end);
}

# --- llm_per_request_metrics off (a location) ---

$r = $t->post('/off/v1/chat/completions', { %greedy, max_tokens => 2 });
like($r->{content}, qr/"metrics":null\}$/, 'off: "metrics": null');
$r = $t->stream('/off/v1/chat/completions', { %greedy, max_tokens => 2,
    stream => \1, stream_options => { include_usage => \1 } });
@chunks = grep { ref } @{ $r->{events} };
ok($chunks[-1]{usage} && !exists $chunks[-1]{metrics},
   'off: usage chunk without metrics');

# --- llm_force_include_usage on ---

$r = $t->stream('/forced/v1/chat/completions', { %greedy, max_tokens => 3,
                                                 stream => \1 });
@chunks = grep { ref } @{ $r->{events} };
ok(!@{ $chunks[-1]{choices} } && $chunks[-1]{usage}{completion_tokens} == 3,
   'forced: usage chunk without stream_options');
ok(exists $chunks[-1]{metrics}, 'forced: with the metrics');
ok(!grep({ !$_->{usage} } @chunks),
   'forced: continuous usage on every chunk (vLLM)');

# --- access log ---

my $lines = $t->wait_access_log(1);
my ($first) = grep { m{^/v1/chat/completions } } @$lines;
my $f = log_fields($first // '');
like($f->{id}, qr/^chatcmpl-[0-9a-f]{32}$/, 'log: $llm_request_id');
is($f->{model}, 'tiny', 'log: $llm_model');
is($f->{completion}, 8, 'log: $llm_completion_tokens');
is($f->{total}, $f->{prompt} + 8, 'log: $llm_total_tokens');
is($f->{cached}, 0, 'log: $llm_cached_tokens');
is($f->{finish}, 'length', 'log: $llm_finish_reason');
is($f->{spec}, '-', 'log: $llm_spec_acceptance_length without speculation');
is($f->{ttft}, sprintf('%.3f', $chat_metrics->{time_to_first_token_ms}),
   'log: $llm_ttft_ms = the JSON value, three decimals');
is($f->{tps}, sprintf('%.3f', $chat_metrics->{tokens_per_second}),
   'log: $llm_tokens_per_second');
is($f->{itl}, sprintf('%.3f', $chat_metrics->{mean_itl_ms}),
   'log: $llm_mean_itl_ms');
my ($one) = grep { /completion=1 / } @$lines;
is(log_fields($one // '')->{itl}, '-', 'log: "-" where the value is null');

# --- an aborted stream is billed: tokens so far, finish "abort" ---

# the client leaves after two content chunks of a 4000-token stream
my $s = $t->raw_socket('POST', '/off/v1/chat/completions',
                       { %greedy, max_tokens => 4000, stream => \1 });
my $id = stream_id(read_events($s, 3));
close $s;
$f = log_fields($t->wait_log_line(qr{^/off/v1/\S+ 200 id=$id .*finish=abort}, 60)
                // '');
is($f->{finish}, 'abort', 'aborted stream: finish=abort');
ok($f->{completion} >= 1 && $f->{completion} < 4000,
   "aborted stream: the tokens generated so far ($f->{completion})");
like($f->{ttft}, qr/^\d+\.\d{3}$/,
     'aborted stream: timing variables filled, metrics off or not');

$t->done;

# --- a request that waits behind another: queue time covers the whole
#     of the one ahead of it; a client that leaves frees its slot ---

my $q = NginxLLM->new(http => "llm_per_request_metrics on;\n"
                              . "    llm_max_num_seqs 1;",
                      engine => $LONG, locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC
$q->start;

sub gauges {
    my $m = Prometheus::parse($q->get('/metrics')->{content});
    return ($m->value('vllm:num_requests_running') // -1,
            $m->value('vllm:num_requests_waiting') // -1,
            $m->value('vllm:request_success_total',
                      finished_reason => 'abort') // 0);
}

# polls /metrics until want->(running, waiting, aborted) holds
sub gauges_until {
    my ($want) = @_;
    my $deadline = time + 60;
    my @g = gauges();
    while (!$want->(@g) && time < $deadline) {
        sleep 0.02;
        @g = gauges();
    }
    return @g;
}

# A (4000 tokens) holds the only slot; B (40 tokens) is seen waiting, then
# C (2 tokens) is seen waiting behind B; only then does A's client leave.
# B runs next, then C: C was queued before B was scheduled and is
# scheduled after B's last token, so its queue time holds all of B's.
# (Raw sockets, not bg_request: a forked child would keep A's open.)
my $sa = $q->raw_socket('POST', '/v1/chat/completions',
                        { %greedy, max_tokens => 4000, stream => \1 });
my $ida = stream_id(read_events($sa, 2));
my $sb = $q->raw_socket('POST', '/v1/chat/completions',
                        { %greedy, max_tokens => 40, stream => \1,
                          stream_options => { include_usage => \1 } });
my @g = gauges_until(sub { $_[1] == 1 });
is_deeply([ @g[0, 1] ], [ 1, 1 ], 'llm_max_num_seqs 1: B waits while A runs');
my $sc = $q->raw_socket('POST', '/v1/chat/completions',
                        { %greedy, max_tokens => 2 });
@g = gauges_until(sub { $_[1] == 2 });
is_deeply([ @g[0, 1] ], [ 1, 2 ], 'C waits behind B');
my $aborted = $g[2];
close $sa;
my $rest = read_events($sb, 1_000_000);
close $sb;
my ($usage) = $rest =~ /^data: (\{.*"choices":\[\].*\})$/m;
my $m1 = (NginxLLM::decode_json_safe($usage // '') // {})->{metrics} // {};
my $resp = do { local $/; <$sc> } // '';
close $sc;
my ($status) = $resp =~ m{^HTTP/1\.1 (\d+)};
my ($cbody) = $resp =~ /\r\n\r\n(.*)\z/s;
my $m2 = (NginxLLM::decode_json_safe($cbody // '') // {})->{metrics} // {};
$f = log_fields($q->wait_log_line(qr{ id=$ida .*finish=abort}, 60) // '');
is($f->{finish}, 'abort', 'A\'s client left: A was cancelled (finish=abort)');
like($rest, qr/"completion_tokens":40,.*data: \[DONE\]/s, 'B: all 40 tokens');
is($status, 200, 'C: 200');
ok($m1->{queue_time_ms} > 0, "B queued behind A: queue_time_ms $m1->{queue_time_ms}");
my $b_run = ($m1->{time_to_first_token_ms} // 9e9)
            + ($m1->{generation_time_ms} // 9e9);
ok(defined $m2->{queue_time_ms} && $m2->{queue_time_ms} >= $b_run - 1e-6,
   sprintf('C waited for all of B\'s 40 tokens: its queue_time_ms %.3f >= '
           . 'B\'s ttft + generation %.3f', $m2->{queue_time_ms} // -1, $b_run));
ok(defined $m1->{mean_itl_ms}
   && $m2->{queue_time_ms} >= 39 * $m1->{mean_itl_ms} - 1e-6,
   'so more than 39 of B\'s inter-token latencies');

# a client that leaves a long stream frees the slot: the engine finishes
# its request as an abort, nothing runs, the next request is served
$s = $q->raw_socket('POST', '/v1/chat/completions',
                    { %greedy, max_tokens => 4000, stream => \1 });
$id = stream_id(read_events($s, 2));
close $s;
$f = log_fields($q->wait_log_line(qr{ id=$id .*finish=abort}, 60) // '');
is($f->{finish}, 'abort', 'disconnect cancels: billed as abort after '
                          . ($f->{completion} // '-') . ' of 4000 tokens');
@g = gauges_until(sub { $_[0] == 0 && $_[2] == $aborted + 2 });
is_deeply(\@g, [ 0, 0, $aborted + 2 ],
          'the engine finished both as aborts (Prometheus), nothing runs or waits');
($r, my $to_token, my $to_end) = timed_post($q, '/v1/chat/completions',
                                            { %greedy, max_tokens => 1 });
is($r->{usage}{completion_tokens}, 1, 'the next request is served');
within_client_clock('the next request', $r->{metrics} // {}, undef, $to_end);
$q->done;

# --- llm_log_stats off: timing variables "-", billing data stays ---

my $o = NginxLLM->new(http => 'llm_log_stats off;');
$o->start;
$r = $o->post('/v1/chat/completions', { %greedy, max_tokens => 3 });
like($r->{content}, qr/"metrics":null\}$/, 'log_stats off: "metrics": null');
$f = log_fields($o->wait_log_line(qr{^/v1/chat/completions }) // '');
is_deeply([ @$f{qw(ttft queue gen itl tps)} ], [ ('-') x 5 ],
          'log_stats off: timing variables are "-"');
is_deeply([ @$f{qw(completion finish model)} ], [ 3, 'length', 'tiny' ],
          'log_stats off: tokens, finish reason and model stay');
$o->done;

done_testing();
