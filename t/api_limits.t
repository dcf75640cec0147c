#!/usr/bin/perl
# What a hostile or careless body cannot do (docs/api.md, "Request limits"):
# nest deeper than 64 levels (300000 levels used to crash the worker in
# yajl_tree_free's recursion), carry ill-formed UTF-8 (overlong forms,
# surrogates) or a NUL byte, make the Responses API echo a value that
# yajl_gen cannot write, break the 16/64/512 rules of OpenAI's metadata, or
# ask for more stop strings, bad words, stop token ids, allowed token ids
# or logit_bias entries than the engine should check at every token.
# Every answer is the OpenAI error object, every text the server writes
# is valid UTF-8 (bytes from the URI become U+FFFD), and the worker stays
# up throughout.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Encode qw(decode);
use Test::More;
use NginxLLM;

my $t = NginxLLM->new(http => 'client_max_body_size 8m;');
$t->start;
my @workers = $t->worker_pids;

my $chat = '/v1/chat/completions';
my $cmpl = '/v1/completions';
my $resp = '/v1/responses';
my @m = ({ role => 'user', content => 'Hi' });
my $json = NginxLLM::json;

sub utf8_ok {
    my ($bytes) = @_;
    return defined eval { decode('UTF-8', "$bytes", Encode::FB_CROAK) };
}

