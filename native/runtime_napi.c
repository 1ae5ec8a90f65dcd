/* Glue for the runtime pin: ELF and ld.so.cache readers (for tests and diagnostics),
 * the closure of executables with their hashes, and file hashing with the same cache.
 * The hash cache and the closure memo live as long as the environment (a per-instance
 * object passed to the functions as their data; freed by an environment cleanup hook). */
#include "addon.h"
#include "elf.h"
#include "ldcache.h"
#include "napi_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __linux__
#include "closure.h"
#endif

static napi_value throw_code(napi_env env, const char *code, const char *message) {
  return confined_throw_error(env, code, message);
}

static bool set_opt_string(napi_env env, napi_value obj, const char *key, const char *s) {
  if (s)
    return confined_set_string(env, obj, key, s);
  napi_value null;
  if (napi_get_null(env, &null) != napi_ok)
    return false;
  return confined_set_value(env, obj, key, null);
}

static napi_value elf_to_js(napi_env env, const struct elf_info *info) {
  napi_value o, needed;
  NAPI_CALL(env, napi_create_object(env, &o));
  NAPI_CALL(env, napi_create_array_with_length(env, info->n_needed, &needed));
  for (size_t i = 0; i < info->n_needed; i++) {
    napi_value s = confined_make_string(env, info->needed[i]);
    if (!s)
      return NULL;
    NAPI_CALL(env, napi_set_element(env, needed, (uint32_t)i, s));
  }
  if (!confined_set_int64(env, o, "class", info->elf_class) ||
      !confined_set_int64(env, o, "data", info->data) ||
      !confined_set_int64(env, o, "osabi", info->osabi) ||
      !confined_set_int64(env, o, "type", info->type) ||
      !confined_set_int64(env, o, "machine", info->machine) ||
      !confined_set_bool(env, o, "dynamic", info->has_dynamic) ||
      !confined_set_int64(env, o, "flags1", (int64_t)info->flags_1) ||
      !confined_set_int64(env, o, "extraLoadTag", (int64_t)info->extra_load_tag) ||
      !set_opt_string(env, o, "interp", info->interp) ||
      !set_opt_string(env, o, "soname", info->soname) ||
      !set_opt_string(env, o, "rpath", info->rpath) ||
      !set_opt_string(env, o, "runpath", info->runpath) ||
      !confined_set_value(env, o, "needed", needed))
    return NULL;
  return o;
}

/* elfInfo(bytes: Uint8Array) -> info; throws an Error with code ENOEXEC (or another
 * errno name) and the parser's reason. */
static napi_value js_elf_info(napi_env env, napi_callback_info cbinfo) {
  napi_value argv[1];
  const uint8_t *buf;
  size_t len;
  if (!confined_get_args(env, cbinfo, 1, argv) ||
      !confined_get_bytes(env, argv[0], "bytes", &buf, &len))
    return NULL;
  struct elf_info *info = malloc(sizeof *info);
  if (!info)
    return throw_code(env, "ENOMEM", "out of memory");
  const char *why = NULL;
  int rc = elf_parse(buf, len, info, &why);
  napi_value res = NULL;
  if (rc < 0) {
    char msg[256];
    snprintf(msg, sizeof msg, "invalid ELF: %s", why ? why : strerror(-rc));
    throw_code(env, rc == -ENOEXEC ? "ENOEXEC" : rc == -E2BIG ? "E2BIG" : "EIO", msg);
  } else {
    res = elf_to_js(env, info);
  }
  free(info);
  return res;
}

/* elfInfoFile(path) -> info (read with pread; the file is not mapped). */
static napi_value js_elf_info_file(napi_env env, napi_callback_info cbinfo) {
  napi_value argv[1];
  char *path = NULL;
  if (!confined_get_args(env, cbinfo, 1, argv) ||
      !confined_get_string(env, argv[0], "path", &path, NULL))
    return NULL;
  char msg[1024];
  napi_value res = NULL;
  struct elf_info *info = malloc(sizeof *info);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (!info) {
    throw_code(env, "ENOMEM", "out of memory");
  } else if (fd < 0 || fstat(fd, &st) < 0) {
    snprintf(msg, sizeof msg, "%s: %s", path, strerror(errno));
    throw_code(env, "EIO", msg);
  } else {
    const char *why = NULL;
    int rc = elf_parse_fd(fd, (uint64_t)st.st_size, info, &why);
    if (rc < 0) {
      snprintf(msg, sizeof msg, "%s: invalid ELF: %s", path, why ? why : strerror(-rc));
      throw_code(env, "ENOEXEC", msg);
    } else {
      res = elf_to_js(env, info);
    }
  }
  if (fd >= 0)
    close(fd);
  free(info);
  free(path);
  return res;
}

