#!/usr/bin/perl
# Structured outputs with a JSON Schema: response_format json_schema (chat,
# completions), text.format json_schema (/v1/responses), vLLM's
# structured_outputs (choice, regex, json), and the openai client's
# chat.completions.parse with a zod schema -- all through the official
# `openai` npm client (t/nginx/structured_client.mjs), every output that
# ended validated by ajv.  A random model, which left alone writes no JSON,
# writes documents valid under the schema.  Then the refusals: vLLM's 400
# with `param`, naming what cannot be honoured.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use JSON::PP;
use Test::More;
use NginxLLM;

my $model = NginxLLM->model(tie => 0);
my $t = NginxLLM->new(model => $model);
$t->start;

my ($rc, $out) = $t->node('structured_client.mjs', $t->url('/v1'), 'tiny');
is($rc, 0, 'the client script ran without an exception') or diag($out);
my $o = NginxLLM::decode_json_safe($out) // {};

sub valid_ended {
    my ($r, $name) = @_;
    if (($r->{finish} // '') =~ /^(stop|completed)$/) {
        ok($r->{parsed} && $r->{valid}, "$name: ended, valid under the schema")
            or diag(JSON::PP->new->canonical->encode($r));
        return 1;
    }
    ok(($r->{finish} // '') =~ /^(length|incomplete)$/,
       "$name: cut by the token limit ($r->{finish})")
        or diag(JSON::PP->new->canonical->encode($r));
    return 0;
}

my $ended = 0;
for my $i (0 .. $#{ $o->{chat} || [] }) {
    $ended += valid_ended($o->{chat}[$i], "chat, seed " . ($i + 1));
}
is(scalar @{ $o->{chat} || [] }, 6, 'six chat samples');
ok($ended >= 4, "$ended of 6 chat samples ended within 150 tokens");
my %keys = map { join(',', sort keys %{ $_->{value} || {} }) => 1 }
           grep { $_->{valid} } @{ $o->{chat} || [] };
is_deeply([ keys %keys ], [ 'city,days,hourly,unit,when' ],
          'every property required is there, no other');
valid_ended($o->{completion} || {}, 'completions');
valid_ended($o->{responses} || {}, '/v1/responses text.format');
is($o->{responses}{format}{type}, 'json_schema',
   '/v1/responses echoes text.format');
valid_ended($o->{so_json} || {}, 'structured_outputs.json (schema as text)');

ok(ref $o->{zod_schema} eq 'HASH'
   && $o->{zod_schema}{additionalProperties} == JSON::PP::false,
   'zodResponseFormat wrote a strict object schema');
my $parsed = 0;
for my $p (@{ $o->{parse} || [] }) {
    if ($p->{error}) {
        like($p->{name}, qr/LengthFinishReasonError/,
             "parse: only a cut output fails ($p->{error})");
        next;
    }
    ok($p->{zod} && $p->{ajv}, 'chat.completions.parse: message.parsed '
       . 'passes zod, the content ajv') or diag(encode_json($p));
    $parsed++;
}
ok($parsed >= 2, "$parsed of 3 parse calls returned a parsed event");

like($o->{choice} // '', qr/^(sunny|rainy|partly cloudy)$/,
     'structured_outputs.choice: one of the choices');
like($o->{regex} // '', qr/^\+1-[0-9]{3}-[0-9]{4}$/,
     'structured_outputs.regex: the whole text matches');

# --- refusals: 400, param, a message naming what is wrong ---

my @msgs = ({ role => 'user', content => 'x' });
my $schema = { type => 'object', properties => { a => { type => 'integer' } } };
for my $case (
    [ '/v1/chat/completions', 'response_format', qr/json_schema/,
      { response_format => { type => 'json_schema' } } ],
    [ '/v1/chat/completions', 'response_format', qr/json_schema\.name/,
      { response_format => { type => 'json_schema',
                             json_schema => { schema => $schema } } } ],
    [ '/v1/chat/completions', 'response_format', qr/schema. must be a JSON Schema object, got a string/,
      { response_format => { type => 'json_schema',
                             json_schema => { name => 'n', schema => 'x' } } } ],
    [ '/v1/chat/completions', 'response_format', qr/'multipleOf'.*#\/properties\/a/,
      { response_format => { type => 'json_schema', json_schema => {
          name => 'n', schema => { type => 'object', properties => {
              a => { type => 'integer', multipleOf => 3 } } } } } } ],
    [ '/v1/completions', 'response_format', qr/format 'uri' is not supported/,
      { response_format => { type => 'json_schema', json_schema => {
          name => 'n', schema => { type => 'string', format => 'uri' } } } } ],
    [ '/v1/completions', 'response_format', qr/never be satisfied/,
      { response_format => { type => 'json_schema', json_schema => {
          name => 'n', schema => { type => 'integer', minimum => 3,
                                   maximum => 2 } } } } ],
    [ '/v1/responses', 'text.format', qr/text\.format\.name/,
      { text => { format => { type => 'json_schema', schema => $schema } } } ],
    [ '/v1/responses', 'text.format', qr/\$ref '#\/\$defs\/x' does not resolve/,
      { text => { format => { type => 'json_schema', name => 'n',
                              schema => { '$ref' => '#/$defs/x' } } } } ],
    [ '/v1/chat/completions', 'structured_outputs', qr/only use one kind/,
      { structured_outputs => { choice => ['a'], regex => 'b' } } ],
    [ '/v1/chat/completions', 'structured_outputs', qr/only use one kind/,
      { structured_outputs => { choice => ['a'] },
        response_format => { type => 'json_object' } } ],
    [ '/v1/responses', 'text.format', qr/only use one kind/,
      { structured_outputs => { choice => ['a'] },
        text => { format => { type => 'json_object' } } } ],
    [ '/v1/chat/completions', 'structured_outputs', qr/grammar. is not supported/,
      { structured_outputs => { grammar => 'root ::= "a"' } } ],
    [ '/v1/completions', 'structured_outputs', qr/choice\[1\]. must be a string/,
      { structured_outputs => { choice => ['a', 1] } } ],
    [ '/v1/completions', 'structured_outputs', qr/look-arounds/,
      { structured_outputs => { regex => '(?=a)a' } } ],
    [ '/v1/completions', 'structured_outputs', qr/not a JSON schema/,
      { structured_outputs => { json => '{"type":' } } ],
    [ '/v1/completions', 'structured_outputs', qr/must be an object/,
      { structured_outputs => 'json' } ])
{
    my ($path, $param, $msg, $extra) = @$case;
    my %base = $path =~ /chat/ ? (messages => \@msgs)
             : $path =~ /responses/ ? (input => 'x') : (prompt => 'x');
    my $r = $t->post($path, { model => 'tiny', max_tokens => 4, %base, %$extra });
    my $e = $r->{json}{error} // {};
    is($r->{status}, 400, "$path, $param: 400");
    is($e->{param}, $param, "$path: param $param");
    like($e->{message} // '', $msg, "$path: $e->{message}");
}

$t->done;
done_testing();
