/* confined-forwarder: the forwarder bridge of a command's network allowlist.
 *
 *   confined-forwarder <port> <socket> -- <command> [args...]
 *
 * Runs inside the sandbox's network namespace (only loopback) as the stage's program. It listens
 * on 127.0.0.1:<port>, then forks and execs the command with its own environment (the runner sets
 * HTTP_PROXY and friends to http://127.0.0.1:<port>). Every connection accepted on the listener
 * is relayed, byte for byte, to the host's egress proxy through the Unix socket <socket> bound
 * into the sandbox: the proxy, not this bridge, decides what may be reached.
 *
 * It exits with the command's exact status: the same exit code, or the same signal (raised on
 * itself with the default disposition), so the stage reports the command's own wait status.
 * Relays are children of this process; when it exits, the stage (pid 1) exits and the kernel ends
 * every process of the pid namespace, relays included. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define FAILURE 125

extern char **environ;

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

/* Relays between the accepted client and the proxy until both directions ended. */
static void relay(int client, const char *socket_path) {
  int up = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (up < 0)
    _exit(1);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (strlen(socket_path) >= sizeof addr.sun_path)
    _exit(1);
  memcpy(addr.sun_path, socket_path, strlen(socket_path) + 1);
  if (connect(up, (struct sockaddr *)&addr, sizeof addr) != 0)
    _exit(1);
  int fds[2] = {client, up};
  int open_in[2] = {1, 1}; /* reading side still open: client->up, up->client */
  static char buf[65536];
  while (open_in[0] || open_in[1]) {
    struct pollfd p[2];
    for (int i = 0; i < 2; i++) {
      p[i].fd = open_in[i] ? fds[i] : -1;
      p[i].events = POLLIN;
      p[i].revents = 0;
    }
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      _exit(1);
    }
    for (int i = 0; i < 2; i++) {
      if (!open_in[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t n = read(fds[i], buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        open_in[i] = 0;
        shutdown(fds[1 - i], SHUT_WR);
        continue;
      }
      if (write_all(fds[1 - i], buf, (size_t)n) != 0)
        _exit(0);
    }
  }
  _exit(0);
}

static void exit_like(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), sig);
    _exit(128 + sig); /* not reached for a fatal signal */
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : FAILURE);
}

int main(int argc, char **argv) {
  if (argc < 5 || strcmp(argv[3], "--") != 0)
    return FAILURE;
  char *end = NULL;
  long port = strtol(argv[1], &end, 10);
  if (!end || *end || port < 1 || port > 65535)
    return FAILURE;
  const char *socket_path = argv[2];

  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0)
    return FAILURE;
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 64) != 0)
    return FAILURE;

  pid_t command = fork();
  if (command < 0)
    return FAILURE;
  if (command == 0) {
    execve(argv[4], argv + 4, environ);
    _exit(FAILURE);
  }

  for (;;) {
    int status = 0;
    pid_t r;
    while ((r = waitpid(-1, &status, WNOHANG)) > 0)
      if (r == command)
        exit_like(status);
    struct pollfd p = {listener, POLLIN, 0};
    int n = poll(&p, 1, 50);
    if (n < 0 && errno != EINTR)
      return FAILURE;
    if (n <= 0 || !(p.revents & POLLIN))
      continue;
    int client = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (client < 0)
      continue;
    pid_t child = fork();
    if (child == 0) {
      close(listener);
      relay(client, socket_path);
    }
    close(client);
  }
}
