#!/usr/bin/perl
# One engine per nginx (issue 13), with worker_processes 4: one model load;
# concurrent streams spread over every worker batch together in it and give
# the greedy text of one at a time; /metrics is the same engine's from any
# worker (consistent, monotonic); a worker killed mid-stream has its
# requests cancelled (KV usage back to 0); reloads under streaming load keep
# the engine (no failure, no second load, the prefix cache stays warm); a
# reload that changes an engine setting replaces the engine, nothing fails.
#
# Nothing waits for a clock: each step polls for the state it needs.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use JSON::PP;
use POSIX qw(WNOHANG);
use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;
use Prometheus;

my $N = 32;

my $t = NginxLLM->new(workers => 4, listen => 'reuseport',
                      locations => <<'LOC');
        location /v1/ { llm_api; add_header X-Worker $pid always; }
        location /timed/v1/ { llm_api; llm_per_request_metrics on; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC
my $dir = $t->dir;
my $http = "llm_max_num_seqs 64;\n"
    . "    llm_enable_prefix_caching on;\n"
    . "    log_format pids '\$pid \$uri \$status \$llm_finish_reason';\n"
    . "    access_log $dir/logs/pids.log pids;";
$t->{http} = $http;
$t->start;

sub loads { scalar(() = $_[0]->error_log =~ /llm: engine process \d+: loading/g) }

# a scrape (a worker nginx just started may still load the model's
# metadata: 503, and the next scrape goes on)
sub metrics {
    my $deadline = time + 30;
    while (time < $deadline) {
        my $r = $t->get('/metrics');
        return Prometheus::parse($r->{content}) if $r->{status} == 200;
        sleep 0.02;
    }
    return Prometheus::parse('');
}

sub pid_lines { [ split /\n/, NginxLLM::slurp("$dir/logs/pids.log") ] }

# node's streams in a child: returns a handle for bg_done()
sub bg_streams {
    my (@args) = @_;
    my $out = "$dir/streams-" . ++$t->{bgs} . '.json';
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my ($rc, $o) = $t->node('shared_streams.mjs',
                                $t->url('/v1/chat/completions'), @args);
        open my $fh, '>', $out or POSIX::_exit(1);
        print $fh $o;
        close $fh;
        POSIX::_exit(0);
    }
    return { pid => $pid, out => $out };
}

sub bg_running { !waitpid($_[0]{pid}, WNOHANG) }

sub bg_done {
    my ($h) = @_;
    waitpid($h->{pid}, 0) if $h->{pid} > 0;
    $h->{pid} = -1;
    my $s = NginxLLM::slurp($h->{out});
    my $v = NginxLLM::decode_json_safe($s);
    diag("streams: $s") unless $v;
    return $v // {};
}

# --- one engine for four workers ---

my $deadline = time + 60;
sleep 0.05 while (() = $t->error_log =~ /llm: worker \d+ uses the/g) < 4
                 && time < $deadline;
is(scalar(() = $t->error_log =~ /llm: worker \d+ uses the/g), 4,
   'all 4 workers use the engine');
is(loads($t), 1, 'one model load in the error log');
is(scalar(() = $t->error_log =~ /llm: worker \d+ started the engine/g), 1,
   'started by one worker');
my ($engine) = $t->error_log =~ /started the engine process (\d+)/;
like(`ps -o args= -p $engine`, qr/^nginx: llm engine process/,
     "the engine process $engine: \"nginx: llm engine process\"");

# --- N concurrent streams over every worker batch together ---

