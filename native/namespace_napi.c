/* Node-API glue of the namespace lifecycle (namespace.h). Internal functions for
 * lib/namespace.js, which validates and shapes the results:
 *   namespaceCheckRoot(root)                       -> { ok, reason? }
 *   namespaceCountEntries(root)                    -> { ok, count? , reason? }
 *   namespaceClaimSlot(root, maxRetained)          -> { ok, path? , full?, reason? }
 *   namespaceMaterialise(slot, dirs, paths, contents, fileMode)
 *                                                  -> { ok, reason?, manifest }
 *   namespaceVerify(manifest)                      -> { ok, reason? }
 *   namespaceRemove(manifest)                      -> { ok, durable?, reason? }
 *   namespaceEntries(manifest)                     -> [{ path, type, dev, ino, uid, mode,
 *                                                        size, nlink, sha256 }]
 * A manifest is a type-tagged external owning the native manifest; the finalizer frees it
 * (freeing never touches the disk). */
#include "addon.h"
#include "namespace.h"
#include "napi_util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* Distinguishes our manifests from any other external. */
static const napi_type_tag manifest_tag = {0x636f6e66696e6564ULL, 0x6e616d6573706163ULL};

static void manifest_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  ns_manifest_free(data);
}

static bool get_manifest(napi_env env, napi_value v, ns_manifest **out) {
  napi_valuetype t;
  bool tagged = false;
  void *data = NULL;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_external ||
      napi_check_object_type_tag(env, v, &manifest_tag, &tagged) != napi_ok || !tagged ||
      napi_get_value_external(env, v, &data) != napi_ok || !data) {
    confined_throw_type_error(env, "manifest must be a namespace manifest");
    return false;
  }
  *out = data;
  return true;
}

/* { ok: true } or { ok: false, reason } */
static napi_value result_object(napi_env env, const ns_result *r) {
  napi_value obj;
  NAPI_CALL(env, napi_create_object(env, &obj));
  if (!confined_set_bool(env, obj, "ok", r->ok))
    return NULL;
  if (!r->ok && !confined_set_string(env, obj, "reason", r->reason))
    return NULL;
  return obj;
}

static napi_value check_root(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  char *root = NULL;
  if (!confined_get_args(env, info, 1, argv) ||
      !confined_get_string(env, argv[0], "root", &root, NULL))
    return NULL;
  ns_result r = ns_check_root(root);
  free(root);
  return result_object(env, &r);
}

static napi_value count_entries(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  char *root = NULL;
  if (!confined_get_args(env, info, 1, argv) ||
      !confined_get_string(env, argv[0], "root", &root, NULL))
    return NULL;
  uint64_t count = 0;
  ns_result r = ns_count_entries(root, &count);
  free(root);
  napi_value obj = result_object(env, &r);
  if (obj && r.ok && !confined_set_int64(env, obj, "count", (int64_t)count))
    return NULL;
  return obj;
}

static napi_value claim_slot(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  char *root = NULL;
  int64_t max = 0;
  if (!confined_get_args(env, info, 2, argv) ||
      !confined_get_string(env, argv[0], "root", &root, NULL))
    return NULL;
  if (!confined_get_int64(env, argv[1], "maxRetained", &max)) {
    free(root);
    return NULL;
  }
  if (max < 1 || max > 1000000) {
    free(root);
    return confined_throw_type_error(env, "maxRetained is out of range");
  }
  char path[PATH_MAX];
  bool full = false;
  ns_result r = ns_claim_slot(root, (uint32_t)max, path, sizeof path, &full);
  free(root);
  napi_value obj = result_object(env, &r);
  if (!obj)
    return NULL;
  if (r.ok ? !confined_set_string(env, obj, "path", path)
           : !confined_set_bool(env, obj, "full", full))
    return NULL;
  return obj;
}

static napi_value array_at(napi_env env, napi_value array, uint32_t i) {
  napi_value v;
  if (napi_get_element(env, array, i, &v) != napi_ok) {
    confined_throw_last_error(env, "napi_get_element");
    return NULL;
  }
  return v;
}

static bool array_length(napi_env env, napi_value v, const char *what, uint32_t *len) {
  bool is = false;
  if (napi_is_array(env, v, &is) != napi_ok || !is ||
      napi_get_array_length(env, v, len) != napi_ok) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s must be an array", what);
    confined_throw_type_error(env, msg);
    return false;
  }
  return true;
}

typedef struct materialise_args {
  char **dirs;
  uint32_t ndirs;
  ns_file *files;
  char **paths;
  uint32_t nfiles;
} materialise_args;

static void args_free(materialise_args *a) {
  for (uint32_t i = 0; a->dirs && i < a->ndirs; i++)
    free(a->dirs[i]);
  for (uint32_t i = 0; a->paths && i < a->nfiles; i++)
    free(a->paths[i]);
  free(a->dirs);
  free(a->paths);
  free(a->files);
}

