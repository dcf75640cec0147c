#!/usr/bin/perl
# The engine process dies (kill -9) mid-stream (issue 13): every request in
# flight ends cleanly (a stream: an SSE error event, then the stream
# closes; a non-streamed request: a JSON 503), the access log says
# finish=error, other locations keep serving, /health answers 503 with the
# reason while the engine restarts, and the engine comes back by itself,
# with a back-off after a start that fails.
#
# The restart is held by construction: before the kill the model's
# tokenizer.json becomes a FIFO, so the new engine's load blocks until this
# test opens the other end (and then fails: a FIFO has no size); the next
# start, after the back-off, finds the real file again.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use File::Temp qw(tempdir);
use POSIX qw(mkfifo WNOHANG);
use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;
use Prometheus;

my $base = NginxLLM->model;
my $held = tempdir('llm-restart-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $held;
for my $f (qw(config.json generation_config.json tokenizer_config.json
              model.safetensors tokenizer.json)) {
    symlink "$base/$f", "$held/$f" or die "symlink $f: $!";
}

my $t = NginxLLM->new(model => $held, workers => 2, locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
        location = /static { return 200 "still here\n"; }
LOC
$t->start;

sub running {
    my $r = $t->get('/metrics');
    return -1 unless $r->{status} == 200;
    return Prometheus::parse($r->{content})->value('vllm:num_requests_running')
           // -1;
}

my %long = (messages => [ { role => 'user', content => 'a long story' } ],
            max_tokens => 200, temperature => 0, ignore_eos => \1);

my $deadline = time + 30;
my ($engine);
while (time < $deadline) {
    ($engine) = $t->error_log =~ /started the engine process (\d+)/;
    last if $engine;
    sleep 0.05;
}
ok($engine, "the engine process $engine");

# three streams and a non-streamed request run
my @streams = map {
    $t->raw_socket('POST', '/v1/chat/completions', { %long, stream => \1 })
} 1 .. 3;
my $plain = $t->bg_request('POST', '/v1/chat/completions', \%long);
$deadline = time + 30;
sleep 0.01 while running() != 4 && time < $deadline;
is(running(), 4, 'four requests run');

# the next start will wait on a FIFO (a second name keeps it reachable)
mkfifo("$held/fifo", 0644) or die "mkfifo: $!";
link "$held/fifo", "$held/fifo2" or die "link: $!";
rename "$held/fifo", "$held/tokenizer.json" or die "rename: $!";

kill 'KILL', $engine;

for my $i (0 .. $#streams) {
    my $s = $streams[$i];
    my ($buf, $dl) = ('', time + 30);
    while (time < $dl) {
        my $n = sysread($s, my $chunk, 65536);
        last unless $n;
        $buf .= $chunk;
    }
    like($buf, qr/data: \{"error":\{"message":/,
         "stream $i: an SSE error event");
    like($buf, qr/\r\n0\r\n\r\n\z/, '... then the stream closes');
    close $s;
}
my $r = $t->wait_bg($plain);
is($r->{status}, 503, 'the non-streamed request: 503');
like($r->{json}{error}{message} // '', qr/the engine stopped/,
     '... with a JSON error saying the engine stopped');
my @lines;
$deadline = time + 10;
while (time < $deadline) {
    @lines = grep { m{^/v1/chat/completions } } @{ $t->access_log };
    last if @lines >= 4;
    sleep 0.05;
}
is(scalar(grep { /finish=error/ } @lines), 4,
   'the access log says finish=error for the four');

is($t->get('/static')->{status}, 200, 'other locations keep serving');
$r = $t->get('/health');
is($r->{status}, 503, '/health: 503 while the engine restarts');
like($r->{json}{error}{message} // '', qr/restarting|loading/,
     "saying why: $r->{json}{error}{message}");
like($t->error_log, qr/llm: the engine process $engine stopped/,
     'the error log tells the engine stopped');

# a request meanwhile waits for the new engine ...
my $waiting = $t->bg_request('POST', '/v1/chat/completions',
                             { %long, max_tokens => 4 });
sleep 0.3;
is(scalar(grep { m{^/v1/chat/completions } } @{ $t->access_log }), 4,
   'a new request waits (not logged yet)');

# ... whose start fails: the real file back, then the FIFO's other end
unlink "$held/tokenizer.json";
symlink "$base/tokenizer.json", "$held/tokenizer.json" or die;
open my $fifo, '>', "$held/fifo2" or die "open fifo: $!";
close $fifo;

$r = $t->wait_bg($waiting);
is($r->{status}, 503, 'the start failed: the waiting request gets 503');
like($r->{json}{error}{message} // '', qr/tokenizer\.json/,
     '... with the reason');

# and after the back-off the engine is back, without anyone's help
ok($t->wait_ready(30), '/health 200 again');
$r = $t->post('/v1/chat/completions', { %long, max_tokens => 4 });
is($r->{status}, 200, 'the API serves again');
like($t->error_log, qr/started the engine process \d+ \(generation 3\)/,
     'a third start, after the back-off');

$t->done;
done_testing();
