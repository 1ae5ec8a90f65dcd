#pragma once
/* Reader of glibc's /etc/ld.so.cache: the new format ("glibc-ld.so.cache1.1"), alone or
 * behind the old "ld.so-1.7.0" table, and the old table alone. Pure and bounds-checked:
 * it works on a buffer and returns errors as values. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entry flags written by ldconfig (elf/ldconfig.h in glibc). */
#define LDCACHE_FLAG_ELF_LIBC6 0x0003
#define LDCACHE_FLAG_X8664_LIB64 0x0300
#define LDCACHE_FLAG_AARCH64_LIB64 0x0a00
/* hwcap value of an entry from a glibc-hwcaps subdirectory: bit 62, the ISA level in
 * bits 32..41 and the index of the subdirectory name in the low 32 bits. */
#define LDCACHE_HWCAP_EXTENSION (1ULL << 62)
#define LDCACHE_HWCAP_ISA_MASK 0x3ffULL

struct ldcache {
  const uint8_t *buf;
  size_t len;
  bool is_new;        /* entries are the new format's */
  size_t table_off;   /* offset of the first entry */
  size_t entry_size;  /* 12 (old) or 24 (new) */
  uint32_t nlibs;     /* entries, checked to fit in the buffer */
  size_t strings_off; /* string offsets are relative to this */
  size_t strings_len; /* and must be below it */
  /* glibc-hwcaps subdirectory names (extension section 1), if present. */
  size_t hwcaps_off;
  uint32_t hwcaps_count;
};

struct ldcache_entry {
  int32_t flags;
  const char *key;   /* soname, NUL-terminated inside the buffer */
  const char *value; /* path */
  uint32_t osversion;
  uint64_t hwcap;
};

/* Validates the headers. Returns 0 or -ENOEXEC with *reason set. */
int ldcache_open(const uint8_t *buf, size_t len, struct ldcache *out, const char **reason);

/* Entry i (< nlibs). Returns 0, or -ENOEXEC when its strings are out of bounds. */
int ldcache_entry(const struct ldcache *c, uint32_t i, struct ldcache_entry *e);

/* Name of glibc-hwcaps subdirectory `index`, or NULL when there is none. */
const char *ldcache_hwcaps_name(const struct ldcache *c, uint32_t index);

/* glibc's ordering of sonames in the cache: digit runs compare numerically. */
int ldcache_libcmp(const char *a, const char *b);

/* Looks `name` up as ld.so does (binary search, then the run of equal names; flags must
 * equal `want_flags`; named-hwcaps entries win by priority: their subdirectory must be
 * in `hwcaps`, listed best first). Returns 1 with *path set, 0 when not found, or a
 * negative errno with *reason when the answer cannot be decided exactly (a legacy
 * hwcap entry, an ISA-level-marked entry, or a malformed table). */
int ldcache_lookup(const struct ldcache *c, const char *name, int32_t want_flags,
                   const char *const *hwcaps, size_t n_hwcaps, const char **path,
                   const char **reason);
