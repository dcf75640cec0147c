#!/usr/bin/perl
# The Responses store is one for the nginx instance (a shared memory zone),
# not one per worker: with worker_processes 4, a chain of three requests
# answered by three different workers sees the whole conversation; GET,
# DELETE, cancel and previous_response_id work from a worker other than
# the one that made the response; llm_responses_owner's isolation holds
# across workers; the store survives "nginx -s reload" (a chain continues
# across it), and a reload that changes llm_responses_store starts an
# empty one; its bounds (the count, the bytes, the oldest first) hold for
# all workers together; chains on every worker at once.
#
# Which worker answers: every response carries X-Worker: $pid.  With
# "listen ... reuseport" each worker has a socket of its own and the
# kernel spreads new connections over them; a test opens connections
# (each one a new accept) until one lands on a worker it wants, then sends
# its request on that kept-alive connection, and checks the X-Worker of
# the answer (so a connection that was not kept shows as a failure, never
# as a false pass).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use HTTP::Tiny;
use POSIX qw(WNOHANG);
use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;

my $model = NginxLLM->model(tie => 0);
my $resp = '/v1/responses';
my %greedy = (temperature => 0, max_output_tokens => 4);

my $owners = <<'HTTP';
    map $http_x_api_key $llm_user {
        default  "";
        key-a    alice;
        key-b    bob;
    }
HTTP

my $locations = <<'LOC';
        location /v1/ { llm_api; llm_responses_owner $llm_user; }
        location /open/v1/ { llm_api; }
        location = /health { llm_health; }
        location = /pid { return 204; }
LOC

my %common = (model => $model, workers => 4, listen => 'reuseport',
              server => 'add_header X-Worker $pid always;',
              locations => $locations);

my $t = NginxLLM->new(%common, http => $owners);
$t->start;

# a connection to a worker that is none of @avoid, from new connections
# (at most 400: with 4 workers each lands on a wanted one with a chance of
# at least 1/4, so they all miss about once in 10^50)
sub worker_other_than {
    my ($t, @avoid) = @_;
    my %avoid = map { $_ => 1 } grep { defined } @avoid;
    for (1 .. 400) {
        my $h = HTTP::Tiny->new(keep_alive => 1, timeout => 60);
        my $r = $h->get($t->url('/pid'));
        my $pid = $r->{headers}{'x-worker'};
        next unless $r->{status} == 204 && defined $pid;
        return { http => $h, pid => $pid, t => $t } unless $avoid{$pid};
    }
    BAIL_OUT("no connection reached a worker other than @avoid");
}

