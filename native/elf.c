/* Bounds-checked ELF reader (see elf.h). Every value read from the file is treated as
 * hostile: offsets and sizes are checked against the object's size with overflow-safe
 * arithmetic before any read, counts are capped, and strings must be NUL-terminated
 * inside the table they come from. */
#include "elf.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* Constants from the ELF specification (no <elf.h>: this file also builds on macOS). */
enum {
  EI_CLASS = 4,
  EI_DATA = 5,
  EI_VERSION = 6,
  EI_OSABI = 7,
  EI_ABIVERSION = 8,
  CLASS32 = 1,
  CLASS64 = 2,
  DATA_LSB = 1,
  DATA_MSB = 2,
  PT_LOAD = 1,
  PT_DYNAMIC = 2,
  PT_INTERP = 3,
  PN_XNUM = 0xffff,
  DT_NULL = 0,
  DT_NEEDED = 1,
  DT_STRTAB = 5,
  DT_STRSZ = 10,
  DT_SONAME = 14,
  DT_RPATH = 15,
  DT_RUNPATH = 29,
};
#define DT_FLAGS_1 0x6ffffffbULL
#define DT_DEPAUDIT 0x6ffffefbULL
#define DT_AUDIT 0x6ffffefcULL
#define DT_AUXILIARY 0x7ffffffdULL
#define DT_FILTER 0x7fffffffULL
#define INTERP_MAX 4096
#define STRING_MAX 4096

struct reader {
  const struct elf_source *src;
  bool is64;
  bool msb;
};

static uint64_t get(const struct reader *r, const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++)
    v |= (uint64_t)p[r->msb ? n - 1 - i : i] << (8 * i);
  return v;
}

/* True when [off, off + n) lies inside the object. */
static bool in_range(uint64_t size, uint64_t off, uint64_t n) {
  return off <= size && n <= size - off;
}

static int read_at(const struct reader *r, uint64_t off, size_t n, void *dst) {
  if (!in_range(r->src->size, off, n))
    return -EINVAL;
  return r->src->read(r->src, off, n, dst);
}

struct phdr {
  uint32_t type;
  uint64_t offset, vaddr, filesz, memsz;
};

static int read_phdr(const struct reader *r, uint64_t off, struct phdr *ph) {
  uint8_t b[56];
  size_t n = r->is64 ? 56 : 32;
  int rc = read_at(r, off, n, b);
  if (rc < 0)
    return rc;
  ph->type = (uint32_t)get(r, b, 4);
  if (r->is64) {
    ph->offset = get(r, b + 8, 8);
    ph->vaddr = get(r, b + 16, 8);
    ph->filesz = get(r, b + 32, 8);
    ph->memsz = get(r, b + 40, 8);
  } else {
    ph->offset = get(r, b + 4, 4);
    ph->vaddr = get(r, b + 8, 4);
    ph->filesz = get(r, b + 16, 4);
    ph->memsz = get(r, b + 20, 4);
  }
  return 0;
}

/* Copies a NUL-terminated string of at most `cap` bytes found at `off` (bounded by
 * `limit`, the end of its table) into the info's string arena. */
static int take_string(const struct reader *r, uint64_t off, uint64_t limit, size_t cap,
                       struct elf_info *out, const char **dst, const char **reason) {
  char tmp[INTERP_MAX > STRING_MAX ? INTERP_MAX : STRING_MAX];
  if (off >= limit) {
    *reason = "string offset outside its table";
    return -ENOEXEC;
  }
  uint64_t avail = limit - off;
  size_t n = avail < cap ? (size_t)avail : cap;
  int rc = read_at(r, off, n, tmp);
  if (rc < 0) {
    *reason = "string outside the file";
    return rc == -EINVAL ? -ENOEXEC : rc;
  }
  const char *nul = memchr(tmp, '\0', n);
  if (!nul) {
    *reason = "string not terminated or too long";
    return -ENOEXEC;
  }
  size_t len = (size_t)(nul - tmp) + 1;
  if (len > sizeof out->strings - out->strings_used) {
    *reason = "too many string bytes";
    return -E2BIG;
  }
  char *s = out->strings + out->strings_used;
  memcpy(s, tmp, len);
  out->strings_used += len;
  *dst = s;
  return 0;
}

/* Maps a virtual address range to a file offset through the PT_LOAD segment that
 * contains it in its file-backed part, as the string table must be for ld.so to read
 * it from the mapped image. */
static int vaddr_to_offset(const struct reader *r, uint64_t phoff, size_t phnum, uint64_t vaddr,
                           uint64_t len, uint64_t *off) {
  size_t phentsize = r->is64 ? 56 : 32;
  for (size_t i = 0; i < phnum; i++) {
    struct phdr ph;
    int rc = read_phdr(r, phoff + i * phentsize, &ph);
    if (rc < 0)
      return rc;
    if (ph.type != PT_LOAD || vaddr < ph.vaddr)
      continue;
    uint64_t delta = vaddr - ph.vaddr;
    if (delta >= ph.filesz || len > ph.filesz - delta)
      continue;
    if (ph.offset > UINT64_MAX - delta)
      return -EINVAL;
    *off = ph.offset + delta;
    return 0;
  }
  return -ENOENT;
}

