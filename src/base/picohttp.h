#pragma once
/* picohttpparser, as built into libh2o, which installs no header for it: the request-head parser
 * the admission gate and the egress proxy read heads with before h2o (or anything) sees them. */

#include <stddef.h>

struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* > 0: the head's length; -1: not a valid head; -2: incomplete. */
int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len,
                      const char **path, size_t *path_len, int *minor_version,
                      struct phr_header *headers, size_t *num_headers, size_t last_len);
/* The same for a response head: its status in *status. */
int phr_parse_response(const char *buf, size_t len, int *minor_version, int *status,
                       const char **msg, size_t *msg_len, struct phr_header *headers,
                       size_t *num_headers, size_t last_len);
