/* The seccomp policies, compiled to BPF with libseccomp on the host and installed by the stage
 * in the confined process just before it execs (see native/exe/stage.c).
 *
 * The default action is ALLOW and the policy is a deny list: the sandbox's namespaces, read-only
 * mounts and dropped capabilities already remove most of the kernel's surface; these rules cut
 * what namespaces cannot (process creation, foreign address families, listening, other
 * processes, kernel attack surface). Values and reasons come from
 * shared/research/linux-confinement.md section 3, measured with node 20 on this kernel. */
#include "seccomp_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Every namespace flag: clone with any of them is refused, as is unshare/setns outright. */
#define NAMESPACE_FLAGS                                                                            \
  (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |    \
   CLONE_NEWNET | CLONE_NEWTIME)

/* Denied with EPERM in every policy: other processes, kernel attack surface, mounts and
 * namespaces, descriptor-based escapes and executable memory files. */
static const char *const common_denied[] = {"ptrace",
                                            "process_vm_readv",
                                            "process_vm_writev",
                                            "process_madvise",
                                            "pidfd_getfd",
                                            "kcmp",
                                            "userfaultfd",
                                            "bpf",
                                            "perf_event_open",
                                            "keyctl",
                                            "add_key",
                                            "request_key",
                                            "unshare",
                                            "setns",
                                            "mount",
                                            "umount2",
                                            "pivot_root",
                                            "chroot",
                                            "mount_setattr",
                                            "open_tree",
                                            "move_mount",
                                            "fsopen",
                                            "fsconfig",
                                            "fsmount",
                                            "fspick",
                                            "name_to_handle_at",
                                            "open_by_handle_at",
                                            "fanotify_init",
                                            "memfd_secret",
                                            "kexec_load",
                                            "kexec_file_load",
                                            "init_module",
                                            "finit_module",
                                            "delete_module",
                                            "acct",
                                            "swapon",
                                            "swapoff",
                                            "reboot",
                                            "quotactl",
                                            "quotactl_fd",
                                            "iopl",
                                            "ioperm",
                                            "syslog",
                                            "vhangup",
                                            "personality",
                                            "lookup_dcookie",
                                            "uselib",
                                            "nfsservctl",
                                            "get_kernel_syms",
                                            "query_module",
                                            "create_module",
                                            "settimeofday",
                                            "clock_settime",
                                            "clock_adjtime",
                                            "adjtimex",
                                            "sethostname",
                                            "setdomainname"};

/* Denied only for the executor: a single process that never creates another one, never execs
 * again (execveat, memfd exec), never signals anything but itself. */
static const char *const executor_denied[] = {
    "fork",  "vfork", "execveat", "memfd_create", "pidfd_open", "pidfd_send_signal",
    "tkill", "bind",  "listen",   "accept",       "accept4"};

static const char *const uring[] = {"io_uring_setup", "io_uring_enter", "io_uring_register"};

struct builder {
  scmp_filter_ctx ctx;
  int rc;
  const char *failed;
};

static void rule(struct builder *b, uint32_t action, const char *name, unsigned n,
                 const struct scmp_arg_cmp *cmp) {
  if (b->rc != 0)
    return;
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) {
    /* A name this architecture does not have (e.g. iopl on arm64): nothing to deny. */
    return;
  }
  int rc = seccomp_rule_add_exact_array(b->ctx, action, nr, n, cmp);
  if (rc != 0) {
    b->rc = rc;
    b->failed = name;
  }
}

static void deny_all(struct builder *b, const char *const *names, size_t n, int err) {
  for (size_t i = 0; i < n; i++)
    rule(b, SCMP_ACT_ERRNO((uint32_t)err), names[i], 0, NULL);
}

/* Arguments are compared on their low 32 bits: the kernel truncates these int arguments, so a
 * caller could otherwise set high bits to slip past an equality test. */
#define LOW32 0xffffffffULL

