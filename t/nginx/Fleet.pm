package Fleet;

# A fleet for the router tests and benchmark: ngx_llm nodes, each an nginx
# in a network namespace of its own (ip netns, a veth pair, addresses of
# this process's own), and a front nginx in router mode on 127.0.0.1.
#
#   my $why = Fleet::cannot();            # undef, or why namespaces fail
#   my $f = Fleet->new(nodes => 3, engine => '...');
#   $f->start_nodes;
#   $f->front(balance => 'llm_balance prefix;');   # (re)starts the front
#   $f->chat($tenant, $system, $user, %opts);
#   $f->hits;                            # summed prefix_cache_hits_total
#
# The namespaces and links go when the object does (and at exit).

use strict;
use warnings;

use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);
use NginxLLM;
use Prometheus;

my @made;    # namespaces and links to delete at exit

END { cleanup() }

sub cleanup {
    while (my $m = pop @made) {
        system("ip $m->[0] del $m->[1] >/dev/null 2>&1");
    }
}

# undef where namespaces can be made, else the reason
sub cannot {
    return 'not root: ip netns needs CAP_SYS_ADMIN' if $> != 0;
    return 'no ip(8) (iproute2)' if system('ip -V >/dev/null 2>&1') != 0;
    my $ns = "llmchk$$";
    my $out = `ip netns add $ns 2>&1`;
    return "ip netns add failed: $out" if $? != 0;
    system("ip netns del $ns");
    return undef;
}

sub new {
    my ($class, %o) = @_;
    my $self = bless { nodes => 3, %o }, $class;
    # 10.(64 + pid % 128).i.{1,2}: concurrent runs apart; or net => N, where
    # the nodes' addresses must be known (they place the ring's points)
    my $net = $o{net} // 64 + $$ % 128;
    for my $i (0 .. $self->{nodes} - 1) {
        my ($ns, $veth) = ("llmr$$-$i", "lr$$" . "n$i");
        sh("ip netns add $ns");
        push @made, ['netns', $ns];
        sh("ip link add $veth type veth peer name ${veth}p");
        push @made, ['link', $veth];
        sh("ip link set ${veth}p netns $ns");
        sh("ip addr add 10.$net.$i.1/24 dev $veth");
        sh("ip link set $veth up");
        sh("ip netns exec $ns ip addr add 10.$net.$i.2/24 dev ${veth}p");
        sh("ip netns exec $ns ip link set ${veth}p up");
        sh("ip netns exec $ns ip link set lo up");
        push @{ $self->{node} }, { ns => $ns, addr => "10.$net.$i.2" };
    }
    return $self;
}

sub sh {
    my ($cmd) = @_;
    system($cmd) == 0 or die "$cmd: failed\n";
}

