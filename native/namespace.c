/* Executor namespace lifecycle: see namespace.h for the contract of each function.
 *
 * The manifest records every entry this code created (the slot, the top-level
 * directories, every parent directory and every file) with the facts that identify it:
 * device, inode, owner, mode, size, link count and, for files, the sha256 of the bytes
 * written. Verification and removal trust only those records: an entry that is not
 * recorded is a surprise, never something to delete. */
#include "namespace.h"
#include "namespace_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/opensslv.h>

/* Deeper paths are refused (lib/ allows 16 segments; this bounds the recursion). */
#define NS_MAX_DEPTH 64
/* One buffer per manifest, for reading files back and for directory listings. */
#define NS_BUF_SIZE (128 * 1024)
#define NS_NONE UINT32_MAX
/* Entry labels in reasons; small, because verification recurses once per directory level. */
#define NS_LABEL_MAX 384

typedef struct ns_entry {
  char *path;       /* relative to the slot; "." for the slot itself */
  const char *name; /* the last component (the slot's own name for the slot) */
  uint32_t parent;  /* NS_NONE for the slot */
  uint32_t first_child, last_child, next_sibling, nchildren;
  uint32_t seen; /* the verification generation whose listing contained it */
  bool is_dir;
  uint64_t dev, ino, size, nlink;
  uint32_t uid, mode;
  uint8_t sha256[32];
} ns_entry;

struct ns_manifest {
  char *root;      /* absolute path of the executor root */
  char *slot;      /* absolute path of the slot */
  char *slot_name; /* its last component */
  uint64_t root_dev, root_ino;
  ns_entry *entries;
  uint32_t count, cap;
  uint32_t *table; /* open addressing: (parent, name) -> entry index */
  uint32_t table_size;
  uint32_t generation;
  bool removed;
  EVP_MD_CTX *ctx;
  EVP_MD *fetched; /* OpenSSL 3: fetched once, so each digest skips the implicit fetch */
  const EVP_MD *md;
  uint8_t *buf;
};

/* ---- results ------------------------------------------------------------------------ */

static ns_result ok_result(void) {
  ns_result r;
  r.ok = true;
  r.reason[0] = '\0';
  return r;
}

__attribute__((format(printf, 1, 2))) static ns_result fail(const char *fmt, ...) {
  ns_result r;
  va_list ap;
  r.ok = false;
  va_start(ap, fmt);
  vsnprintf(r.reason, sizeof r.reason, fmt, ap);
  va_end(ap);
  return r;
}

/* ---- root checks, counting, slots --------------------------------------------------- */

