#!/usr/bin/perl
# One case of the HTTP fuzzer (t/api_fuzz.t, docs/fuzzing.md), to look at
# or to replay:
#
#   t/fuzz_http/case.pl SEED I              the body's bytes on stdout, its
#                                           description on stderr
#   t/fuzz_http/case.pl SEED I PORT         POSTs it to 127.0.0.1:PORT and
#                                           prints the response and the
#                                           checks that fail
#   t/fuzz_http/case.pl --stats SEED N      kinds, sizes and generation time
#                                           of cases 0 .. N-1
#
# e.g. t/fuzz_http/case.pl 1 123 > body; curl --data-binary @body \
#   -H 'Content-Type: application/json' http://127.0.0.1:8080/v1/responses

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use FuzzHTTP;
use Time::HiRes qw(time);

if (@ARGV && $ARGV[0] eq '--stats') {
    my (undef, $seed, $n) = @ARGV;
    my (%k, %bytes, %ep);
    my $t0 = time;
    my $max = 0;
    for my $i (0 .. $n - 1) {
        my $c = FuzzHTTP::case($seed, $i);
        $k{ $c->{kind} }++;
        $ep{ $c->{ep} }++;
        $bytes{ $c->{kind} } += length $c->{body};
        $max = length $c->{body} if length $c->{body} > $max;
    }
    printf "%d cases in %.1f s, largest %d bytes\n", $n, time - $t0, $max;
    printf "  %-18s %5d  %8.1f KB avg\n", $_, $k{$_},
           $bytes{$_} / $k{$_} / 1024 for sort keys %k;
    printf "  %-18s %5d\n", $_, $ep{$_} for sort keys %ep;
    exit 0;
}

my ($seed, $i, $port) = @ARGV;
die "usage: $0 SEED I [PORT]\n" unless defined $i;
my $c = FuzzHTTP::case($seed, $i);
print STDERR "case $seed/$i: $c->{kind} POST $c->{path} ($c->{desc}), "
             . length($c->{body}) . " bytes\n";
if (!defined $port) {
    binmode STDOUT;
    print $c->{body};
    exit 0;
}
$SIG{PIPE} = 'IGNORE';
my $r = FuzzHTTP::post($port, $c->{path}, $c->{body}, 60);
print "status ", $r->{status} // 'none', " in $r->{ms} ms",
      ($r->{error} ? " ($r->{error})" : ''), "\n";
print FuzzHTTP::snippet($r->{body} // $r->{raw}, 2000), "\n";
my @f = FuzzHTTP::check($c, $r);
print "FAIL: $_->[0]: $_->[1]\n" for @f;
print "ok\n" unless @f;
exit(@f ? 1 : 0);
