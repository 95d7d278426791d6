#pragma once
/* What the agent bridge (agent.c) and its keeper (keeper.c) share: the keeper's address, and a
 * blocking HTTP/1.1 client for the agent's server on the sandbox's loopback. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#define HEAD_MAX (64u << 10)
#define BODY_MAX (4u << 20)
#define READY_TIMEOUT_S 300 /* the server's start, on a slow and busy machine */
#define REQUEST_TIMEOUT_MS 60000

/* The keeper's abstract unix socket for the server on port, in the sandbox's network namespace. */
void keeper_address(const char *port, struct sockaddr_un *a, socklen_t *len);
/* A TCP connection to 127.0.0.1:port, or -1 with errno. */
int connect_port(uint16_t port);

/* One request and its response on a connection of its own. */
struct conn {
    int fd;
    size_t off, len;
    char buf[65536];
    /* the body being read: chunked, or `left` bytes (-1: until the connection closes) */
    bool chunked;
    int64_t left;
    bool body_done;
};

/* One line (without "\r\n") into out (cap bytes, longer lines fail); ms < 0: no time limit. */
bool read_line(struct conn *c, char *out, size_t cap, int ms);
/* Send a request (dir: the URI-encoded directory it is for, or NULL); false when it could not be
 * sent. */
bool request_send(struct conn *c, uint16_t port, const char *method, const char *path,
                  const char *dir, const char *body, const char *accept);
/* Read the response's head; returns its status, or -1. */
int response_head(struct conn *c);
/* Up to cap bytes of the body into out: how many (0 at its end), or -1 on error. */
ssize_t read_body(struct conn *c, char *out, size_t cap, int ms);
/* The whole body of a request (at most BODY_MAX bytes) as JSON, or NULL; *status set. */
json_t *call(uint16_t port, const char *method, const char *path, const char *dir, const char *body,
             int *status);
/* Abort what the server's session (an id the caller checked) is answering, in directory dir (as
 * for call); a session answering nothing is left as it is. */
void session_abort(uint16_t port, const char *session, const char *dir);
