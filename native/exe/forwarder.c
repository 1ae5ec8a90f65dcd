/* confined-forwarder: the in-sandbox end of the egress bridge.
 *
 *   confined-forwarder [--ready-fd N] <port> <unix-socket-path> [--exec -- command [args...]]
 *
 * A confined command lives in a network namespace with loopback only. This program listens on
 * 127.0.0.1:<port> (and [::1]:<port> when the namespace has IPv6) and relays every accepted
 * connection, byte for byte, to the host's egress proxy through <unix-socket-path> (a socket
 * bound into the sandbox). It understands nothing of what it relays: the proxy decides.
 *
 * Readiness: once listening, it writes "ready\n" ("ready <port>\n" when <port> is 0 and the
 * kernel chose one) to fd N, or to stdout without --exec and --ready-fd, then closes that fd.
 * With --exec it then forks the command (after listening, so the command's first connection
 * finds the listener), keeps relaying, and exits with the command's exact status (re-raising
 * its fatal signal). It kills nothing: in the sandbox the pid namespace ends every process when
 * its pid 1 (the stage, which reaps this program) exits.
 *
 * Lifetime: PR_SET_PDEATHSIG SIGKILL, so it dies with its parent; SIGTERM, SIGINT and SIGHUP end
 * it (with --exec they are passed to the command, whose exit then ends this program).
 *
 * Structure: one thread, one poll loop, signals through a signalfd, every descriptor O_CLOEXEC
 * and non-blocking, a fixed connection table with bounded buffers (a slow reader stalls only
 * its own connection), half-close passed on with shutdown(SHUT_WR) once a direction's buffer
 * has drained. Exit status 125 means the forwarder itself could not start. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define REFUSAL 125
#define MAX_CONNS 64
#define BUF_SIZE 16384
#define MAX_LISTEN 2

struct direction {
  char data[BUF_SIZE];
  size_t start;
  size_t len;
  bool eof;  /* the source returned end of file */
  bool shut; /* shutdown(SHUT_WR) was passed on to the destination */
};

/* fd[0] is the accepted TCP client, fd[1] the Unix socket to the proxy; dir[i] carries the
 * bytes read from fd[i] to fd[1 - i]. */
struct conn {
  bool used;
  int fd[2];
  struct direction dir[2];
};

static struct conn conns[MAX_CONNS];

/* Set when accept ran out of descriptors (a command's RLIMIT_NOFILE applies here too): the
 * listeners then stay out of poll until a connection closes, instead of spinning on them. */
static bool accept_paused;

static int fail(const char *what, int err) {
  dprintf(2, "confined-forwarder: %s: %s\n", what, strerror(err));
  return REFUSAL;
}

static int parse_int(const char *s, long max, long *out) {
  if (!s || !*s || strlen(s) > 10)
    return -1;
  long v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9')
      return -1;
    v = v * 10 + (*p - '0');
  }
  if (v > max || (s[0] == '0' && s[1] != '\0'))
    return -1;
  *out = v;
  return 0;
}

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return -errno;
  return 0;
}

