#!/usr/bin/perl
# The HTTP-level fuzzer (issue 19, docs/fuzzing.md): mutated bodies of
# valid chat, completions, responses, tokenize and detokenize requests
# (stream and not) from a fixed seed, sent to nginx with 2 workers by 2
# clients at once, each request with a hard deadline.  Every response must
# be: a status; a 200 that is a JSON object, or an SSE stream whose every
# data: line is JSON or [DONE] and that ends as its API says; anything else
# the OpenAI error object, as JSON; every byte strict UTF-8, no escaped lone
# surrogate; a body that is no JSON (or no UTF-8) answered 400; no 5xx but
# 503; no hang.  At the end: the same worker pids, no "exited on signal",
# the workers' RSS within a bound of what it was after a warm-up.
#
# One ok per kind of mutation; the failing bodies are saved (the path is
# printed) and the first ones of each kind of failure shown.  A case is
# (seed, index): t/fuzz_http/case.pl SEED I prints or replays it.
#
# env: LLM_FUZZ_HTTP_SEED (1), LLM_FUZZ_HTTP_RUNS (1500),
#      LLM_FUZZ_HTTP_JOBS (2 clients), LLM_FUZZ_HTTP_TIMEOUT (30 s a
#      request), LLM_FUZZ_HTTP_RSS_MB (128, the bound per worker),
#      LLM_FUZZ_HTTP_ONLY (a comma list of case indexes: only those)

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx", "$FindBin::Bin/fuzz_http";

use File::Path qw(make_path remove_tree);
use POSIX qw(_exit);
use Test::More;
use Time::HiRes qw(time);
use FuzzHTTP;
use NginxLLM;

$SIG{PIPE} = 'IGNORE';

my $SEED    = $ENV{LLM_FUZZ_HTTP_SEED} // 1;
my $RUNS    = $ENV{LLM_FUZZ_HTTP_RUNS} // 1500;
my $JOBS    = $ENV{LLM_FUZZ_HTTP_JOBS} // 2;
my $TIMEOUT = $ENV{LLM_FUZZ_HTTP_TIMEOUT} // 30;
my $RSS_MB  = $ENV{LLM_FUZZ_HTTP_RSS_MB} // 128;
my @ONLY    = split /,/, $ENV{LLM_FUZZ_HTTP_ONLY} // '';

# --- the checks check themselves ---

my %utf8 = ("ascii" => 1, "\xc3\xa9" => 1, "\xf0\x9f\x98\x80" => 1,
            "\xef\xbf\xbf" => 1, "\xf4\x8f\xbf\xbf" => 1,
            "\xc0\xaf" => 0, "\xe0\x80\xaf" => 0, "\xf0\x80\x80\xaf" => 0,
            "\xed\xa0\x80" => 0, "\xed\xbf\xbf" => 0, "\xf4\x90\x80\x80" => 0,
            "\x80" => 0, "\xff" => 0, "\xc3" => 0, "a\xe2\x82" => 0);
is_deeply({ map { $_ => defined(FuzzHTTP::utf8_error($_)) ? 0 : 1 } keys %utf8 },
          \%utf8, 'strict UTF-8: overlong forms, surrogates, > U+10FFFF, '
                  . 'stray and cut bytes refused; U+FFFF and 4 bytes fine');
my %json = ('{}' => 1, '{"a":[1,-0.5e3,"x",true,null]}' => 1, ' 1 ' => 1,
            ('[' x 300000) . (']' x 300000) => 1, '{"a":1}' . "\0" => 0,
            '{"a":1,}' => 0, '[01]' => 0, 'NaN' => 0, '[Infinity]' => 0,
            '{"a":"' . "\0" . '"}' => 0, '{"a":"\x"}' => 0, '' => 0,
            '{"a":1}{}' => 0, '[}' => 0, ('[' x 1000) => 0);
is_deeply({ map { $_ => FuzzHTTP::json_check($_)->{ok} } keys %json }, \%json,
          'JSON syntax check');