# a request on that connection; {worker}: the pid that answered it
sub on {
    my ($c, $method, $path, $body, %h) = @_;
    my $r = $c->{http}->request($method, $c->{t}->url($path), {
        headers => { 'Content-Type' => 'application/json', %h },
        defined $body ? (content => NginxLLM::json()->encode($body)) : () });
    $r->{json} = NginxLLM::decode_json_safe($r->{content} // '');
    $r->{worker} = $r->{headers}{'x-worker'} // '';
    return $r;
}

# the same, on a new connection to a worker other than @avoid; checks
# that the answer came from such a worker
sub elsewhere {
    my ($t, $avoid, $method, $path, $body, %h) = @_;
    my $c = worker_other_than($t, @$avoid);
    my $r = on($c, $method, $path, $body, %h);
    is($r->{worker}, $c->{pid}, "$method $path: answered by worker $c->{pid}"
                                . " (none of @$avoid)");
    return $r;
}

sub text_of { $_[0]{output}[0]{content}[0]{text} }

sub count {
    my ($t, @msgs) = @_;
    return $t->post('/v1/tokenize', { messages => \@msgs })->{json}{count};
}

# the pids of the worker processes (not of any other child of the master)
sub workers_now {
    my ($t) = @_;
    return grep { NginxLLM::slurp("/proc/$_/cmdline") =~ /worker process/ }
           $t->worker_pids;
}

# --- a chain over three workers ---

my $r1 = elsewhere($t, [], 'POST', $resp,
                   { %greedy, input => 'One', instructions => 'Sys.' });
is($r1->{status}, 200, 'chain: the first response');
my $r2 = elsewhere($t, [ $r1->{worker} ], 'POST', $resp,
                   { %greedy, input => 'Two',
                     previous_response_id => $r1->{json}{id} });
is($r2->{status}, 200, 'chain: the second, on another worker, continues it');
my $r3 = elsewhere($t, [ $r1->{worker}, $r2->{worker} ], 'POST', $resp,
                   { %greedy, input => 'Three',
                     previous_response_id => $r2->{json}{id} });
is($r3->{status}, 200, 'chain: the third, on a third worker');
my %three = map { $_->{worker} => 1 } $r1, $r2, $r3;
is(scalar(keys %three), 3,
   'chain: three different workers answered');
is($r3->{json}{usage}{input_tokens},
   count($t, { role => 'user', content => 'One' },
             { role => 'assistant', content => text_of($r1->{json}) },
             { role => 'user', content => 'Two' },
             { role => 'assistant', content => text_of($r2->{json}) },
             { role => 'user', content => 'Three' }),
   'chain: the third sees the whole conversation, without instructions');

# a streamed response, stored by its worker, continued by another
my $sc = worker_other_than($t);
my $raw = '';
my $sr = $sc->{http}->request('POST', $t->url($resp), {
    headers => { 'Content-Type' => 'application/json' },
    content => NginxLLM::json()->encode({ %greedy, input => 'Four',
        stream => \1, previous_response_id => $r3->{json}{id} }),
    data_callback => sub { $raw .= $_[0] } });
my ($sid) = $raw =~ /"id":"(resp_[0-9a-f]{32})"/;
ok($raw =~ /response\.completed/ && defined $sid, 'a streamed continuation');
undef $sc;
my $r = elsewhere($t, [ $sr->{headers}{'x-worker'} ], 'POST', $resp,
                  { %greedy, input => 'Five',
                    previous_response_id => $sid });
is($r->{status}, 200, '... continued on another worker');

# --- GET, HEAD, DELETE and cancel from another worker ---

$r = elsewhere($t, [ $r1->{worker} ], 'GET', "$resp/$r1->{json}{id}");
is($r->{status}, 200, 'GET from another worker: 200');
is($r->{content}, $r1->{content}, '... the bytes that were sent');
$r = elsewhere($t, [ $r1->{worker} ], 'HEAD', "$resp/$r1->{json}{id}");
is($r->{headers}{'content-length'}, length $r1->{content},
   'HEAD from another worker: its length');
$r = elsewhere($t, [ $r1->{worker} ], 'POST',
               "$resp/$r1->{json}{id}/cancel");
is($r->{status}, 400, 'cancel from another worker: 400');
is($r->{json}{error}{message}, 'Cannot cancel a synchronous response.',
   '... the answer for a finished response, as on its own worker');
$r = elsewhere($t, [ $r2->{worker} ], 'DELETE', "$resp/$r2->{json}{id}");
is($r->{status}, 200, 'DELETE from another worker: 200');
is_deeply($r->{json}, { id => $r2->{json}{id}, object => 'response',
                        deleted => JSON::PP::true },
          '... deleted');
for my $w ($r2->{worker}, $r->{worker}) {
    my $c = worker_other_than($t, grep { $_ ne $w } workers_now($t));
    my $g = on($c, 'GET', "$resp/$r2->{json}{id}");
    is("$g->{worker} $g->{status}", "$w 404",
       "... and gone on worker $w too");
}
$r = elsewhere($t, [ $r->{worker} ], 'POST', $resp,
               { %greedy, input => 'x',
                 previous_response_id => $r2->{json}{id} });
is($r->{status}, 404, '... for previous_response_id as well');
$r = elsewhere($t, [], 'GET', "$resp/resp_" . '0' x 32);
is($r->{status}, 404, 'an unknown id: 404');

# --- owners, across workers ---

my %alice = ('X-Api-Key' => 'key-a');
my %bob = ('X-Api-Key' => 'key-b');
my %req = (input => 'Hi', max_output_tokens => 2, temperature => 0);
my $unknown = 'resp_' . '0' x 32;

my $a = elsewhere($t, [], 'POST', $resp, \%req, %alice);
is($a->{status}, 200, 'alice makes a response');
my $id = $a->{json}{id};
my @away = ($a->{worker});

for my $m ([ 'GET', "$resp/$id" ], [ 'DELETE', "$resp/$id" ],
           [ 'POST', "$resp/$id/cancel" ])
{
    my ($method, $path) = @$m;
    my $b = elsewhere($t, \@away, $method, $path, undef, %bob);
    my $u = elsewhere($t, \@away, $method, $path =~ s/$id/$unknown/r, undef,
                      %bob);
    is($b->{status}, 404, "bob: $method on another worker: 404");
    is($b->{content}, $u->{content} =~ s/$unknown/$id/gr,
       "bob: $method: the very answer of an unknown id");
}
$r = elsewhere($t, \@away, 'POST', $resp,
               { %req, previous_response_id => $id }, %bob);
is($r->{status}, 404, 'bob: previous_response_id on another worker: 404');
$r = elsewhere($t, \@away, 'GET', "/open$resp/$id", undef, %alice);
is($r->{status}, 404, 'not where owners do not count');
$r = elsewhere($t, \@away, 'GET', "$resp/$id", undef, %alice);
is($r->{content}, $a->{content}, 'alice reads it on another worker');
$r = elsewhere($t, \@away, 'POST', $resp,
               { %req, previous_response_id => $id }, %alice);
is($r->{status}, 200, 'alice continues it on another worker');
cmp_ok($r->{json}{usage}{input_tokens}, '>', $a->{json}{usage}{input_tokens},
       '... with her stored turn in front');
$r = elsewhere($t, \@away, 'DELETE', "$resp/$id", undef, %alice);
is($r->{status}, 200, 'alice deletes it on another worker');
$r = elsewhere($t, [ $r->{worker} ], 'GET', "$resp/$id", undef, %alice);
is($r->{status}, 404, '... and it is gone for her on every worker');

# --- chains on every worker at once (the lock: event loops, thread pools) ---

my @kids;
for my $k (1 .. 8) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $ok = 1;
        my $prev;
        for my $turn (1 .. 3) {
            my $h = HTTP::Tiny->new(keep_alive => 0, timeout => 60);
            my $x = $h->request('POST', $t->url($resp), {
                headers => { 'Content-Type' => 'application/json' },
                content => NginxLLM::json()->encode({ %greedy,
                    input => "k$k t$turn",
                    $prev ? (previous_response_id => $prev) : () }) });
            my $j = NginxLLM::decode_json_safe($x->{content} // '') // {};
            $ok &&= $x->{status} == 200 && $j->{id};
            $prev = $j->{id};
            my $g = $h->get($t->url("$resp/" . ($prev // 'x')));
            $ok &&= $g->{status} == 200 && $g->{content} eq $x->{content};
        }
        POSIX::_exit($ok ? 0 : 1);
    }
    push @kids, $pid;
}
is(scalar(grep { waitpid($_, 0) == $_ && $? == 0 } @kids), 8,
   '8 concurrent chains of 3, each turn read back: all complete');

# --- nginx -s reload between two requests of a chain ---

my $before = elsewhere($t, [], 'POST', $resp, { %greedy, input => 'Before' });
is($before->{status}, 200, 'reload: a response before it');
my %old = map { $_ => 1 } workers_now($t);
$t->reload;
my $deadline = time + 60;
sleep 0.1 while time < $deadline && grep { kill 0, $_ } keys %old;
ok(!grep({ kill 0, $_ } keys %old), 'reload: the old workers are gone');
ok($t->wait_ready, 'reload: the new workers answer');

my $after = elsewhere($t, [ keys %old ], 'POST', $resp,
                      { %greedy, input => 'After',
                        previous_response_id => $before->{json}{id} });
is($after->{status}, 200, 'reload: a new worker continues the chain');
my $third = elsewhere($t, [ keys %old, $after->{worker} ], 'POST', $resp,
                      { %greedy, input => 'Again',
                        previous_response_id => $after->{json}{id} });
is($third->{json}{usage}{input_tokens},
   count($t, { role => 'user', content => 'Before' },
             { role => 'assistant', content => text_of($before->{json}) },
             { role => 'user', content => 'After' },
             { role => 'assistant', content => text_of($after->{json}) },
             { role => 'user', content => 'Again' }),
   'reload: ... and another the whole conversation');
$r = elsewhere($t, [ keys %old ], 'GET', "$resp/$r1->{json}{id}");
is($r->{content}, $r1->{content}, 'reload: an older response is still there');

# a reload that changes llm_responses_store: a new zone, empty
$t->write_conf(http => "$owners    llm_responses_store 100 1m;");
%old = map { $_ => 1 } workers_now($t);
$t->reload;
$deadline = time + 60;
sleep 0.1 while time < $deadline && grep { kill 0, $_ } keys %old;
ok(!grep({ kill 0, $_ } keys %old), 'resize: the old workers are gone');
ok($t->wait_ready, 'resize: the new workers answer');
$r = elsewhere($t, [ keys %old ], 'GET', "$resp/$r1->{json}{id}");
is($r->{status}, 404, 'resize: the store starts empty');
$r = elsewhere($t, [ keys %old ], 'POST', $resp,
               { %greedy, input => 'New' });
my $g = elsewhere($t, [ keys %old, $r->{worker} ], 'GET',
                  "$resp/$r->{json}{id}");
is($g->{content}, $r->{content}, 'resize: and keeps what comes next');

$t->done;

# --- the bounds, for all the workers together ---

my $b = NginxLLM->new(%common,
                      http => "$owners    llm_responses_store 3 8000;");
$b->start;

my @made;
for my $n (1 .. 4) {
    my $x = elsewhere($b, [ $made[-1] ? $made[-1]{worker} : () ], 'POST',
                      $resp, { input => "n$n", max_output_tokens => 1 });
    push @made, $x;
}
is_deeply([ map { elsewhere($b, [ $_->{worker} ], 'GET',
                            "$resp/$_->{json}{id}")->{status} } @made ],
          [ 404, 200, 200, 200 ],
          'entries: the 4th of 3, on any worker, drops the oldest of all');

# one response of about 7.4 kB: with it the bytes keep only itself
my $big = elsewhere($b, [ $made[-1]{worker} ], 'POST', $resp,
                    { input => 'big', max_output_tokens => 1,
                      user => 'x' x 6300 });
is(elsewhere($b, [ $big->{worker} ], 'GET',
             "$resp/$big->{json}{id}")->{content}, $big->{content},
   'bytes: a large response is kept');
is_deeply([ map { elsewhere($b, [ $big->{worker} ], 'GET',
                            "$resp/$_->{json}{id}")->{status} } @made[2, 3] ],
          [ 404, 404 ], 'bytes: the older ones go, whichever worker made them');
my $huge = elsewhere($b, [], 'POST', $resp,
                     { input => 'huge', max_output_tokens => 1,
                       user => 'x' x 9000 });
is($huge->{status}, 200, 'a response larger than the store is answered');
is(elsewhere($b, [ $huge->{worker} ], 'GET',
             "$resp/$huge->{json}{id}")->{status}, 404, '... not kept');
is(elsewhere($b, [ $big->{worker} ], 'GET',
             "$resp/$big->{json}{id}")->{status}, 200, '... nor evicts any');

# three small ones from three workers push the big one out
my @small;
for my $n (1 .. 3) {
    push @small, elsewhere($b, [ map { $_->{worker} } @small ], 'POST',
                           $resp, { input => "s$n", max_output_tokens => 1 });
}
is_deeply([ map { elsewhere($b, [], 'GET', "$resp/$_->{json}{id}")->{status} }
                $big, @small ],
          [ 404, 200, 200, 200 ], 'entries: three workers, three entries');

# churn: entries of many sizes from every worker; the slab always has room
my @churn = map { $b->post($resp, { input => "c$_", max_output_tokens => 1,
                                    user => 'x' x (($_ * 733) % 3000) })
                } 1 .. 40;
is(scalar(grep { $_->{status} == 200 } @churn), 40, 'churn: all answered');
my @kept = grep { $b->get("$resp/$_->{json}{id}")->{status} == 200 } @churn;
ok(@kept >= 1 && @kept <= 3 && $kept[-1] == $churn[-1],
   'churn: the newest kept, within the bounds (' . scalar(@kept) . ')');
unlike($b->error_log, qr/out of memory storing/, 'churn: never out of memory');

$b->done;

done_testing();
