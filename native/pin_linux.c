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

static void memo_file(struct closure_memo *memo, const struct stat *st, const uint8_t sha[32]);

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
int pin_walk(struct closure_result *out, struct closure_memo *memo, const char *path,
             char real[PATH_MAX]) {
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
      memo_lstat(memo, cand, &st, NULL);
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
    memo_lstat(memo, cand, &st, target);
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
                 struct closure_memo *memo, const char *real, int fd, const struct stat *st,
                 enum closure_role role, size_t of) {
  for (size_t i = 0; i < out->n_files; i++) {
    if (strcmp(out->files[i].path, real) == 0) {
      if (role < out->files[i].role)
        out->files[i].role = role;
      memo_file(memo, st, out->files[i].sha256);
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
  memo_file(memo, st, f.sha256);
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
    int rc = pin_walk(out, NULL, paths[i], real);
    if (rc < 0)
      return rc;
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
      return closure_fail(out, -errno, "%s: %s", real, strerror(errno));
    struct stat st;
    rc = fstat(fd, &st) < 0
             ? closure_fail(out, -errno, "%s: %s", real, strerror(errno))
             : pin_add_file(out, cache, rehash, NULL, real, fd, &st, ROLE_LIBRARY, i);
    close(fd);
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* ------------------------------------------------------------------ the memo ---- */

/* Why closure_memo_holds may stand for a new closure_resolve.
 * Besides its arguments (executables, roles, loader configurations, cache path: the
 * caller compares those, lib/runtime.js), closure_resolve's result is a function of what
 * the file system answers to the calls it makes: stat of /etc/ld.so.preload; open, fstat
 * and read of the ld.so.cache; stat of the legacy hwcap subdirectories of each directory
 * searched; for each candidate path ld.so would try, in ld.so's order: open (ENOENT,
 * ENOTDIR, EACCES: skipped), fstat, the ELF parse of its bytes, lstat (and readlink) of
 * every component of the path (pin_walk) and stat of the real path; and the SHA-256 of
 * each file kept. Each of these is recorded with its answer and re-checked by repeating
 * the equivalent call on the same path:
 *  - the kernel resolves the whole path again on every call, from the root, through the
 *    current mounts, directories and symlinks, so no parent is trusted: a retargeted
 *    symlink, a renamed, created or mounted-over directory changes the answer (errno,
 *    device, inode). That is why a lookup that found nothing (a candidate in an earlier
 *    search directory or glibc-hwcaps subdirectory, /etc/ld.so.preload, a legacy hwcap
 *    directory, a missing ld.so.cache) is protected by checking that stat of the same
 *    path still fails with the same errno: a file appearing there makes it succeed. ld.so
 *    decides a lookup by opening a full path, never by listing a directory, so no
 *    directory's contents matter beyond those paths. (open and stat walk the path alike:
 *    same ENOENT/ENOTDIR; an open that failed with EACCES where stat now succeeds counts
 *    as a change, one where stat fails with EACCES fails open too.)
 *  - an lstat'd component: the same file type; for a symlink the same readlink answer
 *    (every alias of the result is re-read), otherwise the same device and inode.
 *  - a stat that succeeded: the same device, inode, mode, size, mtime and ctime, so an open
 *    reaches the same inode with the same metadata and every decision taken from metadata
 *    (regular file, the same object as one already loaded, size, preload file empty) is
 *    the same.
 *  - a file whose bytes were used (each candidate parsed, so every file of the closure,
 *    and the ld.so.cache): its stat key vouches for its bytes under the hash cache's
 *    argument above, with the same conditions (root-owned, not group- or other-writable,
 *    ctime and mtime CACHE_SETTLE_NS older than the clock read before the recording
 *    began, so a change during the recording cannot keep the key). Otherwise the re-check
 *    re-hashes it and compares with the SHA-256 recorded (as a full resolution re-hashes
 *    it, the cache refusing such files); a parsed candidate that was not kept (another ELF
 *    class or machine) has no hash: then the memo never holds.
 * A path that answered twice differently during one recording, a file hashed under a key
 * other than the one observed, or a failed allocation leaves a memo that never holds. So
 * when every observation holds, closure_resolve run now would make the same calls, get
 * the same answers and return the same files, hashes and aliases. The gaps are the hash
 * cache's (root changing bytes and then the clock; a filesystem without ctime), and a
 * change racing the re-check, which races a full resolution alike. The caller does not
 * consult the memo when a re-hash is asked for (CONFINED_RUNTIME_REHASH=1). */

enum obs_verify {
  VERIFY_META,         /* the stat answer is all that mattered */
  VERIFY_KEY,          /* bytes mattered; the stat key vouches for them */
  VERIFY_HASH,         /* bytes mattered; re-hash and compare sha256 */
  VERIFY_UNVERIFIABLE, /* bytes mattered and cannot be re-checked: never holds */
};

struct observation {
  char *path;
  char *target; /* lstat of a symlink: readlink's answer */
  bool follow;  /* stat (true) or lstat (false) */
  bool content; /* the bytes were used */
  bool has_sha; /* sha256 holds the bytes' hash (memo_stat_bytes) */
  enum obs_verify verify;
  int err; /* errno of the call, 0 when it succeeded */
  struct stat st;
  uint8_t sha256[32];
};

/* A file hashed into the result, under the stat key it was hashed with. */
struct memo_hashed {
  struct stat st;
  uint8_t sha256[32];
};

struct closure_memo {
  struct observation *obs;
  size_t n, cap;
  size_t *slots; /* open addressing on (path, follow): index + 1, 0 when free */
  size_t n_slots;
  struct memo_hashed *files;
  size_t n_files, cap_files;
  int64_t now_ns; /* clock read before the first observation */
  bool recording, broken, holds;
};

struct closure_memo *closure_memo_new(void) {
  return calloc(1, sizeof(struct closure_memo));
}

void closure_memo_clear(struct closure_memo *memo) {
  if (!memo)
    return;
  for (size_t i = 0; i < memo->n; i++) {
    free(memo->obs[i].path);
    free(memo->obs[i].target);
  }
  memo->n = 0, memo->n_files = 0;
  if (memo->slots)
    memset(memo->slots, 0, memo->n_slots * sizeof *memo->slots);
  memo->recording = memo->broken = memo->holds = false;
}

void closure_memo_free(struct closure_memo *memo) {
  if (!memo)
    return;
  closure_memo_clear(memo);
  free(memo->obs);
  free(memo->slots);
  free(memo->files);
  free(memo);
}

void memo_begin(struct closure_memo *memo) {
  if (!memo)
    return;
  closure_memo_clear(memo);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  memo->now_ns = ts_ns(now);
  memo->recording = true;
}

static size_t slot_hash(const char *path, bool follow) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)path; *p; p++)
    h = (h ^ *p) * 1099511628211ULL;
  return (size_t)(h ^ (follow ? 0x9e3779b97f4a7c15ULL : 0));
}

