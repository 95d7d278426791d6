#pragma once
/* Confinement of a process entering a sandbox (confine.c). */

#include <linux/filter.h>
#include <stddef.h>

/* Drop capabilities to the sandbox set (bounding, permitted, effective, inheritable; ambient
 * cleared), lower rlimits, set no_new_privs and load the n seccomp filters in order (the last
 * loaded wins a tie between two results of the same action). Call as root of the sandbox's user
 * namespace. Async-signal-safe; returns 0 or -errno. */
int confine_apply(const struct sock_fprog *filters, size_t n);

/* The n filters written to a new memory file, for a process that confines itself later (a pooled
 * sandbox's init, at its hand-over). Returns the file (close-on-exec), or -errno. */
int confine_filters_save(const struct sock_fprog *filters, size_t n);

/* confine_apply with the filters read from such a file (the helper's side; allocates). Returns 0
 * or -errno. */
int confine_apply_saved(int fd);
