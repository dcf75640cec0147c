/*
 * random.c -- ids nobody can predict: the operating system's CSPRNG
 * (getrandom(2)), never libc's random(), whose seed an id gives away.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include "llm.h"


static void
random_bytes(unsigned char *buf, size_t n)
{
    ssize_t  k;
    size_t   got = 0;
    int      fd;

    while (got < n) {
        k = getrandom(buf + got, n - got, 0);
        if (k > 0) {
            got += (size_t) k;
        } else if (k < 0 && errno == ENOSYS) {
            break;                      /* a kernel before 3.17 */
        } else if (k < 0 && errno != EINTR) {
            abort();
        }
    }
    if (got == n) {
        return;
    }
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < n) {
        k = read(fd, buf + got, n - got);
        if (k <= 0 && !(k < 0 && errno == EINTR)) {
            break;
        }
        got += k > 0 ? (size_t) k : 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    if (got < n) {
        abort();                        /* no id is better than a guessable one */
    }
}


void
llm_random_hex(char *out, size_t n_bytes)
{
    static const char  hex[] = "0123456789abcdef";
    unsigned char      b[64];
    size_t             i, k;

    while (n_bytes > 0) {
        k = n_bytes < sizeof(b) ? n_bytes : sizeof(b);
        random_bytes(b, k);
        for (i = 0; i < k; i++) {
            *out++ = hex[b[i] >> 4];
            *out++ = hex[b[i] & 15];
        }
        n_bytes -= k;
    }
    *out = '\0';
}


void
llm_random_alnum(char *out, size_t n)
{
    static const char  set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char      b[32];
    size_t             i;

    while (n > 0) {
        random_bytes(b, sizeof(b));
        /* 248 = 4 * 62: bytes above it would favour the first letters */
        for (i = 0; i < sizeof(b) && n > 0; i++) {
            if (b[i] < 248) {
                *out++ = set[b[i] % 62];
                n--;
            }
        }
    }
    *out = '\0';
}