sub error_is {
    my ($name, $r, $status, $param, $msg) = @_;
    subtest $name => sub {
        is($r->{status}, $status, "status $status");
        like($r->{content} // '',
             qr/^\{"error":\{"message":"(?:[^"\\]|\\.)*","type":"[^"]*",
                "param":(?:null|"[^"]*"),"code":\d+\}\}$/x,
             'the OpenAI error object');
        ok(utf8_ok($r->{content} // ''), 'valid UTF-8');
        my $e = ($r->{json} // {})->{error} // {};
        is($e->{param}, $param, 'param ' . ($param // 'null'));
        like($e->{message} // '', $msg, 'message') if $msg;
    };
}

# a JSON body with $key set to $value (raw JSON text)
sub body_with {
    my ($key, $value, %o) = @_;
    my $b = $json->encode({ messages => \@m, max_tokens => 1, %o });
    $b =~ s/\}$/,"$key":$value}/;
    return $b;
}

# --- nesting ---

my $deep = '[' x 300_000 . ']' x 300_000;
for my $path ($chat, $cmpl, $resp, '/v1/tokenize', '/v1/detokenize') {
    error_is("300000 nested arrays to $path", $t->post($path, $deep), 400,
             undef, qr/^the request body is nested deeper than 64 levels$/);
}
for my $key (qw(tool_choice metadata)) {
    error_is("/v1/responses: $key nested 175000 deep",
             $t->post($resp, '{"input":"x","' . $key . '":'
                             . '[' x 175_000 . ']' x 175_000 . '}'),
             400, undef, qr/nested deeper than 64 levels/);
}
error_is('/v1/responses: tools[0].parameters nested 175000 deep',
         $t->post($resp, '{"input":"x","tools":[{"type":"function",'
                         . '"name":"f","parameters":'
                         . '{"a":' x 175_000 . '1' . '}' x 175_000 . '}]}'),
         400, undef, qr/nested deeper than 64 levels/);

# the limit is exact: 64 levels pass (an unknown field is ignored), 65 not
is($t->post($chat, body_with('x', '[' x 63 . ']' x 63))->{status}, 200,
   '64 levels (the body and 63 more) are accepted');
error_is('65 levels', $t->post($chat, body_with('x', '[' x 64 . ']' x 64)),
         400, undef,
         qr/^the request body is nested deeper than 64 levels$/);

# --- strict JSON: UTF-8, NUL ---

my $valid = $json->encode({ messages => \@m, max_tokens => 1 });
is($t->post($chat, $valid)->{status}, 200, 'the valid body alone: 200');
error_is('a NUL byte after the body', $t->post($chat, "$valid\0garbage"),
         400, undef, qr/^the request body is not valid JSON/);
error_is('a NUL byte at the end', $t->post($chat, "$valid\0"), 400, undef,
         qr/^the request body is not valid JSON/);
error_is('\u0000 in a string',
         $t->post($chat, '{"messages":[{"role":"user","content":"a\u0000b"}]}'),
         400, undef, qr/\\u0000/);

my %bad_utf8 = (
    'an overlong "/" in the model name' => "bad\xc0\xaf",
    'an overlong 3-byte form' => "x\xe0\x80\xaf",
    'an encoded surrogate' => "x\xed\xa0\x80",
    'a byte that never starts a character' => "x\xff",
    'a cut sequence' => "x\xe4\xb8",
);
for my $name (sort keys %bad_utf8) {
    my $r = $t->post($chat, '{"model":"' . $bad_utf8{$name}
                            . '","messages":[{"role":"user","content":"x"}]}');
    error_is("$name: 400, not echoed", $r, 400, undef,
             qr/^the request body is not valid (?:UTF-8$|JSON: .* UTF8 )/);
}
error_is('a lone surrogate escape',
         $t->post($chat, '{"messages":[{"role":"user","content":"\ud800"}]}'),
         400, undef, qr/half of a surrogate pair/);

# --- what comes from the URI is written as valid UTF-8 ---

my $r = $t->get('/v1/models/%ff%fe');
error_is('GET /v1/models/%ff%fe', $r, 404, 'model',
         qr/^The model `\x{FFFD}\x{FFFD}` does not exist\.$/);
$r = $t->get('/v1/models/' . ('%C3%A9' x 400));
error_is('a long model id of "é", cut in the message', $r, 404, 'model',
         qr/^The model `(?:\x{e9})+\x{FFFD}?/);
$r = $t->get('/v1/responses/resp_%c0%af');
error_is('GET /v1/responses/resp_%c0%af', $r, 404, 'response_id',
         qr/^Response with id 'resp_\x{FFFD}\x{FFFD}' not found\.$/);
error_is('an unknown route with bad bytes', $t->get('/v1/x%ff'), 404, undef,
         qr{no API endpoint at "/v1/x\x{FFFD}"});

# completions' echo of token ids that are half a character
my $ids = $t->post('/v1/tokenize', { prompt => "\x{2A6D6}\x{10348}\x{1F9EC}",
                                     add_special_tokens => \0 })->{json};
my ($half) = grep {
    ($t->post('/v1/detokenize', { tokens => [$_] })->{json}{prompt} // '')
        =~ /\x{FFFD}/
} @{ $ids->{tokens} };
ok(defined $half, 'a token that is part of a character')
    or diag(explain($ids));
$r = $t->post($cmpl, { prompt => [ $half, $half ], echo => \1,
                       max_tokens => 1, temperature => 0 });
is($r->{status}, 200, 'completions: echo of ids that are not UTF-8');
ok(utf8_ok($r->{content}), '... the body is valid UTF-8');
like($r->{json}{choices}[0]{text} // '', qr/^\x{FFFD}/,
     '... the prompt is echoed with U+FFFD');
$r = $t->stream($cmpl, { prompt => [ $half ], echo => \1, max_tokens => 1,
                         stream => \1 });
ok(utf8_ok($r->{content}), '... and so is the stream');

# --- the Responses API echoes only what it can write ---

my $nest = '[' x 63 . '"x"' . ']' x 63;      # with the body's: 64 levels
for my $key (qw(tool_choice text reasoning)) {
    my $b = '{"input":"x","max_output_tokens":1,"' . $key . '":' . $nest
            . '}';
    my $plain = $t->post($resp, $b);
    is($plain->{status}, 200, "$key nested as deep as a body may: 200");
    my $echo = $json->encode(($plain->{json} // {})->{$key});
    is($echo, $nest, "$key: the body echoes it intact");
    is($t->get("$resp/$plain->{json}{id}")->{content}, $plain->{content},
       "$key: the stored copy is the same bytes");
    $b =~ s/\}$/,"stream":true}/;
    my $s = $t->stream($resp, $b);
    my @ev = grep { /^data: / } split /\n/, $s->{content};
    is(scalar(grep { !defined NginxLLM::decode_json_safe(substr $_, 6) } @ev),
       0, "$key: every event of the stream parses");
}
for my $key (qw(tool_choice text service_tier)) {
    error_is("$key nested 130 deep: 400, not a broken echo",
             $t->post($resp, '{"input":"x","' . $key . '":'
                             . '[' x 130 . ']' x 130 . '}'),
             400, undef, qr/nested deeper than 64 levels/);
}
error_is('tools[0].parameters nested 126 deep: 400, not a 500',
         $t->post($resp, '{"input":"x","tools":[{"type":"function",'
                         . '"name":"f","parameters":'
                         . '{"a":' x 126 . '1' . '}' x 126 . '}]}'),
         400, undef, qr/nested deeper than 64 levels/);
my $params = '{"a":' x 60 . '1' . '}' x 60;
$r = $t->post($resp, '{"input":"x","max_output_tokens":1,"tools":[{"type":'
                     . '"function","name":"f","parameters":' . $params
                     . '}]}');
is($r->{status}, 200, 'tools[0].parameters nested 60 deep: 200');
is($json->encode($r->{json}{tools}[0]{parameters}), $params,
   '... and echoed intact');

# --- metadata: OpenAI's rules ---

my %meta = map { sprintf('k%02d', $_) . ('x' x 61) => "\x{e9}" x 512 } 1 .. 16;
$r = $t->post($resp, { input => 'x', max_output_tokens => 1,
                       metadata => \%meta });
is($r->{status}, 200, 'metadata: 16 keys of 64, values of 512 characters');
is_deeply($r->{json}{metadata}, \%meta, '... echoed intact');
error_is('metadata: 17 keys',
         $t->post($resp, { input => 'x', metadata => { map { ("k$_" => 'v') }
                                                       1 .. 17 } }),
         400, 'metadata', qr/^Invalid 'metadata': too many properties\. Expected an object with at most 16 properties, but got an object with 17 properties instead\.$/);
error_is('metadata: a key of 65 characters',
         $t->post($resp, { input => 'x', metadata => { 'k' x 65 => 'v' } }),
         400, 'metadata', qr/key too long\. Expected a key with maximum length 64, but got a key with length 65 instead\.$/);
error_is('metadata: a value of 513 characters',
         $t->post($resp, { input => 'x', metadata => { k => "\x{e9}" x 513 } }),
         400, 'metadata', qr/^Invalid 'metadata\.k': string too long\. Expected a string with maximum length 512, but got a string with length 513 instead\.$/);
error_is('metadata: a value that is not a string',
         $t->post($resp, { input => 'x', metadata => { k => 5 } }),
         400, 'metadata', qr/^Invalid type for 'metadata\.k': expected a string, but got a number instead\.$/);
error_is('metadata: not an object',
         $t->post($resp, { input => 'x', metadata => [ 'a' ] }),
         400, 'metadata', qr/^Invalid type for 'metadata': expected an object, but got an array instead\.$/);

# --- request limits: each a 400 naming the field ---

my $vocab = NginxLLM::json->decode(
    NginxLLM::slurp(NginxLLM->model . '/config.json'))->{vocab_size};
my @limits = (
    [ 'stop: 65 strings', { stop => [ map { "s$_" } 1 .. 65 ] }, 'stop',
      qr/^stop must contain at most 64 strings, got 65\.$/ ],
    [ 'stop: 100000 strings', { stop => [ map { "s$_" } 1 .. 100_000 ] },
      'stop', qr/^stop must contain at most 64 strings, got 100000\.$/ ],
    [ 'stop: a string of 1025 bytes', { stop => [ 'a', 'x' x 1025 ] },
      'stop', qr/^stop\[1\] must be at most 1024 bytes long, got 1025\.$/ ],
    [ 'stop: one string of 1025 bytes', { stop => 'x' x 1025 }, 'stop',
      qr/^stop must be at most 1024 bytes long, got 1025\.$/ ],
    [ 'bad_words: 257 words', { bad_words => [ map { "w$_" } 1 .. 257 ] },
      'bad_words', qr/^bad_words must contain at most 256 strings, got 257\.$/ ],
    [ 'bad_words: a word of 257 bytes', { bad_words => [ 'x' x 257 ] },
      'bad_words', qr/^bad_words\[0\] must be at most 256 bytes long, got 257\.$/ ],
    [ 'stop_token_ids: 1025 ids', { stop_token_ids => [ (1) x 1025 ] },
      'stop_token_ids',
      qr/^stop_token_ids must contain at most 1024 ids, got 1025\.$/ ],
    [ 'allowed_token_ids: more than the vocabulary',
      { allowed_token_ids => [ (1) x ($vocab + 1) ] }, 'allowed_token_ids',
      qr/^allowed_token_ids must contain at most $vocab ids, got ${\($vocab + 1)}\.$/ ],
    [ 'logit_bias: 1025 entries',
      { logit_bias => { map { ($_ => 1) } 1 .. 1025 } }, 'logit_bias',
      qr/^logit_bias must contain at most 1024 entries, got 1025\.$/ ],
    [ 'logit_bias: 200000 entries',
      { logit_bias => { map { ($_ => 1) } 1 .. 200_000 } }, 'logit_bias',
      qr/^logit_bias must contain at most 1024 entries, got 200000\.$/ ],
    [ 'n: 257', { n => 257 }, 'n', qr/^n must be at most 256, got 257\.$/ ],
    [ 'top_logprobs: 21', { logprobs => \1, top_logprobs => 21 },
      'top_logprobs',
      qr/^Requested sample logprobs of 21, which is greater than max allowed: 20$/ ],
    [ 'prompt_logprobs: 21', { prompt_logprobs => 21 }, 'prompt_logprobs',
      qr/^Requested prompt logprobs of 21, which is greater than max allowed: 20$/ ],
    [ 'messages: 20000 (the rendered prompt must fit)',
      { messages => [ ({ role => 'user', content => 'x' }) x 20_000 ] },
      'messages', qr/^This model's maximum context length is 256 tokens\./ ],
);
for my $c (@limits) {
    my ($name, $fields, $param, $msg) = @$c;
    error_is($name, $t->post($chat, { messages => \@m, %$fields }), 400,
             $param, $msg);
}
error_is('completions: logprobs 21',
         $t->post($cmpl, { prompt => 'x', logprobs => 21 }), 400, 'logprobs',
         qr/greater than max allowed: 20/);

# at the limits: accepted
$r = $t->post($chat, { messages => \@m, max_tokens => 1,
                       stop => [ map { "s$_" . 'x' x 1000 } 1 .. 64 ],
                       bad_words => [ map { "w$_" } 1 .. 256 ],
                       stop_token_ids => [ (1) x 1024 ],
                       logit_bias => { map { ($_ => 1) } 1 .. 1024 } });
is($r->{status}, 200, 'every list at its limit: 200');

# max_tokens beyond llm_max_model_len is capped, as vLLM caps it
$r = $t->post($cmpl, { prompt => 'Hi', max_tokens => 1_000_000_000,
                       ignore_eos => \1 });
is($r->{status}, 200, 'max_tokens 1e9: 200');
is($r->{json}{choices}[0]{finish_reason}, 'length', '... finish "length"');
is($r->{json}{usage}{prompt_tokens} + $r->{json}{usage}{completion_tokens},
   256, '... at llm_max_model_len');
error_is('max_tokens beyond 64 bits',
         $t->post($cmpl, '{"prompt":"x","max_tokens":1e30}'), 400,
         'max_tokens', qr/must be an integer/);

# the body's size: client_max_body_size (8m here)
error_is('a body over client_max_body_size',
         $t->post($chat, '{"messages":"' . 'x' x (9 << 20) . '"}'), 413,
         undef, qr/client_max_body_size/);

# --- the worker lived through all of it ---

is($t->post($chat, { messages => \@m, max_tokens => 2 })->{status}, 200,
   'a valid request after all of that');
is_deeply([ $t->worker_pids ], \@workers, 'the worker never restarted');

$t->done;

done_testing();
