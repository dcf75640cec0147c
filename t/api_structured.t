#!/usr/bin/perl
# Structured output, `response_format: {"type": "json_object"}` (chat and
# completions) and `text.format` (/v1/responses): a random model, which
# left alone writes no JSON at all, writes JSON objects.  Every output that
# ended (finish_reason stop) is parsed by JSON::PP, a parser we did not
# write, and must be an object; an output cut by max_tokens is closed by
# json_close() below and must then parse (so it was a prefix of JSON).
# Also: the sequence ends (EOS) only after a complete object, streams carry
# the same text, n > 1, /v1/responses, the masks of allowed_token_ids
# together with the grammar's, and the refusals.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use JSON::PP;
use Test::More;
use NginxLLM;

my $model = NginxLLM->model(tie => 0);
my $t = NginxLLM->new(model => $model, locations => <<'LOC');
        location /v1/ { llm_api; }
        location = /health { llm_health; }
LOC
$t->start;

my $chat = '/v1/chat/completions';
my $cmpl = '/v1/completions';
my @msgs = ({ role => 'user', content => 'Describe a cat as JSON.' });
my %json = (response_format => { type => 'json_object' });

# Closes a prefix of JSON text the shortest way: the open string, a
# number or literal cut short, a missing value, the open containers.
sub json_close {
    my ($text) = @_;
    my (@stack, $in_str, $esc, $hex, $key, $expect);
    $expect = 'value';
    for my $c (split //, $text) {
        if ($in_str) {
            if (defined $hex) { $hex--; undef $hex if !$hex; next }
            if ($esc) { $esc = 0; $hex = 4 if $c eq 'u'; next }
            if ($c eq '\\') { $esc = 1; next }
            if ($c eq '"') {
                $in_str = 0;
                $expect = $key ? 'colon' : 'after';
            }
            next;
        }
        next if $c =~ /\s/;
        if ($c eq '{' || $c eq '[') {
            push @stack, $c;
            $expect = $c eq '{' ? 'key' : 'value';
        } elsif ($c eq '}' || $c eq ']') {
            pop @stack;
            $expect = 'after';
        } elsif ($c eq '"') {
            $in_str = 1;
            $key = $expect eq 'key';
        } elsif ($c eq ':') {
            $expect = 'value';
        } elsif ($c eq ',') {
            $expect = $stack[-1] eq '{' ? 'key' : 'value';
        } else {
            $expect = 'scalar';             # inside a number or literal
        }
    }
    my $tail = '';
    if ($in_str) {
        $tail .= '0' x $hex if defined $hex;
        $tail .= 'n' if $esc;
        $tail .= '"';
        $expect = $key ? 'colon' : 'after';
    } elsif ($expect eq 'scalar') {
        my ($word) = $text =~ /([-+.\w]+)$/;
        if ($word =~ /^[tfn]/) {
            for my $lit (qw(true false null)) {
                $tail = substr($lit, length $word) if index($lit, $word) == 0;
            }
        } elsif ($word =~ /[-+.eE]$/) {
            $tail = '0';
        }
        $expect = 'after';
    }
    $tail .= ':' if $expect eq 'colon';
    $tail .= 'null' if $expect eq 'colon' || ($expect eq 'value' && @stack
                                               && $text !~ /\[\s*$/);
    $tail .= '"k":null' if $expect eq 'key' && $text =~ /,\s*$/;
    $tail .= join '', map { $_ eq '{' ? '}' : ']' } reverse @stack;
    return $text . $tail;
}

# the closer itself, on prefixes of a known document
my $doc = '{"a": [1, -2.5e+3, true, null, "x\\u00e9y"], "b": {"c": false}}';
my $closed_ok = 1;
for my $k (1 .. length $doc) {
    my $p = substr($doc, 0, $k);
    next if eval { decode_json(json_close($p)); 1 };
    diag "cannot close '$p': " . json_close($p);
    $closed_ok = 0;
}
ok($closed_ok, 'json_close() closes every prefix of a document');

# Checks one output: stop: an object; length: a prefix of one.
sub check_json {
    my ($text, $finish, $name) = @_;
    if ($finish eq 'stop') {
        my $v = eval { JSON::PP->new->decode($text) };
        ok(ref $v eq 'HASH', "$name: ended, a JSON object")
            or diag "not JSON: '$text': $@";
        return 1;
    }
    my $v = eval { JSON::PP->new->decode(json_close($text)) };
    ok($finish eq 'length' && ref $v eq 'HASH',
       "$name: cut by max_tokens, a prefix of a JSON object")
        or diag "finish $finish, not a prefix: '$text': $@";
    return 0;
}

# --- the whole vocabulary: most tokens are refused at every step ---

my ($ended, %text_of) = (0);
for my $seed (1 .. 8) {
    my $r = $t->post($chat, { messages => \@msgs, %json, temperature => 1,
                              seed => $seed, max_tokens => 60 });
    my $c = $r->{json}{choices}[0];
    $text_of{$seed} = $c->{message}{content};
    $ended += check_json($c->{message}{content}, $c->{finish_reason},
                         "chat, seed $seed");
}
ok($ended >= 2, "$ended of 8 samples ended on their own");
# an object complete before min_tokens: the EOS it cannot stop at yet
# fills the rest (it is a special token: no text), nothing breaks the JSON.
# logit_bias +100 on "{" and "}" makes the object "{}" whatever the
# weights: "{" is the best allowed first token, "}" the best after it.
my %brace = map {
    $_ => $t->post('/v1/tokenize', { prompt => $_, add_special_tokens => \0 })
            ->{json}{tokens}
} ('{', '}');
is_deeply([ map { scalar @{ $brace{$_} } } '{', '}' ], [ 1, 1 ],
          '"{" and "}" are one token each');
my %empty = (messages => \@msgs, %json, temperature => 1, seed => 5,
             max_tokens => 60,
             logit_bias => { map { $brace{$_}[0] => 100 } '{', '}' });
my $e = $t->post($chat, \%empty);
is($e->{json}{choices}[0]{message}{content}, '{}',
   'logit_bias on the braces: the object {}');
is($e->{json}{choices}[0]{finish_reason}, 'stop', 'and it ends there');
my $m = $t->post($chat, { %empty, min_tokens => 20 });
my $c = $m->{json}{choices}[0];
check_json($c->{message}{content}, $c->{finish_reason},
           "min_tokens 20 after a complete object");
like($c->{message}{content}, qr/^\{\}\s*$/,
     'min_tokens 20: still {}, whitespace at most after it');
ok($m->{json}{usage}{completion_tokens} >= 20, 'min_tokens 20: at least 20 tokens');
my $free = $t->post($chat, { messages => \@msgs, temperature => 1, seed => 1,
                             max_tokens => 60 });
ok(!eval { decode_json($free->{json}{choices}[0]{message}{content}); 1 },
   'without response_format the same sample is no JSON');

my $sr = $t->stream($chat, { messages => \@msgs, %json, temperature => 1,
                             seed => 2, max_tokens => 60, stream => \1 });
my @chunks = grep { ref && @{ $_->{choices} } } @{ $sr->{events} };
is(join('', map { $_->{choices}[0]{delta}{content} // '' } @chunks),
   $text_of{2}, 'streamed: the same text');

my $r = $t->post($cmpl, { prompt => 'A cat, as JSON:', %json, temperature => 1,
                          seed => 3, max_tokens => 60, n => 2 });
for my $i (0, 1) {
    my $c = $r->{json}{choices}[$i];
    check_json($c->{text}, $c->{finish_reason}, "completions n=2, choice $i");
}

$r = $t->post('/v1/responses', { input => 'A cat, as JSON.', temperature => 1,
                                  seed => 4, max_output_tokens => 60,
                                  text => { format => { type => 'json_object' } } });
my $out = join '', map { $_->{text} } map { @{ $_->{content} } }
          @{ $r->{json}{output} };
check_json($out, $r->{json}{status} eq 'completed' ? 'stop' : 'length',
           '/v1/responses text.format');

# --- with allowed_token_ids: both masks at once ---

my @alphabet = (map {
    $t->post('/v1/tokenize', { prompt => $_, add_special_tokens => \0 })
      ->{json}{tokens}[0]
} ('{', '}', '"', 'a', ':', '1', ',', 'true'));
my %allowed = map { $_ => 1 } ('{', '}', '"', 'a', ':', '1', ',', 'true');
for my $seed (1 .. 3) {
    $r = $t->post($cmpl, { prompt => 'A', %json, temperature => 1,
                           seed => $seed, max_tokens => 30, logprobs => 0,
                           allowed_token_ids => \@alphabet });
    my $c = $r->{json}{choices}[0];
    check_json($c->{text}, $c->{finish_reason}, "allowed_token_ids, seed $seed");
    ok(!grep({ !$allowed{$_} } @{ $c->{logprobs}{tokens} }),
       "allowed_token_ids, seed $seed: only those tokens");
}

# --- refusals ---

for my $case ([ $chat, { messages => \@msgs }, 'response_format',
                { response_format => { type => 'json_schema',
                                       json_schema => { name => 'n' } } } ],
              [ $cmpl, { prompt => 'x' }, 'response_format',
                { response_format => { type => 'xml' } } ],
              [ '/v1/responses', { input => 'x' }, 'text.format',
                { text => { format => { type => 'json_schema' } } } ])
{
    my ($path, $base, $param, $extra) = @$case;
    $r = $t->post($path, { %$base, %$extra });
    is($r->{status}, 400, "$path $param refused: 400");
    is($r->{json}{error}{param}, $param, "$path: param $param");
}

$t->done;
done_testing();
