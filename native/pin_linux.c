/* Pinning (see pin.h): SHA-256 of files through node's OpenSSL behind a stat-keyed
 * cache, and symlink-recording path resolution. Linux only. */
#include "pin.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 40

/* ---------------------------------------------------------------- hash cache ---- */

/* Why a (device, inode, size, mtime ns, ctime ns) key is sound for a pin.
 * The kernel sets ctime to the current time on every change of a file's bytes or
 * metadata (write, truncate, mmap write fault, chmod, chown, link count, utimes); no
 * system call lets an unprivileged process choose ctime, and only root can set the
 * clock. Replacing a file (rename over it, delete and recreate) gives another inode, or
 * a reused inode number with a new ctime. So, for an entry whose key was read from the
 * descriptor that was hashed, any later change shows up as a different key, provided:
 *  1. the change happens after the key was taken and gets a later ctime: we only store
 *     an entry when ctime and mtime are at least CACHE_SETTLE_NS older than the clock
 *     read before hashing, so a change made during or after hashing cannot receive the
 *     same (coarse, possibly second-granular) timestamp ("racily clean" entries are
 *     never stored, as git does);
 *  2. the key was stable across the hash (checked: fstat before and after);
 *  3. the file cannot be written by anyone but root: writes through a shared writable
 *     mapping update the times only at the first fault after writeback, so a writer
 *     holding a dirty mapping could change bytes without a new ctime. We only cache
 *     files owned by root and not group- or other-writable (ACL grants show in the
 *     group bits), which an attacker without root cannot open for writing at all.
 * Every other file is re-hashed on every call, and CONFINED_RUNTIME_REHASH=1 (or the
 * rehash argument) re-hashes everything. What the cache does not cover: root changing
 * bytes and then the clock, or a kernel/filesystem that does not maintain ctime. */
#define CACHE_SETTLE_NS 2000000000LL

struct cache_entry {
  char *path;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtim, ctim;
  uint8_t sha256[32];
};

struct hash_cache {
  struct cache_entry *e;
  size_t n, cap;
};

struct hash_cache *hash_cache_new(void) {
  return calloc(1, sizeof(struct hash_cache));
}

void hash_cache_free(struct hash_cache *cache) {
  if (!cache)
    return;
  for (size_t i = 0; i < cache->n; i++)
    free(cache->e[i].path);
  free(cache->e);
  free(cache);
}

