/* Glue for the Seatbelt profile builder:
 *   seatbeltProfile({ policy: 'executor', exec, runtimeFiles: [..], program, input })
 *   seatbeltProfile({ policy: 'command', mounts: [{ path, mode: 'ro' | 'rw' }],
 *                     proxyPort: 0 | 1..65535 })
 * Returns { ok: true, text, params: [{ name, value }], instantiated } or
 * { ok: false, error: 'EINVAL' | 'ENOMEM' | 'EIO', reason } when the builder refuses.
 * Throws a TypeError only for values of the wrong type. */
#include "addon.h"
#include "napi_util.h"
#include "profile_seatbelt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Everything the request owns, released in one place. */
struct owned {
  char *policy, *exec, *program, *input;
  char **runtime;
  size_t n_runtime;
  struct seatbelt_mount *mounts;
  char **mount_paths;
  size_t n_mounts;
};

static void owned_free(struct owned *o) {
  free(o->policy);
  free(o->exec);
  free(o->program);
  free(o->input);
  for (size_t i = 0; i < o->n_runtime; i++)
    free(o->runtime[i]);
  free(o->runtime);
  for (size_t i = 0; i < o->n_mounts; i++)
    free(o->mount_paths[i]);
  free(o->mount_paths);
  free(o->mounts);
}

/* Reads obj[key]; *present is false when it is undefined. */
static bool get_prop(napi_env env, napi_value obj, const char *key, napi_value *v, bool *present) {
  napi_valuetype t;
  if (napi_get_named_property(env, obj, key, v) != napi_ok || napi_typeof(env, *v, &t) != napi_ok) {
    confined_throw_last_error(env, key);
    return false;
  }
  *present = t != napi_undefined;
  return true;
}

static bool get_opt_string(napi_env env, napi_value obj, const char *key, char **out) {
  napi_value v;
  bool present;
  if (!get_prop(env, obj, key, &v, &present))
    return false;
  if (!present)
    return true;
  return confined_get_string(env, v, key, out, NULL);
}

static bool get_array(napi_env env, napi_value obj, const char *key, napi_value *arr, uint32_t *n) {
  napi_value v;
  bool present, is = false;
  *n = 0;
  if (!get_prop(env, obj, key, &v, &present))
    return false;
  if (!present)
    return true;
  if (napi_is_array(env, v, &is) != napi_ok || !is) {
    confined_throw_type_error(env, "seatbeltProfile: an array was expected");
    return false;
  }
  if (napi_get_array_length(env, v, n) != napi_ok) {
    confined_throw_last_error(env, key);
    return false;
  }
  /* Bounded before allocating; the builder refuses beyond its own limits anyway. */
  if (*n > 4096) {
    confined_throw_type_error(env, "seatbeltProfile: array too long");
    return false;
  }
  *arr = v;
  return true;
}

static bool get_element(napi_env env, napi_value arr, uint32_t i, napi_value *item) {
  if (napi_get_element(env, arr, i, item) != napi_ok) {
    confined_throw_last_error(env, "napi_get_element");
    return false;
  }
  return true;
}

