#!/usr/bin/perl
# The front's own life and the balancer's shared counts (issue 17): three
# ngx_llm nodes in network namespaces of their own behind a front in
# router mode with two workers (t/nginx/Fleet.pm), llm_balance prefix
# with a one-second window.
#
# - kill -9 of a front worker with streams in flight: the worker the
#   master starts in its place takes back the counts the dead one left
#   (a warn line per node, as many as the dead worker's streams), and
#   once the other streams end every tenant is back on its node (a count
#   left behind keeps a node over its bound, and its tenants elsewhere,
#   for good);
# - nginx -s reload of the front with streams and a workload in flight:
#   every request answered, the streams of the old workers finished, each
#   tenant's requests on one node, and when all is done every tenant back
#   where it was before the reload: the zone kept the keys, and the old
#   workers' counts went back down in it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use POSIX ();
use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;
use Fleet;

if (my $why = Fleet::cannot()) {
    plan skip_all => "network namespaces cannot be made here: $why";
}

my $model = NginxLLM->model;

my $f = Fleet->new(nodes => 3, model => $model, fail_timeout => '2s',
                   engine => <<'ENGINE');
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 2048;
    llm_kv_cache_size 1640k;
    llm_thread_pool llm;
ENGINE

my @systems = Fleet->tenants(8, 340);

$f->start_nodes;
my $front = $f->front(balance => 'llm_balance prefix window=1s;',
                      workers => 2);

# one request of each tenant, one at a time: tenant => the node that
# answered (undef if one failed)
sub round {
    my ($tag) = @_;
    my %home;
    for my $i (0 .. 7) {
        my $r = $front->post('/v1/chat/completions', {
            messages => [ { role => 'system', content => $systems[$i] },
                          { role => 'user', content => "$tag $i" } ],
            max_tokens => 2 }, headers => { 'X-Tenant' => "$tag-$i" });
        return undef unless $r->{status} == 200;
    }
    my $deadline = time + 10;
    while (keys %home < 8 && time < $deadline) {
        for my $l (@{ $f->routes }) {
            $home{$1} = $l->[1] if $l->[0] =~ /^\Q$tag\E-(\d)$/;
        }
        sleep 0.05 if keys %home < 8;
    }
    return \%home;
}

# rounds until every tenant is where it was, for at most a minute
sub settle {
    my ($tag, $want) = @_;
    my $deadline = time + 60;
    my ($k, $now) = (0);
    while (time < $deadline) {
        $now = round($tag . $k++);
        return $now if $now && !grep { $now->{$_} ne $want->{$_} } 0 .. 7;
        sleep 0.25;
    }
    return $now;
}

# long streams of one tenant in child processes: [pid, index]; each
# exits 0 when its stream ended with [DONE]
sub streams {
    my ($tenant, $n, $tag) = @_;
    my @s;
    for my $k (1 .. $n) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            my $r = $front->stream('/v1/chat/completions', {
                messages => [ { role => 'system',
                                content => $systems[$tenant] },
                              { role => 'user', content => "$tag $k" } ],
                max_tokens => 600, ignore_eos => \1, stream => \1 },
                headers => { 'X-Tenant' => "$tag$k" });
            my $done = grep { !ref $_ && $_ eq '[DONE]' } @{ $r->{events} };
            POSIX::_exit($done ? 0 : 1);
        }
        push @s, $pid;
    }
    return @s;
}

sub ended {
    my (@pids) = @_;
    my %e = (done => 0, cut => 0);
    for my $pid (@pids) {
        waitpid($pid, 0);
        $e{$? == 0 ? 'done' : 'cut'}++;
    }
    return \%e;
}

# the front's workers' accepted connections: pid => how many
sub client_conns {
    my $port = $front->port;
    my %n;
    for (`ss -Htnp state established '( sport = :$port )'`) {
        $n{$1}++ while /pid=(\d+)/g;
    }
    return \%n;
}

