#!/usr/bin/perl
# nginx as the inference router (issue 17): three ngx_llm nodes, each in a
# network namespace of its own, behind a front nginx in router mode
# (llm_router_model: the tokenizer and template only) whose upstream
# balances on $llm_prefix_key.
#
# - $llm_prefix_key: equal for equal prefixes, whatever follows them;
# - the 8-tenant workload (distinct ~1,000-token system prompts, 200 chat
#   requests, each node's KV cache holding about 3 tenants' prefixes):
#   llm_balance prefix against round robin, in the nodes' summed
#   vllm:prefix_cache_hits_total; each tenant on one node;
# - a hot tenant (10x the others' rate) spills to a second node;
# - kill -9 of a node mid-run: requests not yet answered retry on another
#   node and succeed, streams on it end, the ring drops the node and takes
#   it back, moving only its prefixes;
# - billing across the tiers: the front's access-log line of a request,
#   body or stream, is the node's (the node's record, read back);
# - bad input at the front gets the node's own OpenAI errors;
# - a node as an Inference Extension endpoint: the metrics the protocol
#   reads, the OpenAI routes.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use POSIX ();
use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;
use Fleet;
use Prometheus;

if (my $why = Fleet::cannot()) {
    plan skip_all => "network namespaces cannot be made here: $why";
}

my $model = NginxLLM->model;

# 2,048 tokens a request; 16-token blocks of 512 bytes (2 layers, 2 KV
# heads of 16 floats, K and V): 1,900k is about 230 blocks, 3.5 prefixes
# of 65 blocks.  The nodes' addresses place the ring's points, and so the
# tenants: on 10.103.x.2 the ring puts them 3/3/2 (without bounds; other
# addresses put 4, 5 or even 6 of the 8 on one node, whose cache then
# holds only some of them, which measures the draw rather than the
# balancer: a run whose ring put 4/4/0 gave 1.91x).  Found with
# `hash $llm_prefix_key consistent` on nets 100-105 (5/2/1, 4/2/2, 5/2/1,
# 3/3/2, 4/3/1, 5/3/0); the diag lines below show the placement.
my $f = Fleet->new(nodes => 3, model => $model, fail_timeout => '2s',
                   net => 103, engine => <<'ENGINE');
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 2048;
    llm_kv_cache_size 1640k;
    llm_thread_pool llm;
ENGINE

my @systems = Fleet->tenants(8, 340);
my $work = Fleet->workload(\@systems, 200);

$f->start_nodes;
my $blocks = do {
    my $r = $f->node(0)->get('/metrics');
    $r->{content} =~ /num_gpu_blocks="(\d+)"/ ? $1 : 0;
};
diag("KV blocks per node: $blocks");

# $llm_prefix_key: the same for two questions of one tenant, another for
# another tenant, none for a prompt of less than a block

my $ft = $f->front(balance => 'llm_balance prefix;');
for my $q ([0, 'one'], [0, 'two'], [1, 'one']) {
    my $r = $ft->post('/v1/chat/completions', {
        messages => [ { role => 'system', content => $systems[$q->[0]] },
                      { role => 'user', content => $q->[1] } ],
        max_tokens => 2 }, headers => { 'X-Tenant' => "k$q->[0]" });
    is($r->{status}, 200, "tenant $q->[0], question $q->[1]: 200");
}
my $r = $ft->post('/v1/chat/completions', {
    messages => [ { role => 'user', content => 'hi' } ], max_tokens => 2 },
    headers => { 'X-Tenant' => 'short' });
is($r->{status}, 200, 'a short prompt: 200');
my $deadline = time + 10;
sleep 0.05 while @{ $f->routes } < 4 && time < $deadline;
my @keys = map { $_->[3] } @{ $f->routes };
like($keys[0], qr/^[0-9a-f]{16}$/, "the key: 16 hex digits ($keys[0])");
is($keys[1], $keys[0], 'the same system prompt: the same key');
isnt($keys[2], $keys[0], 'another system prompt: another key');
is($keys[3], '-', 'a prompt shorter than a block: no key');

# the workload, prefix against round robin, each on fresh nodes

