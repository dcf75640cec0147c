#!/usr/bin/perl
# A worker that still loads the model: generations wait for the load rather
# than fail (its first start, and a reload's new workers while the old ones
# drain), /health and /v1/models say 503 "loading" meanwhile, a client that
# leaves while it waits is dropped, and when the load fails every waiting
# request gets the 503 with the reason.
#
# The load is held by construction: the model's tokenizer.json is a FIFO, so
# the loader's fopen() blocks until this test opens the other end (and then
# fails: a FIFO has no size).  The reloads run against the real model.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use File::Temp qw(tempdir);
use POSIX qw(mkfifo);
use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;

my %chat = (messages => [ { role => 'user', content => 'hello' } ],
            max_tokens => 4, temperature => 0);

# --- a load that waits for the test ---
my $base = NginxLLM->model;
my $held = tempdir('llm-held-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $held;
for my $f (qw(config.json generation_config.json tokenizer_config.json
              model.safetensors)) {
    symlink "$base/$f", "$held/$f" or die "symlink $f: $!";
}
mkfifo("$held/tokenizer.json", 0644) or die "mkfifo: $!";

my $t = NginxLLM->new(model => $held);
$t->start(wait => 0);

my $r = $t->get('/health');
is($r->{status}, 503, '/health: 503 while the model loads');
like($r->{json}{error}{message} // '', qr/^the model is loading$/,
     'saying so');
is($t->get('/v1/models')->{status}, 503, '/v1/models: 503 too');

my @waiting = map { $t->bg_request('POST', '/v1/chat/completions', \%chat) }
              1 .. 3;
my $gone = $t->raw_socket('POST', '/v1/completions',
                          { prompt => 'x', max_tokens => 4 });

# every request has reached the worker: the access log has nothing yet
sleep 0.5;
is_deeply([ map { m{^(/v1/\S+) } ? $1 : () } @{ $t->access_log } ],
          [ '/v1/models' ],
          'the generations wait (only /v1/models is logged)');
close $gone;
ok($t->wait_log_line(qr{^/v1/completions 499 }, 10),
   'a client that leaves while it waits: 499, dropped at once');

# the other end of the FIFO: the loader's fopen() returns, fseek() fails
open my $fifo, '>', "$held/tokenizer.json" or die "open fifo: $!";
close $fifo;

for my $h (@waiting) {
    my $w = $t->wait_bg($h);
    is($w->{status}, 503, 'a waiting request: 503 when the load fails');
    like($w->{json}{error}{message} // '',
         qr/^model not loaded: .*tokenizer\.json: cannot determine the size/,
         'with the reason');
}
like($t->get('/health')->{json}{error}{message} // '',
     qr/^model not loaded: /, '/health tells the reason');
$t->done;

# --- reloads: the new workers' requests wait for their model ---
$t = NginxLLM->new(workers => 2);
$t->start;

my (@status, $reloads);
for my $round (1 .. 5) {
    $t->reload;
    $reloads++;
    # straight after the signal: the old workers, or new ones still loading
    my @h = map { $t->bg_request('POST', '/v1/chat/completions', \%chat) }
            1 .. 4;
    push @status, map { $t->wait_bg($_)->{status} } @h;
    # the next reload once this one's new workers serve
    $t->wait_ready;
}
is(scalar(@status), 20, "20 requests around $reloads reloads");
is(scalar(grep { $_ != 200 } @status), 0, 'every one answered 200')
    or diag("statuses: @status");

$t->done;
done_testing();
