#!/usr/bin/perl
# The router tier (issue 17), one run on this machine:
#
#   1. router overhead: a 1,000-token chat prompt (max_tokens 1, its
#      prefix cached), sent ROUNDS times to a node directly and through the
#      front (llm_router_model + llm_balance prefix, which renders,
#      tokenizes and hashes the prompt, then proxies), interleaved; the
#      medians' difference is what the front adds;
#   2. the 8-tenant workload of t/api_router.t (200 chat requests,
#      max_tokens 1, CLIENTS at once, each node's KV cache about 3
#      tenants' prefixes) through llm_balance prefix, round robin and
#      `hash $llm_prefix_key consistent`, on fresh nodes each: latency
#      p50/p99 at the client (with max_tokens 1 the time to the first
#      token, plus the proxy) and the nodes' summed prefix-cache hits.
#
# Three nodes in network namespaces (root), as the test.  Results:
# BUILD/bench/router_bench.json.  Not part of `make test`.
#
# usage: bench/router_bench.pl     env: ROUNDS=200 CLIENTS=6

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/nginx";

use JSON::PP;
use Time::HiRes qw(time);
use NginxLLM;
use Fleet;

my $rounds = $ENV{ROUNDS} || 200;
my $clients = $ENV{CLIENTS} || 6;

if (my $why = Fleet::cannot()) {
    die "router_bench: $why\n";
}

my $f = Fleet->new(nodes => 3, model => NginxLLM->model,
                   fail_timeout => '2s', engine => <<'ENGINE');
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 2048;
    llm_kv_cache_size 1640k;
    llm_thread_pool llm;
ENGINE

my @systems = Fleet->tenants(8, 340);

sub pct {
    my ($p, @v) = @_;
    @v = sort { $a <=> $b } @v;
    return $v[int($p / 100 * $#v + 0.5)];
}

# 1. overhead

$f->start_nodes;
my $front = $f->front(balance => 'llm_balance prefix;', workers => 1);
my $body = { max_tokens => 1, temperature => 0,
             messages => [ { role => 'system', content => $systems[0] },
                           { role => 'user', content => 'Hello?' } ] };
$front->post('/v1/chat/completions', $body) for 1 .. 3;
my $node_addr = $f->routes->[-1][1];
my ($node) = grep { "$f->{node}[$_]{addr}:8000" eq $node_addr } 0 .. 2;
$node = $f->node($node);
$node->post('/v1/chat/completions', $body);

my (@direct, @routed);
for (1 .. $rounds) {
    my $t0 = time;
    my $r = $node->post('/v1/chat/completions', $body);
    die "node: $r->{status}\n" unless $r->{status} == 200;
    push @direct, (time - $t0) * 1000;
    $t0 = time;
    $r = $front->post('/v1/chat/completions', $body);
    die "front: $r->{status}\n" unless $r->{status} == 200;
    push @routed, (time - $t0) * 1000;
}
my $prompt = $node->post('/v1/chat/completions', $body)
                  ->{json}{usage}{prompt_tokens};
my %out = (overhead => {
    prompt_tokens => $prompt, rounds => $rounds,
    direct_p50_ms => pct(50, @direct), routed_p50_ms => pct(50, @routed),
    overhead_p50_ms => pct(50, @routed) - pct(50, @direct) });
printf "router overhead, %d-token prompt: node %.3f ms, front+node %.3f ms"
       . " (median of %d): +%.3f ms\n", $prompt, pct(50, @direct),
       pct(50, @routed), $rounds, $out{overhead}{overhead_p50_ms};

# 2. the fleet

my $work = Fleet->workload(\@systems, 200);
for my $mode (['prefix', 'llm_balance prefix;'], ['round-robin', ''],
              ['hash-consistent', 'hash $llm_prefix_key consistent;'])
{
    $f->start_nodes;
    $f->front(balance => $mode->[1]);
    my ($st, $ms) = $f->run($work, $clients, max_tokens => 1);
    my $ok = grep { $_ == 200 } @$st;
    my $hits = $f->hits;
    $out{fleet}{$mode->[0]} = { ok => $ok, p50_ms => pct(50, @$ms),
                                p99_ms => pct(99, @$ms),
                                prefix_cache_hits => $hits };
    printf "%-16s %3d ok  p50 %7.2f ms  p99 %7.2f ms  hits %d\n",
           $mode->[0], $ok, pct(50, @$ms), pct(99, @$ms), $hits;
}

my $dir = NginxLLM::build_dir() . '/bench';
mkdir $dir;
open my $fh, '>', "$dir/router_bench.json" or die;
print $fh JSON::PP->new->canonical->pretty->encode(\%out);
close $fh;