ns_result ns_check_root(const char *root) {
  if (!root || root[0] != '/')
    return fail("root %s is not an absolute path", root ? root : "(null)");
  char *real = realpath(root, NULL);
  if (!real)
    return fail("root %s cannot be resolved: %s", root, strerror(errno));
  bool canonical = strcmp(real, root) == 0;
  ns_result r =
      canonical ? ok_result() : fail("root %s is not canonical (it resolves to %s)", root, real);
  free(real);
  if (!canonical)
    return r;
  /* O_PATH suffices for fstat, so the owner and mode are reported even when they deny us
   * reading the directory. */
  int fd = ns_open_path(root, NS_SEARCH_FLAGS);
  if (fd < 0) {
    struct stat st;
    if (errno == ENOTDIR && lstat(root, &st) == 0 && !S_ISDIR(st.st_mode))
      return fail("root %s is not a directory (it is %s)", root, ns_type_name(st.st_mode));
    return fail("root %s cannot be opened without following links: %s", root, strerror(errno));
  }
  struct stat st;
  int rc = fstat(fd, &st);
  ns_close(fd);
  if (rc < 0)
    return fail("root %s cannot be examined: %s", root, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return fail("root %s is not a directory (it is %s)", root, ns_type_name(st.st_mode));
  if (st.st_uid != geteuid())
    return fail("root %s is owned by uid %u, not by this user (uid %u)", root, (unsigned)st.st_uid,
                (unsigned)geteuid());
  if (st.st_mode & 077)
    return fail("root %s has mode %04o: group and other must have no access", root,
                (unsigned)(st.st_mode & 07777));
  return ok_result();
}

static int count_one(void *ctx, const char *name) {
  (void)name;
  (*(uint64_t *)ctx)++;
  return 0;
}

ns_result ns_count_entries(const char *root, uint64_t *count) {
  *count = 0;
  int fd = ns_open_path(root, NS_DIR_FLAGS);
  if (fd < 0)
    return fail("root %s cannot be opened: %s", root, strerror(errno));
  uint8_t *buf = malloc(NS_BUF_SIZE);
  if (!buf) {
    ns_close(fd);
    return fail("out of memory");
  }
  int rc = ns_list_dir(fd, buf, NS_BUF_SIZE, count_one, count);
  ns_result r = rc < 0 ? fail("root %s cannot be listed: %s", root, strerror(errno)) : ok_result();
  free(buf);
  ns_close(fd);
  return r;
}

ns_result ns_claim_slot(const char *root, uint32_t max_retained, char *out, size_t out_size,
                        bool *full) {
  *full = false;
  const char *sep = root[0] && root[strlen(root) - 1] == '/' ? "" : "/";
  /* The longest name must fit before anything is created: a claimed slot whose path
   * could not be reported would stay claimed for nothing. */
  if ((size_t)snprintf(out, out_size, "%s%sslot-%u", root, sep, max_retained) >= out_size)
    return fail("root %s is too long", root);
  int fd = ns_open_path(root, NS_DIR_FLAGS);
  if (fd < 0)
    return fail("root %s cannot be opened: %s", root, strerror(errno));
  char name[32];
  for (uint32_t n = 0; n < max_retained; n++) {
    snprintf(name, sizeof name, "slot-%u", n);
    /* Exclusive: two controllers sharing the root can never both get slot n. */
    if (ns_mkdirat(fd, name, 0700) == 0) {
      /* The umask may have taken bits away; the owner needs all three. */
      int slot_fd = ns_openat(fd, name, NS_DIR_FLAGS, 0);
      struct stat st;
      if (slot_fd >= 0 && fstat(slot_fd, &st) == 0 && (st.st_mode & 07777) != 0700)
        (void)fchmod(slot_fd, 0700);
      ns_close(slot_fd);
      ns_close(fd);
      snprintf(out, out_size, "%s%s%s", root, sep, name);
      return ok_result();
    }
    if (errno != EEXIST) {
      ns_result r = fail("cannot create %s in root %s: %s", name, root, strerror(errno));
      ns_close(fd);
      return r;
    }
  }
  ns_close(fd);
  *full = true;
  return fail("every slot is taken");
}

/* ---- manifest ----------------------------------------------------------------------- */

static uint32_t name_hash(uint32_t parent, const char *name) {
  uint32_t h = 2166136261u ^ (parent * 0x9E3779B1u);
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    h = (h ^ *p) * 16777619u;
  return h;
}

static uint32_t lookup(const ns_manifest *m, uint32_t parent, const char *name) {
  if (!m->table_size)
    return NS_NONE;
  uint32_t mask = m->table_size - 1;
  for (uint32_t i = name_hash(parent, name) & mask;; i = (i + 1) & mask) {
    uint32_t e = m->table[i];
    if (e == NS_NONE)
      return NS_NONE;
    if (m->entries[e].parent == parent && strcmp(m->entries[e].name, name) == 0)
      return e;
  }
}

static void table_insert(ns_manifest *m, uint32_t idx) {
  uint32_t mask = m->table_size - 1;
  uint32_t i = name_hash(m->entries[idx].parent, m->entries[idx].name) & mask;
  while (m->table[i] != NS_NONE)
    i = (i + 1) & mask;
  m->table[i] = idx;
}

/* Records an entry from its fstat; returns its index or NS_NONE when memory ran out. */
static uint32_t record(ns_manifest *m, uint32_t parent, const char *name, const struct stat *st,
                       const uint8_t *sha256) {
  if (m->count == m->cap) {
    uint32_t cap = m->cap ? m->cap * 2 : 64;
    ns_entry *grown = realloc(m->entries, (size_t)cap * sizeof *grown);
    if (!grown)
      return NS_NONE;
    m->entries = grown;
    m->cap = cap;
  }
  if ((m->count + 1) * 2 > m->table_size) {
    uint32_t size = m->table_size ? m->table_size * 2 : 128;
    uint32_t *table = malloc((size_t)size * sizeof *table);
    if (!table)
      return NS_NONE;
    free(m->table);
    m->table = table;
    m->table_size = size;
    memset(table, 0xff, (size_t)size * sizeof *table);
    for (uint32_t i = 0; i < m->count; i++)
      table_insert(m, i);
  }
  char *path;
  size_t nlen = strlen(name);
  if (parent == NS_NONE) {
    path = strdup(".");
  } else if (parent == 0) {
    path = strdup(name);
  } else {
    const char *pp = m->entries[parent].path;
    size_t plen = strlen(pp);
    path = malloc(plen + 1 + nlen + 1);
    if (path) {
      memcpy(path, pp, plen);
      path[plen] = '/';
      memcpy(path + plen + 1, name, nlen + 1);
    }
  }
  if (!path)
    return NS_NONE;
  uint32_t idx = m->count++;
  ns_entry *e = &m->entries[idx];
  memset(e, 0, sizeof *e);
  e->path = path;
  e->name = parent == NS_NONE ? m->slot_name : path + strlen(path) - nlen;
  e->parent = parent;
  e->first_child = e->last_child = e->next_sibling = NS_NONE;
  e->is_dir = S_ISDIR(st->st_mode);
  e->dev = (uint64_t)st->st_dev;
  e->ino = (uint64_t)st->st_ino;
  e->uid = (uint32_t)st->st_uid;
  e->mode = (uint32_t)st->st_mode;
  e->size = (uint64_t)st->st_size;
  e->nlink = (uint64_t)st->st_nlink;
  if (sha256)
    memcpy(e->sha256, sha256, sizeof e->sha256);
  if (parent != NS_NONE) {
    ns_entry *p = &m->entries[parent];
    if (p->last_child == NS_NONE)
      p->first_child = idx;
    else
      m->entries[p->last_child].next_sibling = idx;
    p->last_child = idx;
    p->nchildren++;
  }
  table_insert(m, idx);
  return idx;
}

static bool crypto_ready(ns_manifest *m) {
  if (!m->buf && !(m->buf = malloc(NS_BUF_SIZE)))
    return false;
  if (!m->ctx && !(m->ctx = EVP_MD_CTX_new()))
    return false;
  if (!m->md) {
#if defined(OPENSSL_VERSION_MAJOR) && OPENSSL_VERSION_MAJOR >= 3
    m->fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
    m->md = m->fetched;
#endif
    if (!m->md)
      m->md = EVP_sha256();
  }
  return m->md != NULL;
}

static void crypto_release(ns_manifest *m) {
  EVP_MD_CTX_free(m->ctx);
  m->ctx = NULL;
#if defined(OPENSSL_VERSION_MAJOR) && OPENSSL_VERSION_MAJOR >= 3
  EVP_MD_free(m->fetched);
#endif
  m->fetched = NULL;
  m->md = NULL;
  free(m->buf);
  m->buf = NULL;
}

static bool sha256_memory(ns_manifest *m, const uint8_t *data, size_t len, uint8_t out[32]) {
  unsigned int n = 0;
  return EVP_DigestInit_ex(m->ctx, m->md, NULL) == 1 &&
         (len == 0 || EVP_DigestUpdate(m->ctx, data, len) == 1) &&
         EVP_DigestFinal_ex(m->ctx, out, &n) == 1 && n == 32;
}

/* Hashes the file to its end; *total receives the bytes read. -1 with errno on a read
 * error, -2 when the digest failed. */
static int sha256_fd(ns_manifest *m, int fd, uint64_t *total, uint8_t out[32]) {
  unsigned int n = 0;
  *total = 0;
  if (EVP_DigestInit_ex(m->ctx, m->md, NULL) != 1)
    return -2;
  for (;;) {
    ssize_t got = read(fd, m->buf, NS_BUF_SIZE);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return -1;
    if (got == 0)
      break;
    *total += (uint64_t)got;
    if (EVP_DigestUpdate(m->ctx, m->buf, (size_t)got) != 1)
      return -2;
  }
  return EVP_DigestFinal_ex(m->ctx, out, &n) == 1 && n == 32 ? 0 : -2;
}

static void label(const ns_manifest *m, const ns_entry *e, char *buf, size_t size) {
  if (e->parent == NS_NONE)
    snprintf(buf, size, "%s", m->slot_name);
  else
    snprintf(buf, size, "%s/%s", m->slot_name, e->path);
}

void ns_manifest_free(ns_manifest *m) {
  if (!m)
    return;
  for (uint32_t i = 0; i < m->count; i++)
    free(m->entries[i].path);
  free(m->entries);
  free(m->table);
  crypto_release(m);
  free(m->root);
  free(m->slot);
  free(m->slot_name);
  free(m);
}

const char *ns_manifest_slot(const ns_manifest *m) {
  return m->slot;
}

bool ns_manifest_removed(const ns_manifest *m) {
  return m->removed;
}

size_t ns_manifest_count(const ns_manifest *m) {
  return m->count;
}

void ns_manifest_entry(const ns_manifest *m, size_t i, ns_entry_info *info) {
  const ns_entry *e = &m->entries[i];
  info->path = e->path;
  info->is_dir = e->is_dir;
  info->dev = e->dev;
  info->ino = e->ino;
  info->uid = e->uid;
  info->mode = e->mode;
  info->size = e->size;
  info->nlink = e->nlink;
  info->sha256 = e->is_dir ? NULL : e->sha256;
}

/* ---- materialise -------------------------------------------------------------------- */

/* Creates directory `name` (0700) under parent entry `parent`, records it and returns its
 * descriptor in *fd_out. */
static ns_result make_dir(ns_manifest *m, int parent_fd, uint32_t parent, const char *name,
                          uint32_t *idx_out, int *fd_out) {
  char where[PATH_MAX];
  if (parent == 0)
    snprintf(where, sizeof where, "%s", name);
  else
    snprintf(where, sizeof where, "%s/%s", m->entries[parent].path, name);
  if (ns_mkdirat(parent_fd, name, 0700) < 0)
    return fail("cannot create directory %s: %s", where, strerror(errno));
  struct stat st;
  int fd = ns_openat(parent_fd, name, NS_DIR_FLAGS, 0);
  if (fd < 0) {
    int err = errno;
    /* Record what was made anyway, so that removal can take it away. */
    if (ns_lstatat(parent_fd, name, &st) == 0 && S_ISDIR(st.st_mode))
      (void)record(m, parent, name, &st, NULL);
    return fail("cannot open directory %s: %s", where, strerror(err));
  }
  /* The umask may have taken bits away; the owner needs all three. */
  if (fstat(fd, &st) == 0 && (st.st_mode & 07777) != 0700 && fchmod(fd, 0700) == 0)
    (void)fstat(fd, &st);
  if (record(m, parent, name, &st, NULL) == NS_NONE) {
    ns_close(fd);
    return fail("out of memory");
  }
  *idx_out = m->count - 1;
  *fd_out = fd;
  return ok_result();
}

static ns_result write_file(ns_manifest *m, int dir_fd, uint32_t parent, const char *name,
                            const ns_file *f, uint32_t file_mode) {
  int fd = ns_openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, file_mode);
  if (fd < 0)
    return fail("cannot create %s: %s", f->path, strerror(errno));
  size_t done = 0;
  int write_err = 0;
  while (done < f->size) {
    ssize_t n = write(fd, f->data + done, f->size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      write_err = n < 0 ? errno : EIO;
      break;
    }
    done += (size_t)n;
  }
  /* The umask may have taken bits away: the mode is set exactly. */
  struct stat st;
  int stat_err = 0;
  if (fstat(fd, &st) < 0)
    stat_err = errno;
  else if ((st.st_mode & 07777) != file_mode && fchmod(fd, file_mode) == 0 && fstat(fd, &st) < 0)
    stat_err = errno;
  ns_close(fd);
  if (stat_err)
    return fail("cannot examine %s: %s", f->path, strerror(stat_err));
  /* Even a short write is recorded, with the bytes that reached the file, so that the
   * partial namespace verifies and can be removed. */
  uint8_t digest[32];
  if (!sha256_memory(m, f->data, done, digest))
    return fail("sha256 failed for %s", f->path);
  if (record(m, parent, name, &st, digest) == NS_NONE)
    return fail("out of memory");
  if (write_err)
    return fail("cannot write %s: %s", f->path, strerror(write_err));
  return ok_result();
}

