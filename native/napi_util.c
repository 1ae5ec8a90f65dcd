/* Node-API glue helpers: the only place besides the *_napi.c files that throws. */
#include "napi_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

napi_value confined_throw_type_error(napi_env env, const char *message) {
  napi_throw_type_error(env, NULL, message);
  return NULL;
}

napi_value confined_throw_error(napi_env env, const char *code, const char *message) {
  napi_throw_error(env, code, message);
  return NULL;
}

void confined_throw_last_error(napi_env env, const char *what) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending)
    return;
  const napi_extended_error_info *info = NULL;
  napi_get_last_error_info(env, &info);
  const char *msg = (info && info->error_message) ? info->error_message : "napi call failed";
  char buf[512];
  snprintf(buf, sizeof buf, "confined native: %s (%s)", msg, what);
  napi_throw_error(env, NULL, buf);
}

bool confined_get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) {
    confined_throw_last_error(env, "napi_get_cb_info");
    return false;
  }
  if (argc < want) {
    napi_throw_type_error(env, NULL, "confined native: missing arguments");
    return false;
  }
  return true;
}

bool confined_get_string(napi_env env, napi_value v, const char *what, char **out, size_t *len) {
  napi_valuetype t;
  size_t n = 0;
  char msg[256];
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_string) {
    snprintf(msg, sizeof msg, "%s must be a string", what);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  if (napi_get_value_string_utf8(env, v, NULL, 0, &n) != napi_ok) {
    confined_throw_last_error(env, what);
    return false;
  }
  char *s = malloc(n + 1);
  if (!s) {
    napi_throw_error(env, NULL, "out of memory");
    return false;
  }
  if (napi_get_value_string_utf8(env, v, s, n + 1, &n) != napi_ok) {
    free(s);
    confined_throw_last_error(env, what);
    return false;
  }
  /* An embedded NUL would silently shorten a path given to the kernel. */
  if (strlen(s) != n) {
    free(s);
    snprintf(msg, sizeof msg, "%s must not contain NUL", what);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  *out = s;
  if (len)
    *len = n;
  return true;
}

bool confined_get_int64(napi_env env, napi_value v, const char *what, int64_t *out) {
  napi_valuetype t;
  char msg[256];
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_number ||
      napi_get_value_int64(env, v, out) != napi_ok) {
    snprintf(msg, sizeof msg, "%s must be a number", what);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  return true;
}

bool confined_get_bytes(napi_env env, napi_value v, const char *what, const uint8_t **data,
                        size_t *len) {
  bool is = false;
  char msg[256];
  if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
    napi_typedarray_type type;
    size_t length, offset;
    void *ptr;
    napi_value ab;
    if (napi_get_typedarray_info(env, v, &type, &length, &ptr, &ab, &offset) == napi_ok &&
        type == napi_uint8_array) {
      *data = ptr;
      *len = length;
      return true;
    }
  }
  snprintf(msg, sizeof msg, "%s must be a Uint8Array", what);
  napi_throw_type_error(env, NULL, msg);
  return false;
}

napi_value confined_make_string(napi_env env, const char *s) {
  napi_value v;
  if (napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v) != napi_ok) {
    confined_throw_last_error(env, "napi_create_string_utf8");
    return NULL;
  }
  return v;
}

bool confined_set_value(napi_env env, napi_value obj, const char *key, napi_value value) {
  if (!value)
    return false;
  if (napi_set_named_property(env, obj, key, value) != napi_ok) {
    confined_throw_last_error(env, key);
    return false;
  }
  return true;
}

bool confined_set_string(napi_env env, napi_value obj, const char *key, const char *value) {
  return confined_set_value(env, obj, key, confined_make_string(env, value));
}

bool confined_set_int64(napi_env env, napi_value obj, const char *key, int64_t value) {
  napi_value v;
  if (napi_create_int64(env, value, &v) != napi_ok) {
    confined_throw_last_error(env, key);
    return false;
  }
  return confined_set_value(env, obj, key, v);
}

bool confined_set_bool(napi_env env, napi_value obj, const char *key, bool value) {
  napi_value v;
  if (napi_get_boolean(env, value, &v) != napi_ok) {
    confined_throw_last_error(env, key);
    return false;
  }
  return confined_set_value(env, obj, key, v);
}

bool confined_export(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value f;
  if (napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &f) != napi_ok) {
    confined_throw_last_error(env, name);
    return false;
  }
  return confined_set_value(env, exports, name, f);
}