static bool read_request(napi_env env, napi_value req, struct owned *o,
                         struct seatbelt_request *q) {
  napi_valuetype t;
  if (napi_typeof(env, req, &t) != napi_ok || t != napi_object) {
    confined_throw_type_error(env, "seatbeltProfile: request must be an object");
    return false;
  }
  if (!get_opt_string(env, req, "policy", &o->policy))
    return false;
  if (o->policy && strcmp(o->policy, "executor") == 0) {
    q->policy = SEATBELT_POLICY_EXECUTOR;
  } else if (o->policy && strcmp(o->policy, "command") == 0) {
    q->policy = SEATBELT_POLICY_COMMAND;
  } else {
    confined_throw_type_error(env, "seatbeltProfile: policy must be 'executor' or 'command'");
    return false;
  }
  if (!get_opt_string(env, req, "exec", &o->exec) ||
      !get_opt_string(env, req, "program", &o->program) ||
      !get_opt_string(env, req, "input", &o->input))
    return false;
  q->exec_path = o->exec;
  q->program_dir = o->program;
  q->input_dir = o->input;

  napi_value arr = NULL;
  uint32_t n;
  if (!get_array(env, req, "runtimeFiles", &arr, &n))
    return false;
  if (n) {
    o->runtime = calloc(n, sizeof *o->runtime);
    if (!o->runtime) {
      confined_throw_error(env, NULL, "out of memory");
      return false;
    }
    for (uint32_t i = 0; i < n; i++) {
      napi_value item;
      if (!get_element(env, arr, i, &item) ||
          !confined_get_string(env, item, "runtimeFiles[]", &o->runtime[i], NULL))
        return false;
      o->n_runtime = i + 1;
    }
  }
  q->runtime_files = (const char *const *)o->runtime;
  q->n_runtime_files = o->n_runtime;

  if (!get_array(env, req, "mounts", &arr, &n))
    return false;
  if (n) {
    o->mounts = calloc(n, sizeof *o->mounts);
    o->mount_paths = calloc(n, sizeof *o->mount_paths);
    if (!o->mounts || !o->mount_paths) {
      confined_throw_error(env, NULL, "out of memory");
      return false;
    }
    for (uint32_t i = 0; i < n; i++) {
      napi_value item;
      char *mode = NULL;
      if (!get_element(env, arr, i, &item))
        return false;
      if (napi_typeof(env, item, &t) != napi_ok || t != napi_object) {
        confined_throw_type_error(env, "seatbeltProfile: a mount must be an object");
        return false;
      }
      o->n_mounts = i + 1;
      if (!get_opt_string(env, item, "path", &o->mount_paths[i]) ||
          !get_opt_string(env, item, "mode", &mode))
        return false;
      bool rw = mode && strcmp(mode, "rw") == 0, ro = mode && strcmp(mode, "ro") == 0;
      free(mode);
      if (!o->mount_paths[i] || (!rw && !ro)) {
        confined_throw_type_error(env, "seatbeltProfile: a mount needs a path and mode ro|rw");
        return false;
      }
      o->mounts[i].path = o->mount_paths[i];
      o->mounts[i].writable = rw;
    }
  }
  q->mounts = o->mounts;
  q->n_mounts = o->n_mounts;

  napi_value port;
  bool present;
  if (!get_prop(env, req, "proxyPort", &port, &present))
    return false;
  if (present) {
    int64_t p;
    if (!confined_get_int64(env, port, "proxyPort", &p))
      return false;
    if (p < 0 || p > 65535) {
      confined_throw_type_error(env, "seatbeltProfile: proxyPort must be 0..65535");
      return false;
    }
    q->proxy_port = (unsigned)p;
  }
  return true;
}

static napi_value build_result(napi_env env, const struct seatbelt_profile *p) {
  napi_value obj, list, text;
  NAPI_CALL(env, napi_create_object(env, &obj));
  NAPI_CALL(env, napi_create_string_utf8(env, p->text, p->text_len, &text));
  NAPI_CALL(env, napi_create_array_with_length(env, p->n_params, &list));
  for (size_t i = 0; i < p->n_params; i++) {
    napi_value item;
    NAPI_CALL(env, napi_create_object(env, &item));
    if (!confined_set_string(env, item, "name", p->params[i].name) ||
        !confined_set_string(env, item, "value", p->params[i].value))
      return NULL;
    NAPI_CALL(env, napi_set_element(env, list, (uint32_t)i, item));
  }
  if (!confined_set_bool(env, obj, "ok", true) || !confined_set_value(env, obj, "text", text) ||
      !confined_set_value(env, obj, "params", list) ||
      !confined_set_string(env, obj, "instantiated", p->instantiated))
    return NULL;
  return obj;
}

static napi_value seatbelt_profile_js(napi_env env, napi_callback_info info) {
  napi_value argv[1], out = NULL;
  struct owned o = {0};
  struct seatbelt_request q = {0};
  if (!confined_get_args(env, info, 1, argv) || !read_request(env, argv[0], &o, &q)) {
    owned_free(&o);
    return NULL;
  }
  struct seatbelt_profile p;
  int rc = seatbelt_build(&q, &p);
  owned_free(&o);
  if (rc == 0) {
    out = build_result(env, &p);
    seatbelt_profile_free(&p);
    return out;
  }
  seatbelt_profile_free(&p);
  const char *code = rc == -ENOMEM ? "ENOMEM" : rc == -EIO ? "EIO" : "EINVAL";
  if (napi_create_object(env, &out) != napi_ok) {
    confined_throw_last_error(env, "napi_create_object");
    return NULL;
  }
  if (!confined_set_bool(env, out, "ok", false) || !confined_set_string(env, out, "error", code) ||
      !confined_set_string(env, out, "reason", p.reason))
    return NULL;
  return out;
}

bool confined_seatbelt_init(napi_env env, napi_value exports) {
  return confined_export(env, exports, "seatbeltProfile", seatbelt_profile_js);
}
