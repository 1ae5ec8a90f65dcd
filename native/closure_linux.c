/* Runtime closure and pinning (see closure.h).
 *
 * Resolution follows glibc's ld.so (elf/dl-load.c _dl_map_object, elf/dl-deps.c) for a
 * process started with an empty environment, which is how every pinned executable runs:
 *   - the program interpreter (PT_INTERP) is loaded first and answers to its path and
 *     its DT_SONAME;
 *   - DT_NEEDED entries are mapped breadth-first; a name that matches an object already
 *     loaded (a name it was loaded under, or its DT_SONAME) is not searched again, and
 *     a file already loaded (same device and inode) is the same object;
 *   - a name with a '/' is opened as is (after $ORIGIN/$LIB/$PLATFORM expansion);
 *   - otherwise the search order is: DT_RPATH of the loading object and of each object
 *     that loaded it, then of the executable (all only when the loading object has no
 *     DT_RUNPATH; an object with both ignores its DT_RPATH), then DT_RUNPATH of the
 *     loading object, then /etc/ld.so.cache (entries under the system directories are
 *     skipped when the loader has DF_1_NODEFLIB), then the system directories (skipped
 *     with DF_1_NODEFLIB);
 *   - in every searched directory, the glibc-hwcaps subdirectories ld.so searches come
 *     first, best first; a candidate of another ELF class or machine is skipped and the
 *     search goes on; any other malformed candidate fails the load.
 * LD_LIBRARY_PATH, LD_PRELOAD and the other LD_ variables are ignored (the sandbox
 * clears the environment). What cannot be decided exactly fails closed with a reason:
 * /etc/ld.so.preload, legacy hwcap subdirectories or cache entries, relative search
 * directories, $LIB/$PLATFORM without a known expansion.
 * Given a closure_memo, every answer the file system gives the resolution is recorded
 * (memo_stat, memo_stat_bytes here; memo_lstat in pin_walk): each candidate opened or
 * not found, each legacy subdirectory, the preload file and the cache. */
#include "closure.h"
#include "elf.h"
#include "ldcache.h"
#include "pin.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HOST_MACHINE 62 /* EM_X86_64 */
#define HOST_CACHE_FLAGS (LDCACHE_FLAG_X8664_LIB64 | LDCACHE_FLAG_ELF_LIBC6)
#elif defined(__aarch64__)
#define HOST_MACHINE 183 /* EM_AARCH64 */
#define HOST_CACHE_FLAGS (LDCACHE_FLAG_AARCH64_LIB64 | LDCACHE_FLAG_ELF_LIBC6)
#else
#error "unsupported architecture: only x86_64 and aarch64 Linux are supported"
#endif
#define HOST_CLASS 2 /* ELFCLASS64 */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_DATA 1
#else
#define HOST_DATA 2
#endif
#define ET_DYN 3
#define ET_EXEC 2
#define DF_1_NODEFLIB 0x800
#define MAX_OBJECTS 1024
#define PRELOAD_FILE "/etc/ld.so.preload"

/* ---------------------------------------------------------------- resolution ---- */

struct obj {
  char *opened; /* the path ld.so opens (its l_name) */
  char real[PATH_MAX];
  char origin[PATH_MAX]; /* $ORIGIN */
  struct elf_info *info;
  int fd;
  struct stat st;
  size_t loader; /* index of the object that loaded it, or SIZE_MAX */
  char **names;  /* names it answers to (besides DT_SONAME) */
  size_t n_names;
  enum closure_role role;
};

struct state {
  struct closure_result *out;
  struct closure_memo *memo; /* records every answer the file system gives, or NULL */
  const struct loader_config *cfg;
  const struct ldcache *cache; /* NULL if there is no ld.so.cache */
  struct obj *objs;
  size_t n;
};

static void free_objs(struct state *s) {
  for (size_t i = 0; i < s->n; i++) {
    struct obj *o = &s->objs[i];
    if (o->fd >= 0)
      close(o->fd);
    free(o->info);
    free(o->opened);
    for (size_t k = 0; k < o->n_names; k++)
      free(o->names[k]);
    free(o->names);
  }
  free(s->objs);
  s->objs = NULL, s->n = 0;
}

