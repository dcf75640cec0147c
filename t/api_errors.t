#!/usr/bin/perl
# Bad input gets the OpenAI error object with the right status, type and
# param (SPEC section 8), vLLM's validation messages, and the worker stays
# up: malformed JSON, wrong types, unknown model, empty messages, prompts
# longer than llm_max_model_len, bodies over client_max_body_size (413 as
# JSON, not nginx's HTML), wrong method, unknown route, template errors.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use IO::Socket::INET;
use Test::More;
use NginxLLM;

my $t = NginxLLM->new;
$t->start;
my @workers = $t->worker_pids;

my $chat = '/v1/chat/completions';
my $cmpl = '/v1/completions';
my @m = ({ role => 'user', content => 'Hi' });

sub check {
    my ($name, $r, $status, $type, $param, $msg) = @_;
    subtest $name => sub {
        is($r->{status}, $status, "status $status");
        like($r->{headers}{'content-type'} // '', qr{^application/json},
             'JSON, not HTML');
        my $e = ($r->{json} // {})->{error} // {};
        like($r->{content} // '',
             qr/^\{"error":\{"message":"(?:[^"\\]|\\.)*","type":"[^"]*",
                "param":(?:null|"[^"]*"),"code":\d+\}\}$/x,
             'the OpenAI error object, in its key order');
        is($e->{code}, $status, 'error.code = the status');
        is($e->{type}, $type, "type $type") if defined $type;
        is($e->{param}, $param, 'param ' . ($param // 'null'));
        like($e->{message} // '', $msg, 'message') if $msg;
    };
}

my @cases = (
    # name, path, body, status, type, param, message
    [ 'malformed JSON', $chat, '{"messages": [', 400, 'BadRequestError',
      undef, qr/not valid JSON/ ],
    [ 'empty body', $chat, '', 400, 'BadRequestError', undef,
      qr/not valid JSON/ ],
    [ 'a body that is not an object', $chat, '[1, 2]', 400, undef, undef,
      qr/must be a JSON object, got an array/ ],
    [ 'messages missing', $chat, { model => 'tiny' }, 400, undef,
      'messages', qr/`messages` is required/ ],
    [ 'messages empty', $chat, { messages => [] }, 400, undef, 'messages',
      qr/at least one message/ ],
    [ 'messages of the wrong type', $chat, { messages => 'hi' }, 400,
      undef, 'messages', qr/got a string/ ],
    [ 'a message without a role', $chat, { messages => [{ content => 'x' }] },
      400, undef, 'messages', qr/messages\[0\]\.role must be a string/ ],
    [ 'an image part', $chat, { messages => [{ role => 'user', content => [
        { type => 'image_url', image_url => { url => 'x' } }] }] },
      400, undef, 'messages', qr/only \{"type": "text"/ ],
    [ 'a text part without text', $chat, { messages => [{ role => 'user',
        content => [ { type => 'text', text => 'a' }, { type => 'text' } ] }] },
      400, undef, 'messages', qr/^messages\[0\]\.content\[1\]: only / ],
    [ 'max_tokens as a string', $chat, { messages => \@m,
      max_tokens => '5' }, 400, undef, 'max_tokens',
      qr/`max_tokens` must be an integer, got a string/ ],
    [ 'max_tokens as a fraction', $chat, { messages => \@m,
      max_tokens => 2.5 }, 400, undef, 'max_tokens', qr/must be an integer/ ],
    [ 'max_tokens 0', $chat, { messages => \@m, max_tokens => 0 }, 400,
      undef, 'max_tokens', qr/^max_tokens must be at least 1, got 0\.$/ ],
    [ 'temperature -1', $chat, { messages => \@m, temperature => -1 }, 400,
      undef, 'temperature', qr/^temperature must be non-negative, got -1\.0\.$/ ],
    [ 'top_p 1.5', $chat, { messages => \@m, top_p => 1.5 }, 400, undef,
      'top_p', qr/^top_p must be in \(0, 1\], got 1\.5\.$/ ],
    [ 'top_k -2', $chat, { messages => \@m, top_k => -2 }, 400, undef,
      'top_k', qr/^top_k must be 0 \(disable\), or at least 1, got -2\.$/ ],
    [ 'min_p 2', $chat, { messages => \@m, min_p => 2 }, 400, undef,
      'min_p', qr/^min_p must be in \[0, 1\], got 2\.0\.$/ ],
    [ 'presence_penalty 3', $chat, { messages => \@m,
      presence_penalty => 3 }, 400, undef, 'presence_penalty',
      qr/^presence_penalty must be in \[-2, 2\], got 3\.0\.$/ ],
    [ 'frequency_penalty -2.5', $chat, { messages => \@m,
      frequency_penalty => -2.5 }, 400, undef, 'frequency_penalty',
      qr/got -2\.5\./ ],
    [ 'repetition_penalty 0', $chat, { messages => \@m,
      repetition_penalty => 0 }, 400, undef, 'repetition_penalty',
      qr/must be greater than zero, got 0\.0\./ ],
    [ 'a stop list with an empty string', $chat, { messages => \@m,
      stop => [''] }, 400, undef, 'stop',
      qr/^stop cannot contain an empty string\.$/ ],
    [ 'stop of the wrong type', $chat, { messages => \@m, stop => 5 }, 400,
      undef, 'stop', qr/a string or a list of strings/ ],
    [ 'stream not a boolean', $chat, { messages => \@m, stream => 'yes' },
      400, undef, 'stream', qr/must be a boolean/ ],
    [ 'stream_options without stream', $chat, { messages => \@m,
      stream_options => { include_usage => \1 } }, 400, undef,
      'stream_options', qr/only be defined when `stream=True`/ ],
    [ 'n 2 with greedy sampling', $chat, { messages => \@m, n => 2,
      temperature => 0 }, 400, undef, 'n',
      qr/^n must be 1 when using greedy sampling, got 2\.$/ ],
    [ 'n 0', $chat, { messages => \@m, n => 0 }, 400, undef, 'n',
      qr/^n must be at least 1, got 0\.$/ ],
    [ 'logit_bias with a key that is not an id', $chat, { messages => \@m,
      logit_bias => { abc => 1 } }, 400, undef, 'logit_bias',
      qr/keys must be token ids/ ],
    [ 'logit_bias out of the vocabulary', $chat, { messages => \@m,
      logit_bias => { 999999 => 1 } }, 400, undef, 'logit_bias',
      qr/out-of-vocab token ids\. Vocabulary size: \d+/ ],
    [ 'top_logprobs without logprobs', $chat, { messages => \@m,
      top_logprobs => 2 }, 400, undef, 'top_logprobs',
      qr/`logprobs` must be set to true/ ],
    [ 'top_logprobs 21', $chat, { messages => \@m, logprobs => \1,
      top_logprobs => 21 }, 400, undef, 'top_logprobs',
      qr/^Requested sample logprobs of 21, which is greater than max allowed: 20$/ ],
    [ 'min_tokens > max_tokens', $chat, { messages => \@m, max_tokens => 2,
      min_tokens => 5 }, 400, undef, 'min_tokens',
      qr/^min_tokens must be less than or equal to max_tokens=2, got 5\.$/ ],
    [ 'unknown model', $chat, { messages => \@m, model => 'gpt-4' }, 404,
      'NotFoundError', 'model', qr/^The model `gpt-4` does not exist\.$/ ],
    [ 'a prompt longer than llm_max_model_len', $chat, { messages => [{
      role => 'user', content => 'word ' x 400 }] }, 400, undef, 'messages',
      qr/maximum context length is 256 tokens/ ],
    [ 'a chat template in the request', $chat, { messages => \@m,
      chat_template => '{{ x }}' }, 400, undef, 'chat_template',
      qr/untrusted chat template/ ],
    [ 'tools without a function name', $chat, { messages => \@m,
      tools => [{ type => 'function', function => {} }] }, 400, undef,
      'tools', qr/tools\[0\]/ ],
    [ 'continue_final_message with add_generation_prompt', $chat,
      { messages => \@m, continue_final_message => \1 }, 400, undef,
      'continue_final_message', qr/Cannot set both/ ],
    [ 'completions: no prompt', $cmpl, { max_tokens => 2 }, 400, undef,
      'prompt', qr/Either prompt or prompt_embeds must be provided/ ],
    [ 'completions: an empty prompt in a list', $cmpl,
      { prompt => ['a', ''] }, 400, undef, 'prompt', qr/^prompt\[1\] is empty/ ],
    [ 'completions: an id out of the vocabulary', $cmpl,
      { prompt => [1, 999999] }, 400, undef, 'prompt', qr/out of vocabulary/ ],
    [ 'completions: suffix', $cmpl, { prompt => 'a', suffix => 'b' }, 400,
      undef, 'suffix', qr/suffix is not currently supported/ ],
    [ 'completions: max_tokens 0 without echo', $cmpl, { prompt => 'a',
      max_tokens => 0 }, 400, undef, 'max_tokens', qr/at least 1, got 0/ ],
    [ 'completions: a prompt longer than llm_max_model_len', $cmpl,
      { prompt => [ (1000) x 300 ] }, 400, undef, 'prompt',
      qr/^This model's maximum context length is 256 tokens\. However, your request has 300 input tokens\./ ],
);

for my $c (@cases) {
    my ($name, $path, $body, @want) = @$c;
    check($name, $t->post($path, $body), @want);
}

# vLLM tests stream_options' truth: {} without a stream is fine
is($t->post($chat, { messages => \@m, max_tokens => 1,
                     stream_options => {} })->{status}, 200,
   'stream_options {} without stream: accepted, as in vLLM');

# HTTP-level errors

my $r = $t->get($chat);
check('GET on chat/completions', $r, 405, 'Method Not Allowed', undef,
      qr/use POST/);
is($r->{headers}{allow}, 'POST', '405: Allow: POST');
check('POST on models', $t->post('/v1/models', {}), 405, undef, undef);
check('an unknown route', $t->get('/v1/nothing'), 404, 'NotFoundError',
      undef, qr{no API endpoint at "/v1/nothing"});
check('an unknown model id', $t->get('/v1/models/nope'), 404,
      'NotFoundError', 'model', qr/The model `nope` does not exist/);

# over client_max_body_size (1m): nginx answers before the module runs
my $big = '{"messages":[{"role":"user","content":"' . ('x' x 1_100_000)
          . '"}]}';
check('a body over client_max_body_size', $t->post($chat, $big), 413,
      'Request Entity Too Large', undef, qr/client_max_body_size/);

my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1:' . $t->port) or die;
print $s "POST $chat HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
       . "Transfer-Encoding: chunked\r\n\r\n";
print $s sprintf("%x\r\n%s\r\n", 200_000, 'x' x 200_000) for 1 .. 6;
print $s "0\r\n\r\n";
my $resp = do { local $/; <$s> };
close $s;
like($resp, qr{^HTTP/1\.1 413 .*\r\nContent-Type: application/json\r\n}s,
     'chunked body over the limit: 413, JSON');
like($resp, qr/\{"error":\{"message":"Request body is larger than/,
     'chunked body over the limit: the error object');

# a body larger than client_body_buffer_size is read from its temp file
$r = $t->post($chat, { messages => \@m, max_tokens => 1,
                       user => 'u' x 100_000 });
is($r->{status}, 200, 'a 100 KB body (in a temp file) works');

# still alive, same worker
$r = $t->post($chat, { messages => \@m, max_tokens => 2 });
is($r->{status}, 200, 'a valid request after all of that');
is_deeply([ $t->worker_pids ], \@workers, 'the worker never restarted');
$r = $t->request('HEAD', '/v1/models');
is($r->{status}, 200, 'HEAD /v1/models');

$t->done;

# --- the chat template decides: its errors are 400 with its message ---

my $tmpl = <<'JINJA';
{%- for m in messages %}
{%- if m.role == 'system' and not loop.first %}
{{- raise_exception('System messages must come first, found one at ' ~ loop.index0) }}
{%- endif %}
{{- '<|start_header_id|>' ~ m.role ~ '<|end_header_id|>\n\n' ~ m.content ~ '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}
JINJA
my $tt = NginxLLM->new(model => NginxLLM->model_with_template('raises', $tmpl));
$tt->start;
$r = $tt->post($chat, { messages => [ @m, { role => 'system',
                                            content => 'late' } ] });
check('the template raises (raise_exception)', $r, 400, 'BadRequestError',
      undef, qr/^System messages must come first, found one at 1$/);
$r = $tt->post($chat, { messages => \@m, max_tokens => 1 });
is($r->{status}, 200, 'the same template renders good messages');
$tt->done;

my $nt = NginxLLM->new(model => NginxLLM->model_with_template('none', undef));
$nt->start;
check('a model without a chat template', $nt->post($chat, { messages => \@m }),
      400, 'BadRequestError', undef, qr/must provide a chat template/);
is($nt->post($cmpl, { prompt => 'Hi', max_tokens => 1 })->{status}, 200,
   'completions work without a chat template');
$nt->done;

done_testing();
