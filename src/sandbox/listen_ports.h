#pragma once
/* The sandbox's listening sockets (the proxy listener, the egress proxy), made inside its network
 * namespace and handed to the server: by the setup process as it builds a sandbox, and by the
 * listen helper for a sandbox a server adopts (helper/listen.c). Shared by the server and the
 * static helper. */

#include <stddef.h>
#include <stdint.h>

#define LISTEN_PORTS_MAX 4

/* Open a listening socket on 127.0.0.1:port for each of the n ports, in the calling process's
 * network namespace, send them on sock in one message (SCM_RIGHTS, in order, with one byte) and
 * close them here. System calls only: no allocation, safe after fork. Returns 0, or a negative
 * errno with *stage naming the step that failed. */
int listen_ports_send(int sock, const uint16_t *ports, int n, const char **stage);

/* The server's end: take the listeners of one such message from sock (nonblocking), at most max
 * into fds, close-on-exec. Returns how many arrived (0 when none did; then text, when not NULL,
 * holds what was sent instead, NUL-terminated within cap bytes: the helper's error line). */
int listen_ports_recv(int sock, int *fds, int max, char *text, size_t cap);

/* Bring the loopback interface of the calling process's network namespace up. Returns 0 or
 * -errno. */
int listen_loopback_up(void);

/* The request that hands a pooled sandbox over (the server to its init, on the control socket):
 * in place of a command's length, this word, then a uint32 count and that many uint16 ports. The
 * init then makes the sandbox's network namespace and loopback, confines itself and answers
 * with the listeners of the ports (as listen_ports_send), or "ready\n" when there are none, or
 * an error line. */
#define LISTEN_ARM_REQUEST 0xa4a4a4a4u
