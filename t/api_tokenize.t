#!/usr/bin/perl
# POST /tokenize and /detokenize the way vLLM serves them: ids, count and
# token strings against the tokenizer CLI (llm tokenize / detokenize /
# template), chat messages through the model's template, round trips,
# vLLM's own paths (location = /tokenize), and the errors.

use strict;
use warnings;
use utf8;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $t = NginxLLM->new(locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /tokenize { llm_api; }
        location = /detokenize { llm_api; }
        location = /health { llm_health; }
LOC
$t->start;

my $build = NginxLLM::build_dir();
my $model = NginxLLM->model;

sub cli {
    my (@args) = @_;
    open my $fh, '-|', "$build/llm", @args or die "llm @args: $!";
    binmode $fh, ':raw';
    my $out = do { local $/; <$fh> };
    close $fh;
    return $out;
}

sub cli_ids { NginxLLM::decode_json_safe(cli('tokenize', '--model', $model,
                                             @_)) }

my @texts = ('Hello world', 'The llama (🦙) grazes near Cusco; 東京 is far.',
             "  spaces,\ttabs\nand lines  ", '<|eot_id|> is special');

for my $text (@texts) {
    my $raw = $text;
    utf8::encode($raw);
    my $r = $t->post('/v1/tokenize', { prompt => $text });
    is($r->{status}, 200, "tokenize: 200 ($raw)");
    is_deeply($r->{json}{tokens}, cli_ids('--special', $raw),
              'tokenize: the ids of llm tokenize --special');
    is($r->{json}{count}, scalar @{ $r->{json}{tokens} }, 'count');
    my $plain = $t->post('/v1/tokenize', { prompt => $text,
                                           add_special_tokens => \0 });
    is_deeply($plain->{json}{tokens}, cli_ids($raw),
              'add_special_tokens false: llm tokenize without --special');
    my $d = $t->post('/v1/detokenize', { tokens => $plain->{json}{tokens} });
    is($d->{json}{prompt}, $text, 'detokenize(tokenize(text)) = text');
    my $cd = cli('detokenize', '--model', $model, @{ $r->{json}{tokens} });
    utf8::decode($cd);
    $d = $t->post('/v1/detokenize', { tokens => $r->{json}{tokens} });
    is($d->{json}{prompt}, $cd, 'detokenize: llm detokenize, specials kept');
}

my $r = $t->post('/v1/tokenize', { prompt => 'Hello world' });
like($r->{content},
     qr/^\{"count":3,"max_model_len":256,"tokens":\[\d+,\d+,\d+\],
        "token_strs":null\}$/x, 'tokenize: vLLM\'s keys, token_strs null');
$r = $t->post('/v1/tokenize', { prompt => 'Hello world',
                                return_token_strs => \1 });
is_deeply($r->{json}{token_strs}, [ '<|begin_of_text|>', 'Hello', 'Ġworld' ],
          'return_token_strs: the vocabulary strings');
$r = $t->post('/v1/tokenize', { prompt => '' });
is($r->{json}{count}, 1, 'an empty prompt: just BOS');

# chat messages: the template, as chat renders it
my @msgs = ({ role => 'system', content => 'You are terse.' },
            { role => 'user', content => 'Hi there' });
my $file = $t->dir . '/messages.json';
open my $fh, '>', $file or die;
print $fh NginxLLM::json()->encode(\@msgs);
close $fh;
for my $agp (1, 0) {
    my $rendered = cli('template', '--model', $model, '--messages', $file,
                       $agp ? '--add-generation-prompt' : ());
    $r = $t->post('/v1/tokenize', { messages => \@msgs,
                                    add_generation_prompt => $agp ? \1 : \0 });
    is_deeply($r->{json}{tokens}, cli_ids($rendered),
              "messages, add_generation_prompt $agp: llm template + tokenize");
}
my $c = $t->post('/v1/chat/completions', { messages => \@msgs,
                                           max_tokens => 1 });
$r = $t->post('/v1/tokenize', { messages => \@msgs });
is($r->{json}{count}, $c->{json}{usage}{prompt_tokens},
   'messages: the count chat bills as prompt_tokens');

# vLLM's own paths
$r = $t->post('/tokenize', { prompt => 'Hello world' });
is($r->{json}{count}, 3, 'location = /tokenize');
$r = $t->post('/detokenize', { tokens => [ 9906, 1917 ] });
is($r->{json}{prompt}, 'Hello world', 'location = /detokenize');

# the engine does not see it: nothing to bill
my $line = $t->wait_log_line(qr{^/tokenize });
like($line // '', qr/prompt=- completion=- /, 'log: no token counts');

# errors
sub bad {
    my ($name, $path, $body, $status, $param, $msg) = @_;
    my $x = $t->post($path, $body);
    subtest $name => sub {
        is($x->{status}, $status, "status $status");
        is($x->{json}{error}{param}, $param, 'param ' . ($param // 'null'));
        like($x->{json}{error}{message} // '', $msg, 'message');
    };
}

bad('tokenize: nothing to tokenize', '/v1/tokenize', {}, 400, 'prompt',
    qr/`prompt` \(a string\) or `messages`/);
bad('tokenize: a list as prompt', '/v1/tokenize', { prompt => [ 1 ] }, 400,
    'prompt', qr/got an array/);
bad('tokenize: empty messages', '/v1/tokenize', { messages => [] }, 400,
    'messages', qr/non-empty list/);
bad('tokenize: a request chat template', '/v1/tokenize', { messages => \@msgs,
    chat_template => 'x' }, 400, 'chat_template', qr/untrusted/);
bad('tokenize: return_token_strs not a boolean', '/v1/tokenize',
    { prompt => 'x', return_token_strs => 'yes' }, 400, 'return_token_strs',
    qr/must be a boolean/);
bad('detokenize: no tokens', '/v1/detokenize', {}, 400, 'tokens',
    qr/`tokens` is required/);
bad('detokenize: not ids', '/v1/detokenize', { tokens => [ 'a' ] }, 400,
    'tokens', qr/tokens\[0\] must be a token id/);
bad('detokenize: out of the vocabulary', '/v1/detokenize',
    { tokens => [ 1, 999999 ] }, 400, 'tokens', qr/out of vocabulary/);
bad('tokenize: an unknown model', '/v1/tokenize', { prompt => 'x',
    model => 'nope' }, 404, 'model', qr/The model `nope` does not exist/);
is($t->get('/v1/tokenize')->{status}, 405, 'GET /v1/tokenize: 405');

$t->done;
done_testing();
