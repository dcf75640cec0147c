#!/usr/bin/perl
# Billing survives a worker's death (issue 19): a worker killed with -9
# while one request streams and two wait behind it leaves their slots in
# the shared ledger; the worker nginx starts in its place reports each as a
# "warn" line (request id, tokens so far, finish_reason abort), once.
# Requests that end normally, and those of a worker that exits gracefully
# on a reload, are not reported: their access-log lines bill them.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;
use Prometheus;

my @msgs = ({ role => 'user', content => 'Tell me a story.' });
my %long = (messages => \@msgs, temperature => 0, ignore_eos => \1);

my $t = NginxLLM->new(
    http => "llm_per_request_metrics on;\n    llm_max_num_seqs 1;",
    engine => <<'ENGINE', locations => <<'LOC');
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 4096;
    llm_kv_cache_size 16m;
    llm_thread_pool llm;
ENGINE
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC
$t->start;

sub lost_lines {
    grep { /llm: request "[^"]+" was lost with worker/ }
        split /\n/, $t->error_log;
}

sub waiting {
    my $m = Prometheus::parse($t->get('/metrics')->{content} // '');
    return $m->value('vllm:num_requests_waiting') // -1;
}

# reads SSE from a raw socket until n "data:" events arrived
sub read_events {
    my ($s, $n) = @_;
    my ($buf, $deadline) = ('', time + 60);
    while (time < $deadline) {
        my $got = sysread($s, my $chunk, 65536);
        last unless $got;
        $buf .= $chunk;
        my $count = () = $buf =~ /data: /g;
        return $buf if $count >= $n;
    }
    return $buf;
}

# a normal request first: nothing to report
my $r = $t->post('/v1/chat/completions', { %long, max_tokens => 5 });
is($r->{status}, 200, 'a request that ends normally');
my $prompt_tokens = $r->{json}{usage}{prompt_tokens};

# A streams (4000 tokens), B and C wait behind it (llm_max_num_seqs 1)
my $sa = $t->raw_socket('POST', '/v1/chat/completions',
                        { %long, max_tokens => 4000, stream => \1 });
my $seen = read_events($sa, 20);
my ($ida) = $seen =~ /"id":"(chatcmpl-[0-9a-f]+)"/;
my $received = () = $seen =~ /"delta":\{"content"/g;
ok($ida, "A streams: $ida");
my @rest = map {
    $t->raw_socket('POST', '/v1/chat/completions', { %long, max_tokens => 9 })
} 1 .. 2;
my $deadline = time + 60;
sleep 0.02 while waiting() != 2 && time < $deadline;
is(waiting(), 2, 'B and C wait behind A');

my ($worker) = $t->worker_pids;
kill 'KILL', $worker;
$deadline = time + 60;
my @lost;
while (time < $deadline) {
    @lost = grep { /with worker $worker:/ } lost_lines();
    last if @lost >= 3;
    sleep 0.05;
}
is(scalar @lost, 3, 'the new worker reports the 3 requests of the dead one')
    or diag(join "\n", lost_lines());
like($lost[0] // '', qr/\[warn\]/, 'as warn lines');
my ($la) = grep { /"\Q$ida\E"/ } @lost;
ok($la, "A by its id");
my ($pa, $ca) = ($la // '') =~ /prompt_tokens (\d+), completion_tokens (\d+)/;
is($pa, $prompt_tokens, "A: prompt_tokens $prompt_tokens");
ok(defined $ca && $ca >= $received,
   "A: completion_tokens ($ca) at least what its client got ($received)");
like($la // '', qr/model "tiny", .*finish_reason abort, \d+\.\d{3} s$/,
     'A: model, finish_reason abort, how long it ran');
is(scalar(grep { /prompt_tokens $prompt_tokens, completion_tokens 0,/ }
          @lost), 2, 'B and C: their prompt tokens, no completion tokens');
close $_ for $sa, @rest;

# reported once: the slots are free again
sleep 1.5;
is(scalar(grep { /with worker $worker:/ } lost_lines()), 3,
   'each reported once, however many scans');

# a reload while a request runs: the old worker finishes it gracefully
my $sd = $t->raw_socket('POST', '/v1/chat/completions',
                        { %long, max_tokens => 300, stream => \1 });
my $d = read_events($sd, 2);
my ($idd) = $d =~ /"id":"(chatcmpl-[0-9a-f]+)"/;
$t->reload;
my $tail = read_events($sd, 1_000_000);
like($tail, qr/data: \[DONE\]/, 'a stream across a reload completes');
close $sd;
ok($t->wait_log_line(qr{ id=$idd .*finish=length}, 30),
   'and is billed in the access log');
# the new workers may still load the model: the request waits for it
$r = $t->post('/v1/chat/completions', { %long, max_tokens => 5 });
is($r->{status}, 200, 'the new generation serves');
sleep 1.5;
is(scalar(lost_lines()), 3, 'nothing lost on the reload');

ok($t->stop, 'nginx stopped gracefully');
my @bad = grep { !/worker process $worker exited on signal 9/ }
          $t->bad_log_lines;
ok(!@bad, 'no alert, crit, emerg or sanitizer lines but the kill')
    or diag(join "\n", @bad);

done_testing();