# a node's nginx (an NginxLLM), made or remade with a fresh prefix cache
sub start_node {
    my ($self, $i) = @_;
    my $n = $self->{node}[$i];
    $n->{t}->stop if $n->{t};
    $n->{t} = NginxLLM->new(
        addr => $n->{addr}, port => 8000, netns => $n->{ns},
        engine => $self->{engine}, workers => 1,
        http => 'log_format tenant \'$http_x_tenant $status\'; '
              . 'access_log logs/tenant.log tenant;',
        locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC
    $n->{t}->start;
    return $n->{t};
}

sub start_nodes {
    my ($self) = @_;
    $self->start_node($_) for 0 .. $self->{nodes} - 1;
}

sub node { $_[0]{node}[$_[1]]{t} }

# the access-log line (the harness's billing format) of the request with
# this id, from whichever node served it
sub node_line {
    my ($self, $id) = @_;
    my $deadline = time + 10;
    while (time < $deadline) {
        for my $i (0 .. $self->{nodes} - 1) {
            my $l = $self->node($i)->wait_log_line(qr/ id=\Q$id\E /, 0.01);
            return $l if defined $l;
        }
        sleep 0.05;
    }
    return undef;
}
sub addrs { map { "$_->{addr}:8000" } @{ $_[0]{node} } }

# the front: llm_router_model, an upstream of the nodes with the given
# balancing lines, proxy_pass with retries
sub front {
    my ($self, %o) = @_;
    $self->{front}->stop if $self->{front};
    my $servers = join '', map { "        server $_ max_fails=1 "
                                 . "fail_timeout=$self->{fail_timeout};\n" }
                           $self->addrs;
    my $t = NginxLLM->new(model => '', workers => $o{workers} // 2,
        engine => "    llm_router_model $self->{model};\n",
        http => <<"HTTP", locations => <<'LOC');
    upstream nodes {
        $o{balance}
$servers        keepalive 16;
    }
    log_format route '\$http_x_tenant \$status \$llm_prefix_key '
                     '\$upstream_addr';
    access_log logs/route.log route;
HTTP
        location /v1/ {
            proxy_pass http://nodes;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header LLM-Billing stream;
            proxy_buffering off;
            proxy_next_upstream error timeout non_idempotent;
            proxy_next_upstream_tries 3;
            proxy_connect_timeout 5s;
            client_body_buffer_size 1m;
        }
LOC
    $t->start(wait => 0);
    $self->{front} = $t;
    return $t;
}

sub front_t { $_[0]{front} }

# the route log's lines: [tenant, the node that answered, status, key,
# every node tried]
sub routes {
    my ($self) = @_;
    my $f = $self->{front}->dir . '/logs/route.log';
    my @l;
    for (split /\n/, NginxLLM::slurp($f)) {
        my ($tenant, $status, $key, $tried) = split / /, $_, 4;
        my @tried = split /, /, $tried;
        push @l, [$tenant, $tried[-1], $status, $key, \@tried];
    }
    return \@l;
}

sub metric {
    my ($self, $i, $name) = @_;
    my $r = $self->node($i)->get('/metrics');
    return undef unless $r->{status} == 200;
    return Prometheus::parse($r->{content})->value($name);
}

sub hits {
    my ($self) = @_;
    my $s = 0;
    $s += $self->metric($_, 'vllm:prefix_cache_hits_total') // 0
        for 0 .. $self->{nodes} - 1;
    return $s;
}

# runs the requests (hashes: tenant, system, user) with this many
# clients at once, through the front; returns the responses' statuses
# (and, in list context, their latencies in ms)
sub run {
    my ($self, $requests, $clients, %o) = @_;
    my @pids;
    my $dir = $self->{front}->dir;
    for my $c (0 .. $clients - 1) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            my @st;
            for (my $k = $c; $k < @$requests; $k += $clients) {
                my $q = $requests->[$k];
                my $t0 = time;
                my $r = $self->{front}->post('/v1/chat/completions', {
                    messages => [ { role => 'system', content => $q->{system} },
                                  { role => 'user', content => $q->{user} } ],
                    max_tokens => $o{max_tokens} // 2, temperature => 0 },
                    headers => { 'X-Tenant' => $q->{tenant} });
                push @st, sprintf '%d:%.3f', $r->{status},
                                  (time - $t0) * 1000;
            }
            open my $fh, '>', "$dir/run-$c" or POSIX::_exit(1);
            print $fh "@st\n";
            close $fh;
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    waitpid($_, 0) for @pids;
    my @r = map { [ split /:/ ] }
            map { split ' ', NginxLLM::slurp("$dir/run-$_") }
            0 .. $clients - 1;
    my @st = map { $_->[0] } @r;
    return wantarray ? (\@st, [ map { $_->[1] } @r ]) : \@st;
}

# the 8-tenant workload: distinct ~1,000-token system prompts (seeded
# pseudo-words), short user turns, tenants drawn by a seeded generator
sub tenants {
    my ($class, $n, $words) = @_;
    my @t;
    for my $i (0 .. $n - 1) {
        srand(1000 + $i);
        my @w = map { join '', map { ('a' .. 'z')[int rand 26] }
                               1 .. 3 + int rand 5 } 1 .. $words;
        push @t, "Tenant $i instructions: @w.";
    }
    return @t;
}

sub workload {
    my ($class, $systems, $count, %o) = @_;
    srand($o{seed} // 42);
    my @q;
    for my $k (0 .. $count - 1) {
        my $i = int rand @$systems;
        $i = $o{hot} if defined $o{hot} && rand() < $o{hot_share};
        push @q, { tenant => $i, system => $systems->[$i],
                   user => "Question $k: " . join ' ',
                           map { int rand 1000 } 1 .. 8 };
    }
    return \@q;
}

sub DESTROY {
    my ($self) = @_;
    $self->{front}->stop('TERM') if $self->{front};
    $_->{t} && $_->{t}->stop('TERM') for @{ $self->{node} };
}

1;
