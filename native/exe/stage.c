/* confined-stage: the launch stage bwrap runs as the sandbox's pid 1.
 *
 *   confined-stage <cpu> <nofile> <core> <fsize> <nproc> close <n> NAME=VALUE... -- path [argv...]
 *   confined-stage <cpu> <nofile> <core> <fsize> <nproc> gate <canary> <host-tool> <n>
 *                  NAME=VALUE... -- path [argv...]
 *
 * Each limit is a number (soft = hard; core and fsize in 512-byte blocks) or "-" to leave it as
 * inherited. The program's environment is exactly the n NAME=VALUE arguments: whatever bwrap
 * left in ours (PWD) is not passed on. Descriptors on entry:
 *   0-2  the program's stdio (pipes from the host)
 *   3    control channel (write end of a host pipe): the limits measured in the child, then,
 *        with `gate`, the admission record; the program never holds it
 *   4    status channel (write end of a host pipe): only this stage writes it, after the child
 *        was reaped: "status <exited|signaled> <n> <utime_us> <stime_us> <maxrss_kib>\n", or
 *        "status unexecuted <errno> ..." when execve itself failed after the gate
 *   5    the seccomp program (struct sock_filter array) to install in the child, read to EOF
 *
 * Why a stage: bwrap turns a signal death into 128+n, so the host could not tell `exit 137`
 * from SIGKILL. As pid 1 this stage reaps the program itself and reports the exact wait status
 * and the program's own resource usage over a descriptor the program never holds. The child
 * sets the limits, reports them as measured (getrlimit after setrlimit, in the process that
 * then execs the program: limits survive execve), passes the gate, installs the seccomp filter
 * last and execs. Any failure before exec exits REFUSAL (125): the host then never sends go.
 *
 * The gate (executor only, `gate`): in the process that becomes the program, after its limits
 * are set and in the sandbox's mount namespace and uid, it proves one sandbox effect (the
 * canary, a host file outside every bind, cannot be opened: ENOENT, EACCES or EPERM), requires
 * the host tool (the host's bwrap, never bound) to be absent, writes the admission record,
 * closes the control channel and blocks on stdin for the go byte, which the host sends only
 * after checking the measured limits. End-of-file or any other byte refuses. Nothing of the
 * program, not even node's own start-up, runs before go; worker threads never see a gate.
 *
 * Trust: the program cannot touch this process. It is pid 1 of the pid namespace (the kernel
 * drops signals to it that it has no handler for), it is non-dumpable (so /proc/1/fd, /proc/1/mem
 * and ptrace need CAP_SYS_PTRACE, which nothing inside holds), and the child's filter denies
 * kill/tgkill to any pid but its own, ptrace, process_vm_* and pidfd_getfd. If this stage dies,
 * the kernel kills every process of the namespace. */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* CONFINED_PROGRAM_PID: the pid the executor's filter lets the program signal, decided once. */
#include "../seccomp_policy.h"

#define REFUSAL 125
#define CONTROL_FD 3
#define STATUS_FD 4
#define FILTER_FD 5
/* The gate's protocol; lib/profile.js holds the same values (ADMISSION_RECORD, GO_BYTE) and
 * test/profile.test.js checks they agree. */
#define ADMISSION_RECORD "sf-confined/1 admitted\n"
#define GO_BYTE 0x67
#define MAX_FILTER_BYTES (BPF_MAXINSNS * sizeof(struct sock_filter))

struct limit {
  const char *name;
  int resource;
  int set;
  rlim_t value;
  rlim_t unit; /* report in the spec's units: seconds, descriptors, 512-byte blocks */
};

static int parse_limit(const char *s, struct limit *l) {
  if (strcmp(s, "-") == 0) {
    l->set = 0;
    return 0;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || !end || *end || end == s)
    return -1;
  l->set = 1;
  l->value = (rlim_t)v;
  return 0;
}