typedef struct ns_level {
  uint32_t idx;
  int fd;
} ns_level;

static ns_result materialise_files(ns_manifest *m, int slot_fd, const ns_file *files, size_t nfiles,
                                   uint32_t file_mode) {
  /* The open directories of the previous file's parent chain; stack[0] is the slot.
   * Files that share parents (the usual, sorted case) reuse the descriptors. */
  ns_level stack[NS_MAX_DEPTH + 1];
  size_t depth = 1;
  stack[0].idx = 0;
  stack[0].fd = slot_fd;
  ns_result r = ok_result();
  char name[NAME_MAX + 1];
  for (size_t i = 0; i < nfiles && r.ok; i++) {
    const char *p = files[i].path;
    size_t level = 0;
    for (;;) {
      const char *end = strchr(p, '/');
      size_t len = end ? (size_t)(end - p) : strlen(p);
      if (!ns_valid_name(p, len) || level >= NS_MAX_DEPTH) {
        r = fail("invalid namespace path %s", files[i].path);
        break;
      }
      memcpy(name, p, len);
      name[len] = '\0';
      uint32_t existing = lookup(m, stack[level].idx, name);
      if (!end) {
        r = existing != NS_NONE
                ? fail("%s is given twice or is a directory", files[i].path)
                : write_file(m, stack[level].fd, stack[level].idx, name, &files[i], file_mode);
        break;
      }
      p = end + 1;
      if (depth > level + 1 && stack[level + 1].idx == existing && existing != NS_NONE) {
        level++;
        continue;
      }
      while (depth > level + 1)
        ns_close(stack[--depth].fd);
      if (existing != NS_NONE && !m->entries[existing].is_dir) {
        r = fail("%s: %s is a file", files[i].path, m->entries[existing].path);
        break;
      }
      uint32_t idx;
      int fd;
      if (existing != NS_NONE) {
        idx = existing;
        fd = ns_openat(stack[level].fd, name, NS_DIR_FLAGS, 0);
        if (fd < 0) {
          r = fail("cannot open directory %s: %s", m->entries[existing].path, strerror(errno));
          break;
        }
      } else {
        r = make_dir(m, stack[level].fd, stack[level].idx, name, &idx, &fd);
        if (!r.ok)
          break;
      }
      stack[depth].idx = idx;
      stack[depth].fd = fd;
      depth++;
      level++;
    }
  }
  while (depth > 1)
    ns_close(stack[--depth].fd);
  return r;
}

