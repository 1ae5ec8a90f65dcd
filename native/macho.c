/* Mach-O load-command reader (see macho.h). Every read goes through rd32_* with an
 * explicit bound check first; offsets are size_t and every sum is checked against the
 * remaining length before it is formed, so no arithmetic can wrap. Anything dyld would
 * refuse, or that this reader cannot model exactly, is refused with a reason: the caller
 * pins a runtime closure from this, and a silently skipped command would be a gap. */
#include "macho.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MH_MAGIC 0xfeedfaceu
#define MH_MAGIC_64 0xfeedfacfu
#define FAT_MAGIC 0xcafebabeu
#define FAT_MAGIC_64 0xcafebabfu

#define MACH_HEADER_64_SIZE 32u
#define FAT_HEADER_SIZE 8u
#define FAT_ARCH_SIZE 20u
#define FAT_ARCH_64_SIZE 32u
/* Real universal files hold a handful of slices; Java class files share FAT_MAGIC and
 * put their version where nfat_arch is, so a large count is refused as not Mach-O. */
#define MACHO_MAX_FAT_ARCH 32u

#define CPU_SUBTYPE_MASK 0xff000000u
#define CPU_SUBTYPE_ARM64_ALL 0u
#define CPU_SUBTYPE_ARM64_V8 1u
#define CPU_SUBTYPE_ARM64E 2u
#define CPU_SUBTYPE_X86_64_ALL 3u
#define CPU_SUBTYPE_X86_64_H 8u

#define LC_REQ_DYLD 0x80000000u
#define LC_LOAD_DYLIB 0xcu
#define LC_ID_DYLIB 0xdu
#define LC_LOAD_DYLINKER 0xeu
#define LC_LOAD_WEAK_DYLIB (0x18u | LC_REQ_DYLD)
#define LC_RPATH (0x1cu | LC_REQ_DYLD)
#define LC_REEXPORT_DYLIB (0x1fu | LC_REQ_DYLD)
#define LC_LAZY_LOAD_DYLIB 0x20u
#define LC_LOAD_UPWARD_DYLIB (0x23u | LC_REQ_DYLD)
#define LC_DYLD_ENVIRONMENT 0x27u
/* The other commands loader.h marks LC_REQ_DYLD; none of them names a file. */
#define LC_DYLD_INFO_ONLY (0x22u | LC_REQ_DYLD)
#define LC_MAIN (0x28u | LC_REQ_DYLD)
#define LC_DYLD_EXPORTS_TRIE (0x33u | LC_REQ_DYLD)
#define LC_DYLD_CHAINED_FIXUPS (0x34u | LC_REQ_DYLD)

#define DYLIB_COMMAND_SIZE 24u  /* cmd, cmdsize, name.offset, timestamp, 2 versions */
#define LC_STR_COMMAND_SIZE 12u /* cmd, cmdsize, path/name offset */

__attribute__((format(printf, 3, 4))) static int fail(struct macho_result *r, int err,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
  va_end(ap);
  r->ok = 0;
  return err;
}