sub in_engines {
    my $n = 0;
    for my $i (0 .. 2) {
        $n += ($f->metric($i, 'vllm:num_requests_running') // 0)
              + ($f->metric($i, 'vllm:num_requests_waiting') // 0);
    }
    return $n;
}

my $before = round('a');
ok($before, 'every tenant answered');
diag('homes: ' . join ', ', map { "$_ $before->{$_}" } 0 .. 7) if $before;

# --- kill -9 of a front worker with streams in flight ---

my @workers = $front->worker_pids;
is(scalar @workers, 2, 'two front workers');

my @s = streams(0, 8, 'kill');
my $deadline = time + 60;
sleep 0.05 while in_engines() < 8 && time < $deadline;
is(in_engines(), 8, 'eight streams in the nodes\' engines');

my $conns = client_conns();
my ($victim) = sort { $conns->{$b} <=> $conns->{$a} } keys %$conns;
my $k = $conns->{$victim} // 0;
cmp_ok($k, '>=', 1, "worker $victim has $k of the streams");
kill 'KILL', $victim;

my $re = qr/llm_balance: (\d+) requests to "([^"]+)" in upstream "nodes" /
       . qr/were left in flight by the process that died in slot \d+, /
       . qr/no longer counted/;
my @left;
$deadline = time + 30;
while (time < $deadline) {
    @left = grep { /$re/ } split /\n/, $front->error_log;
    last if @left;
    sleep 0.05;
}
sleep 0.5;
@left = grep { /$re/ } split /\n/, $front->error_log;
my $taken = 0;
for (@left) {
    /$re/;
    $taken += $1;
    diag("taken back: $1 to $2");
}
like($left[0] // '', qr/\[warn\]/, 'the new worker says so, a warn line');
is($taken, $k, "the counts the dead worker left, $k, taken back");
my @now = $front->worker_pids;
is(scalar @now, 2, 'the master started another worker');

my $e = ended(@s);
is($e->{cut}, $k, "the dead worker's streams were cut ($k)");
is($e->{done}, 8 - $k, 'the other worker\'s streams finished');

my $after = settle('b', $before);
is_deeply($after, $before, 'every tenant back on its node: no count left '
                           . 'behind');

# --- a reload with streams and a workload in flight ---

my $work = Fleet->workload(\@systems, 120, seed => 11);
@s = streams(1, 4, 'reload');
$deadline = time + 60;
sleep 0.05 while in_engines() < 4 && time < $deadline;
is(in_engines(), 4, 'four streams in flight');

my %old = map { $_ => 1 } $front->worker_pids;
my $hup = fork // die;
if (!$hup) {
    sleep 1;
    $front->reload;
    POSIX::_exit(0);
}
my $st = $f->run($work, 3);
waitpid($hup, 0);
is(scalar(grep { $_ == 200 } @$st), 120, 'the workload across the reload: '
                                         . '120 answers');
my @new = grep { !$old{$_} } $front->worker_pids;
is(scalar @new, 2, "two new workers (@new)");

$e = ended(@s);
is($e->{done}, 4, 'the streams across the reload finished');

my %on;
for my $l (@{ $f->routes }) {
    next unless $l->[0] =~ /^\d$/;
    $on{$l->[0]}{$l->[1]}++;
}
# the bound may move a tenant whole (tenant 1's streams load its node),
# but not scatter it
my $homed = 0;
for my $i (0 .. 7) {
    my $o = $on{$i} // {};
    my ($main) = sort { $o->{$b} <=> $o->{$a} } keys %$o;
    $homed += $main ? $o->{$main} : 0;
    diag("tenant $i: " . join ', ', map { "$_ $o->{$_}" } sort keys %$o);
}
cmp_ok($homed, '>=', 0.75 * 120, "75% of the workload on its tenant's main "
                                 . "node ($homed)");

$after = settle('c', $before);
is_deeply($after, $before, 'after the reload every tenant is where it was');
is(scalar(grep { /$re/ } split /\n/, $front->error_log), scalar @left,
   'nothing left in flight by the old workers');

ok($front->stop, 'the front stopped gracefully');
my @bad = grep { !/worker process $victim exited on signal 9/ }
          $front->bad_log_lines;
ok(!@bad, 'no alert, crit, emerg or sanitizer lines but the kill')
    or diag(join "\n", @bad);
$f->node($_)->done for 0 .. 2;

done_testing;
