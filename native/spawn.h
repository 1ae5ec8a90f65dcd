#pragma once
/* Spawning the launcher (bwrap) for both APIs, and the pidfd-based process lifecycle.
 *
 * The plan is built completely before the clone: between clone and exec the child makes only
 * async-signal-safe system calls on memory prepared here (the addon runs inside a
 * multi-threaded node process).
 *
 * The launcher is pid 1 of a pid namespace of its own: whenever it ends, every process it
 * started has ended before the host can reap it. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Descriptors the launcher receives, in this order, as 0..SPAWN_FDS-1. */
enum { SPAWN_FDS = 6 };

/* Most stage mounts one plan may hold. */
enum { SPAWN_MAX_MOUNTS = 128 };

/* A mount the child prepares in its private mount namespace before exec'ing bwrap, so that
 * bwrap binds from it and keeps its flags (bwrap has no noexec option of its own). */
struct stage_mount {
  const char *source; /* host path, absolute */
  const char *target; /* inside the staging tmpfs, or the source itself when staging is NULL */
  bool readonly;
  bool noexec;
  bool is_file; /* the staging target is created as an empty file, not a directory */
};

struct spawn_plan {
  const char *file;  /* absolute path of the launcher */
  char *const *argv; /* NULL-terminated */
  char *const *envp; /* NULL-terminated (empty for a clean environment) */
  /* Prepared in the child when nmounts > 0, in a private mount namespace. With staging set, a
   * private tmpfs is mounted there after every source was cloned (so it may hide sources) and
   * the clones are attached inside it; without, each clone is attached over its own source. */
  const char *staging;
  const struct stage_mount *mounts;
  size_t nmounts;
  /* When the caller is root, the child drops to this uid/gid before exec, and stage mounts
   * are idmapped so that files owned by root appear owned by this uid (and files it creates
   * are stored as root's). When not root, the child maps its own uid in a new user namespace
   * (made with the pid namespace). */
  uid_t drop_uid;
  gid_t drop_gid;
  int idmap_userns; /* from confined_idmap_userns; required when root stages mounts, else -1 */
  /* The launcher's descriptors 0..SPAWN_FDS-1; -1 means /dev/null is not opened: the slot
   * stays closed. */
  int fds[SPAWN_FDS];
};

/* What failed, for the error value: a step name and an errno. */
struct spawn_error {
  const char *step;
  int err;
};

/* A user namespace whose uid/gid 0 is the given host uid/gid, for idmapped mounts: root-owned
 * files then appear owned by that uid. Made by a short-lived child, in the host's pid namespace
 * (it names the child in /proc). Returns a close-on-exec descriptor or -1 with errno set. */
int confined_idmap_userns(uid_t uid, gid_t gid);

/* Clones (new pid namespace) and execs the plan. On success returns 0 and sets *pid and *pidfd
 * (close-on-exec). On failure returns -1 and fills *error; no child is left (it was reaped). */
int confined_spawn(const struct spawn_plan *plan, pid_t *pid, int *pidfd,
                   struct spawn_error *error);

/* Reaps through the pidfd if the process has exited (WNOHANG). Returns 1 when reaped (and fills
 * the outputs), 0 when still running, -errno on error. */
struct spawn_exit {
  int code;   /* exit status, or -1 */
  int signal; /* terminating signal, or 0 */
  int64_t utime_us, stime_us, maxrss_kib;
};
int confined_reap(int pidfd, struct spawn_exit *out);
