#!/usr/bin/perl
# Reasoning models (llm_reasoning_parser, vLLM's --reasoning-parser) and
# their metrics (llm_per_request_output_token_metrics).  Models with Qwen3's
# real tokenizer and chat template whose greedy output is a chosen text
# (NginxLLM->script_model_of: "</think>" and "<tool_call>" are Qwen3's own
# added tokens), steered with logit_bias:
#
#   - chat and Responses: the reasoning apart from the content in bodies and
#     streams, cut after every token (max_tokens 1 .. all), the token counts
#     against the token ids the model wrote (return_token_ids);
#     reasoning_tokens; output_token_metrics' counts adding up to
#     completion_tokens and its times obeying their formulas inside the
#     request's own interval; zero-token categories;
#   - Qwen3's enable_thinking false, a model that opens <think> itself, a
#     DeepSeek-R1-style template (the generation prompt opens the block)
#     with deepseek_r1, reasoning followed by a tool call (hermes);
#   - the billing variables in access-log lines of completed and aborted
#     streams; Prometheus' token counters against the sums of the usage;
#   - nginx -t's rejections, a tokenizer without think tokens.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;
use Prometheus;

my $chat = '/v1/chat/completions';
my ($END_THINK, $IM_END) = (151668, 151645);

my $R = 'Let me think about it.';
my $A = ' The answer is four';
my $PLAIN = 'Plain reply';
# Qwen3's prompt ends with "assistant\n" (198), or with enable_thinking
# false with "</think>\n\n" (271)
my ($mdir, $mc) = NginxLLM->script_model_of('qwen3', [198, 271],
                                            "$R</think>$A", $PLAIN);
my ($odir, $oc) = NginxLLM->script_model_of('qwen3', [198],
                                            '<think>Hmm</think> Sure');
my $CALL = '{"name":"get_weather","arguments":{"city":"Rome"}}';
my ($tdir, $tc) = NginxLLM->script_model_of('qwen3', [198],
    "Checking the weather.</think><tool_call>$CALL</tool_call>");

my @msgs = ({ role => 'user', content => 'What is 2 + 2?' });

# the scripts end with generation_config's (first) EOS
my $gen = NginxLLM::json()->decode(NginxLLM::slurp("$mdir/generation_config.json"));
my $EOS = ref $gen->{eos_token_id} ? $gen->{eos_token_id}[0]
                                   : $gen->{eos_token_id};

sub req {
    my ($chain, %o) = @_;
    return { messages => \@msgs, temperature => 0, max_tokens => 40,
             logit_bias => { $chain->[0] => 100 }, return_token_ids => \1,
             %o };
}

my $LOC = <<'LOC';
        location /v1/ { llm_api; }
        location /raw/v1/ {
            llm_api;
            llm_reasoning_parser none;
            llm_per_request_output_token_metrics off;
        }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
LOC

my $t = NginxLLM->new(model => $mdir, locations => $LOC,
                      http => "llm_reasoning_parser qwen3;\n"
                              . "    llm_per_request_output_token_metrics on;");
$t->start;

my $ids = $mc->[0];                     # the reasoning answer's tokens
my $n_r = 0;
$n_r++ while $ids->[$n_r] != $END_THINK;
is($n_r, 6, 'the chain: six reasoning tokens before </think>');

sub detok {
    my @t = @_;
    return '' unless @t;
    return $t->post('/v1/detokenize', { tokens => \@t })->{json}{prompt};
}