static int add_name(struct obj *o, const char *name) {
  for (size_t k = 0; k < o->n_names; k++)
    if (strcmp(o->names[k], name) == 0)
      return 0;
  char **nn = realloc(o->names, (o->n_names + 1) * sizeof *nn);
  if (!nn)
    return -ENOMEM;
  o->names = nn;
  if (!(nn[o->n_names] = strdup(name)))
    return -ENOMEM;
  o->n_names++;
  return 0;
}

static bool matches(const struct obj *o, const char *name) {
  for (size_t k = 0; k < o->n_names; k++)
    if (strcmp(o->names[k], name) == 0)
      return true;
  return o->info && o->info->soname && strcmp(o->info->soname, name) == 0;
}

static void dirname_of(const char *path, char out[PATH_MAX]) {
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (n == 0)
    n = 1; /* "/foo" -> "/" */
  memcpy(out, path, n);
  out[n] = '\0';
}

/* Expands $ORIGIN, $LIB, $PLATFORM (also braced) as ld.so does for `o`. */
static int expand(struct state *s, const struct obj *o, const char *in, char *dst, size_t cap) {
  size_t n = 0;
  for (const char *p = in; *p;) {
    const char *val = NULL;
    size_t skip = 0;
    if (*p == '$') {
      static const char *const names[] = {"ORIGIN", "LIB", "PLATFORM"};
      for (size_t k = 0; k < 3 && !skip; k++) {
        size_t len = strlen(names[k]);
        if (p[1] == '{' && strncmp(p + 2, names[k], len) == 0 && p[2 + len] == '}')
          skip = len + 3;
        else if (strncmp(p + 1, names[k], len) == 0) {
          char c = p[1 + len];
          if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                c == '_'))
            skip = len + 1;
        }
        if (skip)
          val = k == 0 ? o->origin : k == 1 ? s->cfg->lib : s->cfg->platform;
        if (skip && !val)
          return closure_fail(s->out, -ENOTSUP, "%s: $%s has no known expansion", o->real,
                              names[k]);
      }
    }
    if (!skip) {
      if (n + 1 >= cap)
        return closure_fail(s->out, -ENAMETOOLONG, "%s: expanded path too long", o->real);
      dst[n++] = *p++;
      continue;
    }
    size_t vl = strlen(val);
    if (n + vl >= cap)
      return closure_fail(s->out, -ENAMETOOLONG, "%s: expanded path too long", o->real);
    memcpy(dst + n, val, vl);
    n += vl;
    p += skip;
  }
  dst[n] = '\0';
  return 0;
}

/* Opens a candidate as ld.so's open_verify does. Returns 1 with *found set (a new or an
 * already loaded object), 0 to go on searching, or < 0 to fail the load. */
