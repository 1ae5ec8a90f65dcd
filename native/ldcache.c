/* ld.so.cache reader (see ldcache.h). Layouts, as ldconfig writes them:
 *   old:  "ld.so-1.7.0", u32 nlibs, nlibs x {i32 flags, u32 key, u32 value}, strings
 *         (offsets relative to the end of the table).
 *   new:  "glibc-ld.so.cache" "1.1", u32 nlibs, u32 len_strings, u8 flags (endianness
 *         in bits 0-1: 0 unset, 2 little, 3 big), 3 bytes padding, u32 extension_offset,
 *         3 x u32 unused, then nlibs x {i32 flags, u32 key, u32 value, u32 osversion,
 *         u64 hwcap}; string offsets are relative to the start of this header.
 *   Both: the new header follows the old table aligned to 8 bytes.
 *   Extension: u32 magic 0xeaa42174, u32 count, count x {u32 tag, u32 flags, u32 offset,
 *         u32 size}; tag 1 is an array of u32 offsets of glibc-hwcaps subdirectory names. */
#include "ldcache.h"

#include <errno.h>
#include <string.h>

#define OLD_MAGIC "ld.so-1.7.0"
#define NEW_MAGIC "glibc-ld.so.cache1.1"
#define NEW_HEADER 48
#define EXT_MAGIC 0xeaa42174u
#define EXT_TAG_HWCAPS 1u

static uint32_t u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4); /* the cache is in host byte order (checked via the flags byte) */
  return v;
}