ns_result ns_materialise(const char *slot, const char *const *dirs, size_t ndirs,
                         const ns_file *files, size_t nfiles, uint32_t file_mode,
                         ns_manifest **out) {
  *out = NULL;
  const char *cut = slot ? strrchr(slot, '/') : NULL;
  if (!cut || slot[0] != '/' || !ns_valid_name(cut + 1, strlen(cut + 1)))
    return fail("invalid slot path %s", slot ? slot : "(null)");
  if (file_mode & ~0644u)
    return fail("file mode %04o may grant more than read to group or other", file_mode);
  if (nfiles + ndirs > (size_t)(UINT32_MAX / 4))
    return fail("too many files");
  ns_manifest *m = calloc(1, sizeof *m);
  if (!m)
    return fail("out of memory");
  m->slot = strdup(slot);
  m->slot_name = strdup(cut + 1);
  m->root = cut == slot ? strdup("/") : strndup(slot, (size_t)(cut - slot));
  if (!m->slot || !m->slot_name || !m->root || !crypto_ready(m)) {
    ns_manifest_free(m);
    return fail("out of memory or sha256 unavailable");
  }
  *out = m;

  int root_fd = ns_open_path(m->root, NS_DIR_FLAGS);
  if (root_fd < 0)
    return fail("root %s cannot be opened: %s", m->root, strerror(errno));
  struct stat st;
  if (fstat(root_fd, &st) < 0) {
    ns_result r = fail("root %s cannot be examined: %s", m->root, strerror(errno));
    ns_close(root_fd);
    return r;
  }
  m->root_dev = (uint64_t)st.st_dev;
  m->root_ino = (uint64_t)st.st_ino;
  int slot_fd = ns_openat(root_fd, m->slot_name, NS_DIR_FLAGS, 0);
  ns_close(root_fd);
  if (slot_fd < 0)
    return fail("slot %s cannot be opened: %s", slot, strerror(errno));
  if (fstat(slot_fd, &st) < 0) {
    ns_result r = fail("slot %s cannot be examined: %s", slot, strerror(errno));
    ns_close(slot_fd);
    return r;
  }
  if ((st.st_mode & 07777) != 0700 && st.st_uid == geteuid() && fchmod(slot_fd, 0700) == 0)
    (void)fstat(slot_fd, &st);
  /* The slot is recorded first, so that whatever follows can be removed. */
  ns_result r = ok_result();
  if (record(m, NS_NONE, m->slot_name, &st, NULL) == NS_NONE)
    r = fail("out of memory");
  uint64_t present = 0;
  if (r.ok && ns_list_dir(slot_fd, m->buf, NS_BUF_SIZE, count_one, &present) < 0)
    r = fail("slot %s cannot be listed: %s", slot, strerror(errno));
  if (r.ok && present)
    r = fail("slot %s is not empty", slot);
  for (size_t i = 0; i < ndirs && r.ok; i++) {
    uint32_t idx;
    int fd;
    if (!ns_valid_name(dirs[i], strlen(dirs[i])))
      r = fail("invalid namespace directory %s", dirs[i]);
    else if (lookup(m, 0, dirs[i]) != NS_NONE)
      r = fail("namespace directory %s is given twice", dirs[i]);
    else if ((r = make_dir(m, slot_fd, 0, dirs[i], &idx, &fd)).ok)
      ns_close(fd);
  }
  if (r.ok)
    r = materialise_files(m, slot_fd, files, nfiles, file_mode);
  ns_close(slot_fd);
  return r;
}

