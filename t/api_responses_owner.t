#!/usr/bin/perl
# llm_responses_owner: a stored response belongs to the value the
# directive had when it was made (here an API key mapped to a user with
# map).  Another owner's GET, DELETE, cancel and previous_response_id get
# exactly the 404 of an unknown id; the owner's work as before.  Where the
# directive is not set, responses are shared as in vLLM, and they are not
# an owner's.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $t = NginxLLM->new(
    http => <<'HTTP',
    map $http_x_api_key $llm_user {
        default  "";
        key-a    alice;
        key-b    bob;
    }
HTTP
    locations => <<'LOC');
        location /v1/ { llm_api; llm_responses_owner $llm_user; }
        location /open/v1/ { llm_api; }
        location = /health { llm_health; }
LOC
$t->start;

my %alice = (headers => { 'X-Api-Key' => 'key-a' });
my %bob = (headers => { 'X-Api-Key' => 'key-b' });
my $resp = '/v1/responses';
my %req = (input => 'Hi', max_output_tokens => 2, temperature => 0);

# what an unknown id gets, with the id in its place
my $unknown = 'resp_' . '0' x 32;
sub not_found_as_unknown {
    my ($r, $id, $what, $method, $path) = @_;
    my $u = $t->request($method, $path =~ s/\Q$id\E/$unknown/r, undef,
                        %bob);
    is($r->{status}, 404, "$what: 404");
    is($r->{content}, $u->{content} =~ s/$unknown/$id/gr,
       "$what: the very answer of an unknown id");
}

my $a = $t->post($resp, \%req, %alice);
is($a->{status}, 200, 'alice makes a response');
my $id = $a->{json}{id};

is($t->get("$resp/$id", %alice)->{content}, $a->{content},
   'alice gets it back');
for my $who ([ 'bob', %bob ], [ 'no key', headers => {} ]) {
    my ($name, %h) = @$who;
    my $r = $t->get("$resp/$id", %h);
    is($r->{status}, 404, "$name: GET is 404");
    is($r->{content}, $t->get("$resp/$unknown", %h)->{content}
                      =~ s/$unknown/$id/gr,
       "$name: the very answer of an unknown id");
}
not_found_as_unknown($t->request('POST', "$resp/$id/cancel", undef, %bob),
                     $id, 'bob: cancel', 'POST', "$resp/$id/cancel");
is($t->request('POST', "$resp/$id/cancel", undef, %alice)->{status}, 400,
   'alice: cancel is the 400 of a finished response');
not_found_as_unknown($t->request('DELETE', "$resp/$id", undef, %bob),
                     $id, 'bob: DELETE', 'DELETE', "$resp/$id");
is($t->get("$resp/$id", %alice)->{status}, 200,
   "... and alice's response is still there");

my $r = $t->post($resp, { %req, previous_response_id => $id }, %bob);
my $u = $t->post($resp, { %req, previous_response_id => $unknown }, %bob);
is($r->{status}, 404, 'bob: previous_response_id is 404');
is($r->{content}, $u->{content} =~ s/$unknown/$id/gr,
   'bob: the very answer of an unknown previous_response_id');
$r = $t->post($resp, { %req, previous_response_id => $id }, %alice);
is($r->{status}, 200, 'alice continues her conversation');
cmp_ok($r->{json}{usage}{input_tokens}, '>', $a->{json}{usage}{input_tokens},
       '... with the stored turn in front');

# a stream is stored for its owner as well
my $s = $t->stream($resp, { %req, stream => \1 }, %bob);
my ($sid) = $s->{content} =~ /"id":"(resp_[0-9a-f]{32})"/;
is($t->get("$resp/$sid", %bob)->{status}, 200, "bob's streamed response: his");
is($t->get("$resp/$sid", %alice)->{status}, 404, '... not alice\'s');

# without the directive: shared by everyone there, and no owner's
my $o = $t->post("/open$resp", \%req, %alice);
is($t->get("/open$resp/$o->{json}{id}", %bob)->{content}, $o->{content},
   'no llm_responses_owner: anyone there reads it, as in vLLM');
is($t->get("/open$resp/$o->{json}{id}")->{status}, 200,
   '... with no key too');
is($t->get("$resp/$o->{json}{id}", %alice)->{status}, 404,
   '... but it is no owner\'s: alice cannot read it where owners count');
is($t->get("/open$resp/$id", %alice)->{status}, 404,
   "alice's response is not read where owners do not count");

# the owner deletes: gone for her too
is($t->request('DELETE', "$resp/$id", undef, %alice)->{status}, 200,
   'alice deletes it');
is($t->get("$resp/$id", %alice)->{status}, 404, '... and it is gone');

$t->done;

my ($rc, $out) = NginxLLM->new->test_config(
    http => 'llm_responses_owner $remote_user; llm_responses_owner $pid;');
isnt($rc, 0, 'llm_responses_owner twice: nginx -t fails') unless NginxLLM::asan();
like($out, qr/"llm_responses_owner" directive is duplicate/,
     '... naming the directive') unless NginxLLM::asan();

done_testing();
