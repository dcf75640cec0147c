#!/usr/bin/perl
# Configuration: what "nginx -t" rejects (with an [emerg] naming the
# directive), a model that fails to load (nginx stays up, 503 with the
# reason), and graceful quit and reload finishing the streams in flight.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;

my $t = NginxLLM->new;

my ($rc, $out) = $t->test_config;
is($rc, 0, 'nginx -t: the test configuration is valid') or diag($out);

my @rejected = (
    [ 'llm_per_request_metrics on with llm_log_stats off',
      { http => "llm_per_request_metrics on;\n    llm_log_stats off;" },
      qr/\[emerg\] "llm_per_request_metrics on" requires "llm_log_stats on"/ ],
    [ 'the same, set in a location',
      { http => 'llm_log_stats off;', locations =>
        'location /v1/ { llm_api; llm_per_request_metrics on; }' },
      qr/\[emerg\] "llm_per_request_metrics on" requires "llm_log_stats on"/ ],
    [ 'llm_api without llm_model', { model => '' },
      qr/\[emerg\] "llm_api" requires "llm_model"/ ],
    [ 'llm_health without llm_model',
      { model => '', locations => 'location /h { llm_health; }' },
      qr/\[emerg\] "llm_health" requires "llm_model"/ ],
    [ 'llm_device of an unknown kind', { http => 'llm_device gpu;' },
      qr/\[emerg\] "llm_device": invalid value "gpu", use auto, cpu or cuda:N/ ],
    [ 'llm_max_num_seqs 0', { http => 'llm_max_num_seqs 0;' },
      qr/\[emerg\] "llm_max_num_seqs" must be at least 1, got 0/ ],
    [ 'llm_max_model_len not a number',
      { engine => 'llm_thread_pool llm; llm_max_model_len x;' },
      qr/\[emerg\] "llm_max_model_len" directive invalid number/ ],
    [ 'llm_kv_cache_size not a size',
      { engine => 'llm_thread_pool llm; llm_kv_cache_size lots;' },
      qr/\[emerg\] "llm_kv_cache_size" directive invalid value/ ],
    [ 'llm_gpu_memory_utilization 1.5',
      { http => 'llm_gpu_memory_utilization 1.5;' },
      qr/\[emerg\] "llm_gpu_memory_utilization": invalid value "1\.5", must be a fraction in \(0, 1\]/ ],
    [ 'llm_speculative with an unknown method',
      { http => 'llm_speculative eagle;' },
      qr/\[emerg\] "llm_speculative": unknown method "eagle"/ ],
    [ 'llm_speculative with a bad parameter',
      { http => 'llm_speculative ngram tokens=0;' },
      qr/\[emerg\] "llm_speculative": invalid value in "tokens=0"/ ],
    [ 'spec decode metrics without llm_speculative',
      { http => 'llm_per_request_spec_decode_metrics summary;' },
      qr/\[emerg\] "llm_per_request_spec_decode_metrics" other than "none" requires "llm_speculative"/ ],
    [ 'llm_per_request_spec_decode_metrics of an unknown level',
      { http => 'llm_per_request_spec_decode_metrics all;' },
      qr/\[emerg\] invalid value "all"/ ],
    [ 'llm_api twice', { locations => 'location /v1/ { llm_api; llm_api; }' },
      qr/\[emerg\] "llm_api" directive is duplicate/ ],
    [ 'llm_model in a server block', { server => 'llm_model /x;' },
      qr/\[emerg\] "llm_model" directive is not allowed here/ ],
    [ 'an llm_thread_pool nobody declared',
      { engine => 'llm_thread_pool nope;' },
      qr/\[emerg\] unknown thread pool "nope"/ ],
);

for my $c (@rejected) {
    my ($name, $conf, $want) = @$c;
    my ($code, $text) = $t->test_config(%$conf);
    is($code, 1, "nginx -t fails: $name");
    like($text, $want, "... with the [emerg] line") or diag($text);
}

# one engine per nginx: a GPU is opened once, whatever worker_processes says
($rc, $out) = $t->test_config(workers => 4, http => 'llm_device cuda:0;');
is($rc, 0, 'nginx -t: llm_device cuda:0 with worker_processes 4 is valid')
    or diag($out);
($rc, $out) = $t->test_config(workers => 'auto', http => 'llm_device cuda:0;');
is($rc, 0, '... and with worker_processes auto') or diag($out);

($rc, $out) = $t->test_config(workers => 2, http => "llm_speculative ngram tokens=3;\n"
    . "    llm_per_request_spec_decode_metrics summary;\n"
    . "    llm_device cpu; llm_gpu_memory_utilization 0.8;");
is($rc, 0, 'nginx -t accepts speculative settings, a CPU device, 2 workers')
    or diag($out);

($rc, $out) = $t->test_config(engine => "llm_thread_pool llm; llm_kv_cache_size 2g;");
is($rc, 0, 'nginx -t accepts SPEC\'s "llm_kv_cache_size 2g"') or diag($out);

# --- a model that fails to load: nginx stays up, 503 with the reason ---

my $bad = NginxLLM->new(model => '/nonexistent/model');
$bad->start(wait => 0);
my $r;
my $deadline = time + 60;
do {        # the loader thread fails the load in its own time
    $r = $bad->get('/health');
    sleep 0.05;
} while (($r->{json}{error}{message} // 'the model is loading')
         eq 'the model is loading' && time < $deadline);
is($r->{status}, 503, '/health: 503 when the model failed to load');
like($r->{json}{error}{message} // '', qr{model not loaded: .*/nonexistent/model},
     '/health: the reason');
$r = $bad->post('/v1/chat/completions', { messages => [{ role => 'user',
                                                         content => 'x' }] });
is($r->{status}, 503, 'the API: 503');
like($r->{json}{error}{message} // '', qr{/nonexistent/model}, 'the API: the reason');
is($r->{json}{error}{type}, 'ServiceUnavailableError', 'the API: type');
like($bad->error_log, qr/\[error\] .*llm: the model failed to load/,
     'the error log says why');
$bad->done;

# --- graceful quit and reload finish the streams in flight ---

sub start_stream {
    my ($n) = @_;
    my $s = $t->raw_socket('POST', '/v1/chat/completions',
        { messages => [{ role => 'user', content => 'Go on.' }],
          max_tokens => $n, ignore_eos => \1, stream => \1 });
    my $buf = '';
    while ($buf !~ /"content":"[^"]/) {
        sysread($s, my $c, 4096) or last;
        $buf .= $c;
    }
    return ($s, $buf);
}

sub finish_stream {
    my ($s, $buf) = @_;
    local $/;
    $buf .= <$s> // '';
    close $s;
    return $buf;
}

$t->start;
my ($s, $buf) = start_stream(60);
$t->reload;
$buf = finish_stream($s, $buf);
like($buf, qr/"finish_reason":"length".*data: \[DONE\]\n\n/s,
     'reload: the stream in flight finished');
ok($t->wait_ready(30), 'reload: the new worker serves');

($s, $buf) = start_stream(60);
kill 'QUIT', $t->{pid};
$buf = finish_stream($s, $buf);
like($buf, qr/"finish_reason":"length".*data: \[DONE\]\n\n/s,
     'quit: the stream in flight finished');
$t->done;

done_testing();
