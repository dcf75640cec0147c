#!/usr/bin/perl
# nginx's own errors in front of llm_api are the OpenAI error object, with
# a type and a message that fit the status (docs/api.md, "nginx's own
# errors"): limit_req and limit_conn (at 429 and at nginx's default 503),
# auth_basic, auth_request, deny, client_max_body_size, a bad chunked body,
# "return" of other statuses, If-Match ignored; the headers nginx sets stay;
# an error_page of the user and a body the user wrote win.  Errors nginx
# finds before it chooses a location (414, 494, a 400 of the request head)
# and the 408 it never answers are checked as what they are: not JSON, out
# of reach.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/nginx";

use IO::Socket::INET;
use MIME::Base64 qw(encode_base64);
use Test::More;
use Time::HiRes qw(sleep time);
use NginxLLM;

my $t = NginxLLM->new(
    http => <<'HTTP',
    limit_req_zone $binary_remote_addr zone=rate429:1m rate=1r/m;
    limit_req_zone $binary_remote_addr zone=rate503:1m rate=1r/m;
    limit_conn_zone $binary_remote_addr zone=conn429:1m;
    limit_conn_zone $binary_remote_addr zone=conn503:1m;
HTTP
    server => 'large_client_header_buffers 4 1k;');

my $dir = $t->dir;
open my $fh, '>', "$dir/conf/htpasswd" or die;
print $fh "plain:{PLAIN}secret\n",
          'crypted:' . crypt('secret', '$6$saltsalt$') . "\n";
close $fh;

$t->{locations} = <<"LOC";
        location /v1/ { llm_api; }
        location = /health { llm_health; }

        location /rate/ {
            llm_api;
            limit_req zone=rate429;
            limit_req_status 429;
            add_header Retry-After 60 always;
        }
        location /rate503/ { llm_api; limit_req zone=rate503; }

        location /conn/ {
            llm_api;
            limit_conn conn429 1;
            limit_conn_status 429;
        }
        location /conn503/ { llm_api; limit_conn conn503 1; }

        location /basic/ {
            llm_api;
            auth_basic "llm";
            auth_basic_user_file $dir/conf/htpasswd;
        }

        location /authreq/ { llm_api; auth_request /auth; }
        location = /auth {
            internal;
            if (\$http_x_role = admin) { return 204; }
            if (\$http_x_role = banned) { return 403; }
            if (\$http_x_role = broken) { return 500; }
            return 401;
        }

        location /denied/ { llm_api; deny 127.0.0.1; }
        location /small/ { llm_api; client_max_body_size 1k; }
        location /slow/ { llm_api; client_body_timeout 1s; }

        location /r502/ { llm_api; return 502; }
        location /r504/ { llm_api; return 504; }
        location /r460/ { llm_api; return 460; }

        location /custom/ { llm_api; deny all; error_page 403 \@forbidden; }
        location \@forbidden {
            default_type text/plain;
            return 403 "the user's own page\\n";
        }
        location /mine/ {
            llm_api;
            default_type text/html;
            return 403 "<p>the user's own body</p>";
        }
LOC

$t->start;
my @workers = $t->worker_pids;

sub check {
    my ($name, $r, $status, $type, $msg) = @_;
    subtest $name => sub {
        is($r->{status}, $status, "status $status");
        like($r->{headers}{'content-type'} // '', qr{^application/json$},
             'JSON, not HTML');
        like($r->{content} // '',
             qr/^\{"error":\{"message":"(?:[^"\\]|\\.)*","type":"[^"]*",
                "param":null,"code":\d+\}\}$/x,
             'the OpenAI error object, in its key order');
        my $e = ($r->{json} // {})->{error} // {};
        is($e->{code}, $status, 'error.code = the status');
        is($e->{type}, $type, "type $type");
        ref $msg ? like($e->{message}, $msg, 'message')
                 : is($e->{message}, $msg, 'message');
    };
}

sub basic {
    return { Authorization => 'Basic ' . encode_base64($_[0], '') };
}

