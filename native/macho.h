#pragma once
/* Mach-O load-command reader: pure (no I/O, no allocation besides the result's own
 * array), bounds-checked against `len` at every read, errors returned as values. The
 * entry point has the shape of a libFuzzer target: macho_parse(buf, len, cpu, &out). */

#include <stddef.h>
#include <stdint.h>

/* CPU types as in <mach/machine.h>. */
#define MACHO_CPU_TYPE_X86_64 0x01000007u
#define MACHO_CPU_TYPE_ARM64 0x0100000cu

/* The slice a caller asks for. Subtypes are matched exactly (see macho.c). */
enum macho_cpu {
  MACHO_CPU_ARM64,
  MACHO_CPU_X86_64,
};

/* What a reported load command is. Strings are slices of the input buffer, never copied. */
enum macho_entry_kind {
  MACHO_ENTRY_LOAD_DYLIB,        /* LC_LOAD_DYLIB */
  MACHO_ENTRY_LOAD_WEAK_DYLIB,   /* LC_LOAD_WEAK_DYLIB */
  MACHO_ENTRY_REEXPORT_DYLIB,    /* LC_REEXPORT_DYLIB */
  MACHO_ENTRY_LOAD_UPWARD_DYLIB, /* LC_LOAD_UPWARD_DYLIB (also loads a library) */
  MACHO_ENTRY_RPATH,             /* LC_RPATH */
  MACHO_ENTRY_ID_DYLIB,          /* LC_ID_DYLIB */
  MACHO_ENTRY_LOAD_DYLINKER,     /* LC_LOAD_DYLINKER */
  MACHO_ENTRY_DYLD_ENVIRONMENT,  /* LC_DYLD_ENVIRONMENT (changes dyld's search paths) */
};

struct macho_entry {
  enum macho_entry_kind kind;
  size_t offset; /* of the string, from the start of the whole buffer */
  size_t length; /* without the terminating NUL; the string is valid UTF-8 */
};

struct macho_result {
  int ok; /* 1: the fields below are valid; 0: `reason` says why not */
  char reason[160];
  int fat;                     /* 1 when the buffer is a fat (universal) file */
  size_t slice_offset;         /* of the selected mach_header_64 in the buffer */
  size_t slice_size;           /* bytes of the selected slice */
  uint32_t cputype;            /* of the selected slice */
  uint32_t cpusubtype;         /* of the selected slice, capability bits masked off */
  uint32_t filetype;           /* MH_EXECUTE, MH_DYLIB, ... */
  uint32_t flags;              /* mach_header_64.flags */
  uint32_t ncmds;              /* load commands walked */
  struct macho_entry *entries; /* in load-command order; freed by macho_result_free */
  size_t n_entries;
};

/* Parses `buf` (a whole thin or fat Mach-O file) and reports the load commands of the
 * 64-bit slice for `cpu`. Returns 0 with out->ok = 1, or a negative errno with
 * out->ok = 0 and out->reason set (-EINVAL malformed or refused, -ENOENT no slice for
 * `cpu`, -ENOMEM). Never reads outside [buf, buf + len). */
int macho_parse(const uint8_t *buf, size_t len, enum macho_cpu cpu, struct macho_result *out);

/* Releases what macho_parse allocated; safe on a zeroed or failed result. */
void macho_result_free(struct macho_result *r);

/* Names for reporting: "execute", "dylib", ... ("unknown" otherwise); "arm64", "x86_64". */
const char *macho_filetype_name(uint32_t filetype);
const char *macho_cpu_name(enum macho_cpu cpu);
const char *macho_entry_kind_name(enum macho_entry_kind kind);
