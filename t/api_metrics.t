#!/usr/bin/perl
# Per-request metrics (SPEC section 6) and the $llm_* variables (section 5):
# the five fields and their null rules, their arithmetic, where they appear
# in bodies and streams, llm_force_include_usage, queue time behind another
# request, access-log lines for completed and aborted streams, cancellation
# on disconnect, and llm_log_stats off.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;

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

my $t = NginxLLM->new(
    http => 'llm_per_request_metrics on;',
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

my $s = $t->raw_socket('POST', '/off/v1/chat/completions',
                       { %greedy, max_tokens => 200, stream => \1 });
read_events($s, 3);
close $s;
$f = log_fields($t->wait_log_line(qr{^/off/v1/\S+ 200 .*finish=abort}) // '');
is($f->{finish}, 'abort', 'aborted stream: finish=abort');
ok($f->{completion} >= 1 && $f->{completion} < 200,
   "aborted stream: the tokens generated so far ($f->{completion})");
like($f->{ttft}, qr/^\d+\.\d{3}$/,
     'aborted stream: timing variables filled, metrics off or not');

$t->done;

# --- a request that waits behind another: queue time > 0; a client that
#     leaves frees its slot at once ---

my $q = NginxLLM->new(http => "llm_per_request_metrics on;\n"
                              . "    llm_max_num_seqs 1;");
$q->start;

$s = $q->raw_socket('POST', '/v1/chat/completions',
                    { %greedy, max_tokens => 40, stream => \1,
                      stream_options => { include_usage => \1 } });
read_events($s, 2);                      # the first one runs
my $bg = $q->bg_request('POST', '/v1/chat/completions',
                        { %greedy, max_tokens => 2 });
my $rest = read_events($s, 1000);
close $s;
my ($usage) = $rest =~ /^data: (\{.*"choices":\[\].*\})$/m;
my $m1 = (NginxLLM::decode_json_safe($usage // '') // {})->{metrics} // {};
$r = $q->wait_bg($bg);
my $m2 = $r->{json}{metrics} // {};
is($r->{status}, 200, 'the second request: 200');
ok($m2->{queue_time_ms} > 0, "it queued: queue_time_ms $m2->{queue_time_ms}");
ok($m2->{queue_time_ms} > 20 * $m1->{mean_itl_ms},
   'it waited for most of the first request\'s 40 tokens');
ok($m1->{queue_time_ms} < $m2->{queue_time_ms}, 'the first one did not');

# the client of a long stream leaves: the next request does not wait for it
$s = $q->raw_socket('POST', '/v1/chat/completions',
                    { %greedy, max_tokens => 250, stream => \1 });
read_events($s, 2);
close $s;
sleep 0.05;
$r = $q->post('/v1/chat/completions', { %greedy, max_tokens => 1 });
ok($r->{json}{metrics}{queue_time_ms} < 100 * $m1->{mean_itl_ms},
   'disconnect cancels at once: the next request did not wait for 250 '
   . "tokens (queued $r->{json}{metrics}{queue_time_ms} ms)");
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