my $h = bg_streams($N, 150, 'Stream number');
my $max_running = 0;
while (bg_running($h)) {
    my $m = metrics();
    my $run = $m->value('vllm:num_requests_running') // 0;
    $max_running = $run if $run > $max_running;
    last if $max_running == $N;
    sleep 0.01;
}
my $res = bg_done($h)->{results} // [];
is(scalar(grep { $_->{status} == 200 && $_->{done} && !$_->{error}
                 && ($_->{finish} // '') eq 'length' } @$res), $N,
   "$N concurrent streams completed");
is($max_running, $N, "vllm:num_requests_running reached $N: one batch");

my $m = metrics();
my $it = $m->series('vllm:iteration_tokens_total_bucket');
my %it = map { $_->[0]{le} => $_->[1] } @$it;
ok(($it{'+Inf'} // 0) - ($it{'16.0'} // $it{16} // 0) > 0,
   'iteration_tokens_total: steps of more than 16 tokens');

my $lines = [];
$deadline = time + 10;
while (time < $deadline) {
    $lines = [ grep { m{ /v1/chat/completions 200 length$} } @{ pid_lines() } ];
    last if @$lines >= $N;
    sleep 0.05;
}
my %pids = map { (split / /)[0] => 1 } @$lines;
is(scalar(keys %pids), 4, "the $N streams were served by all 4 workers")
    or diag(join ' ', map { "$_" } sort keys %pids);

# the same greedy text one at a time (a few of them)
for my $i (0, 13, 31) {
    local $ENV{OFFSET} = $i;
    my $one = bg_done(bg_streams(1, 150, 'Stream number'))->{results}[0];
    is($one->{text}, $res->[$i]{text},
       "stream $i: the same greedy text alone as in the batch");
}

# --- /metrics: one engine whichever worker answers ---

sub counters {
    my ($mm) = @_;
    my %c;
    for my $s ($mm->samples) {
        next unless $s->{name} =~ /_total$|_count$|_sum$/;
        my $k = join ',', $s->{name},
                map { "$_->[0]=$_->[1]" } @{ $s->{labels} };
        $c{$k} = $s->{value};
    }
    return \%c;
}

$h = bg_streams(8, 100, 'Scrape while');
my (@scrapes, %served_by);
while (@scrapes < 20) {
    my $r = $t->get('/metrics');
    $served_by{ $r->{headers}{'x-worker'} // '?' }++;
    push @scrapes, counters(Prometheus::parse($r->{content} // ''));
}
bg_done($h);
my @bad;
for my $i (1 .. $#scrapes) {
    for my $k (keys %{ $scrapes[$i] }) {
        next if $k =~ /_sum,/;      # f64 sums: monotonic up to rounding
        push @bad, "$k: $scrapes[$i-1]{$k} -> $scrapes[$i]{$k}"
            if ($scrapes[$i]{$k} // 0) < ($scrapes[$i-1]{$k} // 0);
    }
}
ok(!@bad, '20 scrapes during streams: every counter monotonic')
    or diag(join "\n", @bad[0 .. ($#bad < 9 ? $#bad : 9)]);
my @idle = map { counters(metrics()) } 1 .. 20;
is(scalar(grep { JSON::PP->new->canonical->encode($_)
                 ne JSON::PP->new->canonical->encode($idle[0]) } @idle), 0,
   '20 scrapes when idle: all the same');
my $e2e = $idle[0]{'vllm:e2e_request_latency_seconds_count,engine=0,model_name=tiny'};
my $succ = 0;
$succ += $idle[0]{$_} for grep { /^vllm:request_success_total,/ } keys %{ $idle[0] };
is($e2e, $succ, "consistent: one e2e observation per finished request ($succ)");

# --- a worker killed mid-stream: the engine cancels its requests ---

my $s = $t->raw_socket('POST', '/v1/chat/completions',
    { messages => [ { role => 'user', content => 'kill' } ],
      max_tokens => 200, ignore_eos => \1, stream => \1 });
my $buf = '';
$deadline = time + 30;
while (time < $deadline && (() = $buf =~ /data: /g) < 3) {
    sysread($s, my $chunk, 65536) or last;
    $buf .= $chunk;
}
my ($victim) = $buf =~ /X-Worker: (\d+)/i;
ok($victim, "a stream runs in worker $victim");
$deadline = time + 10;
sleep 0.01 while (metrics()->value('vllm:num_requests_running') // 0) == 0
                 && time < $deadline;
kill 'KILL', $victim;
my $t0 = time;
my ($kv, $run) = (1, 1);
$deadline = time + 10;
while (time < $deadline) {
    $m = metrics();
    ($kv, $run) = ($m->value('vllm:kv_cache_usage_perc') // 1,
                   $m->value('vllm:num_requests_running') // 1);
    last if $kv == 0 && $run == 0;
    sleep 0.02;
}
close $s;
is("$kv $run", '0 0', sprintf('killed: KV usage and running back to 0 '
                              . '(%.2f s)', time - $t0));
ok(time - $t0 < 2, 'within 2 s');

# --- reloads under streaming load keep the engine ---

my $hits0 = metrics()->value('vllm:prefix_cache_hits_total') // 0;
my $stop = "$dir/stop-streams";
$ENV{STOP_FILE} = $stop;
$h = bg_streams($N, 40, 'The same long system prompt for every stream, '
                        . 'so that the prefix cache has something to hit:', 600);
my $reloads = 0;
my $log_at = length $t->error_log;
my $t_reloads = time;
for (1 .. 30) {
    $t->reload;
    $reloads++;
    # the next once the new workers serve
    $t->wait_ready;
    sleep 0.1;
}
open my $sf, '>', $stop or die;
close $sf;
$res = bg_done($h);
delete $ENV{STOP_FILE};
ok(($res->{ok} // 0) > 0,
   sprintf("$N clients streaming across $reloads reloads in %.1f s: %d ok",
           time - $t_reloads, $res->{ok} // 0));
is($res->{failed}, 0, 'none failed')
    or diag(join "\n", @{ $res->{failures} // [] }[0 .. 4]);
is(loads($t), 1, 'still one model load: the engine was kept');
like($t->error_log, qr/uses the running engine process $engine \(kept/,
     'the new workers say the engine was kept');
my $since = substr($t->error_log, $log_at);
my $from_master = () = $since =~ /the model's metadata came from the master/g;
my $started = () = $since =~ /start worker process \d+/g;
ok($started >= 4 && $from_master == $started,
   "every worker the reloads started had the model's metadata from the "
   . "master, no load while requests wait ($from_master of $started)");
ok((metrics()->value('vllm:prefix_cache_hits_total') // 0) > $hits0,
   'prefix-cache hits went on');

# --- a reload that changes an engine setting ---

$t->{http} = $http =~ s/llm_max_num_seqs 64/llm_max_num_seqs 2/r;
$t->write_conf;
$h = bg_streams(6, 60, 'Before the change');
$deadline = time + 10;
sleep 0.01 while (metrics()->value('vllm:num_requests_running') // 0) == 0
                 && time < $deadline;
$t->reload;
# requests meanwhile: they wait for the new engine rather than fail, and
# the wait is their queue time (vLLM's queued: the worker's wait started)
# (until one reached a new worker before the new engine served, which
# waits for the old engine's six streams and the load)
my @swap;
my $t_swap = time;
while (time < $t_swap + 20 && @swap < 2000) {
    my $t0 = time;
    my $q = $t->post('/timed/v1/chat/completions',
                     { messages => [{ role => 'user', content => 'Meanwhile' }],
                       max_tokens => 2 });
    push @swap, [ $q->{status}, (time - $t0) * 1000, $q->{json}{metrics} ];
    diag($q->{content}) if $q->{status} != 200;
    last if ($q->{json}{metrics}{queue_time_ms} // 0) >= 50;
}
is(scalar(grep { $_->[0] != 200 } @swap), 0,
   scalar(@swap) . ' requests during the engine swap: none failed')
    or diag(join ' ', map { "$_->[0]" } @swap);
my @waited = grep { ($_->[2]{queue_time_ms} // 0) >= 50 } @swap;
ok(@waited, scalar(@waited) . ' of them waited for the new engine '
            . '(queue_time_ms >= 50)');
ok(!grep({ $_->[2]{queue_time_ms} < 0.5 * $_->[1] } @waited),
   'their wait is their queue time (queue_time_ms >= half the client\'s '
   . 'time)') or diag(join ' ', map { "$_->[2]{queue_time_ms}/$_->[1]" } @waited);
$deadline = time + 60;
sleep 0.05 while loads($t) < 2 && time < $deadline;
is(loads($t), 2, 'a second model load: the settings changed');
like($t->error_log, qr/the engine settings changed: the engine process $engine retires/,
     'the old engine retires');
like($t->error_log, qr/the engine process $engine retired: new requests go to the next one/,
     'it told the workers, which answered before it exited (nothing they sent '
     . 'was lost with it)');
$res = bg_done($h)->{results} // [];
is(scalar(grep { $_->{status} == 200 && $_->{done} && !$_->{error} } @$res),
   6, 'the streams that ran on the old engine completed');
$t->wait_ready;
$h = bg_streams(6, 60, 'After the change');
my ($max_run, $max_wait) = (0, 0);
while (bg_running($h)) {
    $m = metrics();
    my ($r1, $w1) = ($m->value('vllm:num_requests_running') // 0,
                     $m->value('vllm:num_requests_waiting') // 0);
    $max_run = $r1 if $r1 > $max_run;
    $max_wait = $w1 if $w1 > $max_wait;
    sleep 0.01;
}
$res = bg_done($h)->{results} // [];
is(scalar(grep { $_->{status} == 200 && $_->{done} && !$_->{error} } @$res),
   6, 'after the change: 6 streams completed');
ok($max_run <= 2 && $max_wait > 0,
   "llm_max_num_seqs 2 applies: at most $max_run running, $max_wait waiting");

ok($t->stop, 'nginx stopped gracefully');
@bad = grep { !/worker process $victim exited on signal 9/ } $t->bad_log_lines;
ok(!@bad, 'no alert, crit, emerg or sanitizer lines but the kill')
    or diag(join "\n", @bad);
$deadline = time + 10;
sleep 0.05 while kill(0, $engine) && time < $deadline;
ok(!kill(0, $engine) || `ps -o stat= -p $engine` =~ /Z/,
   'the engine process exits with nginx');

done_testing();