static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static ssize_t read_all(int fd, char *buf, size_t cap) {
  size_t got = 0;
  while (got < cap) {
    ssize_t n = read(fd, buf + got, cap - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -1;
    if (n == 0)
      return (ssize_t)got;
    got += (size_t)n;
  }
  /* A filter that fills the buffer is too large: refuse rather than truncate it. */
  char extra;
  return read(fd, &extra, 1) == 0 ? (ssize_t)got : -1;
}

static void format_value(char *out, size_t cap, rlim_t v, rlim_t unit) {
  if (v == RLIM_INFINITY)
    snprintf(out, cap, "unlimited");
  else
    snprintf(out, cap, "%llu", (unsigned long long)(v / unit));
}

/* In the child: set, then measure and report, every limit. Returns 0 or -1. */
static int apply_limits(struct limit *limits, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!limits[i].set)
      continue;
    struct rlimit rl = {limits[i].value * limits[i].unit, limits[i].value * limits[i].unit};
    if (setrlimit(limits[i].resource, &rl) != 0)
      return -1;
  }
  char report[1024];
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    struct rlimit rl;
    char soft[32], hard[32];
    if (getrlimit(limits[i].resource, &rl) != 0)
      return -1;
    format_value(soft, sizeof soft, rl.rlim_cur, limits[i].unit);
    format_value(hard, sizeof hard, rl.rlim_max, limits[i].unit);
    int w = snprintf(report + used, sizeof report - used, "limit %s soft %s\nlimit %s hard %s\n",
                     limits[i].name, soft, limits[i].name, hard);
    if (w < 0 || (size_t)w >= sizeof report - used)
      return -1;
    used += (size_t)w;
  }
  return write_all(CONTROL_FD, report, used);
}

struct gate {
  const char *canary;
  const char *host_tool;
};

/* The admission gate (see the header). Returns 0 once go arrived, -1 to refuse. Runs in the
 * child before no_new_privs and the filter, so nothing here is restricted by seccomp: every
 * denial it observes comes from the mounts and the uid the program will have. */
static int pass_gate(const struct gate *g) {
  /* O_NONBLOCK: a canary path that resolves to a FIFO must not block the gate (it opens, so
   * it refuses). */
  int fd = open(g->canary, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd >= 0) {
    close(fd);
    return -1;
  }
  if (errno != ENOENT && errno != EACCES && errno != EPERM)
    return -1;
  struct stat st;
  if (stat(g->host_tool, &st) == 0 || errno != ENOENT)
    return -1;
  if (write_all(CONTROL_FD, ADMISSION_RECORD, sizeof ADMISSION_RECORD - 1) != 0)
    return -1;
  if (close(CONTROL_FD) != 0)
    return -1;
  unsigned char go = 0;
  ssize_t n;
  for (;;) {
    n = read(STDIN_FILENO, &go, 1);
    if (n >= 0)
      break;
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN)
      return -1;
    /* A non-blocking stdin: wait for the byte or end-of-file rather than refuse early. */
    struct pollfd in = {STDIN_FILENO, POLLIN, 0};
    if (poll(&in, 1, -1) < 0 && errno != EINTR)
      return -1;
  }
  return n == 1 && go == GO_BYTE ? 0 : -1;
}

static void child(struct limit *limits, size_t nlimits, const struct gate *gate,
                  struct sock_fprog *prog, char **argv, char **envp, int exec_report) {
  close(STATUS_FD);
  /* If the stage dies, so does the program (the namespace dies with pid 1 anyway). */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
    _exit(REFUSAL);
  if (getpid() != CONFINED_PROGRAM_PID)
    _exit(REFUSAL);
  if (apply_limits(limits, nlimits) != 0)
    _exit(REFUSAL);
  if (gate) {
    if (pass_gate(gate) != 0)
      _exit(REFUSAL);
  } else {
    close(CONTROL_FD);
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    _exit(REFUSAL);
  /* Last: the filter cuts off the calls used above (it denies nothing exec needs). */
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) != 0)
    _exit(REFUSAL);
  execve(argv[0], argv, envp);
  /* The report pipe is close-on-exec: the stage reads EOF when execve succeeded, the errno
   * when it did not, and says so instead of passing 125 off as the program's exit. */
  int err = errno;
  (void)!write(exec_report, &err, sizeof err);
  _exit(REFUSAL);
}

