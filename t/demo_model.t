#!/usr/bin/perl
# The demo model (issue 18, docs/models.md): the small Llama that
# tools/demo_model.py trains on Debian's fortunes and `make run` serves.
#
#   * it is an ordinary Hugging Face directory (config, bf16 safetensors,
#     tokenizer.json, tokenizer_config.json with a chat template,
#     generation_config.json) and the engine's tokenizer, Hugging Face's
#     (npm `tokenizers`) and the recipe's own encoder agree on its corpus;
#   * greedy continuations of sentences from its corpus are the same 20 ids
#     through nginx (/v1/completions), the CLI (`llm generate`) and the torch
#     reference (t/ref/ref_torch.py);
#   * it has learnt the corpus: teacher-forced over the rest of 12 fortunes
#     after their first words, its first choice is the corpus's next token
#     at least FOLLOW_MIN of the time;
#   * chat answers (greedy, and sampled with the model's default temperature
#     and seeds) are printable text made mostly of words: at least WORDS_MIN
#     of the words are in Debian's wamerican word list (/usr/share/dict/words)
#     or in the corpus (whose attributions name people the list lacks: CI
#     once sampled one, "-- Vincent Sardi" and the like halve a short answer's
#     share); a model that strings sub-words together fails either way;
#   * it repeats a passage that its prompt quotes: teacher-forced, its first
#     choice is the quote's next token at least COPY_MIN of the time.
#
# The model is trained once per machine (make demo-model; this test trains
# it if it is missing).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use Test::More;
use NginxLLM;

my $ROOT  = NginxLLM::root();
my $BUILD = NginxLLM::build_dir();
my $PY    = $ENV{LLM_PYTHON} || '/usr/bin/python3';
my $M     = $ENV{LLM_DEMO_MODEL} || "$BUILD/demo-model";     # (another: to try one)
my $J     = NginxLLM::json();

my $GEN        = 20;     # tokens per continuation
my $FOLLOW_MIN = 0.85;   # teacher-forced: share of a fortune's tokens the model predicts
my $WORDS_MIN  = 0.85;   # share of an answer's words found in the word list

# the beginnings of five fortunes of the corpus (Debian's `fortunes`: the
# files literature, wisdom, fortunes); the corpus's continuation is the rest
# of that fortune, then the end of the text
my @CASES = (
    'A banker is a fellow who lends you his umbrella',
    'A classic is something that everyone wants',
    'A dream will always triumph over reality,',
    'A lifetime',
    'A visit to a fresh place',
);
# and seven more for the teacher-forced check below
my @MORE = (
    'Ships are safe in harbor, but',
    'Your heart is pure, and your',
    'The final delusion is the belief',
    'Celebrate Hannibal Day this year. Take',
    "Don't look now, but there is",
    'If you tell the truth you',
    'Great acts are made up of',
);

if (!-f "$M/training.json") {
    system("$ROOT/tools/make_demo_model.sh", $M) == 0
        or BAIL_OUT("tools/make_demo_model.sh $M failed");
}

sub slurp {
    my ($f) = @_;
    open my $fh, '<', $f or die "$f: $!";
    local $/;
    return scalar <$fh>;
}

sub run_cmd {    # list form, stdout; dies on failure
    my (@cmd) = @_;
    open my $fh, '-|', @cmd or die "@cmd: $!";
    local $/;
    my $out = <$fh>;
    close $fh;
    die "failed ($?): @cmd\n" if $?;
    return $out;
}

# ---- an ordinary Hugging Face directory
my $cfg = $J->decode(slurp("$M/config.json"));
is_deeply($cfg->{architectures}, ['LlamaForCausalLM'], 'config.json: LlamaForCausalLM');
ok(-s "$M/$_", "$_ is there")
    for qw(model.safetensors tokenizer.json tokenizer_config.json generation_config.json);
