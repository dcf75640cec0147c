#!/usr/bin/perl
# The official `openai` npm client, unmodified, against ngx_llm: model list,
# chat, chat streaming with usage (and the metrics vLLM adds), completions
# with logprobs, completions streaming, and an error it maps to its class.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $t = NginxLLM->new(http => 'llm_per_request_metrics on;');
$t->start;

my ($rc, $out) = $t->node('openai_client.mjs', $t->url('/v1'), 'tiny');
is($rc, 0, 'the openai client ran without an exception') or diag($out);
my $o = NginxLLM::decode_json_safe($out) // {};

is_deeply($o->{models}, ['tiny'], 'models.list');
is($o->{model}{id}, 'tiny', 'models.retrieve');
is($o->{model}{max_model_len}, 256, 'model card: max_model_len');

my $chat = $o->{chat};
is($chat->{object}, 'chat.completion', 'chat: object');
is($chat->{choices}[0]{message}{role}, 'assistant', 'chat: role');
ok($chat->{usage}{completion_tokens} >= 1
   && $chat->{usage}{completion_tokens} <= 8
   && $chat->{usage}{total_tokens} == $chat->{usage}{prompt_tokens}
                                      + $chat->{usage}{completion_tokens},
   'chat: usage');
is(ref $chat->{metrics}, 'HASH', 'chat: metrics object reaches the client');

my $s = $o->{chat_stream};
is($s->{text}, $chat->{choices}[0]{message}{content},
   'chat stream: text = non-streamed text');
is(scalar @{ $s->{finish} }, 1, 'chat stream: one finish_reason');
is_deeply($s->{last}{choices}, [], 'chat stream: last chunk has no choices');
is($s->{last}{usage}{completion_tokens}, $chat->{usage}{completion_tokens},
   'chat stream: usage in the last chunk');
ok(exists $s->{last}{metrics}{time_to_first_token_ms},
   'chat stream: metrics in the usage chunk');

my $c = $o->{completion};
is($c->{object}, 'text_completion', 'completion: object');
ok(ref $c->{choices}[0]{logprobs}{tokens} eq 'ARRAY', 'completion: logprobs');
is($o->{completion_stream}{text}, $c->{choices}[0]{text},
   'completion stream: text = non-streamed text');

my $e = $o->{error} // {};
is($e->{status}, 404, 'unknown model: 404');
is($e->{name}, 'NotFoundError', 'the client raises NotFoundError');
is($e->{type}, 'NotFoundError', 'error.type');
is($e->{param}, 'model', 'error.param');

$t->done;
done_testing();