static int try_candidate(struct state *s, const char *path, size_t loader, const char *name,
                         enum closure_role role, size_t *found) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == EACCES) {
      memo_stat(s->memo, path, NULL, errno, false); /* a lookup that found nothing */
      return 0;
    }
    return closure_fail(s->out, -errno, "%s: %s", path, strerror(errno));
  }
  struct stat st;
  struct elf_info *info = NULL;
  const char *why = NULL;
  int rc;
  if (fstat(fd, &st) < 0) {
    rc = closure_fail(s->out, -errno, "%s: %s", path, strerror(errno));
    goto error;
  }
  /* Its bytes decide what follows unless it is an object already loaded (whose own
   * observation covers them). */
  bool loaded = false;
  for (size_t i = 0; i < s->n && !loaded; i++)
    loaded = s->objs[i].st.st_dev == st.st_dev && s->objs[i].st.st_ino == st.st_ino;
  memo_stat(s->memo, path, &st, 0, !loaded);
  for (size_t i = 0; i < s->n; i++) {
    if (s->objs[i].st.st_dev == st.st_dev && s->objs[i].st.st_ino == st.st_ino) {
      close(fd);
      *found = i;
      rc = add_name(&s->objs[i], name);
      return rc < 0 ? closure_fail(s->out, rc, "out of memory") : 1;
    }
  }
  if (!S_ISREG(st.st_mode)) {
    rc = closure_fail(s->out, -EINVAL, "%s: not a regular file", path);
    goto error;
  }
  if (!(info = malloc(sizeof *info))) {
    rc = closure_fail(s->out, -ENOMEM, "out of memory");
    goto error;
  }
  rc = elf_parse_fd(fd, (uint64_t)st.st_size, info, &why);
  if (rc < 0) {
    rc = closure_fail(s->out, rc, "%s: %s", path, why ? why : strerror(-rc));
    goto error;
  }
  if (info->elf_class != HOST_CLASS || info->machine != HOST_MACHINE || info->data != HOST_DATA) {
    if (role == ROLE_LIBRARY) { /* ld.so skips an object of another class or machine */
      free(info);
      close(fd);
      return 0;
    }
    rc = closure_fail(s->out, -ENOEXEC, "%s: not an ELF object for this host", path);
    goto error;
  }
  if (info->osabi != 0 && info->osabi != 3) {
    rc = closure_fail(s->out, -ENOEXEC, "%s: unsupported ELF OS ABI %u", path, info->osabi);
    goto error;
  }
  if (role != ROLE_NODE && role != ROLE_LAUNCHER && info->type != ET_DYN) {
    rc = closure_fail(s->out, -ENOEXEC, "%s: not a shared object", path);
    goto error;
  }
  if ((role == ROLE_NODE || role == ROLE_LAUNCHER) && info->type != ET_DYN &&
      info->type != ET_EXEC) {
    rc = closure_fail(s->out, -ENOEXEC, "%s: not an executable", path);
    goto error;
  }
  if (info->extra_load_tag) {
    /* Audit modules and filtees are loaded by ld.so besides DT_NEEDED: not resolved. */
    rc = closure_fail(s->out, -ENOTSUP,
                      "%s: dynamic tag 0x%llx (audit or filter objects) is not supported", path,
                      (unsigned long long)info->extra_load_tag);
    goto error;
  }
  if (s->n == MAX_OBJECTS) {
    rc = closure_fail(s->out, -E2BIG, "too many objects in the closure");
    goto error;
  }
  struct obj *no = realloc(s->objs, (s->n + 1) * sizeof *no);
  if (!no) {
    rc = closure_fail(s->out, -ENOMEM, "out of memory");
    goto error;
  }
  s->objs = no;
  struct obj *o = &s->objs[s->n];
  memset(o, 0, sizeof *o);
  o->fd = fd, o->st = st, o->info = info, o->loader = loader, o->role = role;
  s->n++;
  if (!(o->opened = strdup(path)) || add_name(o, name) < 0 || add_name(o, path) < 0)
    return closure_fail(s->out, -ENOMEM, "out of memory");
  rc = pin_walk(s->out, s->memo, path, o->real);
  if (rc < 0)
    return rc;
  struct stat rs;
  if (stat(o->real, &rs) < 0 || rs.st_dev != st.st_dev || rs.st_ino != st.st_ino)
    return closure_fail(s->out, -EAGAIN, "%s: changed while it was resolved", path);
  memo_stat(s->memo, o->real, &rs, 0, false);
  /* The main program's $ORIGIN is its real directory (ld.so reads /proc/self/exe); a
   * library's is the directory of the path it was opened by. */
  dirname_of(role == ROLE_NODE || role == ROLE_LAUNCHER ? o->real : path, o->origin);
  *found = s->n - 1;
  return 1;
error:
  free(info);
  close(fd);
  return rc;
}

/* Fails closed when a legacy hwcap subdirectory exists in `dir` (ld.so would search it
 * in an order that depends on the CPU; we do not reproduce that). */