# a raw request whose answer is read whole: (status line, headers, body)
sub raw {
    my ($text) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1:' . $t->port)
        or die "connect: $!";
    print $s $text;
    my $resp = do { local $/; <$s> } // '';
    close $s;
    my ($head, $body) = split /\r\n\r\n/, $resp, 2;
    return ($head // '', $body // '');
}

my $chat = '/chat/completions';
my $r;

# --- limit_req: burst 0, one request a minute ---

is($t->get('/rate/models')->{status}, 200, 'limit_req: the first passes');
$r = $t->get('/rate/models');
check('limit_req at limit_req_status 429', $r, 429, 'RateLimitError',
      'Too many requests: over the request rate this server allows '
      . '(nginx limit_req).');
is($r->{headers}{'retry-after'}, '60',
   'limit_req: Retry-After of add_header ... always stays');

is($t->get('/rate503/models')->{status}, 200,
   'limit_req at its default status: the first passes');
check('limit_req at nginx\'s default 503', $t->get('/rate503/models'), 503,
      'ServiceUnavailableError',
      'Too many requests: over the request rate this server allows '
      . '(nginx limit_req).');

# --- limit_conn: one request at a time, held in its body ---

for my $c ([ '/conn', 429, 'RateLimitError' ],
           [ '/conn503', 503, 'ServiceUnavailableError' ]) {
    my ($loc, $status, $type) = @$c;
    my $held = IO::Socket::INET->new(PeerAddr => '127.0.0.1:' . $t->port)
        or die "connect: $!";
    print $held "POST $loc$chat HTTP/1.1\r\nHost: x\r\n"
              . "Content-Type: application/json\r\n"
              . "Content-Length: 100\r\n\r\n{\"messages\":";
    sleep 0.3;
    check("limit_conn at $status, with a request held open",
          $t->get("$loc/models"), $status, $type,
          'Too many requests at once: over the concurrent requests this '
          . 'server allows (nginx limit_conn).');
    close $held;

    my $st = 0;
    my $deadline = time + 10;
    while (time < $deadline) {
        $st = $t->get("$loc/models")->{status};
        last if $st == 200;
        sleep 0.1;
    }
    is($st, 200, "limit_conn at $status: free again once it is closed");
}

# --- auth_basic ---

$r = $t->get('/basic/models');
check('auth_basic without credentials', $r, 401, 'AuthenticationError',
      'Unauthorized');
is($r->{headers}{'www-authenticate'}, 'Basic realm="llm"',
   'auth_basic: WWW-Authenticate stays');
check('auth_basic with a wrong password',
      $t->get('/basic/models', headers => basic('plain:nope')), 401,
      'AuthenticationError', 'Unauthorized');
is($t->get('/basic/models', headers => basic('plain:secret'))->{status},
   200, 'auth_basic: a {PLAIN} user passes');
is($t->get('/basic/models', headers => basic('crypted:secret'))->{status},
   200, 'auth_basic: a crypt(3) user passes');

# --- auth_request ---

check('auth_request answered 401', $t->get('/authreq/models'), 401,
      'AuthenticationError', 'Unauthorized');
check('auth_request answered 403',
      $t->get('/authreq/models', headers => { 'X-Role' => 'banned' }), 403,
      'PermissionDeniedError', 'Forbidden');
check('auth_request answered 500 (nginx: 500 too)',
      $t->get('/authreq/models', headers => { 'X-Role' => 'broken' }), 500,
      'InternalServerError', 'Internal Server Error');
is($t->get('/authreq/models', headers => { 'X-Role' => 'admin' })->{status},
   200, 'auth_request answered 204: the request passes');

# --- access ---

check('deny 127.0.0.1', $t->get('/denied/models'), 403,
      'PermissionDeniedError', 'Forbidden');

# --- bodies ---

check('a body over client_max_body_size 1k',
      $t->post("/small$chat", { messages => [ { role => 'user',
                                                content => 'x' x 2000 } ] }),
      413, 'Request Entity Too Large',
      'Request body is larger than client_max_body_size.');

my ($head, $body) = raw("POST /v1$chat HTTP/1.1\r\nHost: x\r\n"
                        . "Connection: close\r\n"
                        . "Transfer-Encoding: chunked\r\n\r\nzz\r\n");
like($head, qr{^HTTP/1\.1 400 .*\r\nContent-Type: application/json\r\n}s,
     'a bad chunked body: 400, JSON');
is($body, '{"error":{"message":"Bad Request","type":"BadRequestError",'
          . '"param":null,"code":400}}', 'a bad chunked body: the object');

# a body that stops coming: nginx closes at client_body_timeout, sending
# nothing (a 408 is logged, never answered)
my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1:' . $t->port) or die;
print $s "POST /slow$chat HTTP/1.1\r\nHost: x\r\n"
       . "Content-Length: 100\r\n\r\n{\"messages\":";
my $t0 = time;
my $resp = do { local $/; <$s> } // '';
close $s;
is($resp, '', 'client_body_timeout: the connection closed without a word');
cmp_ok(time - $t0, '<', 10, 'client_body_timeout: after about 1 s');
ok($t->wait_log_line(qr{^/slow/chat/completions 408 }),
   'client_body_timeout: 408 in the access log');

# preconditions are ignored, as vLLM ignores them: nginx's not_modified
# filter would fail them all (no answer has an ETag or a Last-Modified)
$r = $t->get('/v1/models', headers => { 'If-Match' => '"x"' });
is($r->{status}, 200, 'If-Match on /v1/models: ignored');
$r = $t->post("/v1$chat", { messages => [ { role => 'user', content => 'Hi' } ],
                            max_tokens => 2 },
              headers => { 'If-Unmodified-Since' =>
                           'Mon, 01 Jan 2001 00:00:00 GMT' });
is($r->{status}, 200, 'If-Unmodified-Since on a chat completion: ignored');
ok($t->wait_log_line(qr{^/v1/chat/completions 200 id=chatcmpl-.* completion=2 }),
   'the chat completion is billed');

# --- statuses of "return" ---

check('return 502', $t->get('/r502/models'), 502, 'Bad Gateway',
      'Bad Gateway');
check('return 504', $t->get('/r504/models'), 504, 'Gateway Timeout',
      'Gateway Timeout');
check('return 460 (no page, no reason phrase)', $t->get('/r460/models'), 460,
      'Client Error', 'Client Error');

# --- the module's own errors, for comparison ---

$r = $t->get("/v1$chat");
check('the module\'s 405', $r, 405, 'Method Not Allowed', qr/use POST/);
is($r->{headers}{allow}, 'POST', 'the module\'s 405: Allow stays');
check('the module\'s 404 of an unknown route', $t->get('/v1/nothing'), 404,
      'NotFoundError', qr{no API endpoint at "/v1/nothing"});

# --- what the user wrote wins ---

$r = $t->get('/custom/models');
is($r->{status}, 403, 'error_page: the status');
like($r->{headers}{'content-type'}, qr{^text/plain}, 'error_page: its type');
is($r->{content}, "the user's own page\n", 'error_page: its page');

$r = $t->get('/mine/models');
is($r->{status}, 403, 'return with a text/html body: the status');
like($r->{headers}{'content-type'}, qr{^text/html}, 'its type');
is($r->{content}, "<p>the user's own body</p>", 'its body, unchanged');

# --- before a location is chosen: nginx's HTML, out of the filter's reach ---

($head, $body) = raw('GET /v1/models?' . ('x' x 2000)
                     . " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
like($head, qr{^HTTP/1\.1 414 .*\r\nContent-Type: text/html}s,
     '414 of a request line over large_client_header_buffers: HTML');
($head, $body) = raw("GET /v1/models HTTP/1.1\r\nHost: x\r\n"
                     . 'X-Big: ' . ('x' x 2000) . "\r\n"
                     . "Connection: close\r\n\r\n");
like($head, qr{^HTTP/1\.1 400 .*\r\nContent-Type: text/html}s,
     '494 of a header over large_client_header_buffers: a 400 in HTML');
like($body, qr{Request Header Or Cookie Too Large}, '494: nginx\'s page');
($head, $body) = raw("GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n");
like($head, qr{^HTTP/1\.1 400 .*\r\nContent-Type: text/html}s,
     '400 of a request head without Host: HTML');

# --- still alive, same worker ---

is($t->get('/v1/models')->{status}, 200, 'a request after all of that');
is_deeply([ $t->worker_pids ], \@workers, 'the worker never restarted');

$t->done;

done_testing();
