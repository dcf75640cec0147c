#!/usr/bin/perl
# nginx serving a GGUF file (llm_model x.gguf): the served model's default
# name is the file's without ".gguf"; completions give llm generate's ids
# and text on the same file; chat renders the file's own template
# (tokenizer.chat_template) and gives llm generate's ids for the rendered
# prompt; the GGUF and the directory it was converted from serve the same
# tokens; llama.cpp's Q8_0 file of it serves llm generate's tokens.

use strict;
use warnings;
use utf8;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $root = NginxLLM::root();
my $b = NginxLLM::build_dir();
my $dir = NginxLLM->model(tie => 0);

sub run_cmd {
    my (@cmd) = @_;
    open my $fh, '-|', @cmd or die "@cmd: $!";
    my $out = do { local $/; <$fh> };
    close $fh;
    return ($? >> 8, $out);
}

# the GGUF: t/ref/hf_to_gguf.py with llama.cpp's gguf-py, bf16 (the
# directory's bits)
my ($rc, $env) = run_cmd("$root/t/ref/setup_llamacpp.sh", "$b/ref");
my ($src) = $env =~ /^LLAMA_SRC=(.*)$/m;
plan skip_all => 'llama.cpp gguf-py not available (t/ref/setup_llamacpp.sh)'
    if $rc != 0 || !$src;
my $gguf = "$b/t-models/" . (split m{/}, $dir)[-1] . '.gguf';
unless (-f $gguf) {
    local $ENV{PYTHONPATH} = "$src/gguf-py";
    system('/usr/bin/python3', "$root/t/ref/hf_to_gguf.py", $dir, "$gguf.tmp$$",
           '--outtype', 'bf16') == 0 or die "hf_to_gguf.py failed\n";
    rename "$gguf.tmp$$", $gguf or die "$gguf: $!";
}
my $name = (split m{/}, $gguf)[-1];
$name =~ s/\.gguf$//;

my $engine = <<'ENGINE';
    llm_threads 1;
    llm_max_model_len 256;
    llm_kv_cache_size 16m;
    llm_thread_pool llm;
ENGINE
my $t = NginxLLM->new(model => $gguf, engine => $engine);
$t->start;

my $r = $t->get('/v1/models');
is($r->{json}{data}[0]{id}, $name,
   "/v1/models: the file's name without .gguf ($name)");

sub cli_generate {
    my ($prompt, $n) = @_;
    my ($rc, $out) = run_cmd("$b/llm", 'generate', '--model', $gguf,
                             '--prompt', $prompt, '--threads', 1, '--json',
                             '--ignore-eos', '--temperature', 0,
                             '--max-tokens', $n);
    return NginxLLM::decode_json_safe($out) // {};
}