static bool same_key(const struct cache_entry *e, const struct stat *st) {
  return e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
         e->mtim.tv_sec == st->st_mtim.tv_sec && e->mtim.tv_nsec == st->st_mtim.tv_nsec &&
         e->ctim.tv_sec == st->st_ctim.tv_sec && e->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

static struct cache_entry *cache_find(struct hash_cache *c, const char *path) {
  for (size_t i = 0; c && i < c->n; i++)
    if (strcmp(c->e[i].path, path) == 0)
      return &c->e[i];
  return NULL;
}

static int64_t ts_ns(struct timespec t) {
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static bool cacheable(const struct stat *st, int64_t now_ns) {
  return st->st_uid == 0 && (st->st_mode & 022) == 0 && S_ISREG(st->st_mode) &&
         ts_ns(st->st_ctim) <= now_ns - CACHE_SETTLE_NS &&
         ts_ns(st->st_mtim) <= now_ns - CACHE_SETTLE_NS;
}

static void cache_store(struct hash_cache *c, const char *path, const struct stat *st,
                        const uint8_t sha[32], bool keep) {
  struct cache_entry *e = cache_find(c, path);
  if (!keep) {
    if (e) /* a stale entry must not survive a change it could match again */
      e->dev = 0, e->ino = 0, e->size = -1;
    return;
  }
  if (!e) {
    if (c->n == c->cap) {
      size_t cap = c->cap ? c->cap * 2 : 32;
      struct cache_entry *ne = realloc(c->e, cap * sizeof *ne);
      if (!ne)
        return; /* the cache is an optimisation: failing to grow it is not an error */
      c->e = ne, c->cap = cap;
    }
    char *p = strdup(path);
    if (!p)
      return;
    e = &c->e[c->n++];
    e->path = p;
  }
  e->dev = st->st_dev, e->ino = st->st_ino, e->size = st->st_size;
  e->mtim = st->st_mtim, e->ctim = st->st_ctim;
  memcpy(e->sha256, sha, 32);
}

/* ----------------------------------------------------------------- utilities ---- */

int closure_fail(struct closure_result *out, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->error, sizeof out->error, fmt, ap);
  va_end(ap);
  return rc < 0 ? rc : -EINVAL;
}

static int add_alias(struct closure_result *out, const char *link, const char *target) {
  for (size_t i = 0; i < out->n_aliases; i++)
    if (strcmp(out->aliases[i].link, link) == 0 && strcmp(out->aliases[i].target, target) == 0)
      return 0;
  struct closure_alias *na = realloc(out->aliases, (out->n_aliases + 1) * sizeof *na);
  if (!na)
    return -ENOMEM;
  out->aliases = na;
  char *l = strdup(link), *t = strdup(target);
  if (!l || !t) {
    free(l);
    free(t);
    return -ENOMEM;
  }
  out->aliases[out->n_aliases++] = (struct closure_alias){l, t};
  return 0;
}

/* Resolves an absolute path component by component, as the kernel does, recording
 * every symlink met (in any component) as an alias. `real` receives the real path. */
int pin_walk(struct closure_result *out, const char *path, char real[PATH_MAX]) {
  char rest[2 * PATH_MAX], tmp[2 * PATH_MAX], cur[PATH_MAX] = "";
  size_t curlen = 0;
  int links = 0;
  if (path[0] != '/')
    return closure_fail(out, -EINVAL, "%s: not an absolute path", path);
  if (strlen(path) >= sizeof rest)
    return closure_fail(out, -ENAMETOOLONG, "%s: path too long", path);
  strcpy(rest, path);
  const char *p = rest;
  while (*p) {
    while (*p == '/')
      p++;
    if (!*p)
      break;
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 1 && p[0] == '.') {
      p += n;
      continue;
    }
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      while (curlen > 0 && cur[curlen - 1] != '/')
        curlen--;
      if (curlen > 0)
        curlen--;
      cur[curlen] = '\0';
      p += n;
      continue;
    }
    if (curlen + 1 + n >= sizeof cur)
      return closure_fail(out, -ENAMETOOLONG, "%s: path too long", path);
    char cand[PATH_MAX];
    memcpy(cand, cur, curlen);
    cand[curlen] = '/';
    memcpy(cand + curlen + 1, p, n);
    cand[curlen + 1 + n] = '\0';
    struct stat st;
    if (lstat(cand, &st) < 0)
      return closure_fail(out, -errno, "%s: %s", cand, strerror(errno));
    if (!S_ISLNK(st.st_mode)) {
      strcpy(cur, cand);
      curlen += 1 + n;
      p += n;
      continue;
    }
    if (++links > MAX_LINKS)
      return closure_fail(out, -ELOOP, "%s: too many symbolic links", path);
    char target[PATH_MAX];
    ssize_t len = readlink(cand, target, sizeof target - 1);
    if (len < 0)
      return closure_fail(out, -errno, "%s: %s", cand, strerror(errno));
    target[len] = '\0';
    int rc = add_alias(out, cand, target);
    if (rc < 0)
      return closure_fail(out, rc, "out of memory");
    int w = snprintf(tmp, sizeof tmp, "%s/%s", target, p + n);
    if (w < 0 || (size_t)w >= sizeof tmp)
      return closure_fail(out, -ENAMETOOLONG, "%s: path too long", path);
    strcpy(rest, tmp);
    p = rest;
    if (target[0] == '/')
      curlen = 0, cur[0] = '\0';
  }
  if (curlen == 0)
    strcpy(cur, "/");
  strcpy(real, cur);
  return 0;
}

