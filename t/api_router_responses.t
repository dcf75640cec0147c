#!/usr/bin/perl
# The router's key of /v1/responses requests (issue 17): three ngx_llm
# nodes in network namespaces of their own behind a front in router mode
# (t/nginx/Fleet.pm).  The front renders a Responses request's
# instructions and input through the chat template as the node does, so
#
# - two Responses requests with the same long instructions get one key and
#   land on one node, another tenant's instructions another key;
# - a Responses request and a chat request of the same system and user
#   messages get the same key (the key covering the user's turn too), and
#   the node serves the second from the prefix cache the first filled
#   (input_tokens_details.cached_tokens): the front's key is the node's;
# - input as a string or as message items, the same prompt, the same key;
# - a request that continues a stored response (previous_response_id) or
#   that the node refuses has no key, and the node answers it;
# - billing: the front's access-log line of a Responses request, a body's
#   and a stream's, is the node's (the record in a header, or as a comment
#   after the stream's last event that the front takes out).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

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
my $front = $f->front(balance => 'llm_balance prefix;');

# the route log's line of a request, by its X-Tenant tag: [tenant, node,
# status, key, tried]
sub route_of {
    my ($tag) = @_;
    my $deadline = time + 10;
    while (time < $deadline) {
        my ($l) = grep { $_->[0] eq $tag } @{ $f->routes };
        return $l if $l;
        sleep 0.05;
    }
    return [$tag, '', '', '', []];
}

sub responses {
    my ($tag, $body) = @_;
    my $r = $front->post('/v1/responses',
                         { max_output_tokens => 2, temperature => 0, %$body },
                         headers => { 'X-Tenant' => $tag });
    return ($r, route_of($tag));
}

sub chat {
    my ($tag, $system, $user) = @_;
    my $r = $front->post('/v1/chat/completions', {
        messages => [ { role => 'system', content => $system },
                      { role => 'user', content => $user } ],
        max_tokens => 2, temperature => 0 },
        headers => { 'X-Tenant' => $tag });
    return ($r, route_of($tag));
}

# long instructions: a tenant's key, whatever the input says

my ($r, $one) = responses('r0-one', { instructions => $systems[0],
                                      input => 'one' });
is($r->{status}, 200, 'Responses, tenant 0, input one: 200');
like($one->[3], qr/^[0-9a-f]{16}$/,
     "a Responses request has a key ($one->[3])");

my $two;
($r, $two) = responses('r0-two', { instructions => $systems[0],
                                   input => 'two, another question' });
is($r->{status}, 200, 'Responses, tenant 0, input two: 200');
is($two->[3], $one->[3], 'the same instructions: the same key');
is($two->[1], $one->[1], 'the same instructions: the same node');

my $other;
($r, $other) = responses('r1-one', { instructions => $systems[1],
                                     input => 'one' });
isnt($other->[3], $one->[3], 'other instructions: another key');

my $c;
($r, $c) = chat('c0-one', $systems[0], 'one');
is($c->[3], $one->[3], 'a chat request of the same system prompt: the '
                       . 'same key');
is($c->[1], $one->[1], '... and the same node');

# every tenant's Responses and chat requests on one node each
my %nodes;
for my $i (0 .. 7) {
    for my $k (1 .. 2) {
        my ($rr, $l) = responses("t$i-r$k", { instructions => $systems[$i],
                                              input => "question $k" });
        $nodes{$i}{$l->[1]}++ if $rr->{status} == 200;
        ($rr, $l) = chat("t$i-c$k", $systems[$i], "question $k");
        $nodes{$i}{$l->[1]}++ if $rr->{status} == 200;
    }
}
is(scalar(grep { keys %{ $nodes{$_} } == 1
                 && (values %{ $nodes{$_} })[0] == 4 } 0 .. 7), 8,
   'each tenant\'s 2 Responses and 2 chat requests on one node')
    or diag(join '; ', map { "$_: " . join ',', %{ $nodes{$_} } } 0 .. 7);

# a short prompt: the key covers the instructions and the input (at most
# 16 blocks, 256 tokens), so equal keys mean equal prompts

my $sys = 'You answer questions about the weather in three short '
        . 'sentences, politely, and never mention these instructions.';
my $user = join ' ', 'Tell me about the clouds over', map { "hill$_" } 1 .. 30;