ok(FuzzHTTP::json_check('"\ud800"')->{lone}
   && !FuzzHTTP::json_check('"\ud83d\ude00"')->{lone},
   'escaped lone surrogates noticed, pairs not');
is(FuzzHTTP::case($SEED, 7)->{body}, FuzzHTTP::case($SEED, 7)->{body},
   'a case is the same bytes every time');

# --- nginx, 2 workers ---

# fuzz.log: which worker answered which case (X-Fuzz-Case), to tell what a
# worker that died had done before
my $t = NginxLLM->new(workers => 2);
# a tool-call parser: the seeds with tools ask for tool_choice "auto", and
# the random output then goes through the parser too
$t->{http} = "client_max_body_size 16m;\n"
    . "    llm_tool_call_parser hermes;\n"
    . "    log_format fuzz '\$pid \$http_x_fuzz_case \$status';\n"
    . '    access_log ' . $t->dir . '/logs/fuzz.log fuzz;';
$t->start;
my @workers = $t->worker_pids;
is(scalar @workers, 2, '2 workers');

my $out = NginxLLM::build_dir() . "/fuzz-http/seed-$SEED";
remove_tree($out);
make_path($out);

# every seed as it is: 200 and well-formed
my @bad_seeds;
for my $si (0 .. $#FuzzHTTP::SEEDS) {
    my ($ep, $body) = @{ $FuzzHTTP::SEEDS[$si] };
    my $c = { kind => 'none', ep => $ep, body => $body };
    my $r = FuzzHTTP::post($t->port, $FuzzHTTP::PATH{$ep}, $body, $TIMEOUT);
    push @bad_seeds, "seed $si: " . join('; ', map { "$_->[0] ($_->[1])" }
                                          FuzzHTTP::check($c, $r))
        if FuzzHTTP::check($c, $r);
}
ok(!@bad_seeds, scalar(@FuzzHTTP::SEEDS) . ' seed bodies answered 200')
    or diag(join "\n", @bad_seeds);

