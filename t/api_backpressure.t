#!/usr/bin/perl
# Backpressure per client (llm_max_unsent_bytes, send_timeout).  A client
# with a small receive window sends a long stream (16 choices, 20 top
# logprobs each) and reads nothing:
#   (a) once its unsent output passes llm_max_unsent_bytes the engine
#       pauses it: the request still runs (/metrics), no token is made,
#       the worker's memory stays put and its CPU time too (the engine
#       thread sleeps);
#   (b) the client then reads everything: the stream resumes and ends
#       with every token of every choice, in valid SSE;
#   (c) with send_timeout 2s a client that reads nothing is dropped: the
#       access log bills an abort with the tokens made, the engine
#       cancelled it, the worker lives on;
#   (d) a body (no stream) is written once at the end by nginx's own
#       writer: send_timeout drops its client too, billed as it finished;
#   (e) HTTP/2: a client that stops reading (a 1 KB stream window, no
#       WINDOW_UPDATE) is paused the same way, and resumed when it reads.
# Nothing races a clock: each step waits for the state it needs, with a
# deadline; the one lower bound (a drop comes no sooner than send_timeout
# after the request started) holds by construction.

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

# long streams: a stream that is paused cannot end by itself first; the
# listening socket's small send buffer keeps the kernel's share small
my %server = (http => 'llm_max_unsent_bytes 128k;', engine => <<'ENGINE');
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 4096;
    llm_kv_cache_size 16m;
    llm_thread_pool llm;