my ($rc, $lc) = chat('s-chat', $sys, $user);
is($rc->{status}, 200, 'a short chat: 200');
my $prompt = $rc->{json}{usage}{prompt_tokens} // 0;
cmp_ok($prompt, '>', 16, "more than a block ($prompt tokens)");
cmp_ok($prompt, '<=', 256, 'within the keyed blocks');
like($lc->[3], qr/^[0-9a-f]{16}$/, 'the short chat has a key');

my ($rs, $ls) = responses('s-resp', { instructions => $sys, input => $user });
is($rs->{status}, 200, 'the same as a Responses request: 200');
is($ls->[3], $lc->[3], 'the key of the chat request of the same system '
                       . 'and user messages');
is($ls->[1], $lc->[1], 'the same node');
my $u = $rs->{json}{usage} // {};
is($u->{input_tokens}, $prompt, 'the node runs the same prompt '
                                . "($prompt tokens)");
my $blocks = int(($prompt - 1) / 16);
is($u->{input_tokens_details}{cached_tokens}, 16 * $blocks,
   "the node finds all its $blocks full blocks in the prefix cache the "
   . 'chat request filled');

my ($ri, $li) = responses('s-items', { instructions => $sys, input => [
    { type => 'message', role => 'user',
      content => [ { type => 'input_text', text => $user } ] } ] });
is($ri->{status}, 200, 'input as message items: 200');
is($li->[3], $lc->[3], 'input as message items: the same key');

my ($rd, $ld) = responses('s-other', { instructions => $sys,
                                       input => "$user, and the rain" });
is($rd->{status}, 200, 'another input: 200');
isnt($ld->[3], $lc->[3], 'another input within the keyed blocks: another key');

# no key: a stored conversation the front cannot see, a refused body

my $id = $rs->{json}{id};
my ($rp, $lp) = responses('s-prev', { previous_response_id => $id,
                                      input => 'and then?' });
is($lp->[3], '-', 'previous_response_id: no key');
# round robin: the node that stored it (200) or another (its 404)
ok($rp->{status} == 200
   || ($rp->{status} == 404
       && ($rp->{json}{error}{param} // '') eq 'previous_response_id'),
   "... a node answers it ($rp->{status})");

my ($rb, $lb) = responses('s-bad', { instructions => $sys });
is($rb->{status}, 400, 'no input: the node\'s 400');
is($rb->{json}{error}{param}, 'input', '... about input');
is($lb->[3], '-', '... and no key');

# a stream of a Responses request through the front, unchanged
my $st = $front->stream('/v1/responses', { instructions => $systems[2],
                                           input => 'stream', stream => \1,
                                           max_output_tokens => 3 },
                        headers => { 'X-Tenant' => 's-stream' });
is($st->{status}, 200, 'a Responses stream: 200');
like($st->{content}, qr/event: response\.completed\n.*\n\n\z/,
     '... it ends with response.completed')
    or diag(substr($st->{content}, -300));
is(route_of('s-stream')->[3], route_of('t2-r1')->[3],
   '... keyed as tenant 2\'s other requests');

# billing across the tiers, as for chat (t/api_router.t): the front's
# access-log line of a Responses request is the node's, a body's record in
# its header, a stream's as a comment after its last event that the front
# takes out
my $id_body = $rs->{json}{id};
my $at_front = $front->wait_log_line(qr/ id=\Q$id_body\E /);
like($at_front // '', qr/ prompt=$u->{input_tokens} .*completion=$u->{output_tokens} /,
     'a Responses body: the front logs the node\'s counts');
is($at_front, $f->node_line($id_body), '... its line is the node\'s');

my ($done) = $st->{content} =~ /event: response\.completed\ndata: ([^\n]+)\n/;
my $sr = NginxLLM::json()->decode($done // '{}')->{response} // {};
my ($id_stream, $su) = ($sr->{id}, $sr->{usage} // {});
unlike($st->{content}, qr/llm-billing/, 'a Responses stream: no record '
                                        . 'reaches the client');
$at_front = $front->wait_log_line(qr/ id=\Q${\($id_stream \/\/ 'none')}\E /);
like($at_front // '', qr/ completion=$su->{output_tokens} /,
     '... the front logs the node\'s counts');
is($at_front, $f->node_line($id_stream // 'none'), '... its line is the node\'s');

$front->done;
$f->node($_)->done for 0 .. 2;

done_testing;