/* Index + 1 of the observation of (path, follow), or 0; *slot gets where it goes. */
static size_t slot_find(const struct closure_memo *m, const char *path, bool follow, size_t *slot) {
  size_t i = slot_hash(path, follow) & (m->n_slots - 1);
  while (m->slots[i]) {
    const struct observation *o = &m->obs[m->slots[i] - 1];
    if (o->follow == follow && strcmp(o->path, path) == 0)
      break;
    i = (i + 1) & (m->n_slots - 1);
  }
  *slot = i;
  return m->slots[i];
}

static bool slots_grow(struct closure_memo *m) {
  size_t n = m->n_slots ? m->n_slots * 2 : 256;
  size_t *s = calloc(n, sizeof *s);
  if (!s)
    return false;
  free(m->slots);
  m->slots = s, m->n_slots = n;
  for (size_t k = 0; k < m->n; k++) {
    size_t slot;
    slot_find(m, m->obs[k].path, m->obs[k].follow, &slot);
    m->slots[slot] = k + 1;
  }
  return true;
}

static bool same_stat(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
         a->st_size == b->st_size && ts_ns(a->st_mtim) == ts_ns(b->st_mtim) &&
         ts_ns(a->st_ctim) == ts_ns(b->st_ctim);
}

static bool same_answer(const struct observation *o, int err, const struct stat *st,
                        const char *target) {
  if (o->err != err)
    return false;
  if (err)
    return true;
  if (o->follow)
    return same_stat(&o->st, st);
  if ((o->st.st_mode & S_IFMT) != (st->st_mode & S_IFMT))
    return false;
  if (S_ISLNK(st->st_mode))
    return o->target && target && strcmp(o->target, target) == 0;
  return o->st.st_dev == st->st_dev && o->st.st_ino == st->st_ino;
}

