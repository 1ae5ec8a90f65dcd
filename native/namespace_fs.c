/* Filesystem primitives of the namespace code: see namespace_fs.h. */
#include "namespace_fs.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- system call wrappers (EINTR retried; close keeps errno) --------------------------- */

int ns_openat(int dirfd, const char *name, int flags, mode_t mode) {
  int fd;
  do
    fd = openat(dirfd, name, flags, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

void ns_close(int fd) {
  if (fd >= 0) {
    int saved = errno;
    /* Not retried: on Linux the descriptor is gone even when close reports EINTR. */
    (void)close(fd);
    errno = saved;
  }
}

int ns_mkdirat(int dirfd, const char *name, mode_t mode) {
  int rc;
  do
    rc = mkdirat(dirfd, name, mode);
  while (rc < 0 && errno == EINTR);
  return rc;
}

int ns_lstatat(int dirfd, const char *name, struct stat *st) {
  int rc;
  do
    rc = fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW);
  while (rc < 0 && errno == EINTR);
  return rc;
}

int ns_unlinkat(int dirfd, const char *name, int flags) {
  int rc;
  do
    rc = unlinkat(dirfd, name, flags);
  while (rc < 0 && errno == EINTR);
  return rc;
}

int ns_fsync(int fd) {
  int rc;
  do
    rc = fsync(fd);
  while (rc < 0 && errno == EINTR);
  return rc;
}

const char *ns_type_name(mode_t mode) {
  if (S_ISREG(mode))
    return "a regular file";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISLNK(mode))
    return "a symbolic link";
  if (S_ISFIFO(mode))
    return "a fifo";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  return "of an unknown type";
}

/* lib/ applies the stricter snapshot grammar; this keeps the kernel calls safe. */
bool ns_valid_name(const char *s, size_t len) {
  if (len == 0 || len > NAME_MAX)
    return false;
  if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
    return false;
  return memchr(s, '/', len) == NULL;
}

/* With O_DIRECTORY|O_NOFOLLOW a symbolic link component fails with ENOTDIR (or ELOOP). */
int ns_open_path(const char *path, int last_flags) {
  char comp[NAME_MAX + 1];
  const char *p = path;
  if (path[0] != '/') {
    errno = EINVAL;
    return -1;
  }
  while (*p == '/')
    p++;
  int fd = ns_openat(AT_FDCWD, "/", *p ? NS_SEARCH_FLAGS : last_flags, 0);
  while (fd >= 0 && *p) {
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (!ns_valid_name(p, len)) {
      ns_close(fd);
      errno = len > NAME_MAX ? ENAMETOOLONG : EINVAL;
      return -1;
    }
    memcpy(comp, p, len);
    comp[len] = '\0';
    p += len;
    while (*p == '/')
      p++;
    int next = ns_openat(fd, comp, *p ? NS_SEARCH_FLAGS : last_flags, 0);
    ns_close(fd);
    fd = next;
  }
  return fd;
}

/* ---- directory listing -------------------------------------------------------------- */

/* Linux reads the kernel's records straight into the caller's buffer: no allocation per
 * directory on the verification path. */
#if defined(__linux__)
int ns_list_dir(int fd, uint8_t *buf, size_t size, ns_name_fn fn, void *ctx) {
  for (;;) {
    ssize_t n;
    do
      n = getdents64(fd, buf, size);
    while (n < 0 && errno == EINTR);
    if (n < 0)
      return -1;
    if (n == 0)
      return 0;
    for (ssize_t off = 0; off < n;) {
      struct dirent64 *d = (struct dirent64 *)(void *)(buf + off);
      off += d->d_reclen;
      const char *s = d->d_name;
      if (s[0] == '.' && (s[1] == '\0' || (s[1] == '.' && s[2] == '\0')))
        continue;
      int stop = fn(ctx, s);
      if (stop)
        return stop;
    }
  }
}
#else
int ns_list_dir(int fd, uint8_t *buf, size_t size, ns_name_fn fn, void *ctx) {
  (void)buf;
  (void)size;
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0)
    return -1;
  DIR *dir = fdopendir(copy);
  if (!dir) {
    ns_close(copy);
    return -1;
  }
  int result = 0;
  for (;;) {
    errno = 0;
    struct dirent *d = readdir(dir);
    if (!d) {
      result = errno ? -1 : 0;
      break;
    }
    const char *s = d->d_name;
    if (s[0] == '.' && (s[1] == '\0' || (s[1] == '.' && s[2] == '\0')))
      continue;
    result = fn(ctx, s);
    if (result)
      break;
  }
  int saved = errno;
  closedir(dir);
  errno = saved;
  return result;
}
#endif