int main(int argc, char **argv) {
  if (argc < 10)
    return REFUSAL;
  /* argv[6]: close, or gate followed by the canary and the host tool. */
  struct gate gate_paths = {NULL, NULL};
  const struct gate *gate = NULL;
  int at = 7;
  if (strcmp(argv[6], "gate") == 0) {
    if (argc < 12)
      return REFUSAL;
    gate_paths.canary = argv[7];
    gate_paths.host_tool = argv[8];
    gate = &gate_paths;
    at = 9;
  } else if (strcmp(argv[6], "close") != 0) {
    return REFUSAL;
  }
  char *end = NULL;
  long nenv = strtol(argv[at], &end, 10);
  if (!end || *end || nenv < 0 || nenv > argc - at - 3 || strcmp(argv[at + 1 + nenv], "--") != 0)
    return REFUSAL;
  /* The environment: argv[at+1 .. at+1+nenv) moved down into a NULL-terminated vector. */
  static char *envp[256];
  if (nenv >= (long)(sizeof envp / sizeof *envp))
    return REFUSAL;
  for (long i = 0; i < nenv; i++)
    envp[i] = argv[at + 1 + i];
  envp[nenv] = NULL;
  char **program = argv + at + 2 + nenv;
  struct limit limits[] = {
      {"cpu", RLIMIT_CPU, 0, 0, 1},         {"descriptors", RLIMIT_NOFILE, 0, 0, 1},
      {"core", RLIMIT_CORE, 0, 0, 512},     {"file", RLIMIT_FSIZE, 0, 0, 512},
      {"processes", RLIMIT_NPROC, 0, 0, 1},
  };
  for (int i = 0; i < 5; i++)
    if (parse_limit(argv[1 + i], &limits[i]) != 0)
      return REFUSAL;
  /* Report the four limits of the spec always, and processes only when it was asked for. */
  size_t nlimits = limits[4].set ? 5 : 4;

  static char filter[MAX_FILTER_BYTES];
  ssize_t flen = read_all(FILTER_FD, filter, sizeof filter);
  close(FILTER_FD);
  if (flen <= 0 || flen % (ssize_t)sizeof(struct sock_filter) != 0)
    return REFUSAL;
  struct sock_fprog prog = {(unsigned short)(flen / (ssize_t)sizeof(struct sock_filter)),
                            (struct sock_filter *)filter};

  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0)
    return REFUSAL;
  pid_t pid = fork();
  if (pid < 0)
    return REFUSAL;
  if (pid == 0) {
    close(report[0]);
    child(limits, nlimits, gate, &prog, program, envp, report[1]);
  }
  close(report[1]);

  /* Parent: hold nothing the host waits on but the status channel. */
  prctl(PR_SET_DUMPABLE, 0);
  for (int fd = 0; fd <= CONTROL_FD; fd++)
    close(fd);

  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  for (;;) {
    /* As pid 1 this also reaps anything reparented to us; only the program's status counts. */
    pid_t r = wait4(-1, &status, 0, &ru);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return REFUSAL;
    if (r == pid)
      break;
  }
  /* The child is gone, so is every copy of the report pipe's write end: EOF unless it wrote. */
  int exec_errno = 0;
  ssize_t got;
  do
    got = read(report[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof exec_errno)
    exec_errno = 0;
  char line[160];
  long long ut = (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
  long long st = (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
  int n;
  if (exec_errno > 0 && exec_errno < 1000)
    n = snprintf(line, sizeof line, "status unexecuted %d %lld %lld %ld\n", exec_errno, ut, st,
                 ru.ru_maxrss);
  else if (WIFSIGNALED(status))
    n = snprintf(line, sizeof line, "status signaled %d %lld %lld %ld\n", WTERMSIG(status), ut, st,
                 ru.ru_maxrss);
  else
    n = snprintf(line, sizeof line, "status exited %d %lld %lld %ld\n", WEXITSTATUS(status), ut, st,
                 ru.ru_maxrss);
  if (n > 0)
    write_all(STATUS_FD, line, (size_t)n);
  return 0;
}