/* ---- verify ------------------------------------------------------------------------- */

typedef struct ns_listing {
  ns_manifest *m;
  uint32_t dir;
  uint32_t matched;
  char extra[NAME_MAX + 1];
} ns_listing;

static int listing_one(void *ctx, const char *name) {
  ns_listing *l = ctx;
  uint32_t e = lookup(l->m, l->dir, name);
  if (e == NS_NONE) {
    snprintf(l->extra, sizeof l->extra, "%s", name);
    return 1;
  }
  l->m->entries[e].seen = l->m->generation;
  l->matched++;
  return 0;
}

/* Describes why opening a recorded entry failed, from what is there now. */
static ns_result open_problem(ns_manifest *m, int parent_fd, const ns_entry *e, int err) {
  char at[NS_LABEL_MAX];
  struct stat st;
  label(m, e, at, sizeof at);
  if (err == ENOENT)
    return fail("%s: missing", at);
  if (ns_lstatat(parent_fd, e->name, &st) == 0 &&
      (S_ISDIR(st.st_mode) != e->is_dir || (!e->is_dir && !S_ISREG(st.st_mode))))
    return fail("%s: is now %s (recorded %s)", at, ns_type_name(st.st_mode),
                e->is_dir ? "a directory" : "a regular file");
  return fail("%s: cannot be opened: %s", at, strerror(err));
}

