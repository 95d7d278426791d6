#pragma once
/* Passwords: Argon2id hashes made by libsodium's crypto_pwhash_str() with its interactive passes
 * (2) and SIGNIN_PASSWORD_MEMORY_MB of memory (64 MiB by default, libsodium's interactive
 * limit). A hash keeps the limits it was made with: checking one takes that memory and tens to
 * hundreds of milliseconds, so the server never checks on the loop: password_verify_async()
 * hands the check to one of two worker threads and answers on the loop. sodium_init() must have
 * run (main does it). */

#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* What a new password must be: at least 10 characters (UTF-8 code points), at most 1024 bytes.
 * Checks of longer passwords fail without looking at them. */
#define PASSWORD_MIN_CHARS 10
#define PASSWORD_MAX_BYTES 1024

/* Checks running at once (each holds its hash's memory while it runs), and checks that may wait for
 * one of them; beyond that password_verify_async() refuses. */
#define PASSWORD_RUNNING_MAX 2
#define PASSWORD_WAITING_MAX 16
#define PASSWORD_QUEUE_MAX (PASSWORD_RUNNING_MAX + PASSWORD_WAITING_MAX)

/* Keep n of the PASSWORD_QUEUE_MAX places (running and waiting) for priority checks: an
 * ordinary check is refused where it would leave fewer than n free. n is clamped to
 * 0..PASSWORD_QUEUE_MAX - 1. The default is 0. Loop thread only. */
void password_set_reserved(int n);

/* The memory new hashes (and the dummy one) take, in MiB: SIGNIN_PASSWORD_MEMORY_MB, checked to
 * be within 19 (OWASP's floor for Argon2id with two passes) and 1024. Before the first hash or
 * check; the default is 64. */
void password_set_memory_mb(unsigned mb);

/* 0 when pw[len] may be set as a password, else -EINVAL with a message that does not quote it. */
int password_acceptable(const char *pw, size_t len, struct err *err);

/* Hash pw[len] (which must be acceptable) into out, a NUL-terminated "$argon2id$..." string.
 * Blocks for as long as a check takes: the command line, tests and worker threads only.
 * -EINVAL for an unacceptable password, -ENOMEM when the memory cannot be had. */
int password_hash(const char *pw, size_t len, char out[crypto_pwhash_STRBYTES], struct err *err);

/* Whether stored was made with other limits than password_hash() uses now (or is unreadable),
 * so that a password just checked against it should be hashed and stored again. */
bool password_needs_rehash(const char *stored);

/* Check pw[len] against stored, blocking (not on the loop). stored NULL or "" (the user has no
 * password) checks against a dummy hash and fails, taking as long as a real check. Returns 0
 * when it matches, -EACCES when it does not, -EINVAL when stored is not a hash this build can
 * read, -ENOMEM when the memory cannot be had. */
int password_verify(const char *stored, const char *pw, size_t len);

struct password_check;

/* A check's answer: result as password_verify() gives it, and when the password matched a hash
 * made with other limits than new ones take (SIGNIN_PASSWORD_MEMORY_MB changed since), rehash:
 * the password hashed anew with the current ones, to store in place of the old hash (NULL
 * otherwise, or when it could not be made). */
typedef void (*password_checked_fn)(void *ctx, int result, const char *rehash);

/* Check pw[len] against stored on a worker thread, and call cb on the loop thread when done. stored
 * NULL or "" (no such user, or no password set) fails after as long as a real check, so the time of
 * an answer does not tell which user names exist; so does a password longer than
 * PASSWORD_MAX_BYTES. The password and hash are copied (the copy of the password wiped when
 * checked): the caller may wipe its own at once. A priority check may take the reserved places
 * (password_set_reserved) and is run before every ordinary one waiting; checks of one kind run in
 * the order they were asked for. Returns a handle that stays valid until cb has returned or the
 * check is cancelled, or NULL with err set: -EBUSY ("busy") when the queue is full (for an ordinary
 * check, when only the reserved places are left), -EINVAL when stored is longer than a hash can be,
 * -EAGAIN when no worker thread can start. Loop thread only. */
struct password_check *password_verify_async(const char *stored, const char *pw, size_t len,
                                             bool priority, password_checked_fn cb, void *ctx,
                                             struct err *err);

/* Forget a check (its client left): cb will not be called. A waiting check is dropped at once;
 * a running one finishes on its thread and is freed then. Only before cb has been called; NULL
 * is fine. Loop thread only. */
void password_check_cancel(struct password_check *c);

/* Checks made and not yet freed, cancelled ones included (for tests). */
int password_checks_outstanding(void);
