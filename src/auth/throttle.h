#pragma once
/* Throttling of sign-in guesses (passwords, one-time codes), in memory, per user name and per
 * client address. The first THROTTLE_FREE failures of a name or an address cost nothing; each
 * one after that makes the next guess wait, 1 s doubling up to THROTTLE_MAX_WAIT_MS. This slows
 * guessing to a crawl without locking anyone out: the real user can still sign in after the wait,
 * or with a sign-in link. A name or address is forgotten THROTTLE_FORGET_MS after its last wait
 * ended without another failure, and when a guess for that user name succeeds (its address
 * stays counted: one address guessing many names is the attack this catches).
 *
 * The table is fixed (THROTTLE_ENTRIES), so strangers cannot grow it; where it is full, a new
 * name or address takes the place of one with the fewest failures. Callers pass what they
 * want counted together as addr: behind a proxy, the client address it reports; for IPv6,
 * better the /64 than the address, since one host has many.
 *
 * The clock is the caller's (now_ms, any monotonic milliseconds), so tests need not sleep. Loop
 * thread only. user or addr may be NULL or "" when unknown. */

#include <stdint.h>

#define THROTTLE_ENTRIES 4096
#define THROTTLE_FREE 5
#define THROTTLE_FIRST_WAIT_MS 1000
#define THROTTLE_MAX_WAIT_MS (15 * 60 * 1000)
#define THROTTLE_FORGET_MS (15 * 60 * 1000)

/* Milliseconds until a guess for user from addr may be tried: 0 when it may be now. */
int64_t throttle_wait_ms(const char *user, const char *addr, int64_t now_ms);

/* Count a failed guess against user and against addr. */
void throttle_failure(const char *user, const char *addr, int64_t now_ms);

/* A guess for user succeeded: forget user's failures (not addr's). */
void throttle_success(const char *user, const char *addr, int64_t now_ms);

/* Forget everything (for tests). */
void throttle_reset(void);