/* The checks every entry shares: type, device and inode, owner. */
static ns_result identity_problem(const ns_manifest *m, const ns_entry *e, const struct stat *st) {
  char at[NS_LABEL_MAX];
  bool type_ok = e->is_dir ? S_ISDIR(st->st_mode) : S_ISREG(st->st_mode);
  if (type_ok && (uint64_t)st->st_dev == e->dev && (uint64_t)st->st_ino == e->ino &&
      (uint32_t)st->st_uid == e->uid)
    return ok_result();
  label(m, e, at, sizeof at);
  if (!type_ok)
    return fail("%s: is now %s (recorded %s)", at, ns_type_name(st->st_mode),
                e->is_dir ? "a directory" : "a regular file");
  if ((uint64_t)st->st_dev != e->dev || (uint64_t)st->st_ino != e->ino)
    return fail("%s: replaced (device:inode %ju:%ju, recorded %ju:%ju)", at, (uintmax_t)st->st_dev,
                (uintmax_t)st->st_ino, (uintmax_t)e->dev, (uintmax_t)e->ino);
  return fail("%s: owner changed (uid %u, recorded %u)", at, (unsigned)st->st_uid, e->uid);
}

static ns_result verify_file(ns_manifest *m, int dir_fd, const ns_entry *e) {
  char at[NS_LABEL_MAX];
  /* O_NONBLOCK: a fifo put in a file's place must not block the check. */
  int fd = ns_openat(dir_fd, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
  if (fd < 0)
    return open_problem(m, dir_fd, e, errno);
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int err = errno;
    ns_close(fd);
    label(m, e, at, sizeof at);
    return fail("%s: cannot be examined: %s", at, strerror(err));
  }
  ns_result r = identity_problem(m, e, &st);
  if (!r.ok) {
    ns_close(fd);
    return r;
  }
  label(m, e, at, sizeof at);
  if (st.st_nlink != 1) {
    ns_close(fd);
    return fail("%s: has %ju hard links (recorded 1)", at, (uintmax_t)st.st_nlink);
  }
  if ((uint64_t)st.st_size != e->size) {
    ns_close(fd);
    return fail("%s: size changed (%ju bytes, recorded %ju)", at, (uintmax_t)st.st_size,
                (uintmax_t)e->size);
  }
  uint64_t total;
  uint8_t digest[32];
  int rc = sha256_fd(m, fd, &total, digest);
  int err = errno;
  ns_close(fd);
  if (rc == -1)
    return fail("%s: cannot be read: %s", at, strerror(err));
  if (rc < 0)
    return fail("%s: sha256 failed", at);
  if (total != e->size)
    return fail("%s: size changed while read (%ju bytes, recorded %ju)", at, (uintmax_t)total,
                (uintmax_t)e->size);
  if (memcmp(digest, e->sha256, sizeof digest) != 0)
    return fail("%s: content changed (sha256 differs)", at);
  return ok_result();
}