# completions: the tokens and text of llm generate on the same file
my $prompt = 'The llama (🦙) grazes near Cusco;';
my $raw = $prompt;
utf8::encode($raw);
my $g = cli_generate($raw, 16);
is(scalar @{ $g->{ids} // [] }, 16, 'llm generate on the GGUF: 16 tokens');
my %body = (model => $name, prompt => $prompt, max_tokens => 16,
            temperature => 0, ignore_eos => \1, return_token_ids => \1);
$r = $t->post('/v1/completions', \%body);
is($r->{status}, 200, 'completions: 200');
my $c = $r->{json}{choices}[0];
is_deeply($r->{json}{choices}[0]{prompt_token_ids}
          // $r->{json}{prompt_token_ids}, $g->{prompt_ids},
          'completions: the prompt ids of the file\'s tokenizer');
is_deeply($c->{token_ids}, $g->{ids}, 'completions: llm generate\'s ids');
is($c->{text}, $g->{text}, 'completions: llm generate\'s text');

# chat: the file's template, then llm generate's tokens for that prompt
my @msgs = ({ role => 'system', content => 'You are terse.' },
            { role => 'user', content => 'Hi there' });
my $mfile = $t->dir . '/messages.json';
open my $fh, '>', $mfile or die;
print $fh NginxLLM::json()->encode(\@msgs);
close $fh;
(undef, my $rendered) = run_cmd("$b/llm", 'template', '--model', $gguf,
                                '--messages', $mfile,
                                '--add-generation-prompt');
(undef, my $dir_rendered) = run_cmd("$b/llm", 'template', '--model', $dir,
                                    '--messages', $mfile,
                                    '--add-generation-prompt');
ok(length $rendered && $rendered eq $dir_rendered,
   'the file\'s chat template renders as the directory\'s');
my $bos = '<|begin_of_text|>';
is(substr($rendered, 0, length $bos), $bos, 'the prompt starts with BOS');
$g = cli_generate(substr($rendered, length $bos), 12);
$r = $t->post('/v1/chat/completions',
              { model => $name, messages => \@msgs, max_tokens => 12,
                temperature => 0, ignore_eos => \1,
                return_token_ids => \1 });
is($r->{status}, 200, 'chat: 200');
$c = $r->{json}{choices}[0];
is_deeply($r->{json}{prompt_token_ids}, $g->{prompt_ids},
          'chat: the rendered prompt\'s ids, BOS once');
is_deeply($c->{token_ids}, $g->{ids}, 'chat: llm generate\'s ids');
is($c->{message}{content}, $g->{text}, 'chat: llm generate\'s text');

# streamed, the same text
$r = $t->stream('/v1/chat/completions',
                { model => $name, messages => \@msgs, max_tokens => 12,
                  temperature => 0, ignore_eos => \1, stream => \1 });
my @chunks = grep { ref && @{ $_->{choices} } } @{ $r->{events} };
is(join('', map { $_->{choices}[0]{delta}{content} // '' } @chunks),
   $g->{text}, 'chat, streamed: the same text');
$t->stop;

# the directory it came from serves the same tokens (bf16 bits copied)
my $d = NginxLLM->new(model => $dir);
$d->start;
my $dr = $d->post('/v1/chat/completions',
                  { model => 'tiny', messages => \@msgs, max_tokens => 12,
                    temperature => 0, ignore_eos => \1,
                    return_token_ids => \1 });
is_deeply($dr->{json}{choices}[0]{token_ids}, $c->{token_ids},
          'the directory serves the same tokens as its GGUF');
$d->stop;

# llama.cpp's own Q8_0 file of it (llama_model_quantize): served on the
# block-format kernels, the tokens of llm generate on the same file
my ($quantize) = $env =~ /^LLAMA_QUANTIZE=(.*)$/m;
my ($backends) = $env =~ /^GGML_BACKEND_DIR=(.*)$/m;
my $q8 = "$b/t-models/" . (split m{/}, $dir)[-1] . '-q8_0.gguf';
unless (-f $q8) {
    local $ENV{GGML_BACKEND_DIR} = $backends;
    system("$quantize $gguf $q8.tmp$$ q8_0 1 >/dev/null 2>&1") == 0
        or die "llama_quantize failed\n";
    rename "$q8.tmp$$", $q8 or die "$q8: $!";
}
$gguf = $q8;
$g = cli_generate($raw, 16);
is(scalar @{ $g->{ids} // [] }, 16, 'llm generate on the Q8_0 file: 16 tokens');
my $q = NginxLLM->new(model => $q8, engine => $engine);
$q->start;
$r = $q->post('/v1/completions', { %body, model => "$name-q8_0" });
is($r->{status}, 200, 'the Q8_0 file: completions 200');
is_deeply($r->{json}{choices}[0]{token_ids}, $g->{ids},
          'the Q8_0 file: llm generate\'s ids');
is($r->{json}{choices}[0]{text}, $g->{text}, 'the Q8_0 file: llm generate\'s text');
like($q->error_log, qr/Q8_0/, 'the error log names the block format');
$q->stop;

done_testing();
