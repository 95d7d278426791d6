/* Password hashes, and their checks on worker threads.
 *
 * A check costs the memory its hash was made with (64 MiB by default) and a good part of a core
 * for tens to hundreds of milliseconds, and anyone may ask for one by trying to sign in. So
 * checks run on PASSWORD_RUNNING_MAX threads, started at the first check and kept; at most
 * PASSWORD_WAITING_MAX more wait their turn in order, and past that a check is refused at once
 * rather than queued: strangers can make sign-ins slow, but not take the server's memory or
 * threads. A check that matches a hash made with other limits than new ones also hashes the
 * password again, for the caller to store. Part of the queue can be kept for priority checks
 * (sign-ins of browsers and networks that signed in before), which also go first, so that a flood
 * of strangers' guesses cannot keep a known user out. A thread that finishes a check puts it on
 * the done list and writes a byte to a pipe the loop watches; the loop calls the callbacks. Every
 * field shared with the threads is under the lock. */
#include "auth/password.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/util.h"

enum check_state { WAITING, RUNNING, DONE };

struct password_check {
    struct password_check *next; /* in the waiting or the done list */
    enum check_state state;
    bool cancelled;
    bool dummy;    /* check against the dummy hash and fail */
    bool priority; /* in the priority waiting list */
    int result;
    password_checked_fn cb;
    void *ctx;
    size_t len;
    char stored[crypto_pwhash_STRBYTES];
    char rehash[crypto_pwhash_STRBYTES]; /* the password hashed anew, or "" */
    char pw[PASSWORD_MAX_BYTES];
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* oldest first: [1] priority checks, taken before [0] ordinary ones */
    struct password_check *waiting[2], **waiting_tail[2];
    struct password_check *done, **done_tail;
    int nwaiting, nrunning; /* running ones count until their thread lets go of them */
    int reserved;           /* places only priority checks may take; loop thread only */
    int threads;
    int wfd; /* the threads' end of the pipe */
    h2o_socket_t *sock;
    int outstanding; /* loop thread only */
} pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .waiting_tail = {&pool.waiting[0], &pool.waiting[1]},
    .done_tail = &pool.done,
    .wfd = -1,
};

/* The memory new hashes take (SIGNIN_PASSWORD_MEMORY_MB): set before the first hash or check,
 * read by the threads after. Passes are libsodium's interactive ones (2). */
static size_t memlimit = crypto_pwhash_MEMLIMIT_INTERACTIVE;

void password_set_memory_mb(unsigned mb)
{
    memlimit = (size_t)mb << 20;
}

/* A hash of a password nobody knows, made with the same limits as real ones, so that checking
 * against it costs what a real check costs. Made once, by the first thread that needs it. */
static pthread_once_t dummy_once = PTHREAD_ONCE_INIT;
static char dummy_hash[crypto_pwhash_STRBYTES];

static void make_dummy(void)
{
    unsigned char pw[32];
    randombytes_buf(pw, sizeof(pw));
    if (crypto_pwhash_str(dummy_hash, (const char *)pw, sizeof(pw),
                          crypto_pwhash_OPSLIMIT_INTERACTIVE, memlimit) != 0)
        dummy_hash[0] = '\0'; /* out of memory: dummy checks fail quickly, nothing worse */
    sodium_memzero(pw, sizeof(pw));
}

int password_acceptable(const char *pw, size_t len, struct err *err)
{
    if (len > PASSWORD_MAX_BYTES)
        return err_set(err, -EINVAL, "the password is longer than %d bytes", PASSWORD_MAX_BYTES);
    size_t chars = 0;
    for (size_t i = 0; i < len; i++)
        chars += ((unsigned char)pw[i] & 0xc0) != 0x80; /* UTF-8 continuation bytes are no more */
    if (chars < PASSWORD_MIN_CHARS)
        return err_set(err, -EINVAL, "the password must be at least %d characters long",
                       PASSWORD_MIN_CHARS);
    return 0;
}

int password_hash(const char *pw, size_t len, char out[crypto_pwhash_STRBYTES], struct err *err)
{
    int r = password_acceptable(pw, len, err);
    if (r < 0)
        return r;
    if (crypto_pwhash_str(out, pw, len, crypto_pwhash_OPSLIMIT_INTERACTIVE, memlimit) != 0)
        return err_set(err, -ENOMEM, "cannot hash the password: out of memory");
    return 0;
}

bool password_needs_rehash(const char *stored)
{
    return crypto_pwhash_str_needs_rehash(stored, crypto_pwhash_OPSLIMIT_INTERACTIVE, memlimit) !=
           0;
}

int password_verify(const char *stored, const char *pw, size_t len)
{
    bool dummy = !stored || !stored[0] || len > PASSWORD_MAX_BYTES;
    if (dummy) {
        pthread_once(&dummy_once, make_dummy);
        stored = dummy_hash;
        if (len > PASSWORD_MAX_BYTES) {
            pw = "";
            len = 0;
        }
    }
    errno = 0;
    int r = crypto_pwhash_str_verify(stored, pw, len);
    if (dummy)
        return -EACCES;
    if (r == 0)
        return 0;
    /* libsodium says a mismatch (or a hash of an algorithm it does not check) with EINVAL, and
     * leaves errno alone when it cannot parse the hash */
    return errno == EINVAL ? -EACCES : errno == ENOMEM ? -ENOMEM : -EINVAL;
}