static int check_legacy(struct state *s, const char *dir) {
  for (size_t k = 0; k < s->cfg->n_legacy; k++) {
    char p[PATH_MAX];
    struct stat st;
    int w = snprintf(p, sizeof p, "%s/%s", dir, s->cfg->legacy[k]);
    if (w <= 0 || (size_t)w >= sizeof p)
      continue;
    int rc = stat(p, &st) < 0 ? errno : 0;
    memo_stat(s->memo, p, rc ? NULL : &st, rc, false);
    if (rc == 0 && S_ISDIR(st.st_mode))
      return closure_fail(s->out, -ENOTSUP, "%s: legacy hwcap subdirectory (not resolved exactly)",
                          p);
  }
  return 0;
}

static int search_dir(struct state *s, const char *dir, const char *name, size_t loader,
                      size_t *found) {
  char p[PATH_MAX];
  int rc = check_legacy(s, dir);
  if (rc < 0)
    return rc;
  const char *sep = dir[strlen(dir) - 1] == '/' ? "" : "/";
  for (size_t k = 0; k <= s->cfg->n_hwcaps; k++) {
    int w = k < s->cfg->n_hwcaps
                ? snprintf(p, sizeof p, "%s%sglibc-hwcaps/%s/%s", dir, sep, s->cfg->hwcaps[k], name)
                : snprintf(p, sizeof p, "%s%s%s", dir, sep, name);
    if (w < 0 || (size_t)w >= sizeof p)
      continue; /* ld.so cannot open a name that long either */
    rc = try_candidate(s, p, loader, name, ROLE_LIBRARY, found);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* Searches a DT_RPATH/DT_RUNPATH string of object `owner`. */
static int search_path_list(struct state *s, size_t owner, const char *list, const char *name,
                            size_t loader, size_t *found) {
  const char *p = list;
  while (p) {
    const char *colon = strchr(p, ':');
    size_t n = colon ? (size_t)(colon - p) : strlen(p);
    char elem[PATH_MAX], dir[PATH_MAX];
    if (n >= sizeof elem)
      return closure_fail(s->out, -ENAMETOOLONG, "%s: search path element too long",
                          s->objs[owner].real);
    memcpy(elem, p, n);
    elem[n] = '\0';
    p = colon ? colon + 1 : NULL;
    if (n == 0)
      continue; /* ld.so skips empty elements */
    int rc = expand(s, &s->objs[owner], elem, dir, sizeof dir);
    if (rc < 0)
      return rc;
    if (dir[0] != '/')
      return closure_fail(s->out, -ENOTSUP, "%s: relative search directory '%s' depends on the cwd",
                          s->objs[owner].real, dir);
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
      dir[--dl] = '\0';
    rc = search_dir(s, dir, name, loader, found);
    if (rc != 0)
      return rc;
  }
  return 0;
}

static const char *rpath_of(const struct obj *o) {
  return o->info->runpath ? NULL : o->info->rpath; /* DT_RUNPATH hides DT_RPATH */
}

static bool under_system_dir(const struct loader_config *cfg, const char *path) {
  for (size_t k = 0; k < cfg->n_dirs; k++) {
    size_t n = strlen(cfg->dirs[k]);
    while (n > 1 && cfg->dirs[k][n - 1] == '/')
      n--;
    if (strncmp(path, cfg->dirs[k], n) == 0 && path[n] == '/')
      return true;
  }
  return false;
}

/* Maps one DT_NEEDED name of object `loader`. */
static int map_needed(struct state *s, size_t loader, const char *needed) {
  char name[PATH_MAX];
  size_t found = 0;
  int rc = expand(s, &s->objs[loader], needed, name, sizeof name);
  if (rc < 0)
    return rc;
  for (size_t i = 0; i < s->n; i++)
    if (matches(&s->objs[i], name))
      return 0;
  if (strchr(name, '/')) {
    if (name[0] != '/')
      return closure_fail(s->out, -ENOTSUP, "%s: DT_NEEDED '%s' is relative to the cwd",
                          s->objs[loader].real, name);
    rc = try_candidate(s, name, loader, name, ROLE_LIBRARY, &found);
    return rc != 0 ? (rc < 0 ? rc : 0)
                   : closure_fail(s->out, -ENOENT, "%s: needed '%s' not found",
                                  s->objs[loader].real, name);
  }
  /* s->objs may move when an object is added: index it afresh each time. */
  const char *runpath = s->objs[loader].info->runpath; /* info is not moved */
  if (!runpath) {
    for (size_t l = loader; l != SIZE_MAX; l = s->objs[l].loader) {
      const char *rp = rpath_of(&s->objs[l]);
      if (rp && (rc = search_path_list(s, l, rp, name, loader, &found)) != 0)
        return rc < 0 ? rc : 0;
    }
    if (loader != 0 && rpath_of(&s->objs[0]) &&
        (rc = search_path_list(s, 0, rpath_of(&s->objs[0]), name, loader, &found)) != 0)
      return rc < 0 ? rc : 0;
  }
  if (runpath && (rc = search_path_list(s, loader, runpath, name, loader, &found)) != 0)
    return rc < 0 ? rc : 0;
  bool nodeflib = (s->objs[loader].info->flags_1 & DF_1_NODEFLIB) != 0;
  if (s->cache) {
    const char *cached = NULL, *why = NULL;
    rc = ldcache_lookup(s->cache, name, HOST_CACHE_FLAGS, (const char *const *)s->cfg->hwcaps,
                        s->cfg->n_hwcaps, &cached, &why);
    if (rc < 0)
      return closure_fail(s->out, rc, "%s: %s", name, why);
    if (rc == 1 && !(nodeflib && under_system_dir(s->cfg, cached))) {
      char copy[PATH_MAX];
      snprintf(copy, sizeof copy, "%s", cached);
      rc = try_candidate(s, copy, loader, name, ROLE_LIBRARY, &found);
      if (rc != 0)
        return rc < 0 ? rc : 0;
    }
  }
  if (!nodeflib) {
    for (size_t k = 0; k < s->cfg->n_dirs; k++) {
      char dir[PATH_MAX];
      snprintf(dir, sizeof dir, "%s", s->cfg->dirs[k]);
      size_t dl = strlen(dir);
      while (dl > 1 && dir[dl - 1] == '/')
        dir[--dl] = '\0';
      rc = search_dir(s, dir, name, loader, &found);
      if (rc != 0)
        return rc < 0 ? rc : 0;
    }
  }
  return closure_fail(s->out, -ENOENT, "%s: needed library '%s' not found", s->objs[loader].real,
                      name);
}

static int resolve_one(struct state *s, const char *exe, enum closure_role role,
                       const struct loader_config *loaders, size_t n_loaders) {
  size_t found;
  int rc = try_candidate(s, exe, SIZE_MAX, exe, role, &found);
  if (rc <= 0)
    return rc < 0 ? rc : closure_fail(s->out, -ENOENT, "%s: cannot be opened", exe);
  const struct elf_info *main = s->objs[0].info;
  if (!main->interp) {
    if (main->n_needed > 0)
      return closure_fail(s->out, -ENOEXEC, "%s: DT_NEEDED without PT_INTERP", exe);
    return 0; /* static executable: the closure is the file itself */
  }
  s->cfg = NULL;
  for (size_t k = 0; k < n_loaders; k++)
    if (strcmp(loaders[k].interp, main->interp) == 0)
      s->cfg = &loaders[k];
  if (!s->cfg)
    return closure_fail(s->out, -ENOTSUP, "%s: no loader configuration for interpreter %s", exe,
                        main->interp);
  if (main->interp[0] != '/')
    return closure_fail(s->out, -ENOTSUP, "%s: relative PT_INTERP", exe);
  char interp[PATH_MAX];
  snprintf(interp, sizeof interp, "%s", main->interp);
  rc = try_candidate(s, interp, SIZE_MAX, interp, ROLE_INTERPRETER, &found);
  if (rc <= 0)
    return rc < 0 ? rc : closure_fail(s->out, -ENOENT, "%s: interpreter %s not found", exe, interp);
  if (found != 1)
    return closure_fail(s->out, -ENOEXEC, "%s: is its own interpreter", exe);
  /* Breadth-first over DT_NEEDED, as _dl_map_object_deps; the interpreter's own
   * dependencies are not mapped (ld.so is already relocated). */
  for (size_t i = 0; i < s->n; i++) {
    if (i == 1)
      continue;
    for (size_t k = 0; k < s->objs[i].info->n_needed; k++) {
      rc = map_needed(s, i, s->objs[i].info->needed[k]);
      if (rc < 0)
        return rc;
    }
  }
  return 0;
}

static int read_small_file(const char *path, uint8_t **buf, size_t *len, struct stat *stp) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) {
    close(fd);
    return -EINVAL;
  }
  uint8_t *b = malloc((size_t)st.st_size + 1);
  size_t done = 0;
  while (b && done < (size_t)st.st_size) {
    ssize_t got = read(fd, b + done, (size_t)st.st_size - done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    done += (size_t)got;
  }
  close(fd);
  if (!b)
    return -ENOMEM;
  *buf = b, *len = done, *stp = st;
  return 0;
}

static int resolve_all(const char *const *exes, const enum closure_role *roles, size_t n_exes,
                       const struct loader_config *loaders, size_t n_loaders,
                       const char *cache_path, struct hash_cache *cache, bool rehash,
                       struct closure_memo *memo, struct closure_result *out) {
  struct stat pst;
  /* ld.so loads every library listed in /etc/ld.so.preload into every process it starts,
   * the launchers included; we do not pin those: refuse. */
  int rc = stat(PRELOAD_FILE, &pst) < 0 ? errno : 0;
  memo_stat(memo, PRELOAD_FILE, rc ? NULL : &pst, rc, false);
  if (rc == 0 && pst.st_size > 0)
    return closure_fail(out, -ENOTSUP, "%s exists (preloaded libraries are not supported)",
                        PRELOAD_FILE);
  uint8_t *cbuf = NULL;
  size_t clen = 0;
  struct ldcache lc;
  struct stat cst;
  bool have_cache = false;
  rc = read_small_file(cache_path, &cbuf, &clen, &cst);
  if (rc == 0) {
    const char *why = NULL;
    if (ldcache_open(cbuf, clen, &lc, &why) < 0) {
      free(cbuf);
      return closure_fail(out, -ENOEXEC, "%s: %s", cache_path, why);
    }
    memo_stat_bytes(memo, cache_path, &cst, cbuf, clen);
    have_cache = true;
  } else if (rc == -ENOENT) {
    memo_stat(memo, cache_path, NULL, ENOENT, false);
  } else {
    return closure_fail(out, rc, "%s: %s", cache_path, strerror(-rc));
  }
  rc = 0;
  for (size_t e = 0; e < n_exes && rc == 0; e++) {
    struct state s = {.out = out, .memo = memo, .cache = have_cache ? &lc : NULL};
    rc = resolve_one(&s, exes[e], roles[e], loaders, n_loaders);
    for (size_t i = 0; i < s.n && rc == 0; i++)
      rc = pin_add_file(out, cache, rehash, memo, s.objs[i].real, s.objs[i].fd, &s.objs[i].st,
                        s.objs[i].role, e);
    free_objs(&s);
  }
  free(cbuf);
  return rc;
}

int closure_resolve(const char *const *exes, const enum closure_role *roles, size_t n_exes,
                    const struct loader_config *loaders, size_t n_loaders, const char *cache_path,
                    struct hash_cache *cache, bool rehash, struct closure_memo *memo,
                    struct closure_result *out) {
  memset(out, 0, sizeof *out);
  memo_begin(memo);
  int rc =
      resolve_all(exes, roles, n_exes, loaders, n_loaders, cache_path, cache, rehash, memo, out);
  memo_end(memo, rc == 0);
  return rc;
}