static bool get_string_array(napi_env env, napi_value arr, const char *what, char ***out,
                             size_t *n) {
  bool is = false;
  uint32_t len = 0;
  char msg[128];
  *out = NULL, *n = 0;
  if (napi_is_array(env, arr, &is) != napi_ok || !is ||
      napi_get_array_length(env, arr, &len) != napi_ok) {
    snprintf(msg, sizeof msg, "%s must be an array of strings", what);
    confined_throw_type_error(env, msg);
    return false;
  }
  char **v = calloc(len + 1, sizeof *v);
  if (!v) {
    throw_code(env, "ENOMEM", "out of memory");
    return false;
  }
  for (uint32_t i = 0; i < len; i++) {
    napi_value el;
    if (napi_get_element(env, arr, i, &el) != napi_ok ||
        !confined_get_string(env, el, what, &v[i], NULL)) {
      for (uint32_t k = 0; k < i; k++)
        free(v[k]);
      free(v);
      return false;
    }
  }
  *out = v, *n = len;
  return true;
}

static void free_string_array(char **v, size_t n) {
  for (size_t i = 0; v && i < n; i++)
    free(v[i]);
  free(v);
}

static napi_value ldcache_error(napi_env env, const char *why) {
  char msg[256];
  snprintf(msg, sizeof msg, "invalid ld.so.cache: %s", why ? why : "malformed");
  return throw_code(env, "ENOEXEC", msg);
}

/* ldcacheEntries(bytes) -> [{ flags, key, value, osversion, hwcap (string, hex),
 * hwcapName (glibc-hwcaps subdirectory or null) }] */
static napi_value js_ldcache_entries(napi_env env, napi_callback_info cbinfo) {
  napi_value argv[1], arr;
  const uint8_t *buf;
  size_t len;
  struct ldcache c;
  const char *why = NULL;
  if (!confined_get_args(env, cbinfo, 1, argv) ||
      !confined_get_bytes(env, argv[0], "bytes", &buf, &len))
    return NULL;
  if (ldcache_open(buf, len, &c, &why) < 0)
    return ldcache_error(env, why);
  NAPI_CALL(env, napi_create_array_with_length(env, c.nlibs, &arr));
  for (uint32_t i = 0; i < c.nlibs; i++) {
    struct ldcache_entry e;
    if (ldcache_entry(&c, i, &e) < 0)
      return ldcache_error(env, "entry string out of bounds");
    napi_value o;
    char hex[24];
    snprintf(hex, sizeof hex, "%llx", (unsigned long long)e.hwcap);
    bool named =
        c.is_new && ((e.hwcap >> 32) & ~LDCACHE_HWCAP_ISA_MASK) == (LDCACHE_HWCAP_EXTENSION >> 32);
    NAPI_CALL(env, napi_create_object(env, &o));
    if (!confined_set_int64(env, o, "flags", e.flags) ||
        !confined_set_string(env, o, "key", e.key) ||
        !confined_set_string(env, o, "value", e.value) ||
        !confined_set_int64(env, o, "osversion", e.osversion) ||
        !confined_set_string(env, o, "hwcap", hex) ||
        !set_opt_string(env, o, "hwcapName",
                        named ? ldcache_hwcaps_name(&c, (uint32_t)e.hwcap) : NULL))
      return NULL;
    NAPI_CALL(env, napi_set_element(env, arr, i, o));
  }
  return arr;
}

/* ldcacheLookup(bytes, name, flags, hwcaps: string[]) -> path | null */
static napi_value js_ldcache_lookup(napi_env env, napi_callback_info cbinfo) {
  napi_value argv[4], res = NULL;
  const uint8_t *buf;
  size_t len, n_hw = 0;
  char *name = NULL, **hw = NULL;
  int64_t flags;
  struct ldcache c;
  const char *why = NULL, *path = NULL;
  if (!confined_get_args(env, cbinfo, 4, argv) ||
      !confined_get_bytes(env, argv[0], "bytes", &buf, &len) ||
      !confined_get_string(env, argv[1], "name", &name, NULL) ||
      !confined_get_int64(env, argv[2], "flags", &flags) ||
      !get_string_array(env, argv[3], "hwcaps", &hw, &n_hw))
    goto out;
  if (ldcache_open(buf, len, &c, &why) < 0) {
    ldcache_error(env, why);
    goto out;
  }
  int rc = ldcache_lookup(&c, name, (int32_t)flags, (const char *const *)hw, n_hw, &path, &why);
  if (rc < 0)
    throw_code(env, "ENOTSUP", why);
  else if (rc == 0)
    napi_get_null(env, &res);
  else
    res = confined_make_string(env, path);
out:
  free(name);
  free_string_array(hw, n_hw);
  return res;
}

