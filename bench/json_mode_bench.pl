#!/usr/bin/perl
# The cost of JSON mode (response_format json_object) through nginx: the
# same seeded completion of GEN tokens (ignore_eos) with and without the
# constraint, alternating, ROUNDS times each, on the untied tiny test model
# (a Llama 3 tokenizer: 128k tokens to mask at every step).  Prints the
# median milliseconds per token of each and their difference, the mask's
# cost; writes BUILD/bench/json_mode.json.  Not part of `make test`.
#
# usage: bench/json_mode_bench.pl        env: ROUNDS=7 GEN=100

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/nginx";

use JSON::PP;
use Time::HiRes qw(time);
use NginxLLM;

my $rounds = $ENV{ROUNDS} // 7;
my $gen = $ENV{GEN} // 100;
my $t = NginxLLM->new(model => NginxLLM->model(tie => 0), locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /health { llm_health; }
LOC
$t->start;

my %body = (prompt => 'A', temperature => 1, seed => 1, max_tokens => $gen,
            ignore_eos => \1);
my %ms = (free => [], json => []);
# warm-up, which also builds the token texts
$t->post('/v1/completions', { %body, max_tokens => 2,
                              response_format => { type => 'json_object' } });
for my $round (1 .. $rounds) {
    for my $mode (qw(free json)) {
        my $t0 = time;
        my $r = $t->post('/v1/completions', { %body, $mode eq 'json'
            ? (response_format => { type => 'json_object' }) : () });
        die "status $r->{status}\n" if $r->{status} != 200;
        push @{ $ms{$mode} },
            1000 * (time - $t0) / $r->{json}{usage}{completion_tokens};
    }
}
$t->stop;

sub median { my @s = sort { $a <=> $b } @_; return $s[$#s / 2] }
my %res = (rounds => $rounds, gen => $gen,
           free_ms_per_token => median(@{ $ms{free} }),
           json_ms_per_token => median(@{ $ms{json} }));
$res{mask_ms_per_token} = $res{json_ms_per_token} - $res{free_ms_per_token};
printf "JSON mode, %d tokens, median of %d: %.2f ms/token free, %.2f with "
       . "the constraint: %.2f ms per token for the mask\n", $gen, $rounds,
       @res{qw(free_ms_per_token json_ms_per_token mask_ms_per_token)};
my $out = NginxLLM::build_dir() . '/bench';
mkdir $out;
open my $f, '>', "$out/json_mode.json" or die "$out/json_mode.json: $!";
print $f JSON::PP->new->canonical->pretty->encode({ %res, runs => \%ms });
close $f;
