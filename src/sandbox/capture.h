#pragma once
/* A command's stdout or stderr as the server keeps it (exec.c): whole while it fits the cap, then
 * its first and last halves, checked as UTF-8 as it arrives. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Keeps a stream within cap bytes: all of it while it fits, then its first half and its last
 * half. Memory follows the output: the head grows as it fills, and the tail is allocated when
 * the output outgrows the cap (what the head holds past its first half moves there). Most
 * commands print little, and buffers at the full cap (2 MiB a command with the defaults) for
 * every command under way would leave the heap as large as the most commands ever at once,
 * with the pages each touched resident. */
struct capture {
    char *head;
    size_t head_len, head_alloc, head_cap; /* head_cap: the cap, then its first half */
    size_t clean; /* how much of the head is known valid UTF-8, checked as it came */
    char *tail;   /* ring */
    size_t tail_cap, tail_start, tail_len;
    uint64_t total;
};

void capture_init(struct capture *c, size_t cap);
/* len bytes more of the stream, copied in. */
void capture_add(struct capture *c, const char *data, size_t len);
/* Where the next bytes read may go straight into the head (*room of them, the head grown as it
 * fills), or NULL when nothing has come yet or the head is full; capture_took then counts the n
 * bytes put there. */
char *capture_room(struct capture *c, size_t *room);
void capture_took(struct capture *c, size_t n);
/* Head, marker and tail as one valid UTF-8 string (*len bytes), *truncated when bytes were
 * dropped; the capture gives up its head to it when the output fit. */
char *capture_finish(struct capture *c, size_t *len, bool *truncated);
void capture_release(struct capture *c);
