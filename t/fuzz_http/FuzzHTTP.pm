package FuzzHTTP;

# The HTTP-level fuzzer of t/api_fuzz.t (docs/fuzzing.md), in core Perl:
#
#   case(SEED, I)     the I-th request of a run: a seed body (chat,
#                     completions, responses, tokenize, detokenize; stream or
#                     not) mutated by one kind of mutation, as exact bytes;
#                     the same (SEED, I) gives the same bytes on any machine
#                     (Perl's own drand48, reseeded per case)
#   post(PORT, ...)   a raw HTTP/1.1 POST on its own connection with a hard
#                     deadline for the whole exchange (a hang is a failure),
#                     the case's index in an X-Fuzz-Case header
#   check(CASE, RES)  the failures of one response: see check() below
#   utf8_error(B)     strict UTF-8 (RFC 3629: no overlong forms, no
#                     surrogates, nothing above U+10FFFF; noncharacters are
#                     valid UTF-8) - Perl's Encode "UTF-8" also refuses
#                     noncharacters such as U+FFFF, which is stricter than
#                     the standard, so the check is our own
#   json_check(B)     a JSON (RFC 8259) syntax check without recursion (a
#                     body 300,000 levels deep is fine), noting escaped lone
#                     surrogates ("\ud800"), which the grammar allows but
#                     that are no Unicode text

use strict;
use warnings;

use Errno qw(EAGAIN EINTR EWOULDBLOCK);
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use Time::HiRes qw(time);

# --- strict UTF-8 ---

my $MB = qr/[\xC2-\xDF][\x80-\xBF]
           |\xE0[\xA0-\xBF][\x80-\xBF]
           |[\xE1-\xEC\xEE\xEF][\x80-\xBF]{2}
           |\xED[\x80-\x9F][\x80-\xBF]
           |\xF0[\x90-\xBF][\x80-\xBF]{2}
           |[\xF1-\xF3][\x80-\xBF]{3}
           |\xF4[\x80-\x8F][\x80-\xBF]{2}/x;

# undef when valid, else the offset of the first bad byte
sub utf8_error {
    my ($s) = @_;
    utf8::downgrade($s);
    pos($s) = 0;
    1 while $s =~ /\G(?:[\x00-\x7F]+|$MB)/gc;
    my $p = pos($s) // 0;
    return $p == length($s) ? undef : $p;
}

# --- JSON syntax, iteratively ---

# { ok, err, lone (an escaped lone surrogate), depth }
#
# The stack is a string of open brackets; runs of brackets, of simple keys
# and of simple scalars are taken a run at a time, so that a body of
# 1,000,000 levels or 100,000 entries is checked in milliseconds, not
# seconds (the same grammar: what a fast path does not take, the slow one
# does or refuses).
my $NUM = qr/-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?/;
my $SCALAR = qr/$NUM|true|false|null|"[^"\\\x00-\x1F]*"/;

sub json_check {
    my ($s) = @_;
    utf8::downgrade($s);
    no warnings 'regexp';       # runs longer than 65534 are taken in parts
    my $st = '';
    my ($lone, $depth, $want) = (0, 0, 'value');
    pos($s) = 0;
    my $fail = sub {
        my $p = pos($s) // 0;
        return { ok => 0, lone => $lone, depth => $depth,
                 err => "$_[0] at byte $p" };
    };
    while (1) {
        $s =~ /\G[ \t\n\r]*/gc;
        if ($want eq 'value' || $want eq 'key') {
            my $opened = 0;
            if ($want eq 'value' && $s =~ /\G(\[+)/gc) {
                $st .= $1;
                $opened = 1;
            } elsif ($want eq 'value'
                     && $s =~ /\G((?:\{[ \t\n\r]*"[^"\\\x00-\x1F]*"[ \t\n\r]*:[ \t\n\r]*)+)/gc) {
                $st .= '{' x ($1 =~ tr/{//);
                $depth = length $st if length $st > $depth;
                next;
            } elsif ($want eq 'value' && $s =~ /\G\{/gc) {
                $st .= '{';
                $want = 'key';
                $opened = 1;
            }
            if ($opened) {
                $depth = length $st if length $st > $depth;
                $s =~ /\G[ \t\n\r]*/gc;
                if ($s =~ /\G([\}\]])/gc) {
                    return $fail->('mismatched close')
                        if ($1 eq '}') != (substr($st, -1) eq '{');
                    chop $st;
                    $want = 'after';
                }
                next;
            }
            if ($s =~ /\G"/gc) {
                while (1) {
                    # plain text, simple escapes, \u but no surrogate
                    next if $s =~ /\G(?:[^"\\\x00-\x1F]++|\\["\\\/bfnrt]
                                     |\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4})+/gcx;
                    if ($s =~ /\G\\u([0-9a-fA-F]{4})/gc) {
                        my $u = hex $1;
                        if ($u >= 0xD800 && $u <= 0xDBFF) {
                            $lone = 1
                                unless $s =~ /\G\\u[dD][c-fC-F][0-9a-fA-F]{2}/gc;
                        } elsif ($u >= 0xDC00 && $u <= 0xDFFF) {
                            $lone = 1;
                        }
                        next;
                    }
                    last if $s =~ /\G"/gc;
                    return $fail->('bad string');
                }
                if ($want eq 'key') {
                    $s =~ /\G[ \t\n\r]*/gc;
                    return $fail->('no colon') unless $s =~ /\G:/gc;
                    $want = 'value';
                } else {
                    $want = 'after';
                }
                next;
            }
            return $fail->('expected a key') if $want eq 'key';
            if ($s =~ /\G(?:$NUM|true|false|null)/gc) {
                $want = 'after';
                next;
            }
            return $fail->('expected a value');
        }
        # after a value
        if ($st eq '') {
            return (pos($s) // 0) == length($s)
                ? { ok => 1, lone => $lone, depth => $depth }
                : $fail->('garbage after the value');
        }
        my $top = substr($st, -1);
        next if $top eq '['
            && $s =~ /\G(?:[ \t\n\r]*,[ \t\n\r]*$SCALAR)+/gc;
        next if $top eq '{'
            && $s =~ /\G(?:[ \t\n\r]*,[ \t\n\r]*"[^"\\\x00-\x1F]*"[ \t\n\r]*:[ \t\n\r]*$SCALAR)+/gc;
        if ($s =~ /\G,/gc) {
            $want = $top eq '{' ? 'key' : 'value';
            next;
        }
        if ($s =~ /\G(\]+|\}+)/gc) {
            my $n = length $1;
            my $open = substr($1, 0, 1) eq ']' ? '[' : '{';
            if ($n > length $st || substr($st, -$n) ne $open x $n) {
                # the longest run that matches, then the mismatch
                my $k = 0;
                $k++ while $k < $n && $k < length $st
                           && substr($st, -1 - $k, 1) eq $open;
                pos($s) = pos($s) - $n + $k;
                return $fail->('mismatched close') if $k < length $st;
                return $fail->('garbage after the value');
            }
            substr($st, -$n) = '';
            next;
        }
        return $fail->('expected , or a close');
    }
}

# a decoded JSON value; undef (and $@) when it is none
my $PP = JSON::PP->new->utf8->allow_nonref->max_depth(1_000_000);
sub decode {
    my ($s) = @_;
    no warnings 'recursion';
    return eval { $PP->decode($s) };
}

# --- a JSON tree with key order, duplicates and raw bytes kept ---
#
# ['o', [[KEY, NODE], ...]]  KEY: the raw text between the quotes
# ['a', [NODE, ...]]
# ['s', RAW]                 RAW: the raw text between the quotes
# ['l', TEXT]                anything else, verbatim (numbers, literals,
#                            NaN, prebuilt giant or deep values)

sub parse_tree {
    my ($text) = @_;
    pos($text) = 0;
    my $v = _pv(\$text);
    $text =~ /\G\s*/gc;
    die "seed: garbage at " . pos($text) . "\n" if pos($text) != length $text;
    return $v;
}

sub _pv {
    my ($r) = @_;
    $$r =~ /\G\s*/gc;
    if ($$r =~ /\G\{/gc) {
        my @kv;
        $$r =~ /\G\s*/gc;
        return [ 'o', \@kv ] if $$r =~ /\G\}/gc;
        while (1) {
            $$r =~ /\G\s*"((?:[^"\\]|\\.)*)"\s*:/gc
                or die "seed: a key expected at " . pos($$r) . "\n";
            my $k = $1;
            push @kv, [ $k, _pv($r) ];
            $$r =~ /\G\s*/gc;
            next if $$r =~ /\G,/gc;
            last if $$r =~ /\G\}/gc;
            die "seed: , or } expected at " . pos($$r) . "\n";
        }
        return [ 'o', \@kv ];
    }
    if ($$r =~ /\G\[/gc) {
        my @a;
        $$r =~ /\G\s*/gc;
        return [ 'a', \@a ] if $$r =~ /\G\]/gc;
        while (1) {
            push @a, _pv($r);
            $$r =~ /\G\s*/gc;
            next if $$r =~ /\G,/gc;
            last if $$r =~ /\G\]/gc;
            die "seed: , or ] expected at " . pos($$r) . "\n";
        }
        return [ 'a', \@a ];
    }
    return [ 's', $1 ] if $$r =~ /\G"((?:[^"\\]|\\.)*)"/gc;
    return [ 'l', $1 ] if $$r =~ /\G(-?[0-9][0-9.eE+-]*|true|false|null)/gc;
    die "seed: a value expected at " . pos($$r) . "\n";
}

