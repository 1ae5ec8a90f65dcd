/* Glue for the Mach-O reader: machoParse(bytes: Uint8Array, cpu: 'arm64' | 'x86_64').
 * Returns { ok: true, fat, sliceOffset, sliceSize, cputype, cpusubtype, fileType,
 * fileTypeCode, flags, ncmds, commands: [{ kind, value }] } in load-command order, or
 * { ok: false, error: 'EINVAL' | 'ENOENT' | 'ENOMEM', reason } for a file the reader
 * refuses. Throws only for arguments of the wrong type. */
#include "addon.h"
#include "macho.h"
#include "napi_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static napi_value build_ok(napi_env env, const uint8_t *buf, const struct macho_result *r) {
  napi_value obj, list;
  NAPI_CALL(env, napi_create_object(env, &obj));
  if (!confined_set_bool(env, obj, "ok", true) || !confined_set_bool(env, obj, "fat", r->fat) ||
      !confined_set_int64(env, obj, "sliceOffset", (int64_t)r->slice_offset) ||
      !confined_set_int64(env, obj, "sliceSize", (int64_t)r->slice_size) ||
      !confined_set_int64(env, obj, "cputype", r->cputype) ||
      !confined_set_int64(env, obj, "cpusubtype", r->cpusubtype) ||
      !confined_set_string(env, obj, "fileType", macho_filetype_name(r->filetype)) ||
      !confined_set_int64(env, obj, "fileTypeCode", r->filetype) ||
      !confined_set_int64(env, obj, "flags", r->flags) ||
      !confined_set_int64(env, obj, "ncmds", r->ncmds))
    return NULL;
  NAPI_CALL(env, napi_create_array_with_length(env, r->n_entries, &list));
  for (size_t i = 0; i < r->n_entries; i++) {
    const struct macho_entry *e = &r->entries[i];
    napi_value item, value;
    NAPI_CALL(env, napi_create_object(env, &item));
    /* The reader validated UTF-8, so this conversion is exact, never lossy. */
    NAPI_CALL(env, napi_create_string_utf8(env, (const char *)buf + e->offset, e->length, &value));
    if (!confined_set_string(env, item, "kind", macho_entry_kind_name(e->kind)) ||
        !confined_set_value(env, item, "value", value))
      return NULL;
    NAPI_CALL(env, napi_set_element(env, list, (uint32_t)i, item));
  }
  if (!confined_set_value(env, obj, "commands", list))
    return NULL;
  return obj;
}

static napi_value macho_parse_js(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  const uint8_t *buf;
  size_t len;
  char *cpu_name = NULL;
  enum macho_cpu cpu;
  if (!confined_get_args(env, info, 2, argv) ||
      !confined_get_bytes(env, argv[0], "bytes", &buf, &len) ||
      !confined_get_string(env, argv[1], "cpu", &cpu_name, NULL))
    return NULL;
  if (strcmp(cpu_name, "arm64") == 0) {
    cpu = MACHO_CPU_ARM64;
  } else if (strcmp(cpu_name, "x86_64") == 0) {
    cpu = MACHO_CPU_X86_64;
  } else {
    free(cpu_name);
    return confined_throw_type_error(env, "cpu must be 'arm64' or 'x86_64'");
  }
  free(cpu_name);

  struct macho_result r;
  int rc = macho_parse(buf, len, cpu, &r);
  napi_value out;
  if (rc == 0) {
    out = build_ok(env, buf, &r);
    macho_result_free(&r);
    return out;
  }
  macho_result_free(&r);
  const char *code = rc == -ENOENT ? "ENOENT" : rc == -ENOMEM ? "ENOMEM" : "EINVAL";
  if (napi_create_object(env, &out) != napi_ok) {
    confined_throw_last_error(env, "napi_create_object");
    return NULL;
  }
  if (!confined_set_bool(env, out, "ok", false) || !confined_set_string(env, out, "error", code) ||
      !confined_set_string(env, out, "reason", r.reason))
    return NULL;
  return out;
}

bool confined_macho_init(napi_env env, napi_value exports) {
  return confined_export(env, exports, "machoParse", macho_parse_js);
}
