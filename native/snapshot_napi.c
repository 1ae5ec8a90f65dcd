/* Node-API glue of snapshot.c: converts the arguments to plain buffers, throws the reason.
 *
 *   snapshotDigest(paths: unknown[], contents: unknown[], maxBytes: number): string
 *   snapshotValidate(paths: unknown[], contents: unknown[], maxBytes: number): undefined
 *
 * Both check every rule; snapshotValidate stops there (lib/ uses it to refuse a snapshot
 * before copying its contents).
 *
 * A path that is not a string or a content that is not a Uint8Array (a Buffer is one) is
 * passed on as NULL, so snapshot.c decides on it like on every other rule. An invalid snapshot
 * throws a TypeError whose message is snapshot.c's reason (lib/snapshot.js adds the prefix);
 * a host failure throws an Error. The caller (lib/) builds both arrays itself. */
#include "addon.h"
#include "napi_util.h"
#include "snapshot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Any non-NULL pointer serves as the bytes of an empty Uint8Array (whose data may be NULL). */
static const uint8_t empty_content[1];

static bool get_array(napi_env env, napi_value v, const char *what, uint32_t *length) {
  bool is = false;
  if (napi_is_array(env, v, &is) != napi_ok || !is) {
    char msg[128];
    snprintf(msg, sizeof msg, "confined native: %s must be an array", what);
    napi_throw_type_error(env, NULL, msg);
    return false;
  }
  if (napi_get_array_length(env, v, length) != napi_ok) {
    confined_throw_last_error(env, what);
    return false;
  }
  return true;
}

/* Sets f->content and f->size from a Uint8Array, or content NULL for anything else. */
static bool get_content(napi_env env, napi_value v, struct snapshot_file *f) {
  bool is = false;
  napi_typedarray_type type;
  size_t length = 0;
  void *data = NULL;
  f->content = NULL;
  f->size = 0;
  if (napi_is_typedarray(env, v, &is) != napi_ok)
    return false;
  if (!is)
    return true;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, NULL, NULL) != napi_ok)
    return false;
  if (type != napi_uint8_array)
    return true;
  f->content = length == 0 ? empty_content : data;
  f->size = length;
  return true;
}

/* Reads the paths (as UTF-8, copied into one block) and the contents (in place) of the
 * first n entries into files. Returns the block to free, or NULL with an exception pending. */
static char *get_files(napi_env env, napi_value paths, napi_value contents, uint32_t n,
                       struct snapshot_file *files) {
  napi_value *strings = calloc(n ? n : 1, sizeof *strings);
  size_t total = 0, offset = 0;
  char *block = NULL;
  if (strings == NULL)
    goto no_memory;
  for (uint32_t i = 0; i < n; i++) {
    napi_value path, content;
    napi_valuetype type;
    files[i].path = NULL;
    files[i].path_len = 0;
    if (napi_get_element(env, paths, i, &path) != napi_ok ||
        napi_get_element(env, contents, i, &content) != napi_ok ||
        napi_typeof(env, path, &type) != napi_ok || !get_content(env, content, &files[i]))
      goto napi_failed;
    if (type != napi_string)
      continue;
    if (napi_get_value_string_utf8(env, path, NULL, 0, &files[i].path_len) != napi_ok)
      goto napi_failed;
    strings[i] = path;
    total += files[i].path_len + 1;
  }
  block = malloc(total ? total : 1);
  if (block == NULL)
    goto no_memory;
  for (uint32_t i = 0; i < n; i++) {
    if (strings[i] == NULL)
      continue;
    size_t copied = 0;
    if (napi_get_value_string_utf8(env, strings[i], block + offset, files[i].path_len + 1,
                                   &copied) != napi_ok)
      goto napi_failed;
    files[i].path = block + offset;
    files[i].path_len = copied;
    offset += copied + 1;
  }
  free(strings);
  return block;

no_memory:
  napi_throw_error(env, NULL, "confined native: out of memory");
  goto fail;
napi_failed:
  confined_throw_last_error(env, "snapshotDigest");
fail:
  free(strings);
  free(block);
  return NULL;
}

/* Checks the snapshot of the call's arguments, and when want_digest hashes it too. */
static napi_value check_snapshot(napi_env env, napi_callback_info info, bool want_digest) {
  napi_value argv[3];
  uint32_t n = 0, n_contents = 0;
  double max_bytes = 0;
  if (!confined_get_args(env, info, 3, argv) || !get_array(env, argv[0], "paths", &n) ||
      !get_array(env, argv[1], "contents", &n_contents))
    return NULL;
  if (n != n_contents)
    return confined_throw_type_error(env, "confined native: paths and contents differ in length");
  napi_valuetype type;
  NAPI_CALL(env, napi_typeof(env, argv[2], &type));
  if (type != napi_number || napi_get_value_double(env, argv[2], &max_bytes) != napi_ok ||
      !(max_bytes >= 0 && max_bytes <= 9007199254740991.0) || floor(max_bytes) != max_bytes)
    return confined_throw_type_error(env, "confined native: maxBytes must be a safe integer >= 0");

  /* One file past the limit is enough to refuse; reading no further bounds the work. */
  if (n > SNAPSHOT_MAX_FILES + 1)
    n = SNAPSHOT_MAX_FILES + 1;
  struct snapshot_file *files = calloc(n ? n : 1, sizeof *files);
  if (files == NULL)
    return confined_throw_error(env, NULL, "confined native: out of memory");
  char *block = get_files(env, argv[0], argv[1], n, files);
  if (block == NULL) {
    free(files);
    return NULL;
  }
  char digest[SNAPSHOT_DIGEST_SIZE];
  char reason[1024];
  struct snapshot_check check = want_digest ? snapshot_digest(files, n, (uint64_t)max_bytes, digest)
                                            : snapshot_validate(files, n, (uint64_t)max_bytes);
  if (check.status != SNAPSHOT_OK)
    snapshot_reason(check, files, reason, sizeof reason);
  free(block);
  free(files);
  if (check.status == SNAPSHOT_OK && want_digest)
    return confined_make_string(env, digest);
  if (check.status == SNAPSHOT_OK) {
    napi_value undefined;
    NAPI_CALL(env, napi_get_undefined(env, &undefined));
    return undefined;
  }
  if (snapshot_status_is_invalid(check.status))
    return confined_throw_type_error(env, reason);
  return confined_throw_error(env, NULL, reason);
}

static napi_value snapshot_digest_js(napi_env env, napi_callback_info info) {
  return check_snapshot(env, info, true);
}

static napi_value snapshot_validate_js(napi_env env, napi_callback_info info) {
  return check_snapshot(env, info, false);
}

bool confined_snapshot_init(napi_env env, napi_value exports) {
  return confined_export(env, exports, "snapshotDigest", snapshot_digest_js) &&
         confined_export(env, exports, "snapshotValidate", snapshot_validate_js);
}