static void check_free(struct password_check *c)
{
    sodium_memzero(c, sizeof(*c));
    free(c);
    pool.outstanding--;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (!pool.waiting[0] && !pool.waiting[1])
            pthread_cond_wait(&pool.wake, &pool.lock);
        int q = pool.waiting[1] ? 1 : 0;
        struct password_check *c = pool.waiting[q];
        pool.waiting[q] = c->next;
        if (!pool.waiting[q])
            pool.waiting_tail[q] = &pool.waiting[q];
        c->next = NULL;
        c->state = RUNNING;
        pool.nwaiting--;
        pool.nrunning++;
        pthread_mutex_unlock(&pool.lock);

        /* the loop may cancel c meanwhile, which only marks it: c stays ours until it is on
         * the done list */
        int result = password_verify(c->dummy ? NULL : c->stored, c->pw, c->len);
        /* made with other limits than new hashes: hashed again while the password is here (a
         * failure only leaves the old hash in place) */
        if (result == 0 && !c->dummy && password_needs_rehash(c->stored) &&
            crypto_pwhash_str(c->rehash, c->pw, c->len, crypto_pwhash_OPSLIMIT_INTERACTIVE,
                              memlimit) != 0)
            c->rehash[0] = '\0';
        sodium_memzero(c->pw, sizeof(c->pw));

        pthread_mutex_lock(&pool.lock);
        c->result = result;
        c->state = DONE;
        *pool.done_tail = c;
        pool.done_tail = &c->next;
        pool.nrunning--;
        /* a full pipe already holds a wake-up for the loop, so a failed write loses nothing */
        ssize_t w = write(pool.wfd, "", 1);
        (void)w;
    }
    return NULL;
}

static void on_done(h2o_socket_t *sock, const char *errstr)
{
    (void)errstr;
    h2o_buffer_consume(&sock->input, sock->input->size);
    pthread_mutex_lock(&pool.lock);
    struct password_check *list = pool.done;
    pool.done = NULL;
    pool.done_tail = &pool.done;
    pthread_mutex_unlock(&pool.lock);
    while (list) {
        struct password_check *c = list;
        list = c->next;
        /* a callback may cancel a check further down this list: it is then only marked */
        if (!c->cancelled)
            c->cb(c->ctx, c->result, c->rehash[0] ? c->rehash : NULL);
        check_free(c);
    }
}

/* The pipe and the threads, at the first check. */
static int pool_start(struct err *err)
{
    if (!pool.sock) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
            return err_set(err, -errno, "cannot check passwords: pipe: %s", strerror(errno));
        pool.wfd = fds[1];
        pool.sock = h2o_evloop_socket_create(loop_get(), fds[0], 0);
        h2o_socket_read_start(pool.sock, on_done);
    }
    /* the threads take no signals: the loop's signalfd is for the main thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (pool.threads < PASSWORD_RUNNING_MAX) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t th;
        int rc = pthread_create(&th, &attr, worker, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        pool.threads++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pool.threads == 0)
        return err_set(err, -EAGAIN, "cannot check passwords: no worker thread could start");
    return 0;
}

void password_set_reserved(int n)
{
    pool.reserved = n < 0 ? 0 : n > PASSWORD_QUEUE_MAX - 1 ? PASSWORD_QUEUE_MAX - 1 : n;
}

struct password_check *password_verify_async(const char *stored, const char *pw, size_t len,
                                             bool priority, password_checked_fn cb, void *ctx,
                                             struct err *err)
{
    size_t slen = stored ? strlen(stored) : 0;
    if (slen >= crypto_pwhash_STRBYTES) {
        err_set(err, -EINVAL, "cannot check the password: the stored hash is too long");
        return NULL;
    }
    if (pool.threads < PASSWORD_RUNNING_MAX && pool_start(err) < 0)
        return NULL;
    struct password_check *c = xcalloc(1, sizeof(*c));
    c->cb = cb;
    c->ctx = ctx;
    c->priority = priority;
    c->dummy = slen == 0 || len > PASSWORD_MAX_BYTES;
    if (!c->dummy) {
        memcpy(c->stored, stored, slen + 1);
        memcpy(c->pw, pw, len);
        c->len = len;
    } else if (len <= PASSWORD_MAX_BYTES) {
        memcpy(c->pw, pw, len); /* the same work as a real check, on what was typed */
        c->len = len;
    }
    pthread_mutex_lock(&pool.lock);
    /* counted together: for a moment after they are asked for, running ones still wait */
    if (pool.nwaiting + pool.nrunning >= PASSWORD_QUEUE_MAX - (priority ? 0 : pool.reserved)) {
        pthread_mutex_unlock(&pool.lock);
        sodium_memzero(c, sizeof(*c));
        free(c);
        err_set(err, -EBUSY, "busy: too many password checks under way; retry in a moment");
        return NULL;
    }
    c->state = WAITING;
    *pool.waiting_tail[priority] = c;
    pool.waiting_tail[priority] = &c->next;
    pool.nwaiting++;
    pool.outstanding++;
    pthread_cond_signal(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    return c;
}

void password_check_cancel(struct password_check *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&pool.lock);
    if (c->state == WAITING) {
        struct password_check **p = &pool.waiting[c->priority];
        while (*p != c)
            p = &(*p)->next;
        *p = c->next;
        if (pool.waiting_tail[c->priority] == &c->next)
            pool.waiting_tail[c->priority] = p;
        pool.nwaiting--;
        pthread_mutex_unlock(&pool.lock);
        check_free(c);
        return;
    }
    c->cancelled = true; /* its thread or the done list lets go of it */
    pthread_mutex_unlock(&pool.lock);
}

int password_checks_outstanding(void)
{
    return pool.outstanding;
}
