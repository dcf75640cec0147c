#!/usr/bin/perl
# Quantize on load through nginx (issue 16): llm_weights q4_k serves on the
# CPU (the engine's log says why), greedy text equal to `llm generate
# --weights q4_k`, with speculation on (greedy output unchanged), in a
# batch of concurrent requests, from the prefix cache on a repeat, in JSON
# mode, with per-request metrics and Prometheus counting the tokens;
# llm_weights' values in nginx -t; a model whose rows do not split into
# Q4_K blocks fails to load with the reason on /health.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;
use Prometheus;

my $model = NginxLLM->model(hidden => 256, intermediate => 512, tie => 0);
my $ENGINE = <<'ENGINE';
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 256;
    llm_kv_cache_size 16m;
    llm_thread_pool llm;
    llm_weights q4_k;
    llm_speculative ngram tokens=4;
    llm_per_request_metrics on;
ENGINE
my $LOC = <<'LOC';
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC

# --- nginx -t ---
{
    my $t = NginxLLM->new(model => $model, locations => $LOC);
    (my $bad = $ENGINE) =~ s/q4_k/q5_k/;
    my ($rc, $out) = $t->test_config(engine => $bad);
    isnt($rc, 0, 'llm_weights q5_k: nginx -t fails');
    like($out, qr/"llm_weights": invalid value "q5_k", use q8_0, q4_0 or q4_k/,
         '... naming the values');
}

my @prompts = ('Once upon a time, in a land far away,',
               'the cat sat on the mat. the cat sat on the mat. the cat',
               'Zebras quietly juggle orange umbrellas beneath');

sub cli {
    my ($prompt) = @_;
    open my $g, '-|', NginxLLM::build_dir() . '/llm', 'generate', '--model',
        $model, '--prompt', $prompt, '--max-tokens', '24', '--temperature',
        '0', '--ignore-eos', '--weights', 'q4_k', '--threads', '1', '--json'
        or die;
    my $j = NginxLLM::decode_json_safe(do { local $/; <$g> });
    close $g;
    return $j;
}

my @cli = map { cli($_) } @prompts;
ok((grep { $_ && length $_->{text} } @cli) == @prompts,
   'llm generate --weights q4_k');

my $t = NginxLLM->new(model => $model, engine => $ENGINE, locations => $LOC);
$t->start;
like($t->error_log, qr/engine ready on cpu \(cpu: Q4_K weights run on the CPU\)/,
     'the engine serves Q4_K on the CPU, and says so');

my %greedy = (model => 'tiny', temperature => 0, ignore_eos => \1,
              max_tokens => 24);
for my $i (0 .. $#prompts) {
    my $r = $t->post('/v1/completions', { %greedy, prompt => $prompts[$i] });
    is($r->{json}{choices}[0]{text}, $cli[$i]{text},
       "greedy text = llm generate --weights q4_k ($i), speculation on");
    ok(defined $r->{json}{metrics}{time_to_first_token_ms},
       '... with per-request metrics');
}

# the same prompts at once: one batch, the same texts
my @h = map { $t->bg_request('POST', '/v1/completions',
                             { %greedy, prompt => $_ }) } @prompts;
my @bg = map { $t->wait_bg($_) } @h;
is_deeply([ map { $_->{json}{choices}[0]{text} } @bg ],
          [ map { $_->{text} } @cli ], 'concurrent requests: the same texts');

# a prompt of several 16-token blocks, twice: the second is served from the
# prefix cache, with the same text
my $long = join ' ', ('The quick brown fox jumps over the lazy dog.') x 5;
my @rep = map { $t->post('/v1/completions', { %greedy, prompt => $long }) } 1 .. 2;
cmp_ok($rep[1]{json}{usage}{prompt_tokens_details}{cached_tokens}, '>=', 32,
       'a repeated prompt hits the prefix cache');
is($rep[1]{json}{choices}[0]{text}, $rep[0]{json}{choices}[0]{text},
   '... and gives the same text');

# JSON mode
my $r = $t->post('/v1/chat/completions', {
    model => 'tiny', max_tokens => 60, temperature => 0,
    messages => [ { role => 'user', content => 'Give me a JSON object.' } ],
    response_format => { type => 'json_object' } });
is($r->{status}, 200, 'JSON mode: 200');
my $content = $r->{json}{choices}[0]{message}{content} // '';
if ($r->{json}{choices}[0]{finish_reason} eq 'stop') {
    ok(defined NginxLLM::decode_json_safe($content), 'JSON mode: the content is JSON')
        or diag($content);
} else {
    like($content, qr/^\s*[\{\[]/, 'JSON mode: the content starts as JSON (cut by max_tokens)');
}

# Prometheus counts what was generated
my $m = Prometheus::parse($t->get('/metrics')->{content});
my ($gen) = map { $_->{value} } grep { $_->{name} eq 'vllm:generation_tokens_total' }
                                @{ $m->{samples} // [] };
cmp_ok($gen // 0, '>=', 8 * 24, 'vllm:generation_tokens_total counts the tokens');
$t->done;

# --- rows that are not whole Q4_K blocks ---
{
    my $small = NginxLLM->model(tie => 0);     # hidden 64
    my $t2 = NginxLLM->new(model => $small, engine => $ENGINE, locations => $LOC);
    $t2->start(wait => 0);
    my $msg = '';
    for (1 .. 200) {
        my $h = $t2->get('/health');
        $msg = $h->{json}{error}{message} // '';
        last if $msg =~ /llm_weights/;
        select undef, undef, undef, 0.05;
    }
    like($msg, qr/llm_weights q4_k: model\.layers\.0\.self_attn\.q_proj\.weight has 64 columns, not a multiple of Q4_K's block of 256/,
         'hidden 64 with Q4_K: /health says which tensor does not fit');
    $t2->done;
}

done_testing;