my %hits;
my %placement;
for my $mode (['prefix', 'llm_balance prefix;'], ['round-robin', '']) {
    $f->start_nodes;
    $f->front(balance => $mode->[1]);
    my $t0 = time;
    my $st = $f->run($work, 6);
    is(scalar(grep { $_ == 200 } @$st), 200, "$mode->[0]: 200 answers");
    $hits{$mode->[0]} = $f->hits;
    # the requests that found their tenant's prefix (more than the first
    # block, the template's header all tenants share), from the nodes'
    # access logs, and the nodes' preemptions (a preempted request is
    # looked up, and counted, again)
    my ($full, $part, $pre) = (0, 0, 0);
    for my $i (0 .. 2) {
        for (@{ $f->node($i)->access_log }) {
            next unless /cached=(\d+) /;
            $full++ if $1 > 16;
            $part++ if $1 > 16 && $1 < 900;
        }
        $pre += $f->metric($i, 'vllm:num_preemptions_total') // 0;
    }
    diag("$mode->[0]: $full of 200 requests found their prefix ($part "
         . "of them less than 900 tokens of it), $pre preemptions");
    my %on;
    for my $l (@{ $f->routes }) {
        $on{$l->[0]}{$l->[1]}++;
    }
    $placement{$mode->[0]} = \%on;
    diag(sprintf "%s: prefix_cache_hits_total %d, %.1f s", $mode->[0],
                 $hits{$mode->[0]}, time - $t0);
}

# the nodes' summed hits: the prefix cache of each node holds 3 tenants'
# prefixes, so round robin's LRU finds a request's prefix about 3 times in
# 8 (67 of this workload's 200 requests, simulated; 61-75 measured when
# blocks were freed first-first, 88 with 20 partial since they are freed
# last-first), while a router that keeps every tenant on one node finds all
# but each tenant's first, 192: 2.87x is the ceiling for this workload,
# 2.65x on average over draws (docs/performance.md; a clean clone's run,
# 2026-12-06: 189,904 / 70,656 = 2.69x).  On rings of random addresses it
# measured 1.9-3.2x (8 keys on 3 nodes can fall 5/2/1 or 4/4/0); on this
# test's 3/3/2 ring 3.08x and 2.63x (round robin finding 83 and 94, some of
# them partly).  Spilling request by request measured 1.6-2.2x.  The test
# asks for 1.75x.
my $ratio = $hits{'round-robin'} ? $hits{prefix} / $hits{'round-robin'} : 0;
diag(sprintf "hits prefix / round robin: %.2f", $ratio);
cmp_ok($ratio, '>=', 1.75, 'llm_balance prefix: many more prefix-cache '
                           . 'hits than round robin');
my ($homed, %load) = (0);
for my $i (0 .. 7) {
    my $on = $placement{prefix}{$i} // {};
    my ($main) = sort { $on->{$b} <=> $on->{$a} } keys %$on;
    $homed += $on->{$main};
    $load{$_} += $on->{$_} for keys %$on;
    diag("tenant $i: " . join ', ', map { "$_ $on->{$_}" } sort keys %$on);
}
cmp_ok($homed, '>=', 0.75 * 200,
       "75% of the requests on their tenant's node ($homed)");
# the bound with 6 requests in flight on 3 nodes, 1.25 x (6 + 1) / 3,
# lets a node hold half of them: in requests (cold prefills are slower),
# up to about 60%
my ($max) = sort { $b <=> $a } values %load;
cmp_ok($max, '<=', 120, "no node serves more than 60% of the fleet's "
                        . "requests ($max)");

# a hot tenant, 10x the rate of each other one: it spills to a second
# node instead of queueing on its own

$f->start_nodes;
$f->front(balance => 'llm_balance prefix;');
my $hot = Fleet->workload(\@systems, 200, hot => 0, hot_share => 0.53,
                          seed => 7);
# (24 tokens each: the requests stay long enough in the engines for the
# hot tenant's node to be busier than the bound allows)
my $st = $f->run($hot, 6, max_tokens => 24);
is(scalar(grep { $_ == 200 } @$st), 200, 'hot tenant: 200 answers');
my %on;
$on{$_->[1]}++ for grep { $_->[0] eq '0' } @{ $f->routes };
my @hot = sort { $b <=> $a } values %on;
diag('hot tenant per node: ' . join ', ', @hot);
my $n_hot = 0;
$n_hot += $_ for @hot;
cmp_ok(scalar(@hot), '>=', 2, 'the hot tenant is served by two nodes');
# how much spills depends on how long the hot node stays over the bound, so
# on how busy the machine is: 9.4% in a CI-like run of the whole suite, more
# when alone; 5% is still requests sent elsewhere by the bound, not by luck
cmp_ok($hot[1] // 0, '>=', 0.05 * $n_hot,
       'the second takes a part of it (5% at least)');

# kill -9 of a node mid-run

$f->start_nodes;
$f->front(balance => 'llm_balance prefix;');
my $front = $f->front_t;

sub round {
    my ($tag) = @_;
    my %home;
    for my $i (0 .. 7) {
        my $r = $front->post('/v1/chat/completions', {
            messages => [ { role => 'system', content => $systems[$i] },
                          { role => 'user', content => "$tag $i" } ],
            max_tokens => 2 }, headers => { 'X-Tenant' => "$tag$i" });
        return undef unless $r->{status} == 200;
    }
    # the log line follows the response
    my $deadline = time + 10;
    while (keys %home < 8 && time < $deadline) {
        for my $l (@{ $f->routes }) {
            $home{$1} = $l->[1] if $l->[0] =~ /^\Q$tag\E(\d)$/;
        }
        sleep 0.05 if keys %home < 8;
    }
    return \%home;
}

