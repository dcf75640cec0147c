# Sourced by the bench scripts that run an nginx with our module.

# nginx_prefix DIR: a prefix directory nginx can use, as root too
nginx_prefix() {
    mkdir -p "$1/conf" "$1/logs" "$1/temp"
    chmod 0755 "$1" "$1/temp"
}

# nginx_conf_head DIR MODULE WORKERS: a conf's main context and the start of
# its http block (temp paths under DIR, no access log); the caller writes
# the rest of the block and its closing brace.  NGINX_ENV: names of
# environment variables the workers (and so the engine) keep, e.g.
# NGINX_ENV="LLM_CPU_AMX LLM_CPU_PACK" (nginx clears the others)
nginx_conf_head() {
    for _v in ${NGINX_ENV:-}; do
        echo "env $_v;"
    done
    cat <<CONF
load_module $2;
worker_processes $3;
daemon on;
pid $1/logs/nginx.pid;
error_log $1/logs/error.log notice;
thread_pool llm threads=2;
events { worker_connections 1024; }
http {
    client_body_temp_path $1/temp/body;
    proxy_temp_path $1/temp/proxy;
    fastcgi_temp_path $1/temp/fastcgi;
    uwsgi_temp_path $1/temp/uwsgi;
    scgi_temp_path $1/temp/scgi;
    access_log off;
CONF
}

# nginx_start DIR: starts the nginx of DIR/conf/nginx.conf; as root its
# workers stay root ("nobody" may not read a checkout in /root)
nginx_start() {
    _user=""
    [ "$(id -u)" = 0 ] && _user="user root;"
    /usr/sbin/nginx -p "$1/" -c "$1/conf/nginx.conf" -e "$1/logs/error.log" \
        -g "$_user"
}

# nginx_wait URL [TRIES=300]: polls URL every 0.2 s until it answers 2xx;
# fails when it never did
nginx_wait() {
    _i=0
    while [ "$_i" -lt "${2:-300}" ]; do
        curl -sf -o /dev/null "$1" && return 0
        sleep 0.2
        _i=$((_i + 1))
    done
    echo "$1 did not answer" >&2
    return 1
}