sub ser {
    my ($n) = @_;
    my $t = $n->[0];
    return '{' . join(',', map { qq("$_->[0]":) . ser($_->[1]) } @{ $n->[1] })
           . '}' if $t eq 'o';
    return '[' . join(',', map { ser($_) } @{ $n->[1] }) . ']' if $t eq 'a';
    return qq("$n->[1]") if $t eq 's';
    return $n->[1];
}

# bytes -> the raw text of a JSON string's contents
sub esc {
    my ($s) = @_;
    $s =~ s/(["\\])/\\$1/g;
    $s =~ s/([\x00-\x1F])/sprintf '\\u%04x', ord $1/ge;
    return $s;
}

sub str  { [ 's', esc($_[0]) ] }
sub lit  { [ 'l', $_[0] ] }
sub type_of {
    my ($n) = @_;
    return 'object' if $n->[0] eq 'o';
    return 'array'  if $n->[0] eq 'a';
    return 'string' if $n->[0] eq 's';
    return 'array'  if $n->[1] =~ /^\[/;
    return 'object' if $n->[1] =~ /^\{/;
    return $n->[1] =~ /^(true|false)$/ ? 'bool'
         : $n->[1] eq 'null' ? 'null' : 'number';
}

# every value below the root: { node, path, set }, pre-order
sub slots {
    my ($n, $path, $out, $set) = @_;
    $out //= [];
    push @$out, { node => $n, path => $path, set => $set } if $set;
    if ($n->[0] eq 'o') {
        for my $p (@{ $n->[1] }) {
            slots($p->[1], ($path eq '' ? '' : "$path.") . $p->[0], $out,
                  sub { $p->[1] = $_[0] });
        }
    } elsif ($n->[0] eq 'a') {
        my $a = $n->[1];
        for my $j (0 .. $#$a) {
            slots($a->[$j], "$path\[$j]", $out, sub { $a->[$j] = $_[0] });
        }
    }
    return $out;
}

# every object member: { pair, obj, path }
sub members {
    my ($n, $path, $out) = @_;
    $out //= [];
    if ($n->[0] eq 'o') {
        for my $j (0 .. $#{ $n->[1] }) {
            my $p = $n->[1][$j];
            my $pp = ($path eq '' ? '' : "$path.") . $p->[0];
            push @$out, { pair => $p, obj => $n, index => $j, path => $pp };
            members($p->[1], $pp, $out);
        }
    } elsif ($n->[0] eq 'a') {
        members($n->[1][$_], "$path\[$_]", $out) for 0 .. $#{ $n->[1] };
    }
    return $out;
}

sub get {
    my ($n, $key) = @_;
    return undef unless $n && $n->[0] eq 'o';
    my ($p) = grep { $_->[0] eq $key } reverse @{ $n->[1] };
    return $p ? $p->[1] : undef;
}

sub put {
    my ($n, $key, $v) = @_;
    for my $p (@{ $n->[1] }) {
        if ($p->[0] eq $key) { $p->[1] = $v; return }
    }
    push @{ $n->[1] }, [ $key, $v ];
}

# --- random choices (Perl's rand is drand48 on every platform) ---

sub pick   { $_[ int rand @_ ] }
sub chance { rand() < $_[0] }
sub wpick {            # [weight, value], ...
    my $sum = 0;
    $sum += $_->[0] for @_;
    my $x = rand $sum;
    for (@_) { return $_->[1] if ($x -= $_->[0]) < 0 }
    return $_[-1][1];
}

# --- seeds: valid requests, 200 each ---

my $M1 = '{"role":"user","content":"Hi"}';
my $TOOL = '{"type":"function","function":{"name":"get_weather",'
         . '"description":"Weather of a city","parameters":{"type":"object",'
         . '"properties":{"city":{"type":"string"}},"required":["city"]}}}';
my $RTOOL = '{"type":"function","name":"get_weather","description":"Weather",'
          . '"parameters":{"type":"object","properties":{"city":'
          . '{"type":"string"}}}}';

our @SEEDS = (
    [ chat => qq({"model":"tiny","messages":[$M1],"max_tokens":4}) ],
    [ chat => qq({"model":"tiny","messages":[{"role":"system","content":"Be brief."},$M1],"max_tokens":5,"temperature":0.7,"top_p":0.9,"seed":1,"stream":true,"stream_options":{"include_usage":true}}) ],
    [ chat => qq({"model":"tiny","messages":[$M1],"n":2,"temperature":1,"logprobs":true,"top_logprobs":3,"max_tokens":3}) ],
    [ chat => qq({"messages":[$M1],"max_tokens":4,"stop":["\\n","ab"],"stop_token_ids":[1,2],"logit_bias":{"100":5,"200":-100},"presence_penalty":0.5,"frequency_penalty":0.1,"repetition_penalty":1.1,"min_p":0.05,"top_k":40}) ],
    [ chat => qq({"model":"tiny","messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}],"tools":[$TOOL],"tool_choice":"auto","max_tokens":4}) ],
    [ chat => qq({"model":"tiny","messages":[$M1],"response_format":{"type":"json_object"},"max_tokens":6}) ],
    [ chat => qq({"model":"tiny","messages":[$M1],"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object","properties":{"city":{"type":"string","maxLength":8},"days":{"type":"integer","minimum":1,"maximum":9},"when":{"type":"string","format":"date"},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2},"note":{"anyOf":[{"type":"string","pattern":"^[a-z]+\$"},{"type":"null"}]}},"required":["city","days"],"additionalProperties":false}}},"max_tokens":6}) ],
    [ completions => q({"model":"tiny","prompt":"x","structured_outputs":{"regex":"[0-9]{2}-(ab|cd)+"},"max_tokens":6}) ],
    [ chat => qq({"messages":[{"role":"user","content":[{"type":"text","text":"Say"},{"type":"text","text":"something"}]}],"max_completion_tokens":3,"min_tokens":1,"ignore_eos":true,"user":"u1"}) ],
    [ chat => qq({"model":"tiny","messages":[$M1],"stream":true,"n":2,"logprobs":true,"top_logprobs":2,"stop":"x","max_tokens":3}) ],
    [ completions => q({"model":"tiny","prompt":"Once upon a time","max_tokens":4}) ],
    [ completions => q({"prompt":["a","b"],"echo":true,"logprobs":2,"max_tokens":2,"temperature":0}) ],
    [ completions => q({"model":"tiny","prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true},"max_tokens":3}) ],
    [ completions => q({"prompt":[[1,2],[3,4]],"stop":"x","logit_bias":{"5":1},"seed":3,"max_tokens":2}) ],
    [ completions => q({"model":"tiny","prompt":"JSON:","response_format":{"type":"json_object"},"max_tokens":6,"n":2,"temperature":0.5}) ],
    [ responses => q({"model":"tiny","input":"Hello","max_output_tokens":4,"instructions":"Be brief.","metadata":{"k":"v","a":"b"}}) ],
    [ responses => q({"model":"tiny","input":[{"role":"system","content":"Sys."},{"type":"message","role":"user","content":[{"type":"input_text","text":"Part one"},{"type":"input_text","text":"Part two"}]}],"stream":true,"temperature":0.8,"top_p":0.9,"max_output_tokens":3}) ],
    [ responses => qq({"input":"Weather?","tools":[$RTOOL],"tool_choice":"auto","text":{"format":{"type":"json_object"}},"store":false,"max_output_tokens":5}) ],
    [ responses => q({"model":"tiny","input":"Hello","include":["message.output_text.logprobs"],"top_logprobs":2,"stream":true,"max_output_tokens":3,"metadata":{"x":"y"}}) ],
    [ responses => q({"input":[{"role":"user","content":"Weather?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"sunny"}],"user":"u","max_output_tokens":2,"parallel_tool_calls":true}) ],
    [ tokenize => q({"model":"tiny","prompt":"hello world","add_special_tokens":false}) ],
    [ tokenize => qq({"model":"tiny","messages":[$M1],"return_token_strs":true}) ],
    [ detokenize => q({"model":"tiny","tokens":[9906,1917]}) ],
);

our %PATH = (chat => '/v1/chat/completions', completions => '/v1/completions',
             responses => '/v1/responses', tokenize => '/v1/tokenize',
             detokenize => '/v1/detokenize');

sub generates { $_[0] eq 'chat' || $_[0] eq 'completions'
                || $_[0] eq 'responses' }

# --- mutations: each changes the tree (or the bytes) and says how ---

my @HUGE = qw(1e308 1e400 -1e400 -1 0 -0 -0.0 0.0 1e-400 4.9e-324
              2.2250738585072014e-308 2147483647 2147483648 -2147483649
              4294967296 9223372036854775807 9223372036854775808
              -9223372036854775808 -9223372036854775809 18446744073709551615
              18446744073709551616 123456789012345678901234567890 1E+2 0e0
              1.0000000000000002 0.5 -2 256 257 100000);
push @HUGE, '1' . ('0' x 400), '0.' . ('0' x 400) . '1';

my %NUMERIC = (
    chat => [qw(max_tokens max_completion_tokens n top_logprobs seed
                temperature top_p top_k min_p presence_penalty
                frequency_penalty repetition_penalty min_tokens)],
    completions => [qw(max_tokens n logprobs seed temperature top_p top_k
                       min_p min_tokens repetition_penalty)],
    responses => [qw(max_output_tokens top_logprobs temperature top_p)],
    tokenize => [], detokenize => [],
);

my @BADNUM = ('NaN', '-NaN', 'Infinity', '-Infinity', '+Infinity', 'inf',
              'nan', '+1', '01', '-01', '.5', '1.', '0x10', '1e', '1e+', '-',
              '--1', '1_000', 'undefined', 'True', 'None', "'s'", 'tru',
              'nul', '1.5.5', '0.e1', '١');

my @BADUTF8 = ("\x80", "\xbf", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf",
               "\xf0\x80\x80\xaf", "\xed\xa0\x80", "\xed\xbf\xbf",
               "\xed\xa0\x80\xed\xb0\x80", "\xf4\x90\x80\x80",
               "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xfe", "\xff",
               "\xc3", "\xe2\x82", "\xc3\x28", "\xe2\x28\xa1");

my @ESCAPES = ('\ud800', '\udfff', '\udc00', '\ud800\u0041', '\udbff',
               '\ud800\ud800', '\udc00\ud800', '\ud83d\ude00', '\u0000',
               '\u001f', '\uffff', '\ufffe', '\uDBFF\uDFFF', '\u00e9',
               # not JSON at all:
               '\u12', '\uZZZZ', '\x41', "\\'", '\a', '\U0041', '\\');

my @VALUES = (lit('0'), lit('-1'), lit('1.5'), lit('1e3'), str('str'),
              str(''), lit('true'), lit('false'), lit('null'), ['a', []],
              ['o', []], ['a', [lit('1'), str('a')]],
              ['o', [['a', lit('1')]]], str('tiny'), ['a', [str('x')]]);

sub other_value {
    my ($n) = @_;
    my $t = type_of($n);
    my @v = grep { type_of($_) ne $t } @VALUES;
    my $v = pick(@v);
    return [ @$v ];       # a copy: the lists inside are never changed
}

sub slot_of {
    my ($tree, %o) = @_;
    my $s = slots($tree, '');
    $s = [ grep { $o{only}->($_) } @$s ] if $o{only};
    return @$s ? pick(@$s) : undef;
}

sub top_slot {         # a top-level member more often than not
    my ($tree) = @_;
    return chance(0.5) ? slot_of($tree, only => sub { $_[0]{path} !~ /[.\[]/ })
                       : slot_of($tree);
}

sub string_slot {
    my ($tree) = @_;
    return slot_of($tree, only => sub { $_[0]{node}[0] eq 's' });
}

sub m_type_swap {
    my ($c) = @_;
    my $s = top_slot($c->{tree}) or return 'nothing to swap';
    my $v = other_value($s->{node});
    $s->{set}->($v);
    return "$s->{path}: " . type_of($s->{node}) . ' -> ' . ser($v);
}

sub m_huge_number {
    my ($c) = @_;
    my $n = pick(@HUGE);
    my @f = @{ $NUMERIC{ $c->{ep} } };
    if (@f && chance(0.4)) {
        my $k = pick(@f);
        put($c->{tree}, $k, lit($n));
        return "$k = $n";
    }
    if (chance(0.15)) {
        my $where = pick(qw(logit_bias_key logit_bias_value stop_token_ids
                            prompt tokens));
        my $t = $c->{tree};
        if ($where eq 'logit_bias_key') {
            (my $k = $n) =~ s/"//g;
            put($t, 'logit_bias', ['o', [[ $k, lit('1') ]]]);
            return "logit_bias key $k";
        }
        if ($where eq 'logit_bias_value') {
            put($t, 'logit_bias', ['o', [[ '100', lit($n) ]]]);
            return "logit_bias value $n";
        }
        my $k = $where eq 'prompt' && $c->{ep} ne 'completions' ? 'tokens'
              : $where;
        put($t, $k, ['a', [ lit('1'), lit($n) ]]);
        return "$k [1, $n]";
    }
    my $s = slot_of($c->{tree}, only => sub { type_of($_[0]{node}) eq 'number' })
            // top_slot($c->{tree}) or return 'nothing';
    $s->{set}->(lit($n));
    return "$s->{path} = $n";
}

sub m_nan_inf {
    my ($c) = @_;
    my $s = (chance(0.6) ? slot_of($c->{tree},
                only => sub { type_of($_[0]{node}) eq 'number' }) : undef)
            // top_slot($c->{tree}) or return 'nothing';
    my $v = pick(@BADNUM);
    $s->{set}->(lit($v));
    return "$s->{path} = $v";
}

# a value nested $d levels deep, as text
sub nested {
    my ($shape, $d) = @_;
    return ('[' x $d) . pick('', '1', '"x"') . (']' x $d) if $shape eq 'arrays';
    return ('{"a":' x $d) . '1' . ('}' x $d) if $shape eq 'objects';
    if ($shape eq 'schema') {
        return ('{"type":"object","properties":{"p":' x $d)
               . '{"type":"string"}' . ('}}' x $d);
    }
    if ($shape eq 'mixed') {
        my $h = int($d / 2);
        return ('[{"a":' x $h) . 'null' . ('}]' x $h);
    }
    # unclosed
    return ('[' x $d) . '1';
}

my %DEEP_TARGETS = (
    chat => [ 'messages[0].content', 'tools[0].function.parameters',
              'tool_choice', 'response_format', 'logit_bias', 'stop',
              'metadata', 'chat_template_kwargs', 'x_unknown', 'messages',
              'messages[0]', 'tools' ],
    completions => [ 'prompt', 'stop', 'logit_bias', 'response_format',
                     'x_unknown', 'stream_options', 'metadata' ],
    # what Responses echoes, twice as often
    responses => [ 'metadata', 'text', 'text.format', 'tool_choice',
                   'tools[0].parameters', 'input', 'input[0].content',
                   'instructions', 'reasoning', 'x_unknown', 'include',
                   'metadata.k', 'metadata', 'text', 'tool_choice',
                   'reasoning', 'tools[0].parameters', 'metadata.k' ],
    tokenize => [ 'prompt', 'messages', 'tools[0].function.parameters',
                  'x_unknown' ],
    detokenize => [ 'tokens', 'x_unknown' ],
);

# sets PATH (a.b, a[0].b) in the tree, making what is missing
sub put_path {
    my ($tree, $path, $v) = @_;
    my @parts = $path =~ /([^.\[\]]+|\[\d+\])/g;
    my $n = $tree;
    while (@parts > 1) {
        my $p = shift @parts;
        my $next_is_index = $parts[0] =~ /^\[/;
        my $child;
        if ($p =~ /^\[(\d+)\]$/) {
            $n = ['a', []] unless $n->[0] eq 'a';
            $child = $n->[1][$1];
            if (!$child || $child->[0] ne ($next_is_index ? 'a' : 'o')) {
                $child = $next_is_index ? ['a', []] : ['o', []];
                $n->[1][$1] = $child;
            }
        } else {
            $child = get($n, $p);
            if (!$child || $child->[0] ne ($next_is_index ? 'a' : 'o')) {
                $child = $next_is_index ? ['a', []] : ['o', []];
                put($n, $p, $child);
            }
        }
        $n = $child;
    }
    my $last = shift @parts;
    if ($last =~ /^\[(\d+)\]$/) {
        $n->[1][$_] //= lit('null') for 0 .. $1 - 1;
        $n->[1][$1] = $v;
    } else {
        put($n, $last, $v);
    }
}

sub deep_depth {
    return wpick([3, 100], [2, 125], [3, 126], [3, 127], [4, 128], [3, 129],
                 [3, 130], [3, 200], [2, 256], [2, 257], [2, 1000],
                 [2, 2000], [3, 10000], [4, 300000], [2, 1_000_000]);
}

sub m_deep {
    my ($c, %o) = @_;
    my $d = $o{max} ? 100 + int rand($o{max} - 99) : deep_depth();
    my $target = pick(@{ $DEEP_TARGETS{ $c->{ep} } });
    my $shape = $target =~ /parameters$/ && chance(0.5) ? 'schema'
              : $d >= 10000 ? wpick([6, 'arrays'], [3, 'objects'],
                                    [1, 'unclosed'])
              : wpick([4, 'arrays'], [4, 'objects'], [2, 'mixed'],
                      [1, 'unclosed']);
    $shape = 'arrays' if $shape eq 'schema' && $d > 1000
                         || $shape eq 'objects' && $d > 300000;
    my $t = $c->{tree};
    # a whole tool, a whole input item: the deep part is what is wrong
    if ($target =~ /^tools\[0\]\.(function\.)?parameters$/) {
        my $tools = get($t, 'tools');
        put($t, 'tools', parse_tree('[' . ($1 ? $TOOL : $RTOOL) . ']'))
            unless $tools && $tools->[0] eq 'a' && @{ $tools->[1] };
    }
    if ($target =~ /^input\[0\]/) {
        my $in = get($t, 'input');
        put($t, 'input', parse_tree('[' . $M1 . ']'))
            unless $in && $in->[0] eq 'a' && @{ $in->[1] };
    }
    put_path($t, $target, lit(nested($shape, $d)));
    return "$target = $shape nested $d deep";
}

sub m_invalid_utf8 {
    my ($c) = @_;
    my $b = pick(@BADUTF8);
    my $hex = join '', map { sprintf '\\x%02x', ord } split //, $b;
    my $r = rand;
    if ($r < 0.25) {
        put($c->{tree}, 'model', [ 's', "bad$b" ]);
        return "model = \"bad$hex\"";
    }
    if ($r < 0.45) {
        my @m = @{ members($c->{tree}, '') };
        return 'no member' unless @m;
        my $m = pick(@m);
        my $k = $m->{pair}[0];
        my $at = int rand(length($k) + 1);
        substr($k, $at, 0) = $b;
        $m->{pair}[0] = $k;
        return "key $m->{path}: $hex inserted at $at";
    }
    my $s = string_slot($c->{tree}) or return 'no string';
    my $raw = $s->{node}[1];
    my $at = int rand(length($raw) + 1);
    $at-- while $at > 0 && substr($raw, 0, $at) =~ /\\(?:\\\\)*$/;
    substr($raw, $at, 0) = $b;
    $s->{set}->([ 's', $raw ]);
    return "$s->{path}: $hex inserted at $at";
}

sub m_escape {
    my ($c) = @_;
    my $e = pick(@ESCAPES);
    if (chance(0.2)) {
        put($c->{tree}, 'model', [ 's', "tiny$e" ]);
        return "model = \"tiny$e\"";
    }
    if (chance(0.15)) {
        my @m = @{ members($c->{tree}, '') };
        return 'no member' unless @m;
        my $m = pick(@m);
        $m->{pair}[0] .= $e;
        return "key $m->{path}$e";
    }
    my $s = string_slot($c->{tree}) or return 'no string';
    my $raw = $s->{node}[1];
    my $at = int rand(length($raw) + 1);
    $at-- while $at > 0 && substr($raw, 0, $at) =~ /\\(?:\\\\)*$/;
    substr($raw, $at, 0) = $e;
    $s->{set}->([ 's', $raw ]);
    return "$s->{path}: $e inserted at $at";
}

sub m_nul {
    my ($c) = @_;
    my $how = pick(qw(in_string in_string after_brace after_brace_garbage
                      before between escaped escaped_model));
    if ($how eq 'in_string') {
        my $s = string_slot($c->{tree}) or return 'no string';
        my $raw = $s->{node}[1];
        my $at = int rand(length($raw) + 1);
        $at-- while $at > 0 && substr($raw, 0, $at) =~ /\\(?:\\\\)*$/;
        substr($raw, $at, 0) = "\0";
        $s->{set}->([ 's', $raw ]);
        return "$s->{path}: a raw NUL at $at";
    }
    if ($how eq 'escaped') {
        my $s = string_slot($c->{tree}) or return 'no string';
        $s->{set}->([ 's', $s->{node}[1] . '\u0000x' ]);
        return "$s->{path}: \\u0000x appended";
    }
    if ($how eq 'escaped_model') {
        put($c->{tree}, 'model', [ 's', 'tiny\u0000x' ]);
        return 'model = "tiny\u0000x"';
    }
    $c->{post} = $how;
    return "a NUL byte $how";
}

sub m_duplicate {
    my ($c) = @_;
    my @m = @{ members($c->{tree}, '') };
    return 'no member' unless @m;
    my @top = grep { $_->{path} !~ /[.\[]/ } @m;
    my $m = chance(0.5) && @top ? pick(@top) : pick(@m);
    my $how = pick(qw(same other swap));
    my $v = $how eq 'same' ? $m->{pair}[1]
          : $how eq 'other' ? pick(lit('true'), lit('false'), str('tiny'),
                                  lit('1'), str('x'))
          : other_value($m->{pair}[1]);
    my $where = pick(qw(before after));
    splice @{ $m->{obj}[1] }, $m->{index} + ($where eq 'after'), 0,
           [ $m->{pair}[0], $v ];
    return "$m->{path} twice ($how value $where: " . substr(ser($v), 0, 40)
           . ')';
}

sub m_giant {
    my ($c) = @_;
    my $ep = $c->{ep};
    my $t = $c->{tree};
    my @what = ('stop', 'logit_bias', 'stop_token_ids', 'x_array', 'x_keys');
    push @what, 'messages', 'tools' if $ep eq 'chat' || $ep eq 'tokenize';
    push @what, 'input', 'metadata', 'tools_r' if $ep eq 'responses';
    push @what, 'prompt_ids', 'prompt_list' if $ep eq 'completions';
    push @what, 'tokens' if $ep eq 'detokenize';
    my $w = pick(@what);
    if ($w eq 'stop') {
        put($t, 'stop', lit('[' . join(',', map { qq("s$_") } 0 .. 9999)
                            . ']'));
        return 'stop: 10,000 strings';
    }
    if ($w eq 'logit_bias') {
        put($t, 'logit_bias', lit('{' . join(',', map { qq("$_":1) }
                                                  0 .. 99_999) . '}'));
        return 'logit_bias: 100,000 entries';
    }
    if ($w eq 'stop_token_ids') {
        put($t, 'stop_token_ids', lit('[' . join(',', 0 .. 9999) . ']'));
        return 'stop_token_ids: 10,000 ids';
    }
    if ($w eq 'x_array') {
        put($t, 'x_unknown', lit('[' . join(',', ('null') x 100_000) . ']'));
        return 'x_unknown: 100,000 nulls';
    }
    if ($w eq 'x_keys') {
        push @{ $t->[1] }, map { [ "x$_", lit('1') ] } 0 .. 9999;
        return '10,000 unknown top-level keys';
    }
    if ($w eq 'messages') {
        put($t, 'messages', lit('[' . join(',', ($M1) x 10_000) . ']'));
        return 'messages: 10,000';
    }
    if ($w eq 'tools') {
        put($t, 'tools', lit('[' . join(',', ($TOOL) x 1000) . ']'));
        return 'tools: 1,000';
    }
    if ($w eq 'tools_r') {
        put($t, 'tools', lit('[' . join(',', ($RTOOL) x 1000) . ']'));
        return 'tools: 1,000';
    }
    if ($w eq 'input') {
        put($t, 'input', lit('[' . join(',', ($M1) x 10_000) . ']'));
        return 'input: 10,000 items';
    }
    if ($w eq 'metadata') {
        put($t, 'metadata', lit('{' . join(',', map { qq("k$_":"v") }
                                                0 .. 9999) . '}'));
        return 'metadata: 10,000 keys';
    }
    if ($w eq 'prompt_ids') {
        put($t, 'prompt', lit('[' . join(',', (1000) x 10_000) . ']'));
        return 'prompt: 10,000 token ids';
    }
    if ($w eq 'prompt_list') {
        put($t, 'prompt', lit('[' . join(',', ('"a"') x 10_000) . ']'));
        return 'prompt: a list of 10,000 prompts';
    }
    put($t, 'tokens', lit('[' . join(',', (1000) x 100_000) . ']'));
    return 'tokens: 100,000 ids';
}

sub m_long {
    my ($c) = @_;
    my $len = pick(10_000, 100_000, 900_000);
    my $what = pick('a', 'word ', "\xc3\xa9", '\n', '\u00e9', '"', "\xf0\x9f\x98\x80");
    my $raw = $what eq '"' ? '\"' x ($len / 2) : $what x ($len / length $what);
    my $t = $c->{tree};
    my $r = rand;
    if ($r < 0.15) {
        put($t, 'model', [ 's', $raw ]);
        return "model: $len bytes of '$what'";
    }
    if ($r < 0.25) {
        push @{ $t->[1] }, [ $raw, lit('1') ];
        return "a key of $len bytes of '$what'";
    }
    my $s = string_slot($t) or return 'no string';
    $s->{set}->([ 's', $raw ]);
    return "$s->{path}: $len bytes of '$what'";
}

sub m_drop_add {
    my ($c) = @_;
    my @m = @{ members($c->{tree}, '') };
    return 'no member' unless @m;
    my $how = pick(qw(drop drop null empty unknown));
    my $m = pick(@m);
    if ($how eq 'drop') {
        splice @{ $m->{obj}[1] }, $m->{index}, 1;
        return "$m->{path} removed";
    }
    if ($how eq 'null') {
        $m->{pair}[1] = lit('null');
        return "$m->{path} = null";
    }
    if ($how eq 'empty') {
        my $v = pick(['a', []], ['o', []], str(''));
        $m->{pair}[1] = $v;
        return "$m->{path} = " . ser($v);
    }
    push @{ $m->{obj}[1] }, [ pick('zzz', '', 'model', 'stream', '__proto__'),
                              pick(@VALUES) ];
    return "a key added to " . ($m->{path} =~ s/\.?[^.]*$//r || 'the top');
}

my %TREE_OPS = (type_swap => \&m_type_swap, huge_number => \&m_huge_number,
                nan_inf => \&m_nan_inf, deep_nesting => \&m_deep,
                invalid_utf8 => \&m_invalid_utf8,
                surrogate_escape => \&m_escape, nul_byte => \&m_nul,
                duplicate_key => \&m_duplicate, giant_array => \&m_giant,
                long_string => \&m_long, drop_add_key => \&m_drop_add);

our @KINDS = (
    [ 4, 'none' ], [ 10, 'truncate' ], [ 11, 'type_swap' ],
    [ 9, 'huge_number' ], [ 6, 'nan_inf' ], [ 9, 'deep_nesting' ],
    [ 9, 'invalid_utf8' ], [ 6, 'surrogate_escape' ], [ 6, 'nul_byte' ],
    [ 6, 'duplicate_key' ], [ 3, 'giant_array' ], [ 3, 'long_string' ],
    [ 4, 'top_level' ], [ 5, 'drop_add_key' ], [ 9, 'combo' ],
);

sub top_level {
    my ($body) = @_;
    my @v = ('', ' ', "\r\n", 'null', 'true', '0', '-1', '"x"', '[]', '[1,2]',
             "[$body]", '{}', "\xef\xbb\xbf$body", "$body x", "$body$body",
             "/*c*/$body", "$body//c", "$body/*c*/", "$body,", "{\n}", '{', '}', '{"a"}', '{"a":}',
             '{,}', '{"a":1,}', 'x' x 1000, 'messages=hi', "\t$body\n",
             '{"model":"tiny"}');
    my $j = int rand @v;
    my $desc = $v[$j];
    $desc = $j == 10 ? '[SEED]' : $j == 12 ? 'BOM SEED' : $j == 13
          ? 'SEED x' : $j == 14 ? 'SEED SEED' : $j == 15 ? '/*c*/SEED'
          : $j == 16 ? 'SEED//c' : $j == 17 ? 'SEED/*c*/'
          : $j == 18 ? 'SEED,' : $j == 26 ? "'x' x 1000"
          : $j == 28 ? 'tab SEED newline' : $desc;
    return ($v[$j], 'top level: ' . ($desc eq '' ? 'empty body' : $desc));
}

# the I-th case of a run: { i, kind, ep, path, desc, body, stream }
sub case {
    my ($seed, $i) = @_;
    srand(($seed * 1_000_003 + $i * 7919 + 17) % 4_294_967_291);
    my $kind = wpick(@KINDS);
    my $si = int rand @SEEDS;
    my ($ep, $text) = @{ $SEEDS[$si] };
    my $c = { i => $i, kind => $kind, ep => $ep, path => $PATH{$ep},
              seed => $si, tree => parse_tree($text) };
    my @desc = ("seed $si ($ep)");
    if (generates($ep) && chance(0.5) && !get($c->{tree}, 'stream')) {
        put($c->{tree}, 'stream', lit('true'));
        push @desc, 'stream';
        if ($ep ne 'responses' && chance(0.5)) {
            put($c->{tree}, 'stream_options',
                ['o', [[ 'include_usage', lit('true') ]]]);
        }
    }
    my $body;
    if ($kind eq 'none') {
        $body = ser($c->{tree});
    } elsif ($kind eq 'truncate') {
        if (chance(0.3)) {              # something else first, sometimes
            my $op = pick(qw(type_swap huge_number invalid_utf8 deep_nesting
                             duplicate_key));
            push @desc, $op eq 'deep_nesting'
                ? m_deep($c, max => 300) : $TREE_OPS{$op}->($c);
        }
        my $full = ser($c->{tree});
        my $at = int rand length $full;
        $body = substr($full, 0, $at);
        push @desc, "truncated at $at of " . length $full;
    } elsif ($kind eq 'top_level') {
        my $d;
        ($body, $d) = top_level(ser($c->{tree}));
        push @desc, $d;
    } elsif ($kind eq 'combo') {
        my $k = 2 + int rand 2;
        for (1 .. $k) {
            my $op = pick(qw(type_swap huge_number nan_inf invalid_utf8
                             surrogate_escape duplicate_key drop_add_key
                             deep_nesting nul_byte));
            push @desc, $op eq 'deep_nesting' ? m_deep($c, max => 300)
                                              : $TREE_OPS{$op}->($c);
        }
        $body = ser($c->{tree});
        if (chance(0.15)) {
            my $at = int rand length $body;
            $body = substr($body, 0, $at);
            push @desc, "truncated at $at";
        }
    } else {
        push @desc, $TREE_OPS{$kind}->($c);
        $body = ser($c->{tree});
    }
    if (my $p = delete $c->{post}) {
        $body = $p eq 'after_brace' ? "$body\0"
              : $p eq 'after_brace_garbage' ? "$body\0garbage"
              : $p eq 'before' ? "\0$body"
              : do { (my $b = $body) =~ s/,/,\0/; $b };
    }
    my $st = get($c->{tree}, 'stream');
    $c->{stream} = $st && $st->[1] eq 'true' ? 1 : 0;
    delete $c->{tree};
    $c->{body} = $body;
    $c->{desc} = join '; ', @desc;
    return $c;
}

# --- HTTP: one POST per connection, a hard deadline ---

# { status, headers => {lc name => value}, body, complete, error, raw, ms }
sub post {
    my ($port, $path, $body, $timeout, $tag) = @_;
    my $t0 = time;
    my $deadline = $t0 + $timeout;
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                  Timeout => $timeout)
        or return { error => "connect: $!", ms => 0 };
    $s->blocking(0);
    my $req = "POST $path HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            . "Content-Type: application/json\r\n"
            . (defined $tag ? "X-Fuzz-Case: $tag\r\n" : '')
            . 'Content-Length: ' . length($body) . "\r\n\r\n" . $body;
    my ($off, $raw, $err) = (0, '', undef);
    my $sel = IO::Select->new($s);
    while (1) {
        my $left = $deadline - time;
        if ($left <= 0) { $err = 'timeout'; last }
        my ($r, $w) = IO::Select->select($sel,
                                         $off < length $req ? $sel : undef,
                                         undef, $left);
        if ($w && @$w) {
            my $n = syswrite($s, $req, 262144, $off);
            if (defined $n) {
                $off += $n;
            } elsif ($! != EAGAIN && $! != EWOULDBLOCK && $! != EINTR) {
                $off = length $req;     # nginx closed it: read its answer
            }
        }
        if ($r && @$r) {
            my $n = sysread($s, my $buf, 262144);
            if ($n) {
                $raw .= $buf;
            } elsif (defined $n) {
                last;
            } elsif ($! != EAGAIN && $! != EWOULDBLOCK && $! != EINTR) {
                $err = "read: $!";
                last;
            }
        }
    }
    close $s;
    my $res = { raw => $raw, ms => int((time - $t0) * 1000) };
    $res->{error} = $err if $err;
    return $res unless $raw =~ /\AHTTP\/1\.[01] (\d{3})[^\r\n]*\r\n(.*?)\r\n\r\n/s;
    $res->{status} = $1;
    my %h;
    for (split /\r\n/, $2) {
        $h{ lc $1 } = $2 if /^([^:]+):\s*(.*)$/;
    }
    $res->{headers} = \%h;
    my $rest = substr($raw, $+[0]);
    if (($h{'transfer-encoding'} // '') =~ /chunked/i) {
        my ($b, $done) = ('', 0);
        pos($rest) = 0;
        while ($rest =~ /\G([0-9a-fA-F]+)[^\r\n]*\r\n/gc) {
            my $n = hex $1;
            if ($n == 0) { $done = 1; last }
            my $p = pos($rest);
            last if $p + $n + 2 > length $rest;
            $b .= substr($rest, $p, $n);
            pos($rest) = $p + $n + 2;
        }
        $res->{body} = $b;
        $res->{complete} = $done;
    } elsif (defined $h{'content-length'}) {
        $res->{body} = substr($rest, 0, $h{'content-length'});
        $res->{complete} = length($rest) >= $h{'content-length'};
    } else {
        $res->{body} = $rest;
        $res->{complete} = !$err;
    }
    return $res;
}

# --- the checks of one response ---

# the OpenAI error object, exactly
sub error_object_problem {
    my ($v, $status) = @_;
    return 'not a JSON object' unless ref $v eq 'HASH';
    return 'keys other than "error"' if join(',', sort keys %$v) ne 'error';
    my $e = $v->{error};
    return '"error" is not an object' unless ref $e eq 'HASH';
    my $keys = join ',', sort keys %$e;
    return "error keys are {$keys}" if $keys ne 'code,message,param,type';
    return 'message is not a string'
        if !defined $e->{message} || ref $e->{message};
    return 'type is not a string' if !defined $e->{type} || ref $e->{type};
    return 'param is neither null nor a string' if ref $e->{param};
    return 'code is not the status'
        if !defined $e->{code} || $e->{code} ne $status;
    return undef;
}

sub json_problem {        # undef when the text is strict JSON, else why
    my ($s) = @_;
    my $j = json_check($s);
    return [ 'not JSON', $j->{err} ] unless $j->{ok};
    return [ 'JSON with an escaped lone surrogate', '' ] if $j->{lone};
    return undef;
}

# the failures of one response: [CLASS, DETAIL], ...; CLASS names the kind
# of failure without the case's particulars (failures are grouped by it)
sub check {
    my ($c, $res) = @_;
    my @f;
    my $b = $res->{body};
    if (($res->{error} // '') eq 'timeout') {
        push @f, [ 'timeout (no complete response in time)',
                   "after $res->{ms} ms, got " . length($res->{raw}) . ' bytes' ];
        return @f;
    }
    if (!defined $res->{status}) {
        push @f, [ 'no HTTP response (connection closed: a worker died?)',
                   ($res->{error} // 'EOF') . ', ' . length($res->{raw} // '')
                   . ' bytes' ];
        return @f;
    }
    my $st = $res->{status};
    push @f, [ 'incomplete body', 'status ' . $st ] unless $res->{complete};
    if (defined(my $at = utf8_error($b))) {
        push @f, [ "invalid UTF-8 in a $st response",
                   sprintf 'at byte %d: %s', $at, hexdump(substr($b, $at, 8)) ];
    }
    my $ct = $res->{headers}{'content-type'} // '';
    if ($st >= 500 && $st != 503) {
        push @f, [ "status $st", snippet($b) ];
    }
    # a body that is no JSON text: 400 (or 413, or 503 while a worker
    # starts); escaped lone surrogates are JSON, and may be taken or refused
    # (a byte order mark may be ignored: RFC 8259, section 8.1)
    (my $in = $c->{body}) =~ s/\A\xef\xbb\xbf//;
    my $jc = defined(utf8_error($in)) ? undef : json_check($in);
    my $bad_in = !$jc ? 'a body that is not UTF-8'
               : $jc->{ok} ? undef
               : 'a body that is not JSON';
    if ($bad_in && $st != 400 && $st != 413 && $st != 503) {
        push @f, [ "$bad_in answered $st", $jc ? $jc->{err} : '' ];
    }
    if ($c->{kind} eq 'none' && $st != 200 && $st != 503) {
        push @f, [ 'a valid seed not answered 200', "$st " . snippet($b) ];
    }
    my $utf8_ok = !defined utf8_error($b);
    if ($st == 200 && $ct =~ m{^text/event-stream}) {
        my ($bad, $last, $n) = (undef, undef, 0);
        for my $line (split /\n/, $b) {
            next if $line eq '' || $line =~ /^(event|id|retry): / || $line =~ /^:/;
            if ($line =~ /^data: (.*)$/s) {
                $n++;
                my $d = $1;
                $last = $d;
                next if $d eq '[DONE]';
                if (my $p = json_problem($d)) {
                    $bad //= [ "a stream data line is $p->[0]",
                               "$p->[1]: " . snippet($d) ];
                }
                next;
            }
            $bad //= [ 'a stream line that is no SSE field', snippet($line) ];
        }
        push @f, $bad if $bad;
        if ($c->{ep} eq 'responses') {
            push @f, [ 'a Responses stream without its final event',
                       snippet($last // '') ]
                unless ($last // '') =~ /"type":"response\.(completed|incomplete|failed)"/;
        } elsif (($last // '') ne '[DONE]') {
            push @f, [ 'a stream not ending with [DONE]', snippet($last // '') ];
        }
    } elsif ($st == 200) {
        if ($ct !~ m{^application/json}) {
            push @f, [ "a 200 with Content-Type $ct", snippet($b) ];
        } elsif (my $p = json_problem($b)) {
            push @f, [ "a 200 body that is $p->[0]", "$p->[1]: " . snippet($b) ];
        } elsif ($utf8_ok && ref(decode($b)) ne 'HASH') {
            push @f, [ 'a 200 body that is no JSON object', snippet($b) ];
        }
    } else {
        if ($ct !~ m{^application/json}) {
            push @f, [ "a $st with Content-Type " . ($ct || 'none'),
                       snippet($b) ];
        } elsif (my $p = json_problem($b)) {
            push @f, [ "an error body that is $p->[0]",
                       "$p->[1]: " . snippet($b) ];
        } elsif ($utf8_ok
                 and my $q = error_object_problem(decode($b), $st)) {
            push @f, [ "an error body that is not the OpenAI error object: $q",
                       snippet($b) ];
        }
    }
    return @f;
}

sub hexdump {
    my ($s) = @_;
    return join '', map { my $o = ord; $o >= 0x20 && $o < 0x7f && $_ ne '\\'
        ? $_ : sprintf '\\x%02x', $o } split //, $s;
}

# the first N bytes, printable
sub snippet {
    my ($s, $n) = @_;
    $n //= 200;
    return '' unless defined $s;
    my $x = hexdump(substr($s, 0, $n));
    return length($s) > $n ? "$x... (" . length($s) . ' bytes)' : $x;
}

1;