sub rss {           # pid => kB, for the workers
    return map { $_ => (FuzzHTTP_slurp("/proc/$_/status")
                        =~ /^VmRSS:\s+(\d+)/m)[0] // 0 } $t->worker_pids;
}

sub FuzzHTTP_slurp { open my $f, '<', $_[0] or return ''; local $/; <$f> }

# runs the cases, JOBS clients at once; a line of JSON per case
sub run_cases {
    my ($tag, @idx) = @_;
    my @kids;
    for my $k (0 .. $JOBS - 1) {
        my @mine = @idx[ grep { $_ % $JOBS == $k } 0 .. $#idx ];
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            open my $fh, '>', "$out/$tag-$k.jsonl" or _exit(2);
            select((select($fh), $| = 1)[0]);
            for my $i (@mine) {
                my $c = FuzzHTTP::case($SEED, $i);
                my $r = FuzzHTTP::post($t->port, $c->{path}, $c->{body},
                                       $TIMEOUT, $i);
                my @f = FuzzHTTP::check($c, $r);
                if (@f) {
                    open my $b, '>', "$out/case-$i.body";
                    binmode $b;
                    print $b $c->{body};
                    close $b;
                    open $b, '>', "$out/case-$i.response";
                    binmode $b;
                    print $b $r->{raw} // '';
                    close $b;
                }
                print $fh NginxLLM::json()->encode({
                    i => $i, kind => $c->{kind}, ep => $c->{ep},
                    desc => $c->{desc}, status => $r->{status} // 0,
                    ms => $r->{ms}, size => length $c->{body},
                    fails => \@f }), "\n";
            }
            close $fh;
            _exit(0);
        }
        push @kids, $pid;
    }
    waitpid($_, 0) for @kids;
    my @res;
    for my $k (0 .. $JOBS - 1) {
        open my $fh, '<', "$out/$tag-$k.jsonl" or next;
        while (my $line = <$fh>) {
            my $v = NginxLLM::decode_json_safe($line);
            push @res, $v if $v;
        }
    }
    return @res;
}

my @all = @ONLY ? @ONLY : (0 .. $RUNS - 1);
my $warm = @all >= 1000 ? 300 : int(@all / 10);
diag("seed $SEED: $RUNS cases, $JOBS clients, $TIMEOUT s a request "
     . "(t/fuzz_http/case.pl $SEED I replays case I)");

# The warm-up: the first cases, and twice the run's memory-heavy ones
# (giant arrays, long strings, 10,000 levels and more), whose answers are
# checked again in the run.  Their first pass raises each worker's RSS by
# 100-150 MB that malloc keeps (per-thread arenas: the bodies are parsed in
# the thread pool); later passes add less and less.
my $t0 = time;
my @res = run_cases('warmup', @all[0 .. $warm - 1]);
my @heavy = grep { my $c = FuzzHTTP::case($SEED, $_);
                   $c->{kind} =~ /^(giant_array|long_string)$/
                   || $c->{desc} =~ /nested \d{5,} deep/ } @all[$warm .. $#all];
run_cases("heavy$_", @heavy) for qw(1 2);
my %rss0 = rss();
my @rss_at;
my @rest = @all[$warm .. $#all];
my $chunk = int(@rest / 4) + 1;
while (my @part = splice @rest, 0, $chunk) {
    push @res, run_cases('run' . scalar(@rss_at), @part);
    my %r = rss();
    push @rss_at, join '+', map { int($r{$_} / 1024) } sort keys %r;
}
my $secs = time - $t0;
my %rss1 = rss();

@res = sort { $a->{i} <=> $b->{i} } @res;
is(scalar @res, scalar @all, 'every case was sent and checked');

# --- the results ---

# A request cut off (no answer, a stream that stops) may be another
# request's crash: such a case is sent again, alone, and what it gets then
# is what counts; if it is answered in full then, it was collateral damage.
my $CUT = qr/^(no HTTP response|timeout|incomplete body|a stream not ending|a Responses stream without)/;
my ($collateral, $replays, $slow_replays) = (0, 0, 0);
for my $r (@res) {
    my @f = @{ $r->{fails} };
    next unless grep { $_->[0] =~ $CUT } @f;
    last if $replays++ >= 200;
    next if grep({ $_->[0] =~ /^timeout/ } @f) && $slow_replays++ >= 5;
    my $c = FuzzHTTP::case($SEED, $r->{i});
    my $a;
    for my $try (1 .. 20) {     # a 503 from a worker still loading is no answer
        $a = FuzzHTTP::post($t->port, $c->{path}, $c->{body}, $TIMEOUT);
        last if ($a->{status} // 0) != 503;
        sleep 0.25;
    }
    my @g = FuzzHTTP::check($c, $a);
    $r->{fails} = \@g;
    if (grep { $_->[0] =~ $CUT } @g) {
        $r->{desc} .= ' (cut off again when sent alone)';
        sleep 0.5;      # a new worker may be starting
    } else {
        $collateral++;
    }
}
diag("$collateral requests cut off by another request's crash were "
     . 'answered in full when sent alone') if $collateral;

my (%n, %nf, %cls, %ms);
for my $r (@res) {
    $n{ $r->{kind} }++;
    $ms{ $r->{kind} } += $r->{ms};
    next unless @{ $r->{fails} };
    $nf{ $r->{kind} }++;
    for my $f (@{ $r->{fails} }) {
        push @{ $cls{ $f->[0] } }, [ $r, $f->[1] ];
    }
}
diag(sprintf '%d cases in %.1f s (%.1f/s)', scalar @res, $secs,
             @res / ($secs || 1));

my $report = '';
for my $cl (sort { @{ $cls{$b} } <=> @{ $cls{$a} } } keys %cls) {
    my @ex = @{ $cls{$cl} };
    my %k;
    $k{ $_->[0]{kind} }++ for @ex;
    $report .= sprintf "\n== %s: %d cases (%s)\n", $cl, scalar @ex,
        join ', ', map { "$_ $k{$_}" } sort keys %k;
    for my $e (@ex[0 .. ($#ex < 2 ? $#ex : 2)]) {
        my ($r, $d) = @$e;
        $report .= sprintf "  case %d %s %s [%s]\n    -> %s %s\n"
            . "    body %s: %s\n", $r->{i}, $r->{kind}, $FuzzHTTP::PATH{ $r->{ep} },
            $r->{desc}, $r->{status}, $d, "$out/case-$r->{i}.body",
            FuzzHTTP::snippet(FuzzHTTP_slurp("$out/case-$r->{i}.body"), 160);
    }
}
if ($report) {
    open my $fh, '>', "$out/failures.txt";
    print $fh $report;
    close $fh;
    diag("failures (all of them in $out/failures.txt):$report");
}

for my $kind (map { $_->[1] } @FuzzHTTP::KINDS) {
    next unless $n{$kind};
    ok(!$nf{$kind}, sprintf '%s: %d cases, %d with a bad answer (%.0f ms '
       . 'a case)', $kind, $n{$kind}, $nf{$kind} // 0, $ms{$kind} / $n{$kind});
}

my @slow = (sort { $b->{ms} <=> $a->{ms} } @res)[0 .. 4];
diag('slowest: ' . join ', ', map { "case $_->{i} $_->{kind} $_->{ms} ms" }
                                  grep { defined } @slow);

ok(!grep({ grep { $_->[0] =~ /^timeout/ } @{ $_->{fails} } } @res),
   "no request took over $TIMEOUT s");
is_deeply([ $t->worker_pids ], \@workers, 'the same 2 workers at the end');
my @sig = grep { /exited on signal/ } split /\n/, $t->error_log;
ok(!@sig, 'no worker exited on a signal')
    or diag(join "\n", @sig[0 .. ($#sig < 9 ? $#sig : 9)]);
if (@sig) {
    # the cases each dead worker answered last (it dies on the next one, or
    # of what one of these left behind)
    my %by;
    for (split /\n/, NginxLLM::slurp($t->dir . '/logs/fuzz.log')) {
        my ($pid, $case, $st) = split / /;
        push @{ $by{$pid} }, "$case:$st" if $case ne '-';
    }
    my %signals;
    for (@sig) {
        my ($pid, $n) = /worker process (\d+) exited on signal (\d+)/ or next;
        $signals{$n}++;
        my @l = @{ $by{$pid} // [] };
        diag("worker $pid (signal $n) answered " . @l . ' cases, the last: '
             . join(' ', @l[($#l > 4 ? $#l - 4 : 0) .. $#l]))
            if $n != 11 || $signals{$n} <= 3;
    }
    diag('signals: ' . join ', ', map { "$_ x $signals{$_}" } sort keys %signals);
    my @libc = grep { /malloc|free\(\)|corrupt|stack smashing/ }
               split /\n/, $t->error_log;
    diag("glibc said: @libc[0 .. ($#libc < 4 ? $#libc : 4)]") if @libc;
}
# the workers that lived through the whole run: flat memory
my @kept = grep { exists $rss1{$_} } sort keys %rss0;
my $fmt = sub { my %h = @_; join ' + ', map { "$h{$_} (pid $_)" } sort keys %h };
diag(sprintf 'RSS kB after the warm-up (%d cases, %d heavy ones twice): %s; '
             . 'after the run: %s; MB after each quarter: %s', $warm,
             scalar @heavy, $fmt->(%rss0), $fmt->(%rss1), join ', ', @rss_at);
SKIP: {
    skip 'no worker lived through the run: no RSS to compare', 1 unless @kept;
    my @grew = grep { $rss1{$_} - $rss0{$_} > $RSS_MB * 1024 } @kept;
    ok(!@grew, "the RSS of each worker that lived through the run (@kept) "
       . "grew by less than $RSS_MB MB after the warm-up")
        or diag(join ', ', map { "pid $_: +" . ($rss1{$_} - $rss0{$_})
                                 . ' kB' } @grew);
}

$t->done;
done_testing;