/* Listens on the loopback address of one family; returns the fd or a negative errno. */
static int listen_on(int family, unsigned short port) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (family == AF_INET) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = bind(fd, (struct sockaddr *)&a, sizeof a);
  } else {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    a.sin6_addr = in6addr_loopback;
    rc = bind(fd, (struct sockaddr *)&a, sizeof a);
  }
  if (rc < 0 || listen(fd, 64) < 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

static unsigned short bound_port(int fd) {
  struct sockaddr_in a;
  socklen_t n = sizeof a;
  if (getsockname(fd, (struct sockaddr *)&a, &n) < 0)
    return 0;
  return ntohs(a.sin_port);
}

/* A blocking connect to the proxy's socket (a local accept queue: no network wait), then
 * non-blocking for the relay. Returns the fd or a negative errno. */
static int connect_proxy(const struct sockaddr_un *addr) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  int rc;
  do
    rc = connect(fd, (const struct sockaddr *)addr, sizeof *addr);
  while (rc < 0 && errno == EINTR);
  if (rc < 0 || set_nonblock(fd) < 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

static void conn_close(struct conn *c) {
  close(c->fd[0]);
  close(c->fd[1]);
  c->used = false;
  accept_paused = false;
}

static void accept_one(int lfd, const struct sockaddr_un *proxy) {
  int cfd;
  do
    cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  while (cfd < 0 && errno == EINTR);
  if (cfd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
      accept_paused = true;
    return; /* EAGAIN, ECONNABORTED: the next poll round tries again */
  }
  struct conn *slot = NULL;
  for (int i = 0; i < MAX_CONNS; i++) {
    if (!conns[i].used) {
      slot = &conns[i];
      break;
    }
  }
  int pfd = slot ? connect_proxy(proxy) : -1;
  if (pfd < 0) {
    close(cfd); /* table full or proxy gone: the client sees the connection closed */
    if (pfd == -EMFILE || pfd == -ENFILE)
      accept_paused = true;
    return;
  }
  memset(slot, 0, sizeof *slot);
  slot->used = true;
  slot->fd[0] = cfd;
  slot->fd[1] = pfd;
}

/* Reads into d from fd. Returns 0, or -1 when the connection must close. */
static int pump_in(struct direction *d, int fd) {
  if (d->start > 0 && d->start + d->len == BUF_SIZE) {
    memmove(d->data, d->data + d->start, d->len);
    d->start = 0;
  }
  size_t room = BUF_SIZE - d->start - d->len;
  if (room == 0)
    return 0;
  ssize_t n;
  do
    n = read(fd, d->data + d->start + d->len, room);
  while (n < 0 && errno == EINTR);
  if (n == 0)
    d->eof = true;
  else if (n > 0)
    d->len += (size_t)n;
  else if (errno != EAGAIN && errno != EWOULDBLOCK)
    return -1;
  return 0;
}

/* Writes from d to fd (MSG_NOSIGNAL: a gone peer is an error, not SIGPIPE). */
static int pump_out(struct direction *d, int fd) {
  ssize_t n;
  do
    n = send(fd, d->data + d->start, d->len, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
  d->start += (size_t)n;
  d->len -= (size_t)n;
  if (d->len == 0)
    d->start = 0;
  return 0;
}

static short wanted(const struct conn *c, int side) {
  short ev = 0;
  const struct direction *in = &c->dir[side], *out = &c->dir[1 - side];
  if (!in->eof && in->start + in->len < BUF_SIZE)
    ev |= POLLIN;
  if (out->len > 0)
    ev |= POLLOUT;
  return ev;
}

/* Handles one connection's poll results; closes it when both directions are done. */
static void service(struct conn *c, const short revents[2], const short asked[2]) {
  for (int side = 0; side < 2; side++) {
    if ((asked[side] & POLLIN) && (revents[side] & (POLLIN | POLLHUP | POLLERR))) {
      if (pump_in(&c->dir[side], c->fd[side]) < 0) {
        conn_close(c);
        return;
      }
    }
  }
  for (int side = 0; side < 2; side++) {
    struct direction *d = &c->dir[1 - side]; /* the bytes that go to fd[side] */
    if (d->len > 0 && (asked[side] & POLLOUT) && (revents[side] & (POLLOUT | POLLERR))) {
      if (pump_out(d, c->fd[side]) < 0) {
        conn_close(c);
        return;
      }
    }
  }
  for (int side = 0; side < 2; side++) {
    struct direction *d = &c->dir[side];
    if (d->eof && d->len == 0 && !d->shut) {
      shutdown(c->fd[1 - side], SHUT_WR);
      d->shut = true;
    }
  }
  if (c->dir[0].shut && c->dir[1].shut)
    conn_close(c);
}

static void write_ready(int fd, unsigned short port, bool show_port) {
  char line[32];
  int n = show_port ? snprintf(line, sizeof line, "ready %u\n", port)
                    : snprintf(line, sizeof line, "ready\n");
  ssize_t w;
  do
    w = write(fd, line, (size_t)n);
  while (w < 0 && errno == EINTR);
}

/* Ends this process the way the command ended: same exit code, or the same fatal signal. */
static int finish_like(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  int sig = WTERMSIG(status);
  signal(sig, SIG_DFL);
  prctl(PR_SET_DUMPABLE, 0);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigprocmask(SIG_UNBLOCK, &one, NULL);
  raise(sig);
  return 128 + sig;
}

int main(int argc, char **argv) {
  int ai = 1;
  long ready_fd = -1;
  if (ai < argc && strcmp(argv[ai], "--ready-fd") == 0) {
    if (parse_int(argv[ai + 1], 1 << 20, &ready_fd) < 0)
      return fail("usage", EINVAL);
    ai += 2;
  }
  long port_l;
  if (argc - ai < 2 || parse_int(argv[ai], 65535, &port_l) < 0) {
    dprintf(2, "usage: confined-forwarder [--ready-fd N] <port> <unix-socket-path> "
               "[--exec -- command [args...]]\n");
    return REFUSAL;
  }
  const char *path = argv[ai + 1];
  char **command = NULL;
  if (argc - ai > 2) {
    if (argc - ai < 5 || strcmp(argv[ai + 2], "--exec") != 0 || strcmp(argv[ai + 3], "--") != 0)
      return fail("usage", EINVAL);
    command = &argv[ai + 4];
  }
  struct sockaddr_un proxy = {.sun_family = AF_UNIX};
  if (strlen(path) == 0 || strlen(path) >= sizeof proxy.sun_path)
    return fail("socket path", ENAMETOOLONG);
  memcpy(proxy.sun_path, path, strlen(path));
  if (ready_fd < 0 && !command)
    ready_fd = 1;

  /* Die with the parent; if it already died before prctl took effect, go now. */
  pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
    return fail("prctl", errno);
  if (getppid() != parent)
    return REFUSAL;

  sigset_t mask, old;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  if (sigprocmask(SIG_BLOCK, &mask, &old) < 0)
    return fail("sigprocmask", errno);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0)
    return fail("signalfd", errno);

  int lfds[MAX_LISTEN];
  int nl = 0;
  int fd4 = listen_on(AF_INET, (unsigned short)port_l);
  if (fd4 < 0)
    return fail("listen 127.0.0.1", -fd4);
  lfds[nl++] = fd4;
  unsigned short port = bound_port(fd4);
  /* IPv6 loopback is optional: a namespace (or host) without IPv6 has none to listen on. With
   * port 0 the kernel chose a port free on 127.0.0.1 only: if [::1] has it taken, the bridge
   * stays IPv4-only rather than failing. */
  int fd6 = listen_on(AF_INET6, port);
  if (fd6 >= 0)
    lfds[nl++] = fd6;
  else if (fd6 != -EAFNOSUPPORT && fd6 != -EADDRNOTAVAIL && fd6 != -EPROTONOSUPPORT &&
           !(fd6 == -EADDRINUSE && port_l == 0))
    return fail("listen [::1]", -fd6);

  if (ready_fd >= 0) {
    write_ready((int)ready_fd, port, port_l == 0);
    close((int)ready_fd);
  }

  pid_t child = -1;
  if (command) {
    child = fork();
    if (child < 0)
      return fail("fork", errno);
    if (child == 0) {
      /* Everything this process opened is O_CLOEXEC: the command gets only stdio. */
      sigprocmask(SIG_SETMASK, &old, NULL);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      execvp(command[0], command);
      int err = errno;
      dprintf(2, "confined-forwarder: exec %s: %s\n", command[0], strerror(err));
      _exit(err == ENOENT ? 127 : 126);
    }
  }

  /* Only descriptors in use go into the poll set: poll(2) refuses (EINVAL) an nfds above
   * RLIMIT_NOFILE, and a command's maxDescriptors limit applies to this process too. */
  struct pollfd pfds[1 + MAX_LISTEN + 2 * MAX_CONNS];
  short asked[MAX_CONNS][2];
  int at[MAX_CONNS][2];
  for (;;) {
    int n = 0;
    pfds[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
    int first_listener = n;
    int listening = accept_paused ? 0 : nl;
    for (int i = 0; i < listening; i++)
      pfds[n++] = (struct pollfd){.fd = lfds[i], .events = POLLIN};
    for (int i = 0; i < MAX_CONNS; i++) {
      for (int side = 0; side < 2; side++) {
        asked[i][side] = conns[i].used ? wanted(&conns[i], side) : 0;
        at[i][side] = -1;
        /* An fd with nothing asked is left out: a hung-up peer would otherwise report POLLHUP
         * on every round while the other direction still drains. */
        if (asked[i][side]) {
          at[i][side] = n;
          pfds[n++] = (struct pollfd){.fd = conns[i].fd[side], .events = asked[i][side]};
        }
      }
    }
    /* Paused listeners are retried every 100 ms even if no connection closes. */
    int rc = poll(pfds, (nfds_t)n, accept_paused ? 100 : -1);
    if (rc < 0) {
      if (errno == EINTR)
        continue;
      return fail("poll", errno);
    }
    if (rc == 0) {
      accept_paused = false;
      continue;
    }
    if (pfds[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD && child > 0) {
          int status;
          pid_t w;
          do
            w = waitpid(child, &status, WNOHANG);
          while (w < 0 && errno == EINTR);
          if (w == child)
            return finish_like(status);
        } else if (sig != SIGCHLD) {
          if (child > 0)
            kill(child, sig);
          else
            return 128 + sig;
        }
      }
    }
    for (int i = 0; i < listening; i++) {
      if (pfds[first_listener + i].revents & POLLIN)
        accept_one(lfds[i], &proxy);
    }
    for (int i = 0; i < MAX_CONNS; i++) {
      if (!conns[i].used || (at[i][0] < 0 && at[i][1] < 0))
        continue;
      short rev[2] = {at[i][0] < 0 ? 0 : pfds[at[i][0]].revents,
                      at[i][1] < 0 ? 0 : pfds[at[i][1]].revents};
      service(&conns[i], rev, asked[i]);
    }
  }
}