# the categories' times obey their formulas inside the request's interval
sub check_times {
    my ($what, $m, $otm) = @_;
    my $end = $m->{time_to_first_token_ms} + $m->{generation_time_ms};
    for my $k (qw(reasoning content)) {
        my $c = $otm->{$k};
        if ($c->{token_count} == 0) {
            ok(!defined $c->{time_to_first_token_ms}
               && !defined $c->{generation_time_ms}
               && !defined $c->{mean_itl_ms}
               && !defined $c->{tokens_per_second},
               "$what: no $k tokens, null times");
            next;
        }
        ok($c->{time_to_first_token_ms} >= $m->{time_to_first_token_ms} - 1e-9
           && $c->{time_to_first_token_ms} + $c->{generation_time_ms}
              <= $end + 1e-9 && $c->{generation_time_ms} >= 0,
           "$what: $k lies inside the request's first and last token");
        if ($c->{token_count} > 1 && defined $c->{mean_itl_ms}) {
            my $itl = $c->{generation_time_ms} / ($c->{token_count} - 1);
            ok(abs($c->{mean_itl_ms} - $itl) <= 1e-9 * $itl
               && abs($c->{tokens_per_second} - 1000 / $itl)
                  <= 1e-9 * 1000 / $itl,
               "$what: $k mean_itl = generation / (n - 1), tokens/s its "
               . "reciprocal");
        } else {
            ok(!defined $c->{mean_itl_ms} && !defined $c->{tokens_per_second},
               "$what: $k with one token: no ITL, no tokens/s");
        }
    }
    my ($r, $c) = ($otm->{reasoning}, $otm->{content});
    if ($r->{token_count} && $c->{token_count}) {
        ok($c->{time_to_first_token_ms}
           >= $r->{time_to_first_token_ms} + $r->{generation_time_ms} - 1e-9,
           "$what: the answer starts after the reasoning ends");
    }
    if ($r->{token_count}) {
        is($r->{time_to_first_token_ms}, $m->{time_to_first_token_ms},
           "$what: reasoning first, its TTFT is the request's");
    }
}

# --- chat: the whole answer ------------------------------------------------

my $r = $t->post($chat, req($ids));
is($r->{status}, 200, 'chat: 200') or diag($r->{content});
my $msg = $r->{json}{choices}[0]{message};
is($msg->{reasoning}, $R, 'chat: message.reasoning');
is($msg->{content}, $A, 'chat: content, without the markup');
is_deeply($r->{json}{choices}[0]{token_ids}, [ @$ids, $EOS ],
          'chat: the tokens of the chain and the EOS');
my $u = $r->{json}{usage};
is($u->{completion_tokens_details}{reasoning_tokens}, $n_r,
   'chat: usage.completion_tokens_details.reasoning_tokens');
my $m = $r->{json}{metrics};
my $otm = $m->{output_token_metrics};
is($otm->{reasoning}{token_count}, $n_r, 'chat: reasoning.token_count');
is($otm->{content}{token_count}, @$ids - $n_r - 1,
   'chat: content.token_count: the tokens after </think>');
is($otm->{unclassified_token_count}, 2,
   'chat: unclassified: </think> and the EOS');
is($otm->{reasoning}{token_count} + $otm->{content}{token_count}
   + $otm->{unclassified_token_count}, $u->{completion_tokens},
   'chat: the three counts add up to completion_tokens');