struct dyn_seen {
  uint64_t strtab, strsz;
  bool have_strtab, have_strsz;
  bool have_soname, have_rpath, have_runpath;
  uint64_t soname, rpath, runpath;
};

static int parse_dynamic(const struct reader *r, const struct phdr *dyn, uint64_t phoff,
                         size_t phnum, struct elf_info *out, const char **reason) {
  size_t entsize = r->is64 ? 16 : 8;
  size_t count = (size_t)(dyn->filesz / entsize);
  if (!in_range(r->src->size, dyn->offset, dyn->filesz)) {
    *reason = "PT_DYNAMIC outside the file";
    return -ENOEXEC;
  }
  if (count > ELF_MAX_DYN) {
    *reason = "too many dynamic entries";
    return -ENOEXEC;
  }
  struct dyn_seen seen = {0};
  uint64_t needed[ELF_MAX_NEEDED];
  size_t n_needed = 0;
  for (size_t i = 0; i < count; i++) {
    uint8_t b[16];
    int rc = read_at(r, dyn->offset + i * entsize, entsize, b);
    if (rc < 0) {
      *reason = "cannot read the dynamic section";
      return rc == -EINVAL ? -ENOEXEC : rc;
    }
    size_t w = entsize / 2;
    uint64_t tag = get(r, b, w), val = get(r, b + w, w);
    if (tag == DT_NULL)
      break;
    switch (tag) {
    case DT_NEEDED:
      if (n_needed == ELF_MAX_NEEDED) {
        *reason = "too many DT_NEEDED entries";
        return -E2BIG;
      }
      needed[n_needed++] = val;
      break;
    case DT_STRTAB:
      seen.strtab = val, seen.have_strtab = true;
      break;
    case DT_STRSZ:
      seen.strsz = val, seen.have_strsz = true;
      break;
    case DT_SONAME:
      seen.soname = val, seen.have_soname = true;
      break;
    case DT_RPATH:
      seen.rpath = val, seen.have_rpath = true;
      break;
    case DT_RUNPATH:
      seen.runpath = val, seen.have_runpath = true;
      break;
    case DT_FLAGS_1:
      out->flags_1 = val;
      break;
    case DT_AUDIT:
    case DT_DEPAUDIT:
    case DT_AUXILIARY:
    case DT_FILTER:
      if (!out->extra_load_tag)
        out->extra_load_tag = tag;
      break;
    default:
      break;
    }
  }
  bool any_string = n_needed || seen.have_soname || seen.have_rpath || seen.have_runpath;
  if (!any_string)
    return 0;
  if (!seen.have_strtab || !seen.have_strsz) {
    *reason = "dynamic strings without DT_STRTAB/DT_STRSZ";
    return -ENOEXEC;
  }
  uint64_t stroff;
  int rc = vaddr_to_offset(r, phoff, phnum, seen.strtab, seen.strsz, &stroff);
  if (rc < 0) {
    *reason = "DT_STRTAB is not inside a PT_LOAD segment";
    return rc == -EIO ? rc : -ENOEXEC;
  }
  if (!in_range(r->src->size, stroff, seen.strsz)) {
    *reason = "DT_STRTAB outside the file";
    return -ENOEXEC;
  }
  uint64_t end = stroff + seen.strsz;
  for (size_t i = 0; i < n_needed; i++) {
    if (needed[i] >= seen.strsz) {
      *reason = "DT_NEEDED outside the string table";
      return -ENOEXEC;
    }
    rc = take_string(r, stroff + needed[i], end, STRING_MAX, out, &out->needed[i], reason);
    if (rc < 0)
      return rc;
  }
  out->n_needed = n_needed;
  struct {
    bool have;
    uint64_t val;
    const char **dst;
  } named[] = {{seen.have_soname, seen.soname, &out->soname},
               {seen.have_rpath, seen.rpath, &out->rpath},
               {seen.have_runpath, seen.runpath, &out->runpath}};
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
    if (!named[i].have)
      continue;
    if (named[i].val >= seen.strsz) {
      *reason = "dynamic string outside the string table";
      return -ENOEXEC;
    }
    rc = take_string(r, stroff + named[i].val, end, STRING_MAX, out, named[i].dst, reason);
    if (rc < 0)
      return rc;
  }
  return 0;
}

