#!/usr/bin/perl
# The cost of constrained decoding through nginx (engine/grammar): the same
# seeded completion free, in JSON mode (response_format json_object) and
# under a realistic tool schema (response_format json_schema: five fields,
# an enum, a bounded integer, a date, two free strings), alternating,
# ROUNDS times each, on two random Llama 3 models with its 128k-token
# vocabulary: the tiny test model (2 layers, hidden 64: the mask's cost is
# most of a step) and the ~357M benchmark shape (8 layers, hidden 1024:
# the issue's "constrained >= 0.97x unconstrained").  Decode speed is the
# per-request metrics' (completion_tokens - 1) / generation_time_ms, so
# that outputs of different lengths compare; the mask's cost per token is
# the difference of the medians.  Prints a table; writes
# BUILD/bench/grammar.json.  Not part of `make test`.
#
# usage: bench/grammar_bench.pl        env: ROUNDS=7 GEN=100 MODELS=tiny,357m

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/nginx";

use JSON::PP;
use NginxLLM;

my $rounds = 0 + ($ENV{ROUNDS} // 7);
my $gen = 0 + ($ENV{GEN} // 100);
my @models = split /,/, ($ENV{MODELS} // 'tiny,357m');

my %shape = (
    tiny   => { tie => 0 },
    '357m' => { tie => 0, layers => 8, hidden => 1024, heads => 16, 'kv-heads' => 8,
                intermediate => 2816, seed => 1 },
);
my $tool = { type => 'object', additionalProperties => JSON::PP::false,
             properties => { city => { type => 'string' },
                             date => { type => 'string', format => 'date' },
                             unit => { enum => [ 'celsius', 'fahrenheit' ] },
                             days => { type => 'integer', minimum => 1, maximum => 14 },
                             notes => { type => 'string' } },
             required => [ qw(city date unit days notes) ] };
my %mode = (
    free => {},
    json => { response_format => { type => 'json_object' } },
    tool => { response_format => { type => 'json_schema',
                                   json_schema => { name => 'get_weather', schema => $tool } } },
);
my @modes = qw(free json tool);

sub median { my @s = sort { $a <=> $b } @_; return $s[$#s / 2] }

my %res = (rounds => $rounds, gen => $gen);
for my $m (@models) {
    my $t = NginxLLM->new(model => NginxLLM->model(%{ $shape{$m} }),
                          http => 'llm_per_request_metrics on;');
    $t->start;
    my %body = (prompt => 'A', temperature => 1, max_tokens => $gen);
    my %ms;
    # warm-up: the token texts, the schema's compile
    $t->post('/v1/completions', { %body, %{ $mode{$_} }, max_tokens => 2 }) for @modes;
    for my $round (1 .. $rounds) {
        # the order alternates, so that neither side always goes first
        for my $k ($round % 2 ? @modes : reverse @modes) {
            my $r = $t->post('/v1/completions', { %body, seed => $round, %{ $mode{$k} },
                                                  $k eq 'free' ? (ignore_eos => \1) : () });
            die "$m $k: status $r->{status}: $r->{content}\n" if $r->{status} != 200;
            my $n = $r->{json}{usage}{completion_tokens} - 1;
            my $g = $r->{json}{metrics}{generation_time_ms};
            push @{ $ms{$k} }, $g / $n if $n > 0 && $g > 0;
        }
    }
    $t->stop;
    my %row = map { $_ => median(@{ $ms{$_} // [0] }) } @modes;
    $res{$m} = { %row, runs => \%ms };
    printf "%-5s  ms/token: free %.3f, JSON mode %.3f (%.3fx), tool schema %.3f (%.3fx); "
           . "the mask %.3f / %.3f ms\n", $m, $row{free}, $row{json},
           $row{free} / $row{json}, $row{tool}, $row{free} / $row{tool},
           $row{json} - $row{free}, $row{tool} - $row{free};
}
my $out = NginxLLM::build_dir() . '/bench';
mkdir $out;
open my $f, '>', "$out/grammar.json" or die "$out/grammar.json: $!";
print $f JSON::PP->new->canonical->pretty->encode(\%res);
close $f;
