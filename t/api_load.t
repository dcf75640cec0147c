#!/usr/bin/perl
# Load and backpressure: 50 concurrent streams complete without an error;
# a client that stops reading (tiny socket buffers) still gets every event
# of a long stream; the worker keeps serving meanwhile.  HTTP/2: a stream
# reset after it started is cancelled and billed as an abort.  Nothing here
# waits for a clock: each step waits for the state it needs (the engine
# finished, the stream started).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Socket qw(PF_INET SOCK_STREAM SOL_SOCKET SO_RCVBUF inet_aton
              pack_sockaddr_in);
use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;
use Prometheus;

my $t = NginxLLM->new(listen => 'sndbuf=4k',
                      http => "llm_per_request_metrics on;\n"
                              . "    llm_max_num_seqs 64;",
                      locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC
$t->start;

sub finished_length {
    my $m = Prometheus::parse($t->get('/metrics')->{content});
    return $m->value('vllm:request_success_total',
                     finished_reason => 'length') // 0;
}

# --- 50 concurrent streams ---

my ($rc, $out) = $t->node('streams.mjs', $t->url('/v1/chat/completions'),
                          50, 16);
is($rc, 0, 'the stream driver ran') or diag($out);
my $res = NginxLLM::decode_json_safe($out) // {};
is($res->{ok}, 50, '50 concurrent streams completed')
    or diag(join "\n", @{ $res->{failures} // [] });
diag(sprintf '50 streams: %.2f s, %d tokens', $res->{seconds} // 0,
             $res->{tokens} // 0);

my $lines = $t->wait_access_log(50);
is(scalar(grep { /^\/v1\/chat\/completions 200 / } @$lines), 50,
   '50 access-log lines with status 200');

# --- backpressure: a client that does not read ---

# a 2 KB receive window, set before connecting so that it holds
my $done_before = finished_length();
socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
setsockopt($s, SOL_SOCKET, SO_RCVBUF, 2048) or die "setsockopt: $!";
connect($s, pack_sockaddr_in($t->port, inet_aton('127.0.0.1')))
    or die "connect: $!";
my $req = NginxLLM::json()->encode(
    { messages => [{ role => 'user', content => 'Write a lot.' }],
      max_tokens => 120, ignore_eos => \1, logprobs => \1,
      top_logprobs => 20, stream => \1 });
syswrite($s, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
             . "Connection: close\r\nContent-Type: application/json\r\n"
             . 'Content-Length: ' . length($req) . "\r\n\r\n$req");

# the engine runs ahead of the client: it finishes all 120 tokens while
# the client has read nothing (the output, about 170 KB, waits in nginx:
# less than llm_max_unsent_bytes, which would pause it, t/api_backpressure.t)
my $deadline = time + 60;
sleep 0.05 while finished_length() == $done_before && time < $deadline;
is(finished_length(), $done_before + 1,
   'the engine finished the stalled stream while its client read nothing');

my $r = $t->post('/v1/chat/completions', {
    messages => [{ role => 'user', content => 'Meanwhile?' }],
    max_tokens => 2 });
is($r->{status}, 200, 'other requests are served while a client stalls');

my $buf = '';
while (1) {
    my $got = sysread($s, my $chunk, 1024);     # slowly
    last unless $got;
    $buf .= $chunk;
}
close $s;
my $events = () = $buf =~ /"logprobs":\{"content":\[/g;
like($buf, qr/data: \[DONE\]\n\n(\r\n0\r\n\r\n)?\z/,
     'the stalled stream ends with [DONE]');
ok($events >= 1 && $buf =~ /"finish_reason":"length"/,
   "every chunk arrived ($events content chunks, finish length)");
my $tokens = () = $buf =~ /\{"token":"(?:[^"\\]|\\.)*","logprob":[^,]+,"bytes":\[[^\]]*\],"top_logprobs"/g;
is($tokens, 120, 'all 120 tokens with their logprobs');

$t->done;

# --- HTTP/2: streams are DATA frames; a reset stream is an abort ---

# a long max_model_len: a stream that is not cancelled runs for seconds
my $h2 = NginxLLM->new(listen => 'http2', engine => <<'ENGINE');
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 4096;
    llm_kv_cache_size 16m;
    llm_thread_pool llm;
ENGINE
$h2->start(wait => 0);
my $url = $h2->url('/v1/chat/completions');
my $curl = "curl -s --http2-prior-knowledge -H 'Content-Type: application/json'";
my $ready = '';
$deadline = time + 60;                          # the model loads
while ($ready ne '200' && time < $deadline) {
    sleep 0.05 if length $ready;
    $ready = `$curl -o /dev/null -w '%{http_code}' ${\ $h2->url('/health')}`;
}
is($ready, '200', 'HTTP/2: /health');
my $body = q({"messages":[{"role":"user","content":"hi"}],"max_tokens":4,)
         . q("ignore_eos":true,"stream":true});
$out = `$curl -N -w '\n%{http_version}' $url -d '$body'`;
like($out, qr/"finish_reason":"length".*data: \[DONE\]\n\n\n2\z/s,
     'HTTP/2: a whole stream');
# reset once its first content chunk arrived, the connection kept open
# until the access log has the request's line: the reset alone ended it
$body =~ s/"max_tokens":4/"max_tokens":4000/;
($rc, $out) = $h2->node('h2_reset.mjs', $h2->url(''), '/v1/chat/completions',
                        $body, $h2->dir . '/logs/access.log');
my $res2 = NginxLLM::decode_json_safe($out) // {};
is($rc, 0, 'HTTP/2 reset driver ran') or diag($out);
ok(!$res2->{error} && $res2->{chunks} >= 1,
   'HTTP/2: the stream started (a content chunk) before the reset')
    or diag($out);
like($res2->{log_line} // '',
     qr/^\/v1\/chat\/completions 200 .*completion=\d+ .*finish=abort /,
     'HTTP/2: a reset stream is cancelled and billed as abort')
    or diag($out);
my ($billed) = ($res2->{log_line} // '') =~ / completion=(\d+) /;
ok(defined $billed && $billed >= 1 && $billed < 4000,
   "HTTP/2: billed for the tokens made before the reset (" . ($billed // '-')
   . ')');
is_deeply([ $res2->{second_status}, $res2->{second_done} ], [ 200, JSON::PP::true ],
          'HTTP/2: the connection serves the next stream after the reset');
$h2->done;

done_testing();
