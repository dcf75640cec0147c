#!/usr/bin/perl
# The router's side of billing across tiers, against a node played by
# this test (a socket on 127.0.0.1 that answers each request with a
# scripted stream, written in pieces): the front takes the node's billing
# record (an SSE comment after [DONE]) out of the stream wherever the
# pieces cut it, passes every other byte as the node wrote it (a comment
# that only begins like the record included), and logs the record's
# values as its $llm_* variables; a body's record comes in a header.
# And what nginx -t says of llm_router_model and llm_balance.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use IO::Socket::INET;
use POSIX ();
use Test::More;
use Time::HiRes qw(sleep);
use NginxLLM;

my $model = NginxLLM->model;

my $node = IO::Socket::INET->new(Listen => 16, LocalAddr => '127.0.0.1:0',
                                 ReuseAddr => 1) or die "listen: $!";
my $node_port = $node->sockport;

my $t = NginxLLM->new(model => '', engine => "    llm_router_model $model;\n",
    http => <<"HTTP", locations => <<'LOC');
    upstream node { llm_balance prefix; server 127.0.0.1:$node_port; }
HTTP
        location /v1/ {
            proxy_pass http://node;
            proxy_http_version 1.1;
            proxy_set_header LLM-Billing stream;
            proxy_buffering off;
        }
LOC
$t->start(wait => 0);

my $record = 'id=chatcmpl-%s prompt=21 cached=16 completion=%d finish=stop '
           . 'log_stats=1 queued=100.5 scheduled=100.75 first=101 '
           . 'last=101.5 model=tiny';

sub body_end {
    my ($req) = @_;
    my ($len) = $req =~ /Content-Length: (\d+)/i;
    return index($req, "\r\n\r\n") + 4 + ($len // 0);
}

my $sse_head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; "
             . "charset=utf-8\r\nTransfer-Encoding: chunked\r\n"
             . "Connection: close\r\n\r\n";
my $events = "data: {\"a\":1}\n\n: llm-bingo is not the record\n\n"
           . "data: {\"b\":\": llm-billing in a string\"}\n\n"
           . "data: [DONE]\n\n";

# streams without a record (a Responses stream, one a node was not asked
# for, one that ends the way the marker begins): the client gets every
# byte, the last ones held back included
my @plain = ("event: response.completed\ndata: {\"a\":1}\n\n",
             $events, $events . ': llm-billin');

# case n: the stream cut at byte n - 1 of the record's marker (and of
# the two newlines before it); then each plain stream whole and cut
# before its last byte and its last two; the last case is a body with a
# header
sub pieces {
    my @cases;
    for my $cut (0 .. 18) {
        my $all = $events . ': llm-billing '
                  . sprintf($record, "c$cut", $cut) . "\n\n";
        my $at = length($events) - 2 + $cut;
        push @cases, [ $sse_head, substr($all, 0, $at), substr($all, $at) ];
    }
    for my $s (@plain) {
        push @cases, [ $sse_head, $s ];
        for my $back (1, 2) {
            push @cases, [ $sse_head, substr($s, 0, -$back),
                           substr($s, -$back) ];
        }
    }
    my $body = '{"id":"chatcmpl-b","object":"chat.completion"}';
    push @cases, [ "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                   . "LLM-Billing: " . sprintf($record, 'b', 42) . "\r\n"
                   . "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                   $body ];
    return @cases;
}

my $n_cases = scalar(() = pieces());

# the node: one request per connection, the pieces written apart
my $pid = fork // die;
if (!$pid) {
    while (my $c = $node->accept) {
        my $req = '';
        while ($req !~ /\r\n\r\n/s || length($req) < body_end($req)) {
            last unless sysread($c, $req, 65536, length $req);
        }
        my ($n) = $req =~ /"case":(\d+)/;
        my @pieces = @{ (pieces())[$n] };
        my $head = shift @pieces;
        syswrite($c, $head);
        for my $p (@pieces) {
            syswrite($c, sprintf("%x\r\n%s\r\n", length $p, $p));
            sleep 0.05;
        }
        syswrite($c, "0\r\n\r\n");
        close $c;
    }
    POSIX::_exit(0);
}

for my $n (0 .. 18) {
    my $r = $t->post('/v1/chat/completions', { case => $n, messages => [] });
    is($r->{status}, 200, "cut $n: 200");
    is($r->{content}, $events, "cut $n: the client gets the stream without "
                               . 'the record');
    my $line = $t->wait_log_line(qr/ id=chatcmpl-c$n /);
    like($line // '', qr/ prompt=21 completion=$n total=\d+ cached=16 ttft=250\.000 queue=250\.000 /,
         "cut $n: the front logs the record's values");
}

for my $n (19 .. $n_cases - 2) {
    my $s = $plain[int(($n - 19) / 3)];
    my $r = $t->post('/v1/chat/completions', { case => $n, messages => [] });
    is($r->{status}, 200, "no record, case $n: 200");
    is($r->{content}, $s, "no record, case $n: the client gets every byte");
}

my $r = $t->post('/v1/chat/completions',
                 { case => $n_cases - 1, messages => [] });
is($r->{headers}{'llm-billing'}, sprintf($record, 'b', 42),
   'a body: the record in its header');
like($t->wait_log_line(qr/ id=chatcmpl-b /) // '',
     qr/ prompt=21 completion=42 total=63 cached=16 ttft=250\.000 /,
     'a body: the front logs the record\'s values');

# nginx -t

for my $c (['llm_router_model /nonexistent;', qr/llm_router_model.*nonexistent/],
           ["llm_router_model $model prefix_blocks=0;", qr/prefix_blocks must be 1 to 256/],
           ["upstream u { llm_balance prefix load_factor=1; server 127.0.0.1:1; }",
            qr/load_factor must be a number above 1/],
           ["upstream u { llm_balance hash; server 127.0.0.1:1; }",
            qr/invalid method "hash"/],
           ["upstream u { llm_balance prefix window=x; server 127.0.0.1:1; }",
            qr/invalid window "x"/],
           ["upstream u { llm_balance prefix; server 127.0.0.1:1; }",
            qr/"llm_balance" in upstream "u" requires "llm_router_model"/])
{
    my ($rc, $out) = $t->test_config(http => $c->[0], engine => '',
                                     locations => '');
    isnt($rc, 0, "nginx -t fails: $c->[0]");
    like($out, $c->[1], '... naming the cause');
}

kill 'TERM', $pid;
waitpid($pid, 0);
$t->done;

done_testing;