static int hash_fd(struct closure_result *out, int fd, const char *path, const struct stat *st,
                   uint8_t sha[32]) {
  static const size_t chunk = 1 << 20;
  uint8_t *buf = malloc(chunk);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int rc = 0;
  if (!buf || !ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
    rc = closure_fail(out, -ENOMEM, "%s: cannot start SHA-256", path);
    goto done;
  }
  uint64_t off = 0;
  for (;;) {
    ssize_t got = pread(fd, buf, chunk, (off_t)off);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      rc = closure_fail(out, -errno, "%s: %s", path, strerror(errno));
      goto done;
    }
    if (got == 0)
      break;
    if (EVP_DigestUpdate(ctx, buf, (size_t)got) != 1) {
      rc = closure_fail(out, -EIO, "%s: SHA-256 failed", path);
      goto done;
    }
    off += (uint64_t)got;
  }
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx, sha, &len) != 1 || len != 32) {
    rc = closure_fail(out, -EIO, "%s: SHA-256 failed", path);
    goto done;
  }
  struct stat after;
  if (fstat(fd, &after) < 0 || off != (uint64_t)st->st_size || after.st_size != st->st_size ||
      ts_ns(after.st_mtim) != ts_ns(st->st_mtim) || ts_ns(after.st_ctim) != ts_ns(st->st_ctim))
    rc = closure_fail(out, -EAGAIN, "%s: changed while it was hashed", path);
done:
  EVP_MD_CTX_free(ctx);
  free(buf);
  return rc;
}

/* Adds (or merges) a file of the result and hashes it from `fd` (whose fstat is `st`). */
int pin_add_file(struct closure_result *out, struct hash_cache *cache, bool rehash,
                 const char *real, int fd, const struct stat *st, enum closure_role role,
                 size_t of) {
  for (size_t i = 0; i < out->n_files; i++) {
    if (strcmp(out->files[i].path, real) == 0) {
      if (role < out->files[i].role)
        out->files[i].role = role;
      return 0;
    }
  }
  if (!S_ISREG(st->st_mode))
    return closure_fail(out, -EINVAL, "%s: not a regular file", real);
  struct closure_file f = {.size = (uint64_t)st->st_size, .role = role, .of = of};
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct cache_entry *e = rehash ? NULL : cache_find(cache, real);
  if (e && same_key(e, st)) {
    memcpy(f.sha256, e->sha256, 32);
    f.cached = true;
  } else {
    int rc = hash_fd(out, fd, real, st, f.sha256);
    if (rc < 0)
      return rc;
    if (cache)
      cache_store(cache, real, st, f.sha256, cacheable(st, ts_ns(now)));
  }
  f.path = strdup(real);
  struct closure_file *nf = realloc(out->files, (out->n_files + 1) * sizeof *nf);
  if (!f.path || !nf) {
    free(f.path);
    if (nf)
      out->files = nf;
    return closure_fail(out, -ENOMEM, "out of memory");
  }
  out->files = nf;
  out->files[out->n_files++] = f;
  return 0;
}

void closure_result_free(struct closure_result *out) {
  for (size_t i = 0; i < out->n_files; i++)
    free(out->files[i].path);
  for (size_t i = 0; i < out->n_aliases; i++) {
    free(out->aliases[i].link);
    free(out->aliases[i].target);
  }
  free(out->files);
  free(out->aliases);
  out->files = NULL, out->aliases = NULL;
  out->n_files = out->n_aliases = 0;
}

int closure_hash_files(const char *const *paths, size_t n, struct hash_cache *cache, bool rehash,
                       struct closure_result *out) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < n; i++) {
    char real[PATH_MAX];
    int rc = pin_walk(out, paths[i], real);
    if (rc < 0)
      return rc;
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
      return closure_fail(out, -errno, "%s: %s", real, strerror(errno));
    struct stat st;
    rc = fstat(fd, &st) < 0 ? closure_fail(out, -errno, "%s: %s", real, strerror(errno))
                            : pin_add_file(out, cache, rehash, real, fd, &st, ROLE_LIBRARY, i);
    close(fd);
    if (rc < 0)
      return rc;
  }
  return 0;
}