#ifdef __linux__
static const char *const role_names[] = {"node", "launcher", "interpreter", "library"};

/* Per environment: the hash cache, and the observations of the last recorded closure. */
struct runtime_env {
  struct hash_cache *cache;
  struct closure_memo *memo;
  uint32_t generation; /* of the recording in memo; 0 when there is none */
  uint32_t recordings;
};

static napi_value result_to_js(napi_env env, const struct closure_result *r) {
  napi_value o, files, aliases;
  NAPI_CALL(env, napi_create_object(env, &o));
  NAPI_CALL(env, napi_create_array_with_length(env, r->n_files, &files));
  NAPI_CALL(env, napi_create_array_with_length(env, r->n_aliases, &aliases));
  for (size_t i = 0; i < r->n_files; i++) {
    const struct closure_file *f = &r->files[i];
    char hex[65];
    for (size_t k = 0; k < 32; k++)
      snprintf(hex + 2 * k, 3, "%02x", f->sha256[k]);
    napi_value fo;
    NAPI_CALL(env, napi_create_object(env, &fo));
    if (!confined_set_string(env, fo, "path", f->path) ||
        !confined_set_int64(env, fo, "size", (int64_t)f->size) ||
        !confined_set_string(env, fo, "sha256", hex) ||
        !confined_set_string(env, fo, "role", role_names[f->role]) ||
        !confined_set_int64(env, fo, "of", (int64_t)f->of) ||
        !confined_set_bool(env, fo, "cached", f->cached))
      return NULL;
    NAPI_CALL(env, napi_set_element(env, files, (uint32_t)i, fo));
  }
  for (size_t i = 0; i < r->n_aliases; i++) {
    napi_value ao;
    NAPI_CALL(env, napi_create_object(env, &ao));
    if (!confined_set_string(env, ao, "link", r->aliases[i].link) ||
        !confined_set_string(env, ao, "target", r->aliases[i].target))
      return NULL;
    NAPI_CALL(env, napi_set_element(env, aliases, (uint32_t)i, ao));
  }
  if (!confined_set_value(env, o, "files", files) ||
      !confined_set_value(env, o, "aliases", aliases))
    return NULL;
  return o;
}

static bool get_bool(napi_env env, napi_value v, bool *out) {
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_boolean ||
      napi_get_value_bool(env, v, out) != napi_ok) {
    confined_throw_type_error(env, "rehash must be a boolean");
    return false;
  }
  return true;
}

static bool get_prop(napi_env env, napi_value obj, const char *key, napi_value *out) {
  if (napi_get_named_property(env, obj, key, out) != napi_ok) {
    confined_throw_last_error(env, key);
    return false;
  }
  return true;
}

static void free_loaders(struct loader_config *l, size_t n) {
  for (size_t i = 0; l && i < n; i++) {
    free(l[i].interp);
    free(l[i].platform);
    free(l[i].lib);
    free_string_array(l[i].dirs, l[i].n_dirs);
    free_string_array(l[i].hwcaps, l[i].n_hwcaps);
    free_string_array(l[i].legacy, l[i].n_legacy);
  }
  free(l);
}

static bool get_opt_string(napi_env env, napi_value obj, const char *key, char **out) {
  napi_value v;
  napi_valuetype t;
  *out = NULL;
  if (!get_prop(env, obj, key, &v) || napi_typeof(env, v, &t) != napi_ok)
    return false;
  if (t == napi_null || t == napi_undefined)
    return true;
  return confined_get_string(env, v, key, out, NULL);
}

