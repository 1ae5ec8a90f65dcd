#pragma once
/* Bounds-checked ELF reader: the facts ld.so uses to load an object (class, machine,
 * type, PT_INTERP and the dynamic section's DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH,
 * DT_FLAGS_1). Pure: no allocation, no I/O except through the caller's reader; every
 * offset taken from the file is checked before use, so any input gives 0 or an error. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELF_MAX_NEEDED 512
#define ELF_STRINGS_MAX 65536
#define ELF_MAX_PHNUM 4096
#define ELF_MAX_DYN 65536

struct elf_info {
  uint8_t elf_class;  /* 1 = ELFCLASS32, 2 = ELFCLASS64 */
  uint8_t data;       /* 1 = little-endian, 2 = big-endian */
  uint8_t osabi;      /* e_ident[EI_OSABI] */
  uint8_t abiversion; /* e_ident[EI_ABIVERSION] */
  uint16_t type;      /* e_type */
  uint16_t machine;   /* e_machine */
  bool has_dynamic;   /* a PT_DYNAMIC segment was found */
  uint64_t flags_1;   /* DT_FLAGS_1, 0 if absent */
  /* The first dynamic tag that makes ld.so load more than DT_NEEDED says (DT_AUDIT,
   * DT_DEPAUDIT, DT_FILTER, DT_AUXILIARY), or 0. */
  uint64_t extra_load_tag;
  /* NUL-terminated strings stored in `strings` (NULL when absent). The struct holds
   * pointers into itself: do not copy it by value. */
  const char *interp;
  const char *soname;
  const char *rpath;   /* the last DT_RPATH, as ld.so keeps it */
  const char *runpath; /* the last DT_RUNPATH */
  size_t n_needed;
  const char *needed[ELF_MAX_NEEDED]; /* DT_NEEDED in file order */
  size_t strings_used;
  char strings[ELF_STRINGS_MAX];
};

/* A random-access byte source. read() copies exactly n bytes at off into dst and
 * returns 0, or a negative errno (-EINVAL when the range is outside the object). */
struct elf_source {
  int (*read)(const struct elf_source *src, uint64_t off, size_t n, void *dst);
  uint64_t size;
  const void *ctx;
  int fd;
};

/* Parses a whole ELF image held in memory. Returns 0, or a negative errno with
 * *reason set to a static description (-ENOEXEC for malformed input). */
int elf_parse(const uint8_t *buf, size_t len, struct elf_info *out, const char **reason);

/* Same, reading through `src` (e.g. pread on a file descriptor). */
int elf_parse_source(const struct elf_source *src, struct elf_info *out, const char **reason);

/* Parses the file open on fd (size from fstat by the caller) with pread. */
int elf_parse_fd(int fd, uint64_t size, struct elf_info *out, const char **reason);
