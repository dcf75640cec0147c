#!/usr/bin/perl
# Ids nobody can guess: every id the API issues ("chatcmpl-", "cmpl-",
# "resp_", "msg_", "modelperm-") is the prefix and 32 hex digits (128 bits)
# from the kernel's CSPRNG.  They used to come from libc's random(), which
# nginx seeds in each worker with (pid << 16) ^ sec ^ msec of its start:
# this test replays that generator for every seed a worker started in the
# test's time window could have had, and finds none of the ids it got.
# Two workers started together never issue the same id.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use Time::HiRes qw(time);
use NginxLLM;

my @m = ({ role => 'user', content => 'Hi' });

sub ids_of {
    my ($t) = @_;
    my @ids;
    for (1 .. 10) {
        push @ids, $t->post('/v1/chat/completions',
                            { messages => \@m, max_tokens => 1 })->{json}{id};
        push @ids, $t->post('/v1/completions',
                            { prompt => 'Hi', max_tokens => 1 })->{json}{id};
        my $r = $t->post('/v1/responses', { input => 'Hi',
                                            max_output_tokens => 1,
                                            temperature => 0 })->{json};
        push @ids, $r->{id}, map { $_->{id} } @{ $r->{output} // [] };
        push @ids, $t->get('/v1/models')->{json}{data}[0]{permission}[0]{id};
    }
    return @ids;
}

my $t = NginxLLM->new;
my $started = time;
$t->start;
my $ready = time;
my ($worker) = $t->worker_pids;

my @ids = ids_of($t);
my %form = (chatcmpl => qr/^chatcmpl-[0-9a-f]{32}$/,
            cmpl => qr/^cmpl-[0-9a-f]{32}$/, resp => qr/^resp_[0-9a-f]{32}$/,
            msg => qr/^msg_[0-9a-f]{32}$/,
            modelperm => qr/^modelperm-[0-9a-f]{32}$/);
for my $kind (sort keys %form) {
    my @k = grep { defined && /^\Q$kind\E[-_]/ } @ids;
    ok(@k >= 10, "$kind: " . scalar(@k) . ' ids');
    is(scalar(grep { $_ !~ $form{$kind} } @k), 0,
       "$kind: the prefix and 32 lowercase hex digits");
}
my %seen;
is(scalar(grep { $seen{$_}++ } @ids), 0, scalar(@ids) . ' ids, all different');

# the 128 bits, as libc's random() would have made them: 4 groups of
# random() ^ (random() << 16), either call first (C leaves the order open)
my @hex = map { /([0-9a-f]{32})$/ ? $1 : () } @ids;
my $py = <<'PY';
import ctypes, sys
libc = ctypes.CDLL(None)
libc.random.restype = ctypes.c_long
pid, t0, t1 = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
want = set(sys.stdin.read().split())
heads = {int(w[:8], 16) for w in want}
draws = 400
for sec in range(t0, t1 + 1):
    for msec in range(1000):
        libc.srandom(ctypes.c_uint(((pid << 16) ^ sec ^ msec) & 0xffffffff))
        r = [libc.random() for _ in range(draws)]
        for k in range(draws - 8):
            for x, y in ((0, 1), (1, 0)):
                if (r[k + x] ^ (r[k + y] << 16)) & 0xffffffff not in heads:
                    continue
                # the first group matches: the whole id must (1 in 2^96)
                hexid = ''.join('%08x' % ((r[k + 2 * g + x]
                                           ^ (r[k + 2 * g + y] << 16))
                                          & 0xffffffff) for g in range(4))
                if hexid in want:
                    print('predicted', sec, msec, k)
                    sys.exit(0)
print('none')
PY
my $file = $t->dir . '/predict.py';
open my $fh, '>', $file or die;
print $fh $py;
close $fh;
my $python = $ENV{LLM_PYTHON} || 'python3';
my $cmd = sprintf("echo '%s' | %s %s %d %d %d", join(' ', @hex), $python,
                  $file, $worker, int($started) - 1, int($ready) + 1);
my $out = `$cmd`;
is($out, "none\n", 'no id is what libc random(), seeded as nginx seeds the '
                   . 'worker, would give');

$t->done;

# two workers, started in the same moment

my $w = NginxLLM->new(workers => 2,
                      http => "log_format ids '\$pid \$llm_request_id';");
$w->{server} = 'access_log ' . $w->dir . '/logs/ids.log ids;';
$w->start;
my %by;
my $ok = 0;
for (1 .. 60) {
    # a worker still loading the model makes the request wait: no retry
    $ok++ if $w->post('/v1/completions',
                      { prompt => 'Hi', max_tokens => 1 })->{status} == 200;
}
is($ok, 60, '60 completions answered');
# a line is logged after its response is sent: wait for all of them
my $ids_log = $w->dir . '/logs/ids.log';
my $deadline = Time::HiRes::time() + 30;
Time::HiRes::sleep(0.05)
    while (() = NginxLLM::slurp($ids_log) =~ /cmpl-/g) < 60
          && Time::HiRes::time() < $deadline;
for (split /\n/, NginxLLM::slurp($ids_log)) {
    my ($pid, $id) = split / /;
    push @{ $by{$pid} }, $id if $id =~ /^cmpl-/;
}
my @all = map { @$_ } values %by;
is(scalar(@all), 60, '60 completions logged with their worker');
%seen = ();
is(scalar(grep { $seen{$_}++ } @all), 0, '... all of their ids different');
diag('workers that answered: ' . join(', ', map { "$_: " . @{ $by{$_} } }
                                               sort keys %by));
$w->done;

done_testing();