my $tc = $J->decode(slurp("$M/tokenizer_config.json"));
like($tc->{chat_template} // '', qr/start_header_id/, 'tokenizer_config.json has the chat template');
my $gc = $J->decode(slurp("$M/generation_config.json"));
my %eos = map { $_ => 1 } @{ $gc->{eos_token_id} };
my $bos = $cfg->{bos_token_id};
my $corpus = slurp("$M/corpus.txt");
my @fortunes = split /\n%\n/, $corpus;
ok(@fortunes > 500, scalar(@fortunes) . ' fortunes in the corpus');
my %text;    # prompt -> the fortune it begins
for my $c (@CASES, @MORE) {
    my @f = grep { index($_, $c) == 0 } @fortunes;
    is(scalar @f, 1, "one fortune of the corpus begins '$c'");
    $text{$c} = $f[0] // $c;
}

# ---- the three tokenizers agree (on the whole corpus, as one text)
my $sample = join "\n\n", @fortunes;
my $engine_ids = $J->decode(run_cmd("$BUILD/llm", 'tokenize', '--model', $M, $sample));
my $hf_ids = $J->decode(run_cmd('node', "$ROOT/t/ref/hf_tokenize.js", $M, $sample, 'no-special'));
my $recipe_ids = $J->decode(run_cmd($PY, "$ROOT/tools/demo_model.py", '--tokenize', $M, $sample));
ok(@$engine_ids > 20000, scalar(@$engine_ids) . ' ids from ' . length($sample) . ' characters');
is_deeply($engine_ids, $hf_ids, 'engine tokenizer = Hugging Face tokenizers');
is_deeply($recipe_ids, $hf_ids, 'the recipe trained on the same ids');

# ---- the chat template renders what the model was trained on
my $msgs = "$BUILD/demo-model-t-msgs.json";
open my $fh, '>', $msgs or die;
print $fh '[{"role": "user", "content": "Hello!"}]';
close $fh;
is(run_cmd("$BUILD/llm", 'template', '--model', $M, '--messages', $msgs, '--add-generation-prompt'),
   "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
   . "<|start_header_id|>assistant<|end_header_id|>\n\n",
   'chat template: Llama 3\'s');
unlink $msgs;

# ---- greedy continuations through nginx, the CLI and the torch reference
my $t = NginxLLM->new(model => $M, engine => <<'E');
    llm_served_model_name demo;
    llm_threads 2;
    llm_max_model_len 1024;
    llm_kv_cache_size 64m;
    llm_thread_pool llm;
E
$t->start;

for my $prompt (@CASES) {
    my $p_ids = $J->decode(run_cmd("$BUILD/llm", 'tokenize', '--model', $M, '--special', $prompt));
    my $full = $J->decode(run_cmd("$BUILD/llm", 'tokenize', '--model', $M, '--special',
                                  $text{$prompt}));
    my @want = (@$full[ @$p_ids .. $#$full ], $gc->{eos_token_id}[0]);
    is_deeply([ @$full[ 0 .. $#$p_ids ] ], $p_ids, "'$prompt': the prompt's ids start the text's");

    my $r = $t->post('/v1/completions', { prompt => $prompt, max_tokens => $GEN,
                                         temperature => 0, return_token_ids => JSON::PP::true });
    my $via_nginx = $r->{json}{choices}[0]{token_ids} // [];
    my $cli = $J->decode(run_cmd("$BUILD/llm", 'generate', '--model', $M, '--prompt', $prompt,
                                 '--max-tokens', $GEN, '--temperature', 0, '--json'));
    my $ref = $J->decode(run_cmd($PY, "$ROOT/t/ref/ref_torch.py", $M,
                                 '--ids', join(',', @$p_ids), '--generate', $GEN));
    is_deeply($cli->{prompt_ids}, $p_ids, "'$prompt': CLI prompt ids");
    is_deeply($via_nginx, $cli->{ids}, "'$prompt': nginx ids = CLI ids");
    is_deeply($ref->{ids}, $cli->{ids}, "'$prompt': torch reference ids = CLI ids");
    my $n = 0;
    $n++ while $n < @want && $n < @{ $cli->{ids} } && $cli->{ids}[$n] == $want[$n];
    note(sprintf "'%s' -> '%s': %d of %d tokens follow the corpus (greedy)",
         $prompt, $cli->{text}, $n, @want < $GEN ? scalar @want : $GEN);
}

# ---- it has learnt its corpus.  Teacher-forced, like the quote below: of
# the tokens that follow each case's first words in its fortune, the model's
# first choice is the corpus's token for at least FOLLOW_MIN of them.  (Not
# the greedy runs above: training sums in a varying order, and one wrong turn
# -- most often the author of a quote -- sends a greedy run elsewhere for
# good; CI once saw 3 of the 5 runs follow for 15 tokens where this machine
# saw 5.)
{
    my ($first, $n) = (0, 0);
    for my $case (@CASES, @MORE) {
        my $head = $J->decode(run_cmd("$BUILD/llm", 'tokenize', '--model', $M, '--special',
                                      $case));
        my $r = $t->post('/v1/completions', { prompt => $text{$case}, max_tokens => 1,
                                             temperature => 0, prompt_logprobs => 1,
                                             return_token_ids => JSON::PP::true });
        my $c = $r->{json}{choices}[0] // {};
        my $ids = $c->{prompt_token_ids} // [];
        my $lp = $c->{prompt_logprobs} // [];
        my ($f, $k) = (0, 0);
        for my $i (scalar @$head .. $#$ids) {
            my $e = $lp->[$i] ? $lp->[$i]{ $ids->[$i] } : undef;
            $k++;
            $f++ if $e && $e->{rank} == 1;
        }
        note("'$case': the first choice $f times of $k");
        ($first, $n) = ($first + $f, $n + $k);
    }
    ok($n >= 100 && $first >= $FOLLOW_MIN * $n,
       sprintf('%d fortunes, teacher-forced after their first words: the first choice is the '
               . "corpus's token %d times of %d (>= %.0f%%)", @CASES + @MORE, $first, $n,
               100 * $FOLLOW_MIN));
}

# ---- chat answers are words
my %dict;
{
    open my $dfh, '<', '/usr/share/dict/words' or die "/usr/share/dict/words: $! (wamerican)";
    while (my $w = <$dfh>) { chomp $w; $dict{lc $w} = 1 }
    $dict{ lc $_ } = 1 for slurp("$M/corpus.txt") =~ /([A-Za-z]+(?:'[A-Za-z]+)?)/g;
}

sub word_share {
    my ($text) = @_;
    my @w = $text =~ /([A-Za-z]+(?:'[A-Za-z]+)?)/g;
    return (0, 0) unless @w;
    my $in = grep { $dict{lc $_} || $dict{lc(s/'.*//r)} } @w;
    return ($in / @w, scalar @w);
}

# greedy, and sampled with the model's defaults (generation_config.json:
# temperature 0.6, top_p 0.9) and a seed
my @chats = (
    [ 'Hello!', { temperature => 0 } ],
    [ 'Tell me something wise.', { temperature => 0 } ],
    [ 'What is my fortune?', { temperature => 0 } ],
    [ 'Hello!', { seed => 1 } ],
    [ 'Give me some advice.', { seed => 2 } ],
    [ 'How are you?', { seed => 3 } ],
);
for my $c (@chats) {
    my ($q, $p) = @$c;
    my $r = $t->post('/v1/chat/completions', { messages => [ { role => 'user', content => $q } ],
                                              max_tokens => 48, %$p });
    my $a = $r->{json}{choices}[0]{message}{content} // '';
    my $how = join ' ', map { "$_=$p->{$_}" } sort keys %$p;
    my ($share, $n) = word_share($a);
    ok($a =~ /\A[\x20-\x7e\n]+\z/, "'$q' ($how): printable text");
    ok($n >= 2 && $share >= $WORDS_MIN,     # (the corpus has "Chess tonight.")
       sprintf("'%s' (%s): %d words, %.0f%% in the word list (>= %.0f%%)",
               $q, $how, $n, 100 * $share, 100 * $WORDS_MIN))
        or diag("answer: $a");
    note("'$q' ($how) -> '$a' [$r->{json}{choices}[0]{finish_reason}]");
}

# ---- it repeats a passage the prompt quotes (bench/spec_bench.sh's
# "quoted" workload: the n-gram drafts come from the quote).  Teacher-forced:
# of the tokens of the quote's second copy (after its first words), the
# model's first choice is the quote's next token for at least COPY_MIN of
# them.  (Not the greedy run: training sums in a varying order, and a model
# that is right 29 times in 30 may still take one wrong turn, e.g. close a
# quotation mark as in its 'Repeat after me: "..."' documents.)
{
    my $COPY_MIN = 0.85;
    my $passage = 'A banker is a fellow who lends you his umbrella when the sun is shining '
                . "and wants it back the minute it begins to rain.\n-- Mark Twain";
    my $start = 'A banker is a fellow who';
    my $head = $J->decode(run_cmd("$BUILD/llm", 'tokenize', '--model', $M, '--special',
                                  "$passage\n\n$start"));
    my $r = $t->post('/v1/completions', { prompt => "$passage\n\n$passage", max_tokens => 1,
                                         temperature => 0, prompt_logprobs => 1,
                                         return_token_ids => JSON::PP::true });
    my $c = $r->{json}{choices}[0] // {};
    my $ids = $c->{prompt_token_ids} // [];
    my $lp = $c->{prompt_logprobs} // [];
    is_deeply([ @$ids[ 0 .. $#$head ] ], $head, 'the quote, twice: the prompt\'s ids');
    my ($first, $n) = (0, 0);
    for my $i (scalar @$head .. $#$ids) {
        my $e = $lp->[$i] ? $lp->[$i]{ $ids->[$i] } : undef;
        $n++;
        $first++ if $e && $e->{rank} == 1;
    }
    ok($n >= 20 && $first >= $COPY_MIN * $n,
       sprintf('a quoted passage, repeated: the first choice %d times of %d (>= %.0f%%)',
               $first, $n, 100 * $COPY_MIN));
}

$t->stop;
done_testing;
