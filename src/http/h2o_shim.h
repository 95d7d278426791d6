#pragma once
/* What the gate (gate.c) uses of h2o that h2o does not publish, in one place: written for libh2o
 * 2.2.5 (libh2o-evloop 0.13.5, the Debian and Ubuntu package), checked against it at each
 * upgrade. Why each is needed:
 * - h2o's HPACK decoder: the gate decodes an unauthenticated HTTP/2 connection's header blocks
 *   with a table of its own kept in step with h2o's, to find a credential before h2o buffers the
 *   bodies. libh2o exports these functions, but their header (h2o/http2_internal.h) includes a
 *   khash.h that is not installed, so they are declared here as that header has them.
 * - a socket's read callback: the gate sits between the event loop and h2o's own callback, and
 *   h2o sets that callback again on its own (each request on HTTP/1, after output drains on
 *   HTTP/2). h2o_socket_read_start would also start reading, which the gate must not do on a
 *   socket h2o stopped; so the field is read and written directly. */

#include <h2o.h>
#include <h2o/cache_digests.h>
#include <stddef.h>
#include <stdint.h>

/* h2o/http2_internal.h */
typedef struct st_h2o_hpack_header_table_t {
    struct st_h2o_hpack_header_table_entry_t *entries;
    size_t num_entries, entry_capacity, entry_start_index;
    size_t hpack_size;
    size_t hpack_capacity;
    size_t hpack_max_capacity;
} h2o_hpack_header_table_t;
void h2o_hpack_dispose_header_table(h2o_hpack_header_table_t *header_table);
int h2o_hpack_parse_headers(h2o_req_t *req, h2o_hpack_header_table_t *header_table,
                            const uint8_t *src, size_t len, int *pseudo_header_exists_map,
                            size_t *content_length, h2o_cache_digests_t **digests,
                            const char **err_desc);

/* The callback h2o reads sock with (h2o_socket_t's private _cb.read). */
static inline h2o_socket_cb h2o_shim_read_cb(h2o_socket_t *sock)
{
    return sock->_cb.read;
}

static inline void h2o_shim_set_read_cb(h2o_socket_t *sock, h2o_socket_cb cb)
{
    sock->_cb.read = cb;
}