/* loaders: [{ interp, dirs, hwcaps, legacy, platform, lib }] */
static bool get_loaders(napi_env env, napi_value arr, struct loader_config **out, size_t *n) {
  uint32_t len = 0;
  bool is = false;
  *out = NULL, *n = 0;
  if (napi_is_array(env, arr, &is) != napi_ok || !is ||
      napi_get_array_length(env, arr, &len) != napi_ok) {
    confined_throw_type_error(env, "loaders must be an array");
    return false;
  }
  struct loader_config *l = calloc(len + 1, sizeof *l);
  if (!l) {
    throw_code(env, "ENOMEM", "out of memory");
    return false;
  }
  for (uint32_t i = 0; i < len; i++) {
    napi_value o, v;
    *n = i + 1;
    if (napi_get_element(env, arr, i, &o) != napi_ok || !get_prop(env, o, "interp", &v) ||
        !confined_get_string(env, v, "interp", &l[i].interp, NULL) ||
        !get_prop(env, o, "dirs", &v) ||
        !get_string_array(env, v, "dirs", &l[i].dirs, &l[i].n_dirs) ||
        !get_prop(env, o, "hwcaps", &v) ||
        !get_string_array(env, v, "hwcaps", &l[i].hwcaps, &l[i].n_hwcaps) ||
        !get_prop(env, o, "legacy", &v) ||
        !get_string_array(env, v, "legacy", &l[i].legacy, &l[i].n_legacy) ||
        !get_opt_string(env, o, "platform", &l[i].platform) ||
        !get_opt_string(env, o, "lib", &l[i].lib)) {
      free_loaders(l, *n);
      *out = NULL, *n = 0;
      return false;
    }
  }
  *out = l, *n = len;
  return true;
}

/* runtimeClosure(paths: string[], roles: string[], loaders, cachePath, rehash, record?)
 *   -> { files: [{ path, size, sha256, role, of, cached }], aliases: [{ link, target }],
 *        memo }
 * With record === true, what the resolution observed replaces the memo, and `memo` is
 * its generation (a positive number) for runtimeMemoChanged; otherwise `memo` is 0 and
 * the memo is left alone. Throws an Error with code 'runtime-unavailable' and the reason
 * on any failure (a recording then holds nothing). */
static napi_value js_runtime_closure(napi_env env, napi_callback_info cbinfo) {
  napi_value argv[6], res = NULL, undef;
  size_t argc = 6;
  void *data = NULL;
  char **paths = NULL, **roles = NULL, *cache_path = NULL;
  size_t n_paths = 0, n_roles = 0, n_loaders = 0;
  struct loader_config *loaders = NULL;
  enum closure_role *rv = NULL;
  bool rehash = false, record = false;
  struct closure_result r = {0};
  NAPI_CALL(env, napi_get_cb_info(env, cbinfo, &argc, argv, NULL, &data));
  struct runtime_env *renv = data;
  if (argc < 5) {
    confined_throw_type_error(env, "runtimeClosure: missing arguments");
    return NULL;
  }
  NAPI_CALL(env, napi_get_undefined(env, &undef));
  if (argc < 6)
    argv[5] = undef;
  napi_valuetype rt;
  NAPI_CALL(env, napi_typeof(env, argv[5], &rt));
  if (!get_string_array(env, argv[0], "paths", &paths, &n_paths) ||
      !get_string_array(env, argv[1], "roles", &roles, &n_roles) ||
      !get_loaders(env, argv[2], &loaders, &n_loaders) ||
      !confined_get_string(env, argv[3], "cachePath", &cache_path, NULL) ||
      !get_bool(env, argv[4], &rehash))
    goto out;
  if (rt != napi_undefined &&
      (rt != napi_boolean || napi_get_value_bool(env, argv[5], &record) != napi_ok)) {
    confined_throw_type_error(env, "record must be a boolean");
    goto out;
  }
  if (n_roles != n_paths || !(rv = calloc(n_paths + 1, sizeof *rv))) {
    confined_throw_type_error(env, "runtimeClosure: one role per path");
    goto out;
  }
  for (size_t i = 0; i < n_paths; i++) {
    if (strcmp(roles[i], "node") == 0)
      rv[i] = ROLE_NODE;
    else if (strcmp(roles[i], "launcher") == 0)
      rv[i] = ROLE_LAUNCHER;
    else {
      confined_throw_type_error(env, "runtimeClosure: role must be 'node' or 'launcher'");
      goto out;
    }
  }
  if (record)
    renv->generation = 0;
  int rc = closure_resolve((const char *const *)paths, rv, n_paths, loaders, n_loaders, cache_path,
                           renv->cache, rehash, record ? renv->memo : NULL, &r);
  if (rc < 0) {
    throw_code(env, "runtime-unavailable", r.error);
    goto out;
  }
  if (record && ++renv->recordings == 0) /* never 0, which means "none" */
    renv->recordings = 1;
  if (record)
    renv->generation = renv->recordings;
  res = result_to_js(env, &r);
  if (res && !confined_set_int64(env, res, "memo", record ? renv->generation : 0))
    res = NULL;
out:
  closure_result_free(&r);
  free(rv);
  free(cache_path);
  free_string_array(paths, n_paths);
  free_string_array(roles, n_roles);
  free_loaders(loaders, n_loaders);
  return res;
}

/* hashFiles(paths: string[], rehash: boolean) -> same shape as runtimeClosure (every
 * file with role 'library' and `of` its index). */