/* Callers check `off <= len && len - off >= 4` before each read. */
static uint32_t rd32_le(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t rd32_be(const uint8_t *p) {
  return (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

static uint64_t rd64_be(const uint8_t *p) {
  return (uint64_t)rd32_be(p) << 32 | rd32_be(p + 4);
}

/* True when [off, off + n) lies inside a buffer of `len` bytes. */
static int in_bounds(size_t len, size_t off, size_t n) {
  return off <= len && n <= len - off;
}

static int valid_utf8(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    size_t extra;
    uint32_t cp, min;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return 0;
    }
    if (extra > n - i - 1)
      return 0;
    for (size_t k = 1; k <= extra; k++) {
      if ((s[i + k] & 0xc0) != 0x80)
        return 0;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    i += extra + 1;
  }
  return 1;
}

const char *macho_cpu_name(enum macho_cpu cpu) {
  switch (cpu) {
  case MACHO_CPU_ARM64:
    return "arm64";
  case MACHO_CPU_X86_64:
    return "x86_64";
  }
  return "unknown";
}

const char *macho_filetype_name(uint32_t filetype) {
  static const char *const names[] = {NULL,      "object",      "execute",  "fvmlib", "core",
                                      "preload", "dylib",       "dylinker", "bundle", "dylib_stub",
                                      "dsym",    "kext_bundle", "fileset"};
  if (filetype < sizeof names / sizeof names[0] && names[filetype])
    return names[filetype];
  return "unknown";
}

const char *macho_entry_kind_name(enum macho_entry_kind kind) {
  switch (kind) {
  case MACHO_ENTRY_LOAD_DYLIB:
    return "load";
  case MACHO_ENTRY_LOAD_WEAK_DYLIB:
    return "weak";
  case MACHO_ENTRY_REEXPORT_DYLIB:
    return "reexport";
  case MACHO_ENTRY_LOAD_UPWARD_DYLIB:
    return "upward";
  case MACHO_ENTRY_RPATH:
    return "rpath";
  case MACHO_ENTRY_ID_DYLIB:
    return "id";
  case MACHO_ENTRY_LOAD_DYLINKER:
    return "dylinker";
  case MACHO_ENTRY_DYLD_ENVIRONMENT:
    return "dyld-environment";
  }
  return "unknown";
}

/* Slice matching. 1: this slice is the one asked for. 0: another CPU. -1: the same CPU
 * type in a variant (arm64e, x86_64h) whose selection by the kernel and dyld depends on
 * the machine and the process, so a file holding it cannot be pinned exactly. */
static int slice_matches(enum macho_cpu cpu, uint32_t cputype, uint32_t cpusubtype) {
  uint32_t sub = cpusubtype & ~CPU_SUBTYPE_MASK;
  switch (cpu) {
  case MACHO_CPU_ARM64:
    if (cputype != MACHO_CPU_TYPE_ARM64)
      return 0;
    return (sub == CPU_SUBTYPE_ARM64_ALL || sub == CPU_SUBTYPE_ARM64_V8) ? 1 : -1;
  case MACHO_CPU_X86_64:
    if (cputype != MACHO_CPU_TYPE_X86_64)
      return 0;
    return sub == CPU_SUBTYPE_X86_64_ALL ? 1 : -1;
  }
  return 0;
}

/* Reads the load-command string at `stroff` inside the command at `cmd_off` of `cmdsize`
 * bytes; `min` is the fixed part of the command that the string may not overlap. */
static int take_string(const uint8_t *buf, size_t cmd_off, uint32_t cmdsize, uint32_t min,
                       uint32_t index, enum macho_entry_kind kind, struct macho_result *r) {
  if (cmdsize < min)
    return fail(r, -EINVAL, "load command %u (%s): cmdsize %u is smaller than %u", index,
                macho_entry_kind_name(kind), cmdsize, min);
  uint32_t stroff = rd32_le(buf + cmd_off + 8);
  if (stroff < min || stroff >= cmdsize)
    return fail(r, -EINVAL, "load command %u (%s): string offset %u outside [%u, %u)", index,
                macho_entry_kind_name(kind), stroff, min, cmdsize);
  const uint8_t *s = buf + cmd_off + stroff;
  size_t room = (size_t)cmdsize - stroff;
  const uint8_t *nul = memchr(s, 0, room);
  if (!nul)
    return fail(r, -EINVAL, "load command %u (%s): string not NUL-terminated within cmdsize", index,
                macho_entry_kind_name(kind));
  size_t n = (size_t)(nul - s);
  if (n == 0)
    return fail(r, -EINVAL, "load command %u (%s): empty string", index,
                macho_entry_kind_name(kind));
  if (!valid_utf8(s, n))
    return fail(r, -EINVAL, "load command %u (%s): string is not valid UTF-8", index,
                macho_entry_kind_name(kind));
  struct macho_entry *e = &r->entries[r->n_entries++];
  e->kind = kind;
  e->offset = cmd_off + stroff;
  e->length = n;
  return 0;
}

/* Walks the load commands of the mach_header_64 at `base`, `size` bytes, all inside buf. */
static int parse_slice(const uint8_t *buf, size_t base, size_t size, enum macho_cpu cpu,
                       struct macho_result *r) {
  if (size < 4)
    return fail(r, -EINVAL, "truncated Mach-O header: %zu bytes", size);
  uint32_t magic = rd32_le(buf + base);
  if (magic == MH_MAGIC)
    return fail(r, -EINVAL, "32-bit Mach-O slice (MH_MAGIC) refused: only 64-bit is supported");
  if (rd32_be(buf + base) == MH_MAGIC || rd32_be(buf + base) == MH_MAGIC_64)
    return fail(r, -EINVAL, "big-endian Mach-O slice refused");
  if (magic != MH_MAGIC_64)
    return fail(r, -EINVAL, "not a Mach-O file (magic 0x%08x)", magic);
  if (size < MACH_HEADER_64_SIZE)
    return fail(r, -EINVAL, "truncated mach_header_64: %zu of %u bytes", size, MACH_HEADER_64_SIZE);
  const uint8_t *h = buf + base;
  uint32_t cputype = rd32_le(h + 4), cpusubtype = rd32_le(h + 8);
  int m = slice_matches(cpu, cputype, cpusubtype);
  if (m != 1)
    return fail(r, m == 0 ? -ENOENT : -EINVAL, "slice is cputype 0x%08x subtype %u, not %s",
                cputype, cpusubtype & ~CPU_SUBTYPE_MASK, macho_cpu_name(cpu));
  r->cputype = cputype;
  r->cpusubtype = cpusubtype & ~CPU_SUBTYPE_MASK;
  r->filetype = rd32_le(h + 12);
  uint32_t ncmds = rd32_le(h + 16), sizeofcmds = rd32_le(h + 20);
  r->flags = rd32_le(h + 24);
  if (sizeofcmds > size - MACH_HEADER_64_SIZE)
    return fail(r, -EINVAL, "sizeofcmds %u exceeds the %zu bytes after the header", sizeofcmds,
                size - MACH_HEADER_64_SIZE);
  /* Every load command is at least 8 bytes: this bounds ncmds, and so the allocation,
   * by the input's own length. */
  if (ncmds > sizeofcmds / 8)
    return fail(r, -EINVAL, "ncmds %u cannot fit in sizeofcmds %u", ncmds, sizeofcmds);
  r->entries = calloc(ncmds ? ncmds : 1, sizeof *r->entries);
  if (!r->entries)
    return fail(r, -ENOMEM, "out of memory");

  size_t off = base + MACH_HEADER_64_SIZE;
  size_t end = off + sizeofcmds; /* <= base + size <= len, checked above */
  int have_id = 0, have_dylinker = 0;
  for (uint32_t i = 0; i < ncmds; i++) {
    if (!in_bounds(end, off, 8))
      return fail(r, -EINVAL, "load command %u header extends past sizeofcmds", i);
    uint32_t cmd = rd32_le(buf + off), cmdsize = rd32_le(buf + off + 4);
    if (cmdsize < 8)
      return fail(r, -EINVAL, "load command %u: cmdsize %u is smaller than 8", i, cmdsize);
    if (cmdsize % 8 != 0)
      return fail(r, -EINVAL, "load command %u: cmdsize %u is not a multiple of 8", i, cmdsize);
    if (!in_bounds(end, off, cmdsize))
      return fail(r, -EINVAL, "load command %u: cmdsize %u extends past sizeofcmds", i, cmdsize);
    int rc = 0;
    switch (cmd) {
    case LC_LOAD_DYLIB:
      rc = take_string(buf, off, cmdsize, DYLIB_COMMAND_SIZE, i, MACHO_ENTRY_LOAD_DYLIB, r);
      break;
    case LC_LOAD_WEAK_DYLIB:
      rc = take_string(buf, off, cmdsize, DYLIB_COMMAND_SIZE, i, MACHO_ENTRY_LOAD_WEAK_DYLIB, r);
      break;
    case LC_REEXPORT_DYLIB:
      rc = take_string(buf, off, cmdsize, DYLIB_COMMAND_SIZE, i, MACHO_ENTRY_REEXPORT_DYLIB, r);
      break;
    case LC_LOAD_UPWARD_DYLIB:
      rc = take_string(buf, off, cmdsize, DYLIB_COMMAND_SIZE, i, MACHO_ENTRY_LOAD_UPWARD_DYLIB, r);
      break;
    case LC_ID_DYLIB:
      if (have_id++)
        return fail(r, -EINVAL, "load command %u: a second LC_ID_DYLIB", i);
      rc = take_string(buf, off, cmdsize, DYLIB_COMMAND_SIZE, i, MACHO_ENTRY_ID_DYLIB, r);
      break;
    case LC_RPATH:
      rc = take_string(buf, off, cmdsize, LC_STR_COMMAND_SIZE, i, MACHO_ENTRY_RPATH, r);
      break;
    case LC_LOAD_DYLINKER:
      if (have_dylinker++)
        return fail(r, -EINVAL, "load command %u: a second LC_LOAD_DYLINKER", i);
      rc = take_string(buf, off, cmdsize, LC_STR_COMMAND_SIZE, i, MACHO_ENTRY_LOAD_DYLINKER, r);
      break;
    case LC_DYLD_ENVIRONMENT:
      rc = take_string(buf, off, cmdsize, LC_STR_COMMAND_SIZE, i, MACHO_ENTRY_DYLD_ENVIRONMENT, r);
      break;
    case LC_DYLD_INFO_ONLY:
    case LC_MAIN:
    case LC_DYLD_EXPORTS_TRIE:
    case LC_DYLD_CHAINED_FIXUPS:
      break;
    case LC_LAZY_LOAD_DYLIB:
      return fail(r, -EINVAL, "load command %u: LC_LAZY_LOAD_DYLIB is not supported", i);
    default:
      /* dyld refuses an image with a command it must understand but does not; so do we
       * (it could load code). Other commands do not name files and are skipped. */
      if (cmd & LC_REQ_DYLD)
        return fail(r, -EINVAL, "load command %u: unknown command 0x%08x requires dyld", i, cmd);
      break;
    }
    if (rc < 0)
      return rc;
    off += cmdsize;
  }
  r->ncmds = ncmds;
  return 0;
}

static int parse_fat(const uint8_t *buf, size_t len, int is64, enum macho_cpu cpu,
                     struct macho_result *r) {
  size_t arch_size = is64 ? FAT_ARCH_64_SIZE : FAT_ARCH_SIZE;
  if (len < FAT_HEADER_SIZE)
    return fail(r, -EINVAL, "truncated fat header: %zu bytes", len);
  uint32_t nfat = rd32_be(buf + 4);
  if (nfat == 0)
    return fail(r, -EINVAL, "fat file with no slices");
  if (nfat > MACHO_MAX_FAT_ARCH)
    return fail(r, -EINVAL, "fat header claims %u slices (more than %u): not a Mach-O file", nfat,
                MACHO_MAX_FAT_ARCH);
  if ((len - FAT_HEADER_SIZE) / arch_size < nfat)
    return fail(r, -EINVAL, "truncated fat header: %u slices need %zu bytes, file has %zu", nfat,
                FAT_HEADER_SIZE + nfat * arch_size, len);
  size_t found_off = 0, found_size = 0;
  int found = 0;
  for (uint32_t i = 0; i < nfat; i++) {
    const uint8_t *a = buf + FAT_HEADER_SIZE + (size_t)i * arch_size;
    uint32_t cputype = rd32_be(a), cpusubtype = rd32_be(a + 4);
    uint64_t off64 = is64 ? rd64_be(a + 8) : rd32_be(a + 8);
    uint64_t size64 = is64 ? rd64_be(a + 16) : rd32_be(a + 12);
    if (off64 > len || size64 > len - off64)
      return fail(r, -EINVAL, "fat slice %u: offset %llu size %llu extends past the %zu-byte file",
                  i, (unsigned long long)off64, (unsigned long long)size64, len);
    if (off64 < FAT_HEADER_SIZE + (uint64_t)nfat * arch_size && size64 > 0)
      return fail(r, -EINVAL, "fat slice %u: offset %llu overlaps the fat header", i,
                  (unsigned long long)off64);
    int m = slice_matches(cpu, cputype, cpusubtype);
    if (m < 0)
      return fail(r, -EINVAL,
                  "fat slice %u is a %s variant (subtype %u): dyld's choice between variants "
                  "depends on the machine, refused",
                  i, macho_cpu_name(cpu), cpusubtype & ~CPU_SUBTYPE_MASK);
    if (m == 0)
      continue;
    if (found)
      return fail(r, -EINVAL, "fat file has two %s slices", macho_cpu_name(cpu));
    found = 1;
    found_off = (size_t)off64;
    found_size = (size_t)size64;
  }
  if (!found)
    return fail(r, -ENOENT, "fat file has no %s slice", macho_cpu_name(cpu));
  r->fat = 1;
  r->slice_offset = found_off;
  r->slice_size = found_size;
  int rc = parse_slice(buf, found_off, found_size, cpu, r);
  if (rc < 0) {
    /* Prefix the slice's own reason so the caller knows it came from inside the slice. */
    char inner[sizeof r->reason];
    memcpy(inner, r->reason, sizeof inner);
    snprintf(r->reason, sizeof r->reason, "%s slice: %.140s", macho_cpu_name(cpu), inner);
    return rc == -ENOENT ? -EINVAL : rc; /* a mislabelled slice is malformed, not absent */
  }
  return 0;
}

int macho_parse(const uint8_t *buf, size_t len, enum macho_cpu cpu, struct macho_result *out) {
  memset(out, 0, sizeof *out);
  if (cpu != MACHO_CPU_ARM64 && cpu != MACHO_CPU_X86_64)
    return fail(out, -EINVAL, "unknown CPU");
  if (!buf || len < 4)
    return fail(out, -EINVAL, "truncated: %zu bytes", buf ? len : 0);
  int rc;
  uint32_t be = rd32_be(buf);
  if (be == FAT_MAGIC || be == FAT_MAGIC_64) {
    rc = parse_fat(buf, len, be == FAT_MAGIC_64, cpu, out);
  } else {
    out->slice_offset = 0;
    out->slice_size = len;
    rc = parse_slice(buf, 0, len, cpu, out);
  }
  if (rc < 0) {
    free(out->entries);
    out->entries = NULL;
    out->n_entries = 0;
    out->ok = 0;
    return rc;
  }
  out->ok = 1;
  return 0;
}

void macho_result_free(struct macho_result *r) {
  if (!r)
    return;
  free(r->entries);
  r->entries = NULL;
  r->n_entries = 0;
}
