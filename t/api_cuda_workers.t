#!/usr/bin/perl
# llm_device cuda:0 with worker_processes 4 (issue 13): the GPU is opened
# once, by the one engine process, and every worker's requests run on it.
# Without a GPU the CUDA backend is the one built against the emulator
# (build/emu/libllm_cuda.so, docs/cuda.md), pointed to by LLM_CUDA_LIBRARY
# (passed through nginx's `env`); on a GPU machine, LLM_CUDA_LIBRARY may
# name the real build/libllm_cuda.so.  A small model with t/gpu/run.sh's
# 258-token tokenizer keeps the emulated steps short.  Checked: nginx -t
# accepts the configuration; one engine process, one model load, ready on
# cuda:0; all four workers answer; greedy completions are the same from
# every worker and the same as the CPU backend's.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use File::Path qw(make_path);
use Test::More;
use Time::HiRes qw(time sleep);
use NginxLLM;

my $BUILD = NginxLLM::build_dir();
my $ROOT = NginxLLM::root();
my $lib = $ENV{LLM_CUDA_LIBRARY} // "$BUILD/emu/libllm_cuda.so";

plan skip_all => "$lib not built (sanitizer build?)" unless -f $lib;
$ENV{LLM_CUDA_LIBRARY} = $lib;
$ENV{LLM_EMU_MEM} //= 1024 * 1024 * 1024;

# the model: t/gpu/run.sh's tokenizer, the shapes of t/cuda_emu.t
my $dir = "$BUILD/t-models/cuda-workers";
unless (-f "$dir/config.json") {
    make_path("$BUILD/t-models");
    my $tmp = "$dir.tmp$$";
    system('sh', '-c', "sed -n '/^mini_tokenizer() {/,/^}/p' "
           . "'$ROOT/t/gpu/run.sh' > '$tmp.sh' && . '$tmp.sh' "
           . "&& mini_tokenizer '$tmp.tok'") == 0 or die "mini_tokenizer";
    system("$BUILD/llm", 'make-model', '--tokenizer', "$tmp.tok",
           '--out', $tmp, '--layers', 2, '--hidden', 256, '--heads', 4,
           '--kv-heads', 2, '--intermediate', 512, '--rope-llama3',
           '--dtype', 'bf16', '--seed', 7) == 0 or die "make-model";
    system('rm', '-rf', "$tmp.sh", "$tmp.tok");
    rename $tmp, $dir or system('rm', '-rf', $tmp);
}

sub server {
    my ($device) = @_;
    return NginxLLM->new(model => $dir, workers => 4, listen => 'reuseport',
        main => "env LLM_CUDA_LIBRARY;\nenv LLM_EMU_MEM;",
        engine => <<"ENGINE", locations => <<'LOC');
    llm_served_model_name tiny;
    llm_device $device;
    llm_threads 1;
    llm_max_model_len 128;
    llm_max_num_seqs 8;
    llm_kv_cache_size 8m;
    llm_gpu_memory_utilization 0.25;
ENGINE
        location /v1/ { llm_api; add_header X-Worker $pid always; }
        location = /health { llm_health; }
LOC
}

my @prompts = ('The quick brown fox', 'jumps over the lazy dog',
               'nginx serves', 'a model on the GPU');

sub greedy {
    my ($t, $p) = @_;
    my $r = $t->post('/v1/completions', { prompt => $p, max_tokens => 6,
                                          temperature => 0,
                                          return_token_ids => \1 });
    return ($r->{status}, $r->{headers}{'x-worker'} // 0,
            $r->{json}{choices}[0]{token_ids} // []);
}

# the CPU's answers, the reference
my $cpu = server('cpu');
$cpu->start;
my %want = map { $_ => join(' ', @{ (greedy($cpu, $_))[2] }) } @prompts;
$cpu->done;
ok(!grep({ $_ eq '' } values %want), 'the CPU backend answers every prompt');

my $t = server('cuda:0');
my ($st, $txt) = $t->test_config;
is($st, 0, 'nginx -t: llm_device cuda:0 with worker_processes 4') or diag($txt);
$t->start;

# until every worker has answered, or 120 s (an emulated step is slow)
my (%seen, $bad, $n);
my $same = 1;
my $deadline = time + 120;
while (time < $deadline && keys %seen < 4) {
    my $p = $prompts[$n++ % @prompts];
    my ($status, $w, $ids) = greedy($t, $p);
    $bad++ if $status != 200;
    $same = 0 if join(' ', @$ids) ne $want{$p};
    $seen{$w}++;
}
is($bad // 0, 0, "$n requests, every one answered 200");
is(scalar(keys %seen), 4, 'all four workers answered');
ok($same, 'greedy ids on cuda:0 from every worker = the CPU backend\'s');

my $log = $t->error_log;
my $loads = () = $log =~ /llm: engine process \d+: loading/g;
is($loads, 1, 'one engine process, one model load');
like($log, qr/llm: engine ready on cuda:0 /, 'the engine runs on cuda:0');
my $users = () = $log =~ /llm: worker \d+ uses the /g;
is($users, 4, 'the four workers use that engine');

$t->done;
done_testing;