/* Records one answer; the same question answered again must get the same answer. */
static struct observation *memo_add(struct closure_memo *m, const char *path, bool follow,
                                    const struct stat *st, int err, const char *target) {
  if (!m || !m->recording || m->broken)
    return NULL;
  if ((m->n + 1) * 2 > m->n_slots && !slots_grow(m)) {
    m->broken = true;
    return NULL;
  }
  size_t slot, at = slot_find(m, path, follow, &slot);
  if (at) {
    struct observation *o = &m->obs[at - 1];
    if (!same_answer(o, err, st, target)) {
      m->broken = true;
      return NULL;
    }
    return o;
  }
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    struct observation *no = realloc(m->obs, cap * sizeof *no);
    if (!no) {
      m->broken = true;
      return NULL;
    }
    m->obs = no, m->cap = cap;
  }
  struct observation *o = &m->obs[m->n];
  memset(o, 0, sizeof *o);
  o->follow = follow, o->err = err;
  if (st)
    o->st = *st;
  o->path = strdup(path);
  o->target = target ? strdup(target) : NULL;
  if (!o->path || (target && !o->target)) {
    free(o->path);
    free(o->target);
    m->broken = true;
    return NULL;
  }
  m->slots[slot] = ++m->n;
  return o;
}

void memo_stat(struct closure_memo *memo, const char *path, const struct stat *st, int err,
               bool content) {
  struct observation *o = memo_add(memo, path, true, st, st ? 0 : err, NULL);
  if (o && content)
    o->content = true;
}

void memo_stat_bytes(struct closure_memo *memo, const char *path, const struct stat *st,
                     const uint8_t *buf, size_t len) {
  struct observation *o = memo_add(memo, path, true, st, 0, NULL);
  if (!o)
    return;
  o->content = true;
  if (cacheable(st, memo->now_ns))
    return;
  unsigned int n = 0;
  if (EVP_Digest(buf, len, o->sha256, &n, EVP_sha256(), NULL) != 1 || n != 32)
    memo->broken = true;
  else
    o->has_sha = true;
}

void memo_lstat(struct closure_memo *memo, const char *path, const struct stat *st,
                const char *target) {
  memo_add(memo, path, false, st, 0, target);
}

static bool same_file_key(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
         ts_ns(a->st_mtim) == ts_ns(b->st_mtim) && ts_ns(a->st_ctim) == ts_ns(b->st_ctim);
}

static struct memo_hashed *hashed_find(struct closure_memo *m, const struct stat *st) {
  for (size_t i = 0; i < m->n_files; i++)
    if (m->files[i].st.st_dev == st->st_dev && m->files[i].st.st_ino == st->st_ino)
      return &m->files[i];
  return NULL;
}

/* A file of the result with its hash; the same inode must always come with the same key
 * and hash (a file merged into an entry hashed under another key breaks the memo). */