ENGINE
my $t = NginxLLM->new(%server, listen => 'sndbuf=4k', locations => <<'LOC');
        location /v1/ { llm_api; }
        location /slow/v1/ { llm_api; send_timeout 2s; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC
$t->start;

my $N = 16;
my $MAX = 200;
my %long = (messages => [{ role => 'user', content => 'Write a lot.' }],
            n => $N, max_tokens => $MAX, ignore_eos => \1, seed => 1,
            logprobs => \1, top_logprobs => 20, stream => \1,
            stream_options => { include_usage => \1 });

sub metrics { Prometheus::parse($t->get('/metrics')->{content}) }
sub generated { metrics()->value('vllm:generation_tokens_total') // 0 }
sub running { metrics()->value('vllm:num_requests_running') // -1 }
sub aborted {
    metrics()->value('vllm:request_success_total',
                     finished_reason => 'abort') // 0;
}

# the worker's resident memory (kB) and CPU time (s, all its threads)
sub rss_kb {
    my ($pid) = @_;
    return (NginxLLM::slurp("/proc/$pid/status") =~ /^VmRSS:\s+(\d+) kB/m)[0];
}
sub cpu_s {
    my ($pid) = @_;
    my @f = split / /, (NginxLLM::slurp("/proc/$pid/stat") =~ /\) (.*)/)[0];
    return ($f[11] + $f[12]) / 100;
}

sub wait_until {
    my ($cond, $timeout) = @_;
    my $deadline = time + ($timeout // 60);
    until ($cond->()) {
        return 0 if time > $deadline;
        sleep 0.1;
    }
    return 1;
}

# a client with a small receive window (set before connecting, so that
# it holds) that sends the request and then reads nothing
sub stalled_client {
    my ($path, $body) = @_;
    socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
    setsockopt($s, SOL_SOCKET, SO_RCVBUF, 1024) or die "setsockopt: $!";
    connect($s, pack_sockaddr_in($t->port, inet_aton('127.0.0.1')))
        or die "connect: $!";
    my $req = NginxLLM::json()->encode($body);
    syswrite($s, "POST $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                 . "Content-Type: application/json\r\n"
                 . 'Content-Length: ' . length($req) . "\r\n\r\n$req");
    return $s;
}

# generation went quiet: two readings a second apart agree
sub wait_quiet {
    my $deadline = time + 60;
    my ($prev, $now) = (-1, generated());
    while ($now != $prev && time < $deadline) {
        $prev = $now;
        sleep 1;
        $now = generated();
    }
    return $now == $prev ? $now : undef;
}

# the body of a chunked response read to its end
sub read_body {
    my ($s) = @_;
    my $raw = '';
    while (sysread($s, my $buf, 65536)) {
        $raw .= $buf;
    }
    my ($head, $rest) = split /\r\n\r\n/, $raw, 2;
    my $body = '';
    $rest //= '';
    while ($rest =~ s/^([0-9a-f]+)\r\n//i) {
        my $n = hex $1;
        last if $n == 0;
        $body .= substr($rest, 0, $n, '');
        $rest =~ s/^\r\n// or return ($head, undef);
    }
    return ($head, $body);
}

# a stream's body: valid SSE, every token of every choice, usage
sub check_events {
    my ($body, $what) = @_;
    my @events = split /\n\n/, $body // '';
    is($events[-1], 'data: [DONE]', "$what ends with [DONE]");
    my (%tokens, %finish, $usage, $bad);
    for my $e (@events[0 .. $#events - 1]) {
        my $j = $e =~ /^data: (.*)\z/s ? NginxLLM::decode_json_safe($1)
                                        : undef;
        if (!ref $j) {
            $bad++;
            next;
        }
        $usage = $j->{usage} if !@{ $j->{choices} };
        for my $c (@{ $j->{choices} }) {
            $tokens{ $c->{index} } += @{ $c->{logprobs}{content} // [] };
            $finish{ $c->{index} } .= $c->{finish_reason} // '';
        }
    }
    ok(!$bad, "$what: every event is \"data: \" and a JSON object");
    is_deeply([ map { $tokens{$_} // 0 } 0 .. $N - 1 ], [ ($MAX) x $N ],
              "$what: each of the $N choices has all its $MAX tokens");
    is_deeply([ map { $finish{$_} // '' } 0 .. $N - 1 ],
              [ ('length') x $N ], "$what: each finished once, with length");
    is($usage->{completion_tokens}, $N * $MAX,
       "$what: the usage chunk counts them all");
}

my ($worker) = $t->worker_pids;

# --- (a) a client that reads nothing: paused, bounded ---

my $gen0 = generated();
my $s = stalled_client('/v1/chat/completions', \%long);
ok(wait_until(sub { generated() > $gen0 }), 'the stream started');
my $quiet = wait_quiet();
ok(defined $quiet, 'then the engine stopped generating: no token in a '
   . 'second') or diag('still generating');
$quiet //= 0;
my $made = $quiet - $gen0;
ok($made > 0 && $made < $N * $MAX,
   "paused after $made of its " . $N * $MAX . ' tokens');
is(running(), $N, "its $N sequences still run (vllm:num_requests_running)");

my ($rss1, $cpu1) = (rss_kb($worker), cpu_s($worker));
sleep 3;
my ($rss2, $cpu2) = (rss_kb($worker), cpu_s($worker));
is(generated(), $quiet, 'no token in 3 s more');
ok($rss2 - $rss1 < 1024,
   "the worker's RSS stays put while paused ($rss1 kB, then $rss2 kB)");
ok($cpu2 - $cpu1 < 0.3,
   sprintf('the worker sleeps while paused (%.2f s of CPU in 3 s)',
           $cpu2 - $cpu1));
diag(sprintf 'paused: %d tokens made, RSS %+d kB and %.2f s CPU in 3 s',
             $made, $rss2 - $rss1, $cpu2 - $cpu1);

# --- (b) the client reads everything: resumed, nothing lost ---

my ($head, $body) = read_body($s);
close $s;
like($head // '', qr/^HTTP\/1\.1 200 /, 'the stream: 200');
ok(defined $body, 'the chunked body is well formed');
check_events($body, 'the stream');
my $line = $t->wait_log_line(qr{^/v1/chat/completions 200 .*finish=length});
like($line // '', qr/ completion=${\ ($N * $MAX)} /,
     'the access log bills every token');

# --- (c) send_timeout 2s: a client that reads nothing is dropped ---

my $aborted0 = aborted();
my $t0 = time;
$s = stalled_client('/slow/v1/chat/completions', \%long);
$line = $t->wait_log_line(qr{^/slow/v1/chat/completions }, 60);
my $dropped = time - $t0;
my ($billed) = ($line // '') =~ / completion=(\d+) /;
like($line // '', qr{^/slow/v1/chat/completions 200 .* finish=abort },
     'dropped: billed as an abort ($status: the 200 that was sent)');
ok(defined $billed && $billed > 0 && $billed < $N * $MAX,
   'with the tokens made until then (' . ($billed // '-') . ')');
ok($dropped >= 2, sprintf('no sooner than send_timeout (%.1f s after the '
                          . 'request)', $dropped));
diag(sprintf 'dropped %.1f s after the request', $dropped);
ok(wait_until(sub { aborted() == $aborted0 + $N && running() == 0 }),
   "the engine cancelled its $N sequences, nothing runs");
like($t->error_log, qr/\[info\].*client timed out/,
     'the error log says the client timed out');
close $s;
is_deeply([ $t->worker_pids ], [ $worker ], 'the same worker lives on');
is($t->get('/health')->{status}, 200, 'and serves');

# --- (d) a body: nginx's writer, the same send_timeout ---

$t0 = time;
$s = stalled_client('/slow/v1/chat/completions',
                    { %long, n => 4, max_tokens => 100, stream => \0,
                      stream_options => undef });
$line = $t->wait_log_line(qr{^/slow/v1/chat/completions .*finish=length},
                          60);
$dropped = time - $t0;
like($line // '', qr/ completion=400 /,
     'a body the client does not read: generated in full, billed');
ok($dropped >= 2, sprintf('its client dropped after send_timeout (%.1f s)',
                          $dropped));
close $s;

$t->done;

# --- (e) HTTP/2: a stream whose client stops reading is paused too ---

my $h2 = NginxLLM->new(%server, listen => 'http2', locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /metrics { llm_prometheus; }
LOC
$h2->start(wait => 0);     # /health speaks HTTP/1.1; the request waits for the model
my ($rc, $out) = $h2->node('h2_stall.mjs', $h2->url(''),
                           '/v1/chat/completions',
                           NginxLLM::json()->encode(\%long));
my $st = NginxLLM::decode_json_safe((split /\n/, $out)[-1] // '') // {};
is($rc, 0, 'the HTTP/2 client ran') or diag($out);
ok(!$st->{error}, 'without an error') or diag($st->{error});
is($st->{status}, 200, 'HTTP/2: 200');
ok(defined $st->{paused_at}, 'HTTP/2: the engine stopped generating while '
   . 'the client read nothing');
my $h2made = ($st->{paused_at} // 0) - ($st->{made_before} // 0);
ok($h2made > 0 && $h2made < $N * $MAX,
   "HTTP/2: paused after $h2made of " . $N * $MAX . ' tokens');
is($st->{after_3s}, $st->{paused_at}, 'HTTP/2: no token in 3 s more');
is($st->{running}, $N, "HTTP/2: its $N sequences still run");
my $h2body = $st->{body} // '';
utf8::encode($h2body);      # bytes again, as they came on the wire
check_events($h2body, 'HTTP/2: the resumed stream');
$h2->done;

done_testing();