my $before = round('a');
ok($before, 'every tenant answered before the kill');
my %by_node;
push @{ $by_node{$before->{$_}} }, $_ for keys %$before;
my ($victim) = grep { $f->{node}[$_]{addr} . ':8000'
                      eq $before->{0} } 0 .. 2;
my $gone = $before->{0};
diag("tenant 0 is on node $victim ($gone), with tenants "
     . join ',', sort @{ $by_node{$gone} });

# streams in flight on every node: long, ignoring the end of text
my @streams;
for my $i (0 .. 7) {
    my $pid = fork // die;
    if (!$pid) {
        my $r = $front->stream('/v1/chat/completions', {
            messages => [ { role => 'system', content => $systems[$i] },
                          { role => 'user', content => "stream $i" } ],
            max_tokens => 1500, ignore_eos => \1, stream => \1 },
            headers => { 'X-Tenant' => "s$i" });
        my $done = grep { !ref $_ && $_ eq '[DONE]' } @{ $r->{events} };
        POSIX::_exit($done ? 0 : 1);
    }
    push @streams, [$i, $pid];
}

# and bodies in flight on the dead node's tenants: no byte answered yet,
# they go to another node (proxy_next_upstream) and succeed
my @bodies;
for my $i (@{ $by_node{$gone} }) {
    my $pid = fork // die;
    if (!$pid) {
        my $r = $front->post('/v1/chat/completions', {
            messages => [ { role => 'system', content => $systems[$i] },
                          { role => 'user', content => "body $i" } ],
            max_tokens => 400, ignore_eos => \1 },
            headers => { 'X-Tenant' => "p$i" });
        # 0, or the status less 400 (599: the client's own timeout)
        POSIX::_exit($r->{status} == 200
                     && $r->{json}{usage}{completion_tokens} > 0
                     ? 0 : $r->{status} - 400);
    }
    push @bodies, $pid;
}

