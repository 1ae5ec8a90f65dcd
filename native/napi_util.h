#pragma once
/* Node-API glue helpers. Only glue code (the *_napi.c files and addon.c) includes this:
 * the concern modules return errors as values and never touch napi. */

#include <node_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Evaluates a napi call; on failure throws (unless an exception is already pending)
 * and returns NULL from the calling glue function. */
#define NAPI_CALL(env, call)                                                                       \
  do {                                                                                             \
    napi_status status_ = (call);                                                                  \
    if (status_ != napi_ok) {                                                                      \
      confined_throw_last_error((env), #call);                                                     \
      return NULL;                                                                                 \
    }                                                                                              \
  } while (0)

/* Throws a TypeError/Error with a message; returns NULL for use as `return THROW...`. */
napi_value confined_throw_type_error(napi_env env, const char *message);
napi_value confined_throw_error(napi_env env, const char *code, const char *message);
void confined_throw_last_error(napi_env env, const char *what);

/* Argument helpers: each throws a TypeError naming `what` and returns false on mismatch. */
bool confined_get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv);
bool confined_get_string(napi_env env, napi_value v, const char *what, char **out, size_t *len);
bool confined_get_int64(napi_env env, napi_value v, const char *what, int64_t *out);
bool confined_get_bytes(napi_env env, napi_value v, const char *what, const uint8_t **data,
                        size_t *len);

/* Property helpers that return NULL on failure (an exception is pending). */
napi_value confined_make_string(napi_env env, const char *s);
bool confined_set_string(napi_env env, napi_value obj, const char *key, const char *value);
bool confined_set_int64(napi_env env, napi_value obj, const char *key, int64_t value);
bool confined_set_bool(napi_env env, napi_value obj, const char *key, bool value);
bool confined_set_value(napi_env env, napi_value obj, const char *key, napi_value value);
bool confined_export(napi_env env, napi_value exports, const char *name, napi_callback fn);
