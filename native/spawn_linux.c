/* clone/exec of the launcher as pid 1 of a pid namespace of its own, with a private staging
 * mount namespace, privilege drop and exact descriptors; reaping through pidfds. See spawn.h. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* The child reports a failure on this descriptor: the step index and errno. */
#define ERROR_FD SPAWN_FDS
/* The shared idmap user namespace (close-on-exec) while the child prepares mounts. */
#define USERNS_FD (SPAWN_FDS + 1)
/* A pidfd of the host process (close-on-exec): readable once the host has exited. */
#define PARENT_FD (SPAWN_FDS + 2)

static const char *const step_names[] = {
    "signals", "session",   "descriptors", "userns",  "uid_map",   "mountns", "private-root",
    "staging", "idmap",     "open_tree",   "setattr", "mkdir",     "bind",    "remount",
    "move",    "setgroups", "setgid",      "setuid",  "pdeathsig", "parent",  "exec",
};
enum step {
  STEP_SIGNALS,
  STEP_SESSION,
  STEP_FDS,
  STEP_USERNS,
  STEP_UIDMAP,
  STEP_MOUNTNS,
  STEP_PRIVATE,
  STEP_STAGING,
  STEP_IDMAP,
  STEP_OPEN_TREE,
  STEP_SETATTR,
  STEP_MKDIR,
  STEP_BIND,
  STEP_REMOUNT,
  STEP_MOVE,
  STEP_SETGROUPS,
  STEP_SETGID,
  STEP_SETUID,
  STEP_PDEATHSIG,
  STEP_PARENT,
  STEP_EXEC,
};

/* ---- child side: async-signal-safe only ------------------------------------------------ */

static void fail(enum step step) {
  int report[2] = {(int)step, errno};
  ssize_t n;
  do
    n = write(ERROR_FD, report, sizeof report);
  while (n < 0 && errno == EINTR);
  _exit(127);
}

static size_t fmt_uint(char *out, unsigned long v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  return n;
}

/* Writes "<inside> <outside> 1\n" to a /proc map file. */
static int write_map(const char *path, unsigned long inside, unsigned long outside) {
  char line[64];
  size_t n = fmt_uint(line, inside);
  line[n++] = ' ';
  n += fmt_uint(line + n, outside);
  memcpy(line + n, " 1\n", 3);
  n += 3;
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t w = write(fd, line, n);
  int saved = errno;
  close(fd);
  errno = saved;
  return w == (ssize_t)n ? 0 : -1;
}

/* A user namespace whose uid/gid 0 is the host's drop uid/gid, for idmapped mounts: root-owned
 * files then appear owned by the drop uid. Made by a short-lived grandchild. */
int confined_idmap_userns(uid_t uid, gid_t gid) {
  int ready[2], hold[2];
  if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(hold, O_CLOEXEC) != 0)
    return -1;
  pid_t gc = fork();
  if (gc < 0)
    return -1;
  if (gc == 0) {
    char c = 0;
    close(ready[0]);
    close(hold[1]);
    if (unshare(CLONE_NEWUSER) == 0)
      c = 1;
    if (write(ready[1], &c, 1) != 1)
      _exit(1);
    (void)read(hold[0], &c, 1); /* until the parent closes hold[1] */
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  char ok = 0;
  int fd = -1;
  if (read(ready[0], &ok, 1) == 1 && ok) {
    char path[64] = "/proc/";
    size_t n = 6 + fmt_uint(path + 6, (unsigned long)gc);
    memcpy(path + n, "/uid_map", 9);
    if (write_map(path, 0, uid) == 0) {
      memcpy(path + n, "/gid_map", 9);
      if (write_map(path, 0, gid) == 0) {
        memcpy(path + n, "/ns/user", 9);
        fd = open(path, O_RDONLY | O_CLOEXEC);
      }
    }
  }
  int saved = errno;
  close(hold[1]);
  close(ready[0]);
  while (waitpid(gc, NULL, 0) < 0 && errno == EINTR)
    ;
  errno = saved;
  return fd;
}

