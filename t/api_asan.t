#!/usr/bin/perl
# The core API tests again, with the module and the engine built with
# AddressSanitizer (build/asan, as "make asan" builds it) and loaded into
# Debian's nginx with libasan preloaded.  Any sanitizer report lands in
# error.log, which every test file checks.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $root = NginxLLM::root();

# incremental: only what changed since the last run is rebuilt
my $log = `make -C '$root' BUILD=build/asan SANITIZE=address OPT=-O1 module 2>&1`;
is($? >> 8, 0, 'the AddressSanitizer build of the engine and the module')
    or BAIL_OUT("make asan failed:\n" . substr($log, -3000));

# the sanitizer really runs in the worker
{
    local $ENV{LLM_NGINX_ASAN} = 1;
    my $t = NginxLLM->new;
    $t->start;
    my ($w) = $t->worker_pids;
    like(NginxLLM::slurp("/proc/$w/maps"), qr/libasan\.so/,
         'the worker runs with the ASan runtime');
    $t->done;
}

for my $test (qw(api_chat.t api_completions.t api_errors.t api_metrics.t
                  api_sampling.t api_responses.t api_tokenize.t
                  api_prometheus.t api_spec.t api_prompt_logprobs.t
                  api_structured.t api_nginx_errors.t api_limits.t
                  api_ids.t api_responses_owner.t api_backpressure.t
                  api_responses_workers.t api_engine_shared.t
                  api_engine_restart.t api_openapi_schema.t api_router.t
                  api_router_billing.t
                  api_tools.t api_tool_choice.t api_responses_tools.t
                  api_reasoning.t api_gguf.t)) {
    local $ENV{LLM_NGINX_ASAN} = 1;
    my $out = `'$^X' '$FindBin::Bin/$test' 2>&1`;
    is($? >> 8, 0, "$test under AddressSanitizer")
        or diag(substr($out, -4000));
}

done_testing();