/* Copies the arguments; the file contents stay borrowed (valid during this call). */
static bool args_read(napi_env env, napi_value *argv, materialise_args *a) {
  uint32_t ncontents = 0;
  if (!array_length(env, argv[1], "dirs", &a->ndirs) ||
      !array_length(env, argv[2], "paths", &a->nfiles) ||
      !array_length(env, argv[3], "contents", &ncontents))
    return false;
  if (ncontents != a->nfiles) {
    confined_throw_type_error(env, "paths and contents must have the same length");
    return false;
  }
  a->dirs = calloc(a->ndirs + 1, sizeof *a->dirs);
  a->paths = calloc(a->nfiles + 1, sizeof *a->paths);
  a->files = calloc(a->nfiles + 1, sizeof *a->files);
  if (!a->dirs || !a->paths || !a->files) {
    confined_throw_error(env, NULL, "out of memory");
    return false;
  }
  for (uint32_t i = 0; i < a->ndirs; i++) {
    napi_value v = array_at(env, argv[1], i);
    if (!v || !confined_get_string(env, v, "dirs[i]", &a->dirs[i], NULL))
      return false;
  }
  for (uint32_t i = 0; i < a->nfiles; i++) {
    napi_value p = array_at(env, argv[2], i);
    if (!p || !confined_get_string(env, p, "paths[i]", &a->paths[i], NULL))
      return false;
    napi_value c = array_at(env, argv[3], i);
    if (!c || !confined_get_bytes(env, c, "contents[i]", &a->files[i].data, &a->files[i].size))
      return false;
    a->files[i].path = a->paths[i];
  }
  return true;
}

static napi_value materialise(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  char *slot = NULL;
  int64_t mode = 0;
  materialise_args a = {0};
  if (!confined_get_args(env, info, 5, argv) ||
      !confined_get_string(env, argv[0], "slot", &slot, NULL))
    return NULL;
  if (!confined_get_int64(env, argv[4], "fileMode", &mode) || !args_read(env, argv, &a)) {
    args_free(&a);
    free(slot);
    return NULL;
  }
  if (mode < 0 || mode > 07777) {
    args_free(&a);
    free(slot);
    return confined_throw_type_error(env, "fileMode is out of range");
  }
  ns_manifest *m = NULL;
  ns_result r = ns_materialise(slot, (const char *const *)a.dirs, a.ndirs, a.files, a.nfiles,
                               (uint32_t)mode, &m);
  args_free(&a);
  free(slot);
  napi_value external, obj = NULL;
  if (m) {
    if (napi_create_external(env, m, manifest_finalize, NULL, &external) != napi_ok) {
      /* Nothing owns the manifest: free it (the disk keeps what was made, unrecorded). */
      ns_manifest_free(m);
      confined_throw_last_error(env, "napi_create_external");
      return NULL;
    }
    NAPI_CALL(env, napi_type_tag_object(env, external, &manifest_tag));
  } else {
    NAPI_CALL(env, napi_get_null(env, &external));
  }
  obj = result_object(env, &r);
  if (!obj || !confined_set_value(env, obj, "manifest", external))
    return NULL;
  return obj;
}

static napi_value verify(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  ns_manifest *m;
  if (!confined_get_args(env, info, 1, argv) || !get_manifest(env, argv[0], &m))
    return NULL;
  ns_result r = ns_verify(m);
  return result_object(env, &r);
}

static napi_value remove_namespace(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  ns_manifest *m;
  if (!confined_get_args(env, info, 1, argv) || !get_manifest(env, argv[0], &m))
    return NULL;
  bool durable = false;
  ns_result r = ns_remove(m, &durable);
  napi_value obj = result_object(env, &r);
  if (obj && r.ok && !confined_set_bool(env, obj, "durable", durable))
    return NULL;
  return obj;
}

static bool set_bigint(napi_env env, napi_value obj, const char *key, uint64_t value) {
  napi_value v;
  if (napi_create_bigint_uint64(env, value, &v) != napi_ok) {
    confined_throw_last_error(env, key);
    return false;
  }
  return confined_set_value(env, obj, key, v);
}

static napi_value entries(napi_env env, napi_callback_info info) {
  napi_value argv[1], list;
  ns_manifest *m;
  if (!confined_get_args(env, info, 1, argv) || !get_manifest(env, argv[0], &m))
    return NULL;
  size_t n = ns_manifest_count(m);
  NAPI_CALL(env, napi_create_array_with_length(env, n, &list));
  for (size_t i = 0; i < n; i++) {
    ns_entry_info e;
    napi_value obj;
    char hex[65] = "";
    ns_manifest_entry(m, i, &e);
    if (e.sha256)
      for (int k = 0; k < 32; k++)
        snprintf(hex + 2 * k, 3, "%02x", e.sha256[k]);
    NAPI_CALL(env, napi_create_object(env, &obj));
    if (!confined_set_string(env, obj, "path", e.path) ||
        !confined_set_string(env, obj, "type", e.is_dir ? "directory" : "file") ||
        !set_bigint(env, obj, "dev", e.dev) || !set_bigint(env, obj, "ino", e.ino) ||
        !confined_set_int64(env, obj, "uid", e.uid) ||
        !confined_set_int64(env, obj, "mode", e.mode) ||
        !confined_set_int64(env, obj, "size", (int64_t)e.size) ||
        !confined_set_int64(env, obj, "nlink", (int64_t)e.nlink))
      return NULL;
    napi_value sha;
    if (e.sha256)
      sha = confined_make_string(env, hex);
    else if (napi_get_null(env, &sha) != napi_ok)
      sha = NULL;
    if (!confined_set_value(env, obj, "sha256", sha))
      return NULL;
    NAPI_CALL(env, napi_set_element(env, list, (uint32_t)i, obj));
  }
  return list;
}

bool confined_namespace_init(napi_env env, napi_value exports) {
  return confined_export(env, exports, "namespaceCheckRoot", check_root) &&
         confined_export(env, exports, "namespaceCountEntries", count_entries) &&
         confined_export(env, exports, "namespaceClaimSlot", claim_slot) &&
         confined_export(env, exports, "namespaceMaterialise", materialise) &&
         confined_export(env, exports, "namespaceVerify", verify) &&
         confined_export(env, exports, "namespaceRemove", remove_namespace) &&
         confined_export(env, exports, "namespaceEntries", entries);
}