static uint64_t u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static bool host_little(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

/* Checks an offset into the string area and that the string ends inside the buffer. */
static const char *string_at(const struct ldcache *c, uint32_t off) {
  if (off >= c->strings_len)
    return NULL;
  size_t start = c->strings_off + off;
  if (start >= c->len)
    return NULL;
  const char *s = (const char *)c->buf + start;
  if (!memchr(s, '\0', c->len - start))
    return NULL;
  return s;
}

static int open_new(const uint8_t *buf, size_t len, size_t at, struct ldcache *out,
                    const char **reason) {
  if (len < at || len - at < NEW_HEADER || memcmp(buf + at, NEW_MAGIC, 20) != 0) {
    *reason = "no new-format ld.so.cache header";
    return -ENOEXEC;
  }
  const uint8_t *h = buf + at;
  uint8_t endian = h[28] & 3;
  if (endian == 1 || (endian == 2 && !host_little()) || (endian == 3 && host_little())) {
    *reason = "ld.so.cache has the wrong byte order";
    return -ENOEXEC;
  }
  uint32_t nlibs = u32(h + 20);
  if ((len - at - NEW_HEADER) / 24 < nlibs) {
    *reason = "ld.so.cache entry count exceeds the file";
    return -ENOEXEC;
  }
  out->is_new = true;
  out->table_off = at + NEW_HEADER;
  out->entry_size = 24;
  out->nlibs = nlibs;
  out->strings_off = at;
  out->strings_len = len - at;
  uint32_t ext = u32(h + 32);
  /* The extension is optional; a malformed one only disables glibc-hwcaps, as in ld.so. */
  if (ext != 0 && ext % 4 == 0 && (size_t)ext <= len - at && len - at - ext >= 8 &&
      u32(buf + at + ext) == EXT_MAGIC) {
    uint32_t count = u32(buf + at + ext + 4);
    size_t secs = at + ext + 8;
    if (count <= (len - secs) / 16) {
      for (uint32_t i = 0; i < count; i++) {
        const uint8_t *s = buf + secs + (size_t)i * 16;
        uint32_t off = u32(s + 8), size = u32(s + 12);
        if (u32(s) != EXT_TAG_HWCAPS || size % 4 != 0)
          continue;
        if ((size_t)off > len - at || size > len - at - off)
          continue;
        out->hwcaps_off = at + off;
        out->hwcaps_count = size / 4;
      }
    }
  }
  return 0;
}

int ldcache_open(const uint8_t *buf, size_t len, struct ldcache *out, const char **reason) {
  static const char *unused;
  if (!reason)
    reason = &unused;
  memset(out, 0, sizeof *out);
  out->buf = buf;
  out->len = len;
  if (len >= 20 && memcmp(buf, NEW_MAGIC, 20) == 0)
    return open_new(buf, len, 0, out, reason);
  if (len < 16 || memcmp(buf, OLD_MAGIC, 11) != 0) {
    *reason = "not an ld.so.cache file";
    return -ENOEXEC;
  }
  /* Old header: 11 magic bytes, padding to 12, u32 nlibs. */
  uint32_t nlibs = u32(buf + 12);
  if ((len - 16) / 12 < nlibs) {
    *reason = "ld.so.cache entry count exceeds the file";
    return -ENOEXEC;
  }
  size_t table_end = 16 + (size_t)nlibs * 12;
  size_t aligned = (table_end + 7) & ~(size_t)7;
  if (aligned <= len && len - aligned >= NEW_HEADER && memcmp(buf + aligned, NEW_MAGIC, 20) == 0)
    return open_new(buf, len, aligned, out, reason);
  out->is_new = false;
  out->table_off = 16;
  out->entry_size = 12;
  out->nlibs = nlibs;
  out->strings_off = table_end;
  out->strings_len = len - table_end;
  return 0;
}

int ldcache_entry(const struct ldcache *c, uint32_t i, struct ldcache_entry *e) {
  if (i >= c->nlibs)
    return -EINVAL;
  const uint8_t *p = c->buf + c->table_off + (size_t)i * c->entry_size;
  e->flags = (int32_t)u32(p);
  e->key = string_at(c, u32(p + 4));
  e->value = string_at(c, u32(p + 8));
  e->osversion = c->is_new ? u32(p + 12) : 0;
  e->hwcap = c->is_new ? u64(p + 16) : 0;
  return e->key && e->value ? 0 : -ENOEXEC;
}

const char *ldcache_hwcaps_name(const struct ldcache *c, uint32_t index) {
  if (index >= c->hwcaps_count)
    return NULL;
  return string_at(c, u32(c->buf + c->hwcaps_off + (size_t)index * 4));
}

int ldcache_libcmp(const char *a, const char *b) {
  while (*a) {
    bool da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
    if (da && db) {
      unsigned long va = 0, vb = 0;
      while (*a >= '0' && *a <= '9')
        va = va * 10 + (unsigned long)(*a++ - '0');
      while (*b >= '0' && *b <= '9')
        vb = vb * 10 + (unsigned long)(*b++ - '0');
      if (va != vb)
        return va < vb ? -1 : 1;
    } else if (da) {
      return 1;
    } else if (db) {
      return -1;
    } else if (*a != *b) {
      return (unsigned char)*a - (unsigned char)*b;
    } else {
      a++, b++;
    }
  }
  return -(unsigned char)*b;
}

static bool is_named_hwcap(uint64_t hwcap) {
  return ((hwcap >> 32) & ~LDCACHE_HWCAP_ISA_MASK) == (LDCACHE_HWCAP_EXTENSION >> 32);
}

int ldcache_lookup(const struct ldcache *c, const char *name, int32_t want_flags,
                   const char *const *hwcaps, size_t n_hwcaps, const char **path,
                   const char **reason) {
  static const char *unused;
  if (!reason)
    reason = &unused;
  *path = NULL;
  if (c->nlibs == 0)
    return 0;
  /* The same binary search as ld.so, so that a table ld.so would misread is misread
   * the same way; then walk back to the first entry of the run of equal names. */
  int64_t left = 0, right = (int64_t)c->nlibs - 1;
  const char *best = NULL;
  size_t best_priority = 0;
  while (left <= right) {
    int64_t middle = (left + right) / 2;
    struct ldcache_entry e;
    if (ldcache_entry(c, (uint32_t)middle, &e) < 0 && !e.key)
      return 0; /* ld.so gives up on a bogus key */
    int cmp = ldcache_libcmp(name, e.key);
    if (cmp != 0) {
      /* ldconfig sorts the table in decreasing order of ldcache_libcmp. */
      if (cmp < 0)
        left = middle + 1;
      else
        right = middle - 1;
      continue;
    }
    left = middle;
    while (middle > 0) {
      struct ldcache_entry p;
      ldcache_entry(c, (uint32_t)(middle - 1), &p);
      if (!p.key || ldcache_libcmp(name, p.key) != 0)
        break;
      middle--;
    }
    for (; middle <= right; middle++) {
      struct ldcache_entry x;
      ldcache_entry(c, (uint32_t)middle, &x);
      if (middle > left && (!x.key || ldcache_libcmp(name, x.key) != 0))
        break;
      if (x.flags != want_flags || !x.value)
        continue;
      bool named = c->is_new && is_named_hwcap(x.hwcap);
      if (!named && best)
        break; /* named entries come first; the best of them wins */
      if (named) {
        if ((x.hwcap >> 32) & LDCACHE_HWCAP_ISA_MASK) {
          *reason = "ld.so.cache entry with an ISA level marker (not resolved exactly)";
          return -ENOTSUP;
        }
        const char *sub = ldcache_hwcaps_name(c, (uint32_t)x.hwcap);
        size_t prio = 0;
        for (size_t k = 0; sub && k < n_hwcaps; k++)
          if (strcmp(sub, hwcaps[k]) == 0) {
            prio = k + 1;
            break;
          }
        if (prio == 0 || (best && prio >= best_priority))
          continue;
        best_priority = prio;
        best = x.value;
        continue;
      }
      if (x.hwcap != 0) {
        *reason = "legacy hwcap entry in ld.so.cache (not resolved exactly)";
        return -ENOTSUP;
      }
      best = x.value;
      break; /* flags equal the wanted id: no better entry follows */
    }
    break;
  }
  if (!best)
    return 0;
  *path = best;
  return 1;
}