static napi_value js_hash_files(napi_env env, napi_callback_info cbinfo) {
  napi_value argv[2], res = NULL;
  size_t argc = 2, n = 0;
  void *data = NULL;
  char **paths = NULL;
  bool rehash = false;
  struct closure_result r = {0};
  NAPI_CALL(env, napi_get_cb_info(env, cbinfo, &argc, argv, NULL, &data));
  if (argc < 2) {
    confined_throw_type_error(env, "hashFiles: missing arguments");
    return NULL;
  }
  if (!get_string_array(env, argv[0], "paths", &paths, &n) || !get_bool(env, argv[1], &rehash))
    goto out;
  struct runtime_env *renv = data;
  if (closure_hash_files((const char *const *)paths, n, renv->cache, rehash, &r) < 0)
    throw_code(env, "runtime-unavailable", r.error);
  else
    res = result_to_js(env, &r);
out:
  closure_result_free(&r);
  free_string_array(paths, n);
  return res;
}

/* runtimeMemoChanged(generation: number) -> null when the recording `generation` (from
 * runtimeClosure's `memo`) is the current one and every observation in it still holds,
 * so that runtimeClosure with the same arguments would return the same files, hashes and
 * aliases (see closure_memo_holds); otherwise a string saying what changed, and the
 * recording is dropped. */
static napi_value js_runtime_memo_changed(napi_env env, napi_callback_info cbinfo) {
  napi_value argv[1], res;
  size_t argc = 1;
  void *data = NULL;
  int64_t generation;
  NAPI_CALL(env, napi_get_cb_info(env, cbinfo, &argc, argv, NULL, &data));
  struct runtime_env *renv = data;
  if (argc < 1 || !confined_get_int64(env, argv[0], "generation", &generation))
    return argc < 1 ? confined_throw_type_error(env, "runtimeMemoChanged: missing generation")
                    : NULL;
  char why[1200];
  if (renv->generation == 0 || generation != (int64_t)renv->generation)
    snprintf(why, sizeof why, "no recording %lld", (long long)generation);
  else if (closure_memo_holds(renv->memo, why, sizeof why) == 1) {
    NAPI_CALL(env, napi_get_null(env, &res));
    return res;
  } else {
    closure_memo_clear(renv->memo);
    renv->generation = 0;
  }
  return confined_make_string(env, why);
}

static void free_runtime_env(void *arg) {
  struct runtime_env *renv = arg;
  hash_cache_free(renv->cache);
  closure_memo_free(renv->memo);
  free(renv);
}

static bool export_with(napi_env env, napi_value exports, const char *name, napi_callback fn,
                        void *data) {
  napi_value f;
  if (napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, data, &f) != napi_ok) {
    confined_throw_last_error(env, name);
    return false;
  }
  return confined_set_value(env, exports, name, f);
}
#endif

bool confined_runtime_init(napi_env env, napi_value exports) {
  if (!confined_export(env, exports, "elfInfo", js_elf_info) ||
      !confined_export(env, exports, "elfInfoFile", js_elf_info_file) ||
      !confined_export(env, exports, "ldcacheEntries", js_ldcache_entries) ||
      !confined_export(env, exports, "ldcacheLookup", js_ldcache_lookup))
    return false;
#ifdef __linux__
  /* One hash cache and one closure memo per environment (main thread or worker), shared
   * by the functions below. */
  struct runtime_env *renv = calloc(1, sizeof *renv);
  if (renv) {
    renv->cache = hash_cache_new();
    renv->memo = closure_memo_new();
  }
  if (!renv || !renv->cache || !renv->memo) {
    if (renv)
      free_runtime_env(renv);
    throw_code(env, "ENOMEM", "out of memory");
    return false;
  }
  if (napi_add_env_cleanup_hook(env, free_runtime_env, renv) != napi_ok) {
    free_runtime_env(renv);
    confined_throw_last_error(env, "napi_add_env_cleanup_hook");
    return false;
  }
  if (!export_with(env, exports, "runtimeClosure", js_runtime_closure, renv) ||
      !export_with(env, exports, "runtimeMemoChanged", js_runtime_memo_changed, renv) ||
      !export_with(env, exports, "hashFiles", js_hash_files, renv) ||
      !confined_set_int64(env, exports, "ldcacheHostFlags",
#if defined(__x86_64__)
                          LDCACHE_FLAG_X8664_LIB64 | LDCACHE_FLAG_ELF_LIBC6
#else
                          LDCACHE_FLAG_AARCH64_LIB64 | LDCACHE_FLAG_ELF_LIBC6
#endif
                          ))
    return false;
#endif
  return true;
}