check_times('chat', $m, $otm);
like($r->{content}, qr/"output_token_metrics":\{"reasoning":\{"token_count":\d+,"time_to_first_token_ms":[^,]+,"generation_time_ms":[^,]+,"mean_itl_ms":[^,]+,"tokens_per_second":[^,]+\},"content":\{"token_count"/,
     'chat: vLLM\'s key order');
my $content_ttft = $otm->{content}{time_to_first_token_ms};

# --- every cut, body and stream ----------------------------------------------

sub stream_parts {
    my ($s) = @_;
    my (%p, $seen_content, $order_ok, $markup);
    $p{reasoning} = $p{content} = '';
    $order_ok = 1;
    for my $e (@{ $s->{events} }) {
        next unless ref $e;
        $p{usage} = $e->{usage}, $p{metrics} = $e->{metrics}
            if $e->{usage} && !@{ $e->{choices} };
        next unless @{ $e->{choices} // [] };
        my $d = $e->{choices}[0]{delta};
        if (defined $d->{reasoning}) {
            $order_ok = 0 if $seen_content;
            $p{reasoning} .= $d->{reasoning};
        }
        if (defined $d->{content} && length $d->{content}) {
            $seen_content = 1;
            $p{content} .= $d->{content};
        }
        $markup = 1 if grep { defined && /<\/?think>/ }
                            $d->{reasoning}, $d->{content};
        $p{finish} = $e->{choices}[0]{finish_reason}
            if $e->{choices}[0]{finish_reason};
    }
    $p{order_ok} = $order_ok;
    $p{markup} = $markup;
    return \%p;
}

my $all_cuts = 1;
for my $k (1 .. @$ids + 1) {
    my $want_r = detok(@$ids[0 .. ($k < $n_r ? $k : $n_r) - 1]);
    my $want_c = $k > $n_r + 1 ? detok(@$ids[$n_r + 1 .. ($k > @$ids ? @$ids : $k) - 1])
                               : '';
    my $n_reason = $k < $n_r ? $k : $n_r;
    my $n_content = $k > $n_r + 1 ? ($k > @$ids ? @$ids : $k) - $n_r - 1 : 0;

    my $b = $t->post($chat, req($ids, max_tokens => $k));
    my $bm = $b->{json}{choices}[0]{message};
    my $o = $b->{json}{metrics}{output_token_metrics};
    my $ok = ($bm->{reasoning} // '') eq $want_r
             && ($bm->{content} // '') eq $want_c
             && (length $want_c || !defined $bm->{content})
             && (length $want_r || !defined $bm->{reasoning})
             && $b->{json}{usage}{completion_tokens_details}{reasoning_tokens}
                == $n_reason
             && $o->{reasoning}{token_count} == $n_reason
             && $o->{content}{token_count} == $n_content
             && $o->{reasoning}{token_count} + $o->{content}{token_count}
                + $o->{unclassified_token_count}
                == $b->{json}{usage}{completion_tokens};

    my $s = $t->stream($chat, req($ids, max_tokens => $k, stream => \1,
                                  stream_options => { include_usage => \1 }));
    my $p = stream_parts($s);
    my $so = $p->{metrics}{output_token_metrics};
    $ok &&= $p->{reasoning} eq $want_r && $p->{content} eq $want_c
            && $p->{order_ok} && !$p->{markup}
            && $p->{usage}{completion_tokens_details}{reasoning_tokens}
               == $n_reason
            && $so->{reasoning}{token_count} == $n_reason
            && $so->{content}{token_count} == $n_content;
    ok($ok, "max_tokens $k: reasoning [$want_r], content [$want_c], "
            . "$n_reason + $n_content tokens, body and stream")
        or do { $all_cuts = 0; diag($b->{content}); diag($s->{content}) };
}

# zero-token categories: a stream drops the nulls (exclude_none), a body
# keeps them
my $s = $t->stream($chat, req($ids, max_tokens => $n_r, stream => \1,
                              stream_options => { include_usage => \1 }));
my $p = stream_parts($s);
is_deeply($p->{metrics}{output_token_metrics}{content}, { token_count => 0 },
          'stream, reasoning only: content {"token_count": 0}, nulls dropped');
is($p->{finish}, 'length', 'stream, reasoning only: cut by length');
$r = $t->post($chat, req($ids, max_tokens => $n_r));
check_times('chat, reasoning only', $r->{json}{metrics},
            $r->{json}{metrics}{output_token_metrics});
is($r->{json}{choices}[0]{message}{content}, undef,
   'chat, reasoning only: content null');

# --- thinking off ----------------------------------------------------------

$r = $t->post($chat, req($mc->[1],
              chat_template_kwargs => { enable_thinking => \0 }));
$msg = $r->{json}{choices}[0]{message};
is($msg->{reasoning}, undef, 'enable_thinking false: reasoning null');
is($msg->{content}, $PLAIN, 'enable_thinking false: all content');
$otm = $r->{json}{metrics}{output_token_metrics};
is($otm->{reasoning}{token_count}, 0, 'enable_thinking false: no reasoning');
is($otm->{content}{token_count}, scalar @{ $mc->[1] },
   'enable_thinking false: every token but the EOS is content');
check_times('enable_thinking false', $r->{json}{metrics}, $otm);
is($r->{json}{metrics}{output_token_metrics}{content}{time_to_first_token_ms},
   $r->{json}{metrics}{time_to_first_token_ms},
   'enable_thinking false: the answer\'s TTFT is the request\'s');

# a prompt that closed the block: what the model writes is content, markers
# and all (vLLM: thinking disabled)
$r = $t->post($chat, req($ids, chat_template_kwargs => { enable_thinking => \0 }));
is($r->{json}{choices}[0]{message}{content}, "$R</think>$A",
   'enable_thinking false: a </think> the model writes is content');
is($r->{json}{metrics}{output_token_metrics}{content}{token_count},
   scalar @$ids, 'enable_thinking false: ... and counts as content');

# a location without the parser: the model's text as it is
$r = $t->post("/raw$chat", req($ids));
is($r->{json}{choices}[0]{message}{content}, "$R</think>$A",
   'llm_reasoning_parser none: the text with its markup, as content');
is($r->{json}{choices}[0]{message}{reasoning}, undef,
   'llm_reasoning_parser none: reasoning null');
ok(!exists $r->{json}{usage}{completion_tokens_details},
   'llm_reasoning_parser none: no completion_tokens_details');

# --- Responses ----------------------------------------------------------------

$r = $t->post('/v1/responses', { input => 'What is 2 + 2?', temperature => 0,
                                 logit_bias => { $ids->[0] => 100 } });
is($r->{status}, 200, 'responses: 200');
my $out = $r->{json}{output};
is(scalar @$out, 2, 'responses: a reasoning item and a message');
is($out->[0]{type}, 'reasoning', 'responses: the reasoning first');
like($out->[0]{id}, qr/^rs_[0-9a-f]{32}$/, 'responses: rs_ id');
is_deeply($out->[0]{content}, [{ type => 'reasoning_text', text => $R }],
          'responses: one reasoning_text part');
is_deeply($out->[0]{summary}, [], 'responses: no summary');
is($out->[1]{content}[0]{text}, $A, 'responses: the message, the answer');
is($r->{json}{usage}{output_tokens_details}{reasoning_tokens}, $n_r,
   'responses: output_tokens_details.reasoning_tokens');
$otm = $r->{json}{metrics}{output_token_metrics};
is($otm->{reasoning}{token_count} + $otm->{content}{token_count}
   + $otm->{unclassified_token_count}, $r->{json}{usage}{output_tokens},
   'responses: the counts add up to output_tokens');
check_times('responses', $r->{json}{metrics}, $otm);

$s = $t->stream('/v1/responses', { input => 'What is 2 + 2?',
    temperature => 0, logit_bias => { $ids->[0] => 100 }, stream => \1 });
my @ev;
for my $blk (split /\n\n/, $s->{content}) {
    my ($type, $data) = $blk =~ /^event: (\S+)\ndata: (.*)\z/s or next;
    push @ev, [ $type, NginxLLM::decode_json_safe($data) ];
}
my @types = map { $_->[0] } @ev;
my $deltas = grep { $_ eq 'response.reasoning_text.delta' } @types;
my @want = ('response.created', 'response.in_progress',
            'response.output_item.added', 'response.content_part.added',
            ('response.reasoning_text.delta') x $deltas,
            'response.reasoning_text.done', 'response.content_part.done',
            'response.output_item.done', 'response.output_item.added');
is_deeply([ @types[0 .. $#want] ], \@want,
          'responses stream: the reasoning item\'s events before the message');
is(join('', map { $_->[1]{delta} } grep { $_->[0] eq 'response.reasoning_text.delta' } @ev),
   $R, 'responses stream: the reasoning deltas add up');
my ($rdone) = grep { $_->[0] eq 'response.reasoning_text.done' } @ev;
is($rdone->[1]{text}, $R, 'responses stream: reasoning_text.done');
my @msg_ev = grep { $_->[0] eq 'response.output_text.delta' } @ev;
is(join('', map { $_->[1]{delta} } @msg_ev), $A,
   'responses stream: the answer\'s deltas');
ok(!grep({ $_->[1]{output_index} != 1 } @msg_ev),
   'responses stream: the message at output_index 1');
my $done = $ev[-1][1]{response};
is($done->{output}[0]{content}[0]{text}, $R,
   'responses stream: response.completed has the reasoning item');
is($done->{usage}{output_tokens_details}{reasoning_tokens}, $n_r,
   'responses stream: reasoning_tokens');
is($done->{metrics}{output_token_metrics}{reasoning}{token_count}, $n_r,
   'responses stream: output_token_metrics in response.completed');

# --- access log: the billing record ------------------------------------------

sub log_fields {
    my ($line) = @_;
    return { map { /^(\w+)=(.*)$/ ? ($1, $2) : () } split / /, $line // '' };
}

my $first = log_fields($t->wait_log_line(qr{^/v1/chat/completions 200 .* completion=12 .*reasoning=6 }, 10));
is($first->{reasoning}, $n_r, 'log: $llm_reasoning_tokens');
is($first->{content}, @$ids - $n_r - 1, 'log: $llm_content_tokens');
like($first->{content_ttft}, qr/^\d+\.\d{3}$/, 'log: $llm_content_ttft_ms');
my ($first_line) = grep { m{^/v1/chat/completions 200 } }
                   @{ $t->access_log };
is(log_fields($first_line)->{content_ttft}, sprintf('%.3f', $content_ttft),
   'log: $llm_content_ttft_ms = the JSON value, three decimals');
my $cut = $t->wait_log_line(qr/ completion=3 .*reasoning=3 /, 10);
is(log_fields($cut)->{content_ttft}, '-', 'log: no answer token: "-"');

# Prometheus: the token counters are the sums of the requests' usage.  Both
# are views that settle after the response: a worker writes the access-log
# line after the client has read the last byte, and the counters follow the
# engine's publish, so a busy machine is given until they agree.
my ($sum_p, $sum_c, $prom);
my $deadline = time + 30;
while (1) {
    ($sum_p, $sum_c) = (0, 0);
    for my $l (@{ $t->access_log }) {
        my $f = log_fields($l);
        next unless $l =~ m{^(/raw)?/v1/(chat/completions|responses) 200 };
        $sum_p += $f->{prompt};
        $sum_c += $f->{completion};
    }
    $prom = Prometheus::parse($t->get('/metrics')->{content});
    last if ($prom->value('vllm:generation_tokens_total') // -1) == $sum_c
            && ($prom->value('vllm:prompt_tokens_total') // -1) == $sum_p;
    last if time > $deadline;
    select(undef, undef, undef, 0.1);
}
is($prom->value('vllm:generation_tokens_total'), $sum_c,
   "Prometheus: generation tokens = the requests' completion tokens ($sum_c)");
is($prom->value('vllm:prompt_tokens_total'), $sum_p,
   "Prometheus: prompt tokens = the requests' prompt tokens ($sum_p)");

$t->done;

# --- the model opens <think> itself (older Qwen3 templates) -----------------

$t = NginxLLM->new(model => $odir,
                   http => 'llm_reasoning_parser qwen3;'
                           . ' llm_per_request_output_token_metrics on;');
$t->start;
$r = $t->post($chat, req($oc->[0]));
$msg = $r->{json}{choices}[0]{message};
is($msg->{reasoning}, 'Hmm', 'own <think>: the marker dropped');
is($msg->{content}, ' Sure', 'own <think>: the answer');
$otm = $r->{json}{metrics}{output_token_metrics};
is($otm->{unclassified_token_count}, 3,
   'own <think>: <think>, </think> and the EOS unclassified');
is($otm->{reasoning}{token_count} + $otm->{content}{token_count} + 3,
   $r->{json}{usage}{completion_tokens}, 'own <think>: the counts add up');
$t->done;

# --- a DeepSeek-R1-style template: the generation prompt opens the block ---

my $ds = "$mdir-deepseek";
unless (-f "$ds/config.json") {
    mkdir "$ds.tmp$$";
    system('cp', "$mdir/$_", "$ds.tmp$$/$_") == 0 or die
        for qw(config.json generation_config.json tokenizer.json
               tokenizer_config.json);
    symlink "$mdir/model.safetensors", "$ds.tmp$$/model.safetensors" or die;
    open my $fh, '>:utf8', "$ds.tmp$$/chat_template.jinja" or die;
    print $fh "{% for m in messages %}{% if m['role'] == 'user' %}"
            . "{{ '<\x{ff5c}User\x{ff5c}>' + m['content'] }}{% else %}"
            . "{{ '<\x{ff5c}Assistant\x{ff5c}>' + m['content'] }}{% endif %}"
            . "{% endfor %}{% if add_generation_prompt %}"
            . "{{ '<\x{ff5c}Assistant\x{ff5c}><think>\\n' }}{% endif %}";
    close $fh;
    rename "$ds.tmp$$", $ds or system('rm', '-rf', "$ds.tmp$$");
}
for my $parser (qw(deepseek_r1 qwen3)) {
    $t = NginxLLM->new(model => $ds,
                       http => "llm_reasoning_parser $parser;"
                               . ' llm_per_request_output_token_metrics on;');
    $t->start;
    for my $kw ({}, { enable_thinking => \0 }) {
        my $what = "$parser, DeepSeek template"
                   . (%$kw ? ', enable_thinking false' : '');
        $r = $t->post($chat, req($ids, chat_template_kwargs => $kw));
        $msg = $r->{json}{choices}[0]{message};
        is($msg->{reasoning}, $R, "$what: the prompt's <think> opens the block");
        is($msg->{content}, $A, "$what: the answer");
        is($r->{json}{metrics}{output_token_metrics}{reasoning}{token_count},
           $n_r, "$what: reasoning tokens");
    }
    $t->done;
}

# --- reasoning, then a tool call ---------------------------------------------

$t = NginxLLM->new(model => $tdir,
                   http => "llm_reasoning_parser qwen3;\n"
                           . "    llm_tool_call_parser hermes;\n"
                           . "    llm_per_request_output_token_metrics on;");
$t->start;
my @tools = ({ type => 'function', function => { name => 'get_weather',
    parameters => { type => 'object',
                    properties => { city => { type => 'string' } } } } });
$r = $t->post($chat, req($tc->[0], tools => \@tools));
my $ch = $r->{json}{choices}[0];
is($ch->{message}{reasoning}, 'Checking the weather.',
   'tools: the reasoning first');
is($ch->{message}{content}, undef, 'tools: no content');
is($ch->{message}{tool_calls}[0]{function}{name}, 'get_weather',
   'tools: then the call');
is($ch->{message}{tool_calls}[0]{function}{arguments}, '{"city":"Rome"}',
   'tools: its arguments');
is($ch->{finish_reason}, 'tool_calls', 'tools: finish_reason tool_calls');
$otm = $r->{json}{metrics}{output_token_metrics};
my $n_tr = 0;
$n_tr++ while $tc->[0][$n_tr] != $END_THINK;
is($otm->{reasoning}{token_count}, $n_tr, 'tools: reasoning tokens');
is($otm->{content}{token_count}, 0, 'tools: the call is not content');
is($otm->{unclassified_token_count}, @{ $tc->[0] } - $n_tr + 1,
   'tools: </think>, the call\'s tokens and the EOS unclassified');

$s = $t->stream($chat, req($tc->[0], tools => \@tools, stream => \1));
my $sum = NginxLLM::add_up_tool_stream($s);
$p = stream_parts($s);
is($p->{reasoning}, 'Checking the weather.', 'tools stream: reasoning deltas');
is($sum->{content}, '', 'tools stream: no content, no markup');
is($sum->{calls}[0]{arguments}, '{"city":"Rome"}',
   'tools stream: the call\'s deltas');

$r = $t->post('/v1/responses', { input => 'Weather?', temperature => 0,
    tools => [{ type => 'function', name => 'get_weather',
                parameters => $tools[0]{function}{parameters} }],
    logit_bias => { $tc->[0][0] => 100 } });
is_deeply([ map { $_->{type} } @{ $r->{json}{output} } ],
          [ 'reasoning', 'function_call' ],
          'tools, responses: a reasoning item, then the function call');
is($r->{json}{usage}{output_tokens_details}{reasoning_tokens}, $n_tr,
   'tools, responses: reasoning_tokens');
is($r->{json}{metrics}{output_token_metrics}{unclassified_token_count},
   @{ $tc->[0] } - $n_tr + 1,
   'tools, responses: the call\'s tokens unclassified');
$t->done;

# --- billing: aborted streams, llm_log_stats off -----------------------------

my $rand = NginxLLM->model(tokenizer => 'qwen3', tie => 0);
$t = NginxLLM->new(model => $rand, http => 'llm_reasoning_parser qwen3;',
                   engine => <<'ENGINE');
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 4096;
    llm_kv_cache_size 32m;
ENGINE
$t->start;

sub abort_stream {
    my ($body) = @_;
    my $sock = $t->raw_socket('POST', $chat, { %$body, stream => \1,
                                                max_tokens => 3000 });
    my $buf = '';
    while ((() = $buf =~ /data: /g) < 4) {
        sysread($sock, my $c, 65536) or last;
        $buf .= $c;
    }
    my ($id) = $buf =~ /"id":"(chatcmpl-[0-9a-f]+)"/;
    close $sock;
    return log_fields($t->wait_log_line(qr{ id=$id .*finish=abort}, 60));
}

# a random model never closes the block: everything is reasoning
my $f = abort_stream({ messages => \@msgs, temperature => 0,
                       logit_bias => { $END_THINK => -100, $EOS => -100,
                                       $IM_END => -100 } });
is($f->{finish}, 'abort', 'aborted, thinking: billed as abort');
ok($f->{reasoning} > 0 && $f->{reasoning} == $f->{completion}
   && $f->{content} == 0,
   "aborted, thinking: every token so far reasoning ($f->{reasoning})");
is($f->{content_ttft}, '-', 'aborted, thinking: no answer token, "-"');

$f = abort_stream({ messages => \@msgs, temperature => 0,
                    chat_template_kwargs => { enable_thinking => \0 },
                    logit_bias => { $EOS => -100, $IM_END => -100 } });
ok($f->{content} > 0 && $f->{content} == $f->{completion}
   && $f->{reasoning} == 0,
   "aborted, thinking off: every token so far content ($f->{content})");
like($f->{content_ttft}, qr/^\d+\.\d{3}$/,
     'aborted, thinking off: the answer\'s TTFT');

$r = $t->post('/v1/completions', { prompt => 'x', max_tokens => 2 });
$f = log_fields($t->wait_log_line(qr{^/v1/completions 200 }, 10));
is("$f->{reasoning} $f->{content} $f->{content_ttft}", '- - -',
   'completions: no reasoning parser there, "-"');
$t->done;

$t = NginxLLM->new(model => $mdir,
                   http => "llm_reasoning_parser qwen3;\n"
                           . "    llm_log_stats off;");
$t->start;
$r = $t->post($chat, req($ids));
is($r->{json}{choices}[0]{message}{reasoning}, $R,
   'log_stats off: the split stays');
ok(!exists $r->{json}{metrics}{output_token_metrics},
   'log_stats off: no output_token_metrics');
$f = log_fields($t->wait_log_line(qr{^/v1/chat/completions 200 }, 10));
is("$f->{reasoning} $f->{content} $f->{content_ttft}",
   "$n_r " . (@$ids - $n_r - 1) . ' -',
   'log_stats off: the counts stay (billing), the time is "-"');
$t->done;

# --- nginx -t ----------------------------------------------------------------
# (not under AddressSanitizer, t/api_asan.t: nginx -t runs without the
# ASan runtime the module needs there)

unless (NginxLLM::asan()) {

    $t = NginxLLM->new(model => $mdir);
    my ($st, $txt) = $t->test_config(http => 'llm_per_request_output_token_metrics on;');
    isnt($st, 0, 'nginx -t: output token metrics without a reasoning parser');
    like($txt, qr/\[emerg\].*"llm_per_request_output_token_metrics on" requires "llm_reasoning_parser"/,
         'nginx -t: ... says why');
    ($st, $txt) = $t->test_config(http => "llm_reasoning_parser qwen3;\n"
        . "    llm_per_request_output_token_metrics on;\n    llm_log_stats off;");
    isnt($st, 0, 'nginx -t: output token metrics with llm_log_stats off');
    like($txt, qr/\[emerg\].*requires "llm_log_stats on"/, 'nginx -t: ... says why');
    ($st, $txt) = $t->test_config(http => "llm_reasoning_parser qwen3;\n"
        . "    llm_per_request_output_token_metrics on;",
        locations => "        location / { llm_api; llm_reasoning_parser none; }");
    like($txt, qr/\[emerg\].*requires "llm_reasoning_parser"/,
         'nginx -t: a location that turns the parser off but not its metrics');
    ($st, $txt) = $t->test_config(http => 'llm_reasoning_parser granite;');
    like($txt, qr/\[emerg\].*unknown parser "granite", use qwen3, deepseek_r1 or none/,
         'nginx -t: an unknown parser');
    ($st, $txt) = $t->test_config(http => "llm_reasoning_parser qwen3;\n"
                                          . "    llm_reasoning_parser qwen3;");
    like($txt, qr/\[emerg\].*"llm_reasoning_parser" directive is duplicate/,
         'nginx -t: twice');
    ($st, $txt) = $t->test_config(http => "llm_reasoning_parser deepseek_r1;\n"
        . "    llm_per_request_output_token_metrics on;");
    is($st, 0, 'nginx -t: a parser and its metrics') or diag($txt);
}

# a tokenizer without think tokens (Llama 3.1's): a clear error, the worker
# alive
$t = NginxLLM->new(http => 'llm_reasoning_parser qwen3;');
$t->start;
$r = $t->post($chat, { messages => \@msgs, max_tokens => 2 });
is($r->{status}, 500, 'no think tokens: 500');
like($r->{json}{error}{message}, qr/no <think> and <\/think> tokens/,
     'no think tokens: says why');
is($t->post('/v1/completions', { prompt => 'x', max_tokens => 1 })->{status},
   200, 'no think tokens: the worker serves on');
$t->done;

done_testing;
