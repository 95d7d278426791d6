#pragma once
/* Descriptors passed over a unix socket (SCM_RIGHTS), one message at a time. Shared by the server
 * and the static helper: system calls only, no allocation, safe after fork. */

#include <stddef.h>

#define FDPASS_MAX 4

/* Send the n descriptors (1 to FDPASS_MAX) with the len bytes of data (at least one: a stream
 * socket carries descriptors on bytes) in one message. Returns 0 or -errno. */
int fdpass_send(int sock, const int *fds, int n, const void *data, size_t len);

/* Receive one message with flags as recvmsg's (MSG_CMSG_CLOEXEC is always added): at most max of
 * its descriptors into fds (the others are closed) and at most cap bytes of its data into buf,
 * their count in *got (0 at the end of the stream). Returns how many descriptors were kept (0
 * when none came), or -errno. */
int fdpass_recv(int sock, int *fds, int max, void *buf, size_t cap, size_t *got, int flags);