static void stage_mounts(const struct spawn_plan *p, bool root, int shared_userns) {
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    fail(STEP_PRIVATE);
  int userns = -1;
  if (root && p->nmounts > 0) {
    /* Made by the host, once per process: this child cannot make it, since its forks would
     * live in this pid namespace while /proc names the host's pids. */
    userns = shared_userns;
    if (userns < 0) {
      errno = EINVAL;
      fail(STEP_IDMAP);
    }
  }
  /* Detached clones of every source first: the staging tmpfs may hide a source (an executor
   * root under /tmp), and a clone restricted before it is attached is never visible writable
   * or executable. Root's clones are also idmapped (see struct spawn_plan). */
  int trees[SPAWN_MAX_MOUNTS];
  for (size_t i = 0; i < p->nmounts; i++) {
    const struct stage_mount *m = &p->mounts[i];
    trees[i] = (int)syscall(SYS_open_tree, AT_FDCWD, m->source,
                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (trees[i] < 0)
      fail(STEP_OPEN_TREE);
    struct mount_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if (m->readonly)
      attr.attr_set |= MOUNT_ATTR_RDONLY;
    if (m->noexec)
      attr.attr_set |= MOUNT_ATTR_NOEXEC;
    if (userns >= 0) {
      attr.attr_set |= MOUNT_ATTR_IDMAP;
      attr.userns_fd = (uint64_t)userns;
    }
    if (syscall(SYS_mount_setattr, trees[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                sizeof attr) != 0)
      fail(STEP_SETATTR);
  }
  if (userns >= 0)
    close(userns);
  /* The staging tmpfs exists only in this mount namespace. Mode 0755 so that the unprivileged
   * launcher can traverse it (the executor root, 0700, cannot be). */
  if (p->staging &&
      mount("tmpfs", p->staging, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0)
    fail(STEP_STAGING);
  for (size_t i = 0; i < p->nmounts; i++) {
    if (p->staging && p->mounts[i].is_file) {
      int fd = open(p->mounts[i].target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0)
        fail(STEP_MKDIR);
      close(fd);
    } else if (p->staging && mkdir(p->mounts[i].target, 0755) != 0) {
      fail(STEP_MKDIR);
    }
    if (syscall(SYS_move_mount, trees[i], "", AT_FDCWD, p->mounts[i].target,
                MOVE_MOUNT_F_EMPTY_PATH) != 0)
      fail(STEP_MOVE);
    close(trees[i]);
  }
}

static void child_main(const struct spawn_plan *p, int host_pidfd, int error_fd) {
  /* Descriptors first, so that fail() can report; dup2 clears close-on-exec on the targets and
   * everything else is closed. Every descriptor we keep is first copied above the range we fill
   * (0..PARENT_FD), so that no placement can clobber a source that is still to be placed. */
  enum { HIGH = PARENT_FD + 1 };
  int high[SPAWN_FDS];
  for (int i = 0; i < SPAWN_FDS; i++) {
    high[i] = p->fds[i] < 0 ? -1 : fcntl(p->fds[i], F_DUPFD_CLOEXEC, HIGH);
    if (p->fds[i] >= 0 && high[i] < 0)
      _exit(127);
  }
  int high_error = fcntl(error_fd, F_DUPFD_CLOEXEC, HIGH);
  int high_userns = p->idmap_userns < 0 ? -1 : fcntl(p->idmap_userns, F_DUPFD_CLOEXEC, HIGH);
  int high_host = fcntl(host_pidfd, F_DUPFD_CLOEXEC, HIGH);
  if (high_error < 0 || dup3(high_error, ERROR_FD, O_CLOEXEC) < 0)
    _exit(127);
  if (high_host < 0 || dup3(high_host, PARENT_FD, O_CLOEXEC) < 0)
    fail(STEP_FDS);
  /* The shared idmap user namespace, if given, sits right after the error pipe. */
  int shared_userns = -1;
  if (p->idmap_userns >= 0) {
    if (high_userns < 0 || dup3(high_userns, USERNS_FD, O_CLOEXEC) < 0)
      fail(STEP_FDS);
    shared_userns = USERNS_FD;
  } else {
    close(USERNS_FD);
  }
  for (int i = 0; i < SPAWN_FDS; i++) {
    if (high[i] < 0)
      close(i);
    else if (dup2(high[i], i) < 0)
      fail(STEP_FDS);
  }
  if (syscall(SYS_close_range, PARENT_FD + 1, ~0U, 0) != 0)
    fail(STEP_FDS);

  /* node ignores SIGPIPE and blocks some signals; an exec keeps ignored dispositions and the
   * mask, so reset both. */
  sigset_t none;
  sigemptyset(&none);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; s++)
    if (s != SIGKILL && s != SIGSTOP)
      (void)sigaction(s, &dfl, NULL);
  if (sigprocmask(SIG_SETMASK, &none, NULL) != 0)
    fail(STEP_SIGNALS);
  /* Out of the controlling terminal's process group: a terminal's ^C goes to the host, and the
   * host decides (the sandbox dies with it through --die-with-parent). */
  if (setsid() < 0)
    fail(STEP_SESSION);

  /* A caller that is not root is in a user namespace of its own (made by the clone, so that it
   * could make the pid namespace): map its own ids, unchanged, so bwrap runs as the caller. */
  bool root = geteuid() == 0;
  if (!root) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "deny", 4) != 4)
      fail(STEP_UIDMAP);
    close(fd);
    if (write_map("/proc/self/uid_map", uid, uid) != 0 ||
        write_map("/proc/self/gid_map", gid, gid) != 0)
      fail(STEP_UIDMAP);
  }
  if (p->nmounts > 0) {
    if (unshare(CLONE_NEWNS) != 0)
      fail(STEP_MOUNTNS);
    stage_mounts(p, root, shared_userns);
  }
  if (root) {
    /* Never run the launcher as host root: bwrap would keep uid 0 (research section 1). Raw
     * syscalls: glibc's wrappers synchronise credentials across threads. */
    if (syscall(SYS_setgroups, 0, NULL) != 0)
      fail(STEP_SETGROUPS);
    if (syscall(SYS_setresgid, p->drop_gid, p->drop_gid, p->drop_gid) != 0)
      fail(STEP_SETGID);
    if (syscall(SYS_setresuid, p->drop_uid, p->drop_uid, p->drop_uid) != 0)
      fail(STEP_SETUID);
  }
  /* Credentials changes clear the parent-death signal, so set it last, then close the race
   * with a host that died before this point (getppid() is 0 here: the host is outside this
   * pid namespace, so ask its pidfd). bwrap's monitor inherits this signal across the exec. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
    fail(STEP_PDEATHSIG);
  struct pollfd host = {.fd = PARENT_FD, .events = POLLIN, .revents = 0};
  if (poll(&host, 1, 0) != 0)
    fail(STEP_PARENT);
  execve(p->file, p->argv, p->envp);
  fail(STEP_EXEC);
}

/* ---- parent side -------------------------------------------------------------------------- */