static ns_result verify_dir(ns_manifest *m, int parent_fd, uint32_t idx) {
  char at[NS_LABEL_MAX];
  const ns_entry *e = &m->entries[idx];
  int fd = ns_openat(parent_fd, e->name, NS_DIR_FLAGS, 0);
  if (fd < 0)
    return open_problem(m, parent_fd, e, errno);
  struct stat st;
  ns_result r = ok_result();
  if (fstat(fd, &st) < 0) {
    label(m, e, at, sizeof at);
    r = fail("%s: cannot be examined: %s", at, strerror(errno));
  }
  if (r.ok)
    r = identity_problem(m, e, &st);
  if (r.ok && (st.st_mode & 077)) {
    label(m, e, at, sizeof at);
    r = fail("%s: directory mode %04o grants group or other access", at,
             (unsigned)(st.st_mode & 07777));
  }
  if (r.ok) {
    /* The exact listing: every name recorded, every recorded name present. */
    ns_listing l = {.m = m, .dir = idx, .matched = 0, .extra = ""};
    int rc = ns_list_dir(fd, m->buf, NS_BUF_SIZE, listing_one, &l);
    label(m, e, at, sizeof at);
    if (rc < 0)
      r = fail("%s: cannot be listed: %s", at, strerror(errno));
    else if (rc > 0)
      r = fail("%s: unexpected entry %s", at, l.extra);
    else if (l.matched != e->nchildren)
      for (uint32_t c = e->first_child; c != NS_NONE; c = m->entries[c].next_sibling)
        if (m->entries[c].seen != m->generation) {
          label(m, &m->entries[c], at, sizeof at);
          r = fail("%s: missing", at);
          break;
        }
  }
  for (uint32_t c = e->first_child; r.ok && c != NS_NONE; c = m->entries[c].next_sibling)
    r = m->entries[c].is_dir ? verify_dir(m, fd, c) : verify_file(m, fd, &m->entries[c]);
  ns_close(fd);
  return r;
}