int elf_parse_source(const struct elf_source *src, struct elf_info *out, const char **reason) {
  static const char *unused;
  if (!reason)
    reason = &unused;
  *reason = NULL;
  memset(out, 0, offsetof(struct elf_info, strings));
  out->strings[0] = '\0';
  uint8_t eh[64];
  struct reader r = {.src = src};
  if (src->size < 52 || src->read(src, 0, 52, eh) < 0) {
    *reason = "truncated ELF header";
    return -ENOEXEC;
  }
  if (memcmp(eh, "\177ELF", 4) != 0) {
    *reason = "not an ELF file";
    return -ENOEXEC;
  }
  if ((eh[EI_CLASS] != CLASS32 && eh[EI_CLASS] != CLASS64) ||
      (eh[EI_DATA] != DATA_LSB && eh[EI_DATA] != DATA_MSB) || eh[EI_VERSION] != 1) {
    *reason = "bad ELF identification";
    return -ENOEXEC;
  }
  r.is64 = eh[EI_CLASS] == CLASS64;
  r.msb = eh[EI_DATA] == DATA_MSB;
  if (r.is64 && (src->size < 64 || src->read(src, 0, 64, eh) < 0)) {
    *reason = "truncated ELF header";
    return -ENOEXEC;
  }
  out->elf_class = eh[EI_CLASS];
  out->data = eh[EI_DATA];
  out->osabi = eh[EI_OSABI];
  out->abiversion = eh[EI_ABIVERSION];
  out->type = (uint16_t)get(&r, eh + 16, 2);
  out->machine = (uint16_t)get(&r, eh + 18, 2);
  uint64_t phoff = r.is64 ? get(&r, eh + 32, 8) : get(&r, eh + 28, 4);
  uint64_t shoff = r.is64 ? get(&r, eh + 40, 8) : get(&r, eh + 32, 4);
  size_t phentsize = (size_t)get(&r, eh + (r.is64 ? 54 : 42), 2);
  size_t phnum = (size_t)get(&r, eh + (r.is64 ? 56 : 44), 2);
  size_t want = r.is64 ? 56 : 32;
  if (phnum == 0)
    return 0; /* no program headers: nothing to load or interpret */
  if (phentsize != want) {
    *reason = "unexpected e_phentsize";
    return -ENOEXEC;
  }
  if (phnum == PN_XNUM) {
    /* The real count is in sh_info of section header 0. */
    uint8_t sh[64];
    size_t shsize = r.is64 ? 64 : 40;
    if (read_at(&r, shoff, shsize, sh) < 0) {
      *reason = "PN_XNUM without a readable section header 0";
      return -ENOEXEC;
    }
    phnum = (size_t)get(&r, sh + (r.is64 ? 44 : 28), 4);
  }
  if (phnum > ELF_MAX_PHNUM) {
    *reason = "too many program headers";
    return -ENOEXEC;
  }
  if (phoff > UINT64_MAX / 2 || !in_range(src->size, phoff, (uint64_t)phnum * phentsize)) {
    *reason = "program headers outside the file";
    return -ENOEXEC;
  }
  struct phdr dyn = {0};
  bool have_interp = false;
  struct phdr interp = {0};
  for (size_t i = 0; i < phnum; i++) {
    struct phdr ph;
    int rc = read_phdr(&r, phoff + i * phentsize, &ph);
    if (rc < 0) {
      *reason = "cannot read a program header";
      return rc == -EINVAL ? -ENOEXEC : rc;
    }
    if (ph.type == PT_DYNAMIC && !out->has_dynamic) {
      dyn = ph;
      out->has_dynamic = true;
    } else if (ph.type == PT_INTERP && !have_interp) {
      interp = ph;
      have_interp = true;
    }
  }
  if (have_interp) {
    if (!in_range(src->size, interp.offset, interp.filesz) || interp.filesz == 0) {
      *reason = "PT_INTERP outside the file";
      return -ENOEXEC;
    }
    size_t cap = interp.filesz < INTERP_MAX ? (size_t)interp.filesz : INTERP_MAX;
    int rc = take_string(&r, interp.offset, interp.offset + interp.filesz, cap, out, &out->interp,
                         reason);
    if (rc < 0)
      return rc;
  }
  if (out->has_dynamic)
    return parse_dynamic(&r, &dyn, phoff, phnum, out, reason);
  return 0;
}

static int buffer_read(const struct elf_source *src, uint64_t off, size_t n, void *dst) {
  if (!in_range(src->size, off, n))
    return -EINVAL;
  memcpy(dst, (const uint8_t *)src->ctx + off, n);
  return 0;
}

int elf_parse(const uint8_t *buf, size_t len, struct elf_info *out, const char **reason) {
  struct elf_source src = {.read = buffer_read, .size = len, .ctx = buf, .fd = -1};
  return elf_parse_source(&src, out, reason);
}

static int fd_read(const struct elf_source *src, uint64_t off, size_t n, void *dst) {
  if (!in_range(src->size, off, n) || off > (uint64_t)INT64_MAX)
    return -EINVAL;
  size_t done = 0;
  while (done < n) {
    ssize_t got = pread(src->fd, (uint8_t *)dst + done, n - done, (off_t)(off + done));
    if (got < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (got == 0)
      return -EIO; /* the file shrank under us */
    done += (size_t)got;
  }
  return 0;
}

int elf_parse_fd(int fd, uint64_t size, struct elf_info *out, const char **reason) {
  struct elf_source src = {.read = fd_read, .size = size, .ctx = NULL, .fd = fd};
  return elf_parse_source(&src, out, reason);
}