int confined_spawn(const struct spawn_plan *plan, pid_t *pid_out, int *pidfd_out,
                   struct spawn_error *error) {
  int errpipe[2];
  error->step = "pipe";
  error->err = 0;
  if (pipe2(errpipe, O_CLOEXEC) != 0) {
    error->err = errno;
    return -1;
  }
  /* The launcher is pid 1 of a pid namespace of its own (a user namespace of its own too when
   * the caller is not root, which may not make a pid namespace otherwise). Every process of the
   * run is in that namespace, so its end, however it comes (our SIGKILL, an outside SIGKILL,
   * the host's death through the parent-death signal), kills them all before it can be reaped.
   * bwrap alone leaves a window: its sandbox arms --die-with-parent only at the end of its
   * setup, and a sandbox whose monitor died before releasing it blocks forever.
   *
   * clone3 without CLONE_VM and without a stack is a fork; CLONE_PIDFD gives the pidfd with no
   * window in which the pid could be reused. */
  int host_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (host_pidfd < 0) {
    error->step = "pidfd_open";
    error->err = errno;
    close(errpipe[0]);
    close(errpipe[1]);
    return -1;
  }
  int pidfd = -1;
  struct clone_args args;
  memset(&args, 0, sizeof args);
  args.flags = CLONE_PIDFD | CLONE_NEWPID | (geteuid() == 0 ? 0 : CLONE_NEWUSER);
  args.pidfd = (uint64_t)(uintptr_t)&pidfd;
  args.exit_signal = SIGCHLD;
  pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) {
    error->step = "clone";
    error->err = errno;
    close(host_pidfd);
    close(errpipe[0]);
    close(errpipe[1]);
    return -1;
  }
  if (pid == 0) {
    close(errpipe[0]);
    child_main(plan, host_pidfd, errpipe[1]);
    _exit(127);
  }
  close(host_pidfd);
  close(errpipe[1]);
  int report[2];
  ssize_t n;
  do
    n = read(errpipe[0], report, sizeof report);
  while (n < 0 && errno == EINTR);
  close(errpipe[0]);
  if (n == (ssize_t)sizeof report) {
    int s = report[0];
    error->step =
        (s >= 0 && s < (int)(sizeof step_names / sizeof *step_names)) ? step_names[s] : "child";
    error->err = report[1];
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
    close(pidfd);
    return -1;
  }
  *pid_out = pid;
  *pidfd_out = pidfd;
  return 0;
}

int confined_reap(int pidfd, struct spawn_exit *out) {
  siginfo_t info;
  struct rusage ru;
  memset(&info, 0, sizeof info);
  memset(&ru, 0, sizeof ru);
  /* The raw waitid takes a rusage argument: the launcher's usage and everything it reaped. */
  long r = syscall(SYS_waitid, P_PIDFD, pidfd, &info, WEXITED | WNOHANG, &ru);
  if (r < 0)
    return -errno;
  if (info.si_pid == 0)
    return 0;
  out->code = info.si_code == CLD_EXITED ? info.si_status : -1;
  out->signal = info.si_code == CLD_EXITED ? 0 : info.si_status;
  out->utime_us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
  out->stime_us = (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
  out->maxrss_kib = ru.ru_maxrss;
  return 1;
}