# wait until the victim streams, then kill its master and workers
$deadline = time + 60;
while (time < $deadline) {
    last if ($f->metric($victim, 'vllm:num_requests_running') // 0) > 0;
    sleep 0.05;
}
my $vt = $f->node($victim);
my @pids = ($vt->{pid}, $vt->worker_pids);
kill 'KILL', @pids;
waitpid($vt->{pid}, 0);
delete $vt->{pid};

my $during = round('b');
ok($during, 'with the node killed, every tenant is answered (retries)');
ok($during && !grep({ $during->{$_} eq $gone } 0 .. 7),
   'none is on the dead node');

my %ended;
for my $s (@streams) {
    waitpid($s->[1], 0);
    $ended{$before->{$s->[0]} eq $gone ? 'dead' : 'live'}{$? >> 8}++;
}
is($ended{live}{1} // 0, 0, 'streams on the other nodes all finished');
my ($retried, @failed) = (0);
for my $pid (@bodies) {
    waitpid($pid, 0);
    $? == 0 ? $retried++ : push @failed, ($? >> 8) + 400;
}
is($retried, scalar @bodies, 'bodies in flight on the dead node: answered '
                             . 'by another node') or diag("statuses: @failed");
my @moved_bodies = grep { $_->[0] =~ /^p/ && @{ $_->[4] } > 1 }
                   @{ $f->routes };
diag('bodies retried after the kill: ' . scalar @moved_bodies);
ok(($ended{dead}{0} // 0) + ($ended{dead}{1} // 0)
   == @{ $by_node{$gone} }, 'streams on the dead node ended (no hang)');

# once the streams' load is gone, the dead node's tenants are elsewhere
# and the others where they were
sub settle {
    my ($tag, $want) = @_;
    my $deadline = time + 60;
    my ($k, $now) = (0);
    while (time < $deadline) {
        $now = round($tag . $k++);
        return $now if $now && $want->($now);
        sleep 0.25;
    }
    return $now;
}
my @others = grep { $before->{$_} ne $gone } 0 .. 7;
$during = settle('b', sub {
    my ($h) = @_;
    !grep({ $h->{$_} eq $gone } 0 .. 7)
        && !grep({ $h->{$_} ne $before->{$_} } @others);
});
is_deeply([ sort grep { $before->{$_} ne $during->{$_} } 0 .. 7 ],
          [ sort @{ $by_node{$gone} } ], 'only the dead node\'s tenants moved');

# the node comes back: after fail_timeout its tenants, and only they,
# return to it
$f->start_node($victim);
my $after = settle('c', sub {
    my ($h) = @_;
    !grep { $h->{$_} ne $before->{$_} } 0 .. 7;
});
is_deeply($after, $before, 'the node is back: every tenant is where it was');

# billing across the tiers: the front's access-log line of a request is
# the node's (the harness's billing format on both: id, counts, times)

for my $k (1 .. 6) {
    my $r = $front->post('/v1/chat/completions', {
        messages => [ { role => 'system', content => $systems[$k] },
                      { role => 'user', content => "bill $k" } ],
        max_tokens => 3 + $k });
    is($r->{status}, 200, "billed request $k: 200");
    my $id = $r->{json}{id};
    my $at_front = $front->wait_log_line(qr/ id=\Q$id\E /);
    my $at_node = $f->node_line($id);
    like($at_front // '', qr/completion=${\($r->{json}{usage}{completion_tokens})} /,
         "billed request $k: the front logs the node's counts");
    is($at_front, $at_node, "billed request $k: the front's line is the "
                            . "node's");
}

# streams too: the node's record rides after [DONE] as an SSE comment,
# which the front takes out; the client gets the node's stream without it

for my $k (1 .. 4) {
    my $r = $front->stream('/v1/chat/completions', {
        messages => [ { role => 'system', content => $systems[$k] },
                      { role => 'user', content => "stream bill $k" } ],
        max_tokens => 20 + $k, stream => \1,
        stream_options => { include_usage => \1 } });
    is($r->{status}, 200, "billed stream $k: 200");
    my ($usage) = grep { ref $_ && $_->{usage} } @{ $r->{events} };
    my $id = $usage->{id} // '';
    unlike($r->{content}, qr/llm-billing/, "billed stream $k: no record "
                                           . 'reaches the client');
    like($r->{content}, qr/\n\ndata: \[DONE\]\n\n\z/,
         "billed stream $k: it ends with [DONE]");
    my $at_front = $front->wait_log_line(qr/ id=\Q$id\E /);
    my $at_node = $f->node_line($id);
    like($at_front // '',
         qr/completion=$usage->{usage}{completion_tokens} /,
         "billed stream $k: the front logs the node's counts");
    is($at_front, $at_node, "billed stream $k: the front's line is the "
                            . "node's");
}

# a node asked directly (no LLM-Billing) sends no record
my $plain = $f->node(0)->stream('/v1/chat/completions', {
    messages => [ { role => 'user', content => 'no record' } ],
    max_tokens => 3, stream => \1 });
unlike($plain->{content}, qr/llm-billing/, 'a stream not from a router: '
                                           . 'no record');

# bad input at the front: the node's own errors

my $node = $f->node(0);
for my $case (['non-JSON', '{"messages": [', 400],
              ['not an object', '[1, 2]', 400],
              ['unknown model', { model => 'nope', messages =>
                  [ { role => 'user', content => 'hi' } ] }, 404],
              ['huge body', 'x' x (2 * 1024 * 1024), 413])
{
    my $a = $front->post('/v1/chat/completions', $case->[1]);
    my $b = $node->post('/v1/chat/completions', $case->[1]);
    is($a->{status}, $case->[2], "$case->[0]: $case->[2] at the front");
    is($a->{status}, $b->{status}, "$case->[0]: the node's status");
    is_deeply($a->{json}, $b->{json}, "$case->[0]: the node's error object");
}

# a node as an Inference Extension endpoint (the model-server protocol of
# gateway-api-inference-extension, docs/proposals/003): the metrics the
# endpoint picker reads, with their meanings, and the OpenAI routes

my $m = Prometheus::parse($node->get('/metrics')->{content});
is($m->{type}{'vllm:num_requests_waiting'}, 'gauge', 'queue: a gauge');
is($m->{type}{'vllm:num_requests_running'}, 'gauge', 'running: a gauge');
is($m->{type}{'vllm:kv_cache_usage_perc'}, 'gauge', 'KV usage: a gauge');
my ($info) = @{ $m->series('vllm:cache_config_info') };
my %l = %{ $info->[0] // {} };
is($l{block_size}, 16, 'cache_config_info: block_size 16');
is($l{num_gpu_blocks}, $blocks, "cache_config_info: num_gpu_blocks $blocks");
my $u = $m->value('vllm:kv_cache_usage_perc');
ok(defined $u && $u >= 0 && $u <= 1, 'KV usage is a fraction');
for my $route ('/v1/chat/completions', '/v1/completions') {
    my $r = $node->post($route, { max_tokens => 1,
        $route =~ /chat/ ? (messages => [ { role => 'user',
                                            content => 'hi' } ])
                         : (prompt => 'hi') });
    is($r->{status}, 200, "$route: 200");
}
is($node->get('/v1/models')->{json}{data}[0]{id}, 'tiny', '/v1/models');

$front->done;
$f->node($_)->done for 0 .. 2;

done_testing;