static void add_common(struct builder *b) {
  deny_all(b, common_denied, sizeof common_denied / sizeof *common_denied, EPERM);
  /* ENOSYS, not EPERM: libuv falls back silently when io_uring is unavailable. */
  deny_all(b, uring, sizeof uring / sizeof *uring, ENOSYS);
  /* clone3 passes its flags through memory that seccomp cannot read. ENOSYS makes glibc fall
   * back to clone, whose flags can be checked; EPERM would abort node (uv_thread_create). */
  rule(b, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
  /* clone with any namespace flag is refused. */
  for (unsigned long bit = 1; bit != 0 && bit <= 0x80000000UL; bit <<= 1) {
    if (!(NAMESPACE_FLAGS & bit))
      continue;
    struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit);
    rule(b, SCMP_ACT_ERRNO(EPERM), "clone", 1, &c);
  }
  /* Terminal injection through an inherited tty. */
  struct scmp_arg_cmp sti = SCMP_A1(SCMP_CMP_MASKED_EQ, LOW32, TIOCSTI);
  rule(b, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &sti);
  struct scmp_arg_cmp tlx = SCMP_A1(SCMP_CMP_MASKED_EQ, LOW32, TIOCLINUX);
  rule(b, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &tlx);
}

static void add_executor(struct builder *b) {
  deny_all(b, executor_denied, sizeof executor_denied / sizeof *executor_denied, EPERM);
  /* clone is allowed only to create threads: without CLONE_THREAD it is a new process. */
  struct scmp_arg_cmp thread = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0);
  rule(b, SCMP_ACT_ERRNO(EPERM), "clone", 1, &thread);
  /* Only Unix sockets, and those can neither bind nor listen (denied above). */
  struct scmp_arg_cmp not_unix = SCMP_A0(SCMP_CMP_NE, AF_UNIX);
  rule(b, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &not_unix);
  rule(b, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socketpair", 1, &not_unix);
  /* Signals only to itself: the program is pid PROGRAM_PID of its pid namespace. */
  static const char *const signal_calls[] = {"kill", "tgkill", "rt_sigqueueinfo",
                                             "rt_tgsigqueueinfo"};
  struct scmp_arg_cmp other = SCMP_A0(SCMP_CMP_NE, CONFINED_PROGRAM_PID);
  for (size_t i = 0; i < sizeof signal_calls / sizeof *signal_calls; i++)
    rule(b, SCMP_ACT_ERRNO(EPERM), signal_calls[i], 1, &other);
}

static void add_command(struct builder *b) {
  /* Commands may fork and exec, so only the families a command can use on loopback or the
   * proxy: Unix and IP. Netlink, packet, vsock and the rest are refused. */
  struct scmp_arg_cmp hi = SCMP_A0(SCMP_CMP_GT, AF_INET6);
  rule(b, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &hi);
  struct scmp_arg_cmp lo = SCMP_A0(SCMP_CMP_LT, AF_UNIX);
  rule(b, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &lo);
  for (int fam = AF_UNIX + 1; fam < AF_INET6; fam++) {
    if (fam == AF_INET)
      continue;
    struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam);
    rule(b, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &c);
  }
}

int confined_seccomp_build(enum confined_policy policy, uint8_t **out, size_t *out_len,
                           const char **failed) {
  struct builder b = {seccomp_init(SCMP_ACT_ALLOW), 0, NULL};
  *out = NULL;
  *out_len = 0;
  *failed = NULL;
  if (!b.ctx)
    return -ENOMEM;
  /* A foreign architecture (int 0x80 on x86_64) kills the process: its numbers mean other
   * calls, so no rule above would apply. libseccomp also refuses x32 numbers this way. */
  int rc = seccomp_attr_set(b.ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc == 0)
    rc = seccomp_attr_set(b.ctx, SCMP_FLTATR_CTL_NNP, 0);
  if (rc != 0) {
    seccomp_release(b.ctx);
    *failed = "attributes";
    return rc;
  }
  add_common(&b);
  if (policy == CONFINED_POLICY_EXECUTOR)
    add_executor(&b);
  else
    add_command(&b);
  if (b.rc != 0) {
    seccomp_release(b.ctx);
    *failed = b.failed;
    return b.rc;
  }
  /* libseccomp 2.5 exports only to a descriptor; a pipe holds a filter (at most 32 KiB). */
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    seccomp_release(b.ctx);
    *failed = "pipe";
    return -errno;
  }
  rc = seccomp_export_bpf(b.ctx, p[1]);
  close(p[1]);
  seccomp_release(b.ctx);
  if (rc != 0) {
    close(p[0]);
    *failed = "export";
    return rc;
  }
  size_t cap = 65536, len = 0;
  uint8_t *buf = malloc(cap);
  if (!buf) {
    close(p[0]);
    return -ENOMEM;
  }
  for (;;) {
    ssize_t n = read(p[0], buf + len, cap - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
    if (len == cap)
      break;
  }
  close(p[0]);
  *out = buf;
  *out_len = len;
  return 0;
}
