#pragma once
/* Seccomp policies of the Linux backend, compiled to BPF (struct sock_filter array). */

#include <stddef.h>
#include <stdint.h>

/* The confined program's pid in its own pid namespace: bwrap runs the stage as pid 1
 * (--as-pid-1) and the stage's only child is the program. Signals go only to this pid. */
#define CONFINED_PROGRAM_PID 2

enum confined_policy {
  CONFINED_POLICY_EXECUTOR, /* one node process: threads only, Unix sockets, no bind/listen */
  CONFINED_POLICY_COMMAND,  /* any command tree: fork/exec allowed, namespaces and kernel
                               attack surface denied */
};

/* Builds the BPF program of a policy. Returns 0 and a malloc'd buffer, or a negative errno
 * with *failed naming the rule or step that failed. */
int confined_seccomp_build(enum confined_policy policy, uint8_t **out, size_t *out_len,
                           const char **failed);
