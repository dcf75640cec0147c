#!/usr/bin/perl
# Load test (issue 5): wrk drives 200 concurrent streaming clients on
# 127.0.0.1 until 200 streams have completed (each of wrk's two threads
# stops at 100; the run's time is only a bound, and wrk's timeout with it,
# so a slow machine makes it longer, not failed).  No request fails, nginx stays up with no [alert]
# in its log, the worker's RSS after the run is what it was after a
# warm-up run (no leak per request), and the engine is idle afterwards
# (/metrics gauges at 0, every request accounted for).
#
# LLM_LOAD_SECONDS overrides the 300 s bound of the measured run.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use File::Temp ();
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);
use NginxLLM;
use Prometheus;

plan skip_all => 'wrk is not installed (tools/install_deps.sh)'
    unless -x '/usr/bin/wrk';

my $SECONDS = $ENV{LLM_LOAD_SECONDS} || 300;
my $CLIENTS = 200;

my $t = NginxLLM->new(
    main => 'worker_rlimit_nofile 4096;',
    http => "llm_per_request_metrics on;\n    llm_max_num_seqs 64;",
    locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC
$t->start;

my ($worker) = $t->worker_pids;

sub rss_kb {
    open my $fh, '<', "/proc/$worker/status" or return 0;
    while (<$fh>) {
        return $1 if /^VmRSS:\s+(\d+) kB/;
    }
    return 0;
}

# wrk for at most $seconds, or until each of its 2 threads has $target good
# streams (each leaves a file in $dir; then wrk is interrupted and reports)
sub wrk {
    my ($seconds, $target) = @_;
    my $dir = File::Temp::tempdir(DIR => $t->dir);
    my $out = "$dir/wrk.out";
    my @cmd = ('/usr/bin/wrk', '-t2', "-c$CLIENTS", "-d${seconds}s",
               '--timeout', "${seconds}s", '-s',
               "$FindBin::Bin/nginx/wrk_stream.lua",
               $t->url('/v1/chat/completions'), '--', '16', $target, $dir);
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', $out or die;
        open STDERR, '>&', \*STDOUT;
        exec @cmd or die "exec: $!";
    }
    until (waitpid($pid, WNOHANG)) {
        if (-e "$dir/thread-0" && -e "$dir/thread-1") {
            kill 'INT', $pid;
            waitpid($pid, 0);
            last;
        }
        sleep 0.2;
    }
    my $text = NginxLLM::slurp($out);
    my ($line) = $text =~ /^(\{"requests".*\})$/m;
    my $res = NginxLLM::decode_json_safe($line // '');
    diag($text) unless $res;
    return $res // {};
}

sub idle {
    my $deadline = time + 20;
    my $m;
    while (time < $deadline) {
        $m = Prometheus::parse($t->get('/metrics')->{content});
        last if $m->value('vllm:num_requests_running') == 0
                && $m->value('vllm:num_requests_waiting') == 0
                && $m->value('vllm:kv_cache_usage_perc') == 0;
        sleep 0.1;
    }
    return $m;
}

# warm-up: pools, buffers and the allocator's arenas reach their size
my $warm = wrk(120, 10);
ok($warm->{good} >= 20, "warm-up: $warm->{good} streams");
idle();
my $rss0 = rss_kb();

my $t0 = time;
my $res = wrk($SECONDS, $CLIENTS / 2);
my $elapsed = time - $t0;
my $m = idle();
my $rss1 = rss_kb();

diag(sprintf '%d clients, %.1f s: %d streams completed, p50 %.0f ms, '
             . 'p99 %.0f ms', $CLIENTS, $res->{seconds} // 0,
             $res->{good} // 0, $res->{p50_ms} // 0, $res->{p99_ms} // 0);
ok($res->{good} >= $CLIENTS, "$res->{good} streams completed and checked");
is($res->{bad}, 0, 'no bad response (status, [DONE], usage, error event)')
    or diag($res->{last_bad});
is($res->{non2xx}, 0, 'no non-2xx status');
is($res->{connect} + $res->{read} + $res->{write}, 0,
   'no connect, read or write error');
is($res->{timeout}, 0, 'no timeout');

# the engine let go of everything, the streams wrk cut at the end included
is($m->value('vllm:num_requests_running'), 0, 'afterwards: nothing running');
is($m->value('vllm:num_requests_waiting'), 0, 'nothing waiting');
is($m->value('vllm:kv_cache_usage_perc'), 0, 'every KV block free');
my $finished = 0;
$finished += $_->[1] for @{ $m->series('vllm:request_success_total') };
ok($finished >= $warm->{requests} + $res->{requests},
   "every request finished in the engine ($finished)");

my $r = $t->get('/health');
is($r->{status}, 200, 'nginx still serves');
is(join(',', $t->worker_pids), $worker, 'the same worker process');

diag(sprintf 'worker RSS: %.1f MB after the warm-up, %.1f MB after the run',
             $rss0 / 1024, $rss1 / 1024);
ok($rss1 <= $rss0 * 1.10 + 8192,
   'worker RSS stable (at most 10 % + 8 MB above the warm-up)');

$t->done;

done_testing();