static ns_result open_root(const ns_manifest *m, int *fd_out) {
  int fd = ns_open_path(m->root, NS_DIR_FLAGS);
  if (fd < 0)
    return fail("root %s cannot be opened: %s", m->root, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) < 0 || (uint64_t)st.st_dev != m->root_dev ||
      (uint64_t)st.st_ino != m->root_ino) {
    ns_close(fd);
    return fail("root %s was replaced", m->root);
  }
  *fd_out = fd;
  return ok_result();
}

ns_result ns_verify(ns_manifest *m) {
  if (m->removed)
    return fail("namespace %s was already removed", m->slot);
  if (m->count == 0)
    return fail("namespace %s has no records", m->slot);
  if (!crypto_ready(m))
    return fail("out of memory or sha256 unavailable");
  int root_fd;
  ns_result r = open_root(m, &root_fd);
  if (!r.ok)
    return r;
  /* A new generation marks this pass's listings without clearing the previous marks. */
  if (++m->generation == 0) {
    for (uint32_t i = 0; i < m->count; i++)
      m->entries[i].seen = 0;
    m->generation = 1;
  }
  r = verify_dir(m, root_fd, 0);
  ns_close(root_fd);
  return r;
}

/* ---- remove ------------------------------------------------------------------------- */

/* The entry under parent_fd is still the recorded one (no rename swapped it in since). */
static ns_result still_recorded(const ns_manifest *m, int parent_fd, const ns_entry *e) {
  struct stat st;
  if (ns_lstatat(parent_fd, e->name, &st) < 0) {
    char at[NS_LABEL_MAX];
    label(m, e, at, sizeof at);
    return fail("removal stopped at %s: %s", at, strerror(errno));
  }
  ns_result r = identity_problem(m, e, &st);
  return r.ok ? r : fail("removal stopped at %s", r.reason);
}

static ns_result unlink_recorded(const ns_manifest *m, int parent_fd, const ns_entry *e) {
  ns_result r = still_recorded(m, parent_fd, e);
  if (!r.ok)
    return r;
  /* AT_REMOVEDIR removes only an empty directory: never recursive. */
  if (ns_unlinkat(parent_fd, e->name, e->is_dir ? AT_REMOVEDIR : 0) < 0) {
    char at[NS_LABEL_MAX];
    label(m, e, at, sizeof at);
    return fail("removal stopped at %s: %s", at, strerror(errno));
  }
  return ok_result();
}

/* Children first: the directory's files, then each subdirectory (depth first), then the
 * directory itself. */
static ns_result remove_dir(ns_manifest *m, int parent_fd, uint32_t idx) {
  const ns_entry *e = &m->entries[idx];
  int fd = ns_openat(parent_fd, e->name, NS_DIR_FLAGS, 0);
  if (fd < 0) {
    char at[NS_LABEL_MAX];
    label(m, e, at, sizeof at);
    return fail("removal stopped at %s: %s", at, strerror(errno));
  }
  struct stat st;
  ns_result r = ok_result();
  if (fstat(fd, &st) < 0 || (uint64_t)st.st_dev != e->dev || (uint64_t)st.st_ino != e->ino) {
    char at[NS_LABEL_MAX];
    label(m, e, at, sizeof at);
    r = fail("removal stopped at %s: replaced", at);
  }
  for (uint32_t c = e->first_child; r.ok && c != NS_NONE; c = m->entries[c].next_sibling)
    if (!m->entries[c].is_dir)
      r = unlink_recorded(m, fd, &m->entries[c]);
  for (uint32_t c = e->first_child; r.ok && c != NS_NONE; c = m->entries[c].next_sibling)
    if (m->entries[c].is_dir)
      r = remove_dir(m, fd, c);
  ns_close(fd);
  if (r.ok)
    r = unlink_recorded(m, parent_fd, e);
  return r;
}

ns_result ns_remove(ns_manifest *m, bool *durable) {
  *durable = false;
  ns_result r = ns_verify(m);
  if (!r.ok)
    return r;
  int root_fd;
  r = open_root(m, &root_fd);
  if (!r.ok)
    return r;
  r = remove_dir(m, root_fd, 0);
  if (r.ok) {
    m->removed = true;
    /* The unlinks are durable once the root's directory entry for the slot is. */
    *durable = ns_fsync(root_fd) == 0;
    crypto_release(m);
  }
  ns_close(root_fd);
  return r;
}