static void memo_file(struct closure_memo *memo, const struct stat *st, const uint8_t sha[32]) {
  if (!memo || !memo->recording || memo->broken)
    return;
  struct memo_hashed *h = hashed_find(memo, st);
  if (h) {
    if (!same_file_key(&h->st, st) || memcmp(h->sha256, sha, 32) != 0)
      memo->broken = true;
    return;
  }
  if (memo->n_files == memo->cap_files) {
    size_t cap = memo->cap_files ? memo->cap_files * 2 : 32;
    struct memo_hashed *nf = realloc(memo->files, cap * sizeof *nf);
    if (!nf) {
      memo->broken = true;
      return;
    }
    memo->files = nf, memo->cap_files = cap;
  }
  h = &memo->files[memo->n_files++];
  h->st = *st;
  memcpy(h->sha256, sha, 32);
}

void memo_end(struct closure_memo *memo, bool ok) {
  if (!memo || !memo->recording)
    return;
  memo->recording = false;
  if (!ok || memo->broken) {
    closure_memo_clear(memo);
    return;
  }
  for (size_t i = 0; i < memo->n; i++) {
    struct observation *o = &memo->obs[i];
    if (!o->content || o->err) {
      o->verify = VERIFY_META;
      continue;
    }
    struct memo_hashed *h = hashed_find(memo, &o->st);
    if (h && !same_file_key(&h->st, &o->st)) {
      closure_memo_clear(memo); /* parsed under one key, hashed under another */
      return;
    }
    if (cacheable(&o->st, memo->now_ns)) {
      o->verify = VERIFY_KEY;
    } else if (h) {
      memcpy(o->sha256, h->sha256, 32);
      o->verify = VERIFY_HASH;
    } else {
      o->verify = o->has_sha ? VERIFY_HASH : VERIFY_UNVERIFIABLE;
    }
  }
  memo->holds = true;
}

__attribute__((format(printf, 3, 4))) static int changed(char *why, size_t len, const char *fmt,
                                                         ...) {
  if (why && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
  }
  return 0;
}

/* Re-hashes a file whose key cannot vouch for its bytes; true when it has the recorded
 * key and hash. It is then trusted by key from now on if it has become cacheable. */
static bool rehash_holds(struct observation *o, int64_t now_ns) {
  int fd = open(o->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat st;
  uint8_t sha[32];
  struct closure_result scratch;
  memset(&scratch, 0, sizeof scratch);
  bool ok = fstat(fd, &st) == 0 && same_stat(&o->st, &st) &&
            hash_fd(&scratch, fd, o->path, &st, sha) == 0 && memcmp(sha, o->sha256, 32) == 0;
  close(fd);
  if (ok && cacheable(&st, now_ns))
    o->verify = VERIFY_KEY;
  return ok;
}

int closure_memo_holds(struct closure_memo *memo, char *why, size_t why_len) {
  if (!memo || !memo->holds)
    return changed(why, why_len, "nothing recorded");
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char target[PATH_MAX];
  for (size_t i = 0; i < memo->n; i++) {
    struct observation *o = &memo->obs[i];
    struct stat st;
    int err = (o->follow ? stat(o->path, &st) : lstat(o->path, &st)) < 0 ? errno : 0;
    const char *t = NULL;
    if (!err && !o->follow && S_ISLNK(st.st_mode)) {
      ssize_t len = readlink(o->path, target, sizeof target - 1);
      if (len < 0)
        return changed(why, why_len, "%s: %s", o->path, strerror(errno));
      target[len] = '\0';
      t = target;
    }
    if (!same_answer(o, err, &st, t))
      return changed(why, why_len, "%s: %s %s", o->path, o->follow ? "stat" : "lstat",
                     err ? strerror(err) : "changed");
    switch (o->verify) {
    case VERIFY_META:
    case VERIFY_KEY:
      break;
    case VERIFY_HASH:
      if (!rehash_holds(o, ts_ns(now)))
        return changed(why, why_len, "%s: contents changed", o->path);
      break;
    case VERIFY_UNVERIFIABLE:
      return changed(why, why_len, "%s: contents cannot be re-checked", o->path);
    }
  }
  return 1;
}
