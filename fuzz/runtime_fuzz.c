/* libFuzzer target for the runtime readers (native/elf.c, native/ldcache.c). Not part of
 * the addon build: `npm run fuzz` (scripts/fuzz.sh) builds and runs it, or by hand:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Inative \
 *     fuzz/runtime_fuzz.c native/elf.c native/ldcache.c -o /tmp/runtime_fuzz
 *   /tmp/runtime_fuzz -max_total_time=60
 * The first input byte selects the reader (odd: ELF, even: ld.so.cache); the rest is the file. */
#include "elf.h"
#include "ldcache.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const uint8_t *buf = data + 1;
  size_t len = size - 1;
  if (data[0] & 1) {
    static struct elf_info info;
    const char *why = NULL;
    if (elf_parse(buf, len, &info, &why) == 0) {
      for (size_t i = 0; i < info.n_needed; i++)
        (void)strlen(info.needed[i]);
      if (info.interp)
        (void)strlen(info.interp);
    }
  } else {
    struct ldcache c;
    const char *why = NULL, *path = NULL;
    if (ldcache_open(buf, len, &c, &why) == 0) {
      for (uint32_t i = 0; i < c.nlibs && i < 4096; i++) {
        struct ldcache_entry e;
        if (ldcache_entry(&c, i, &e) == 0)
          (void)strlen(e.key);
      }
      static const char *const hw[] = {"x86-64-v3", "x86-64-v2"};
      (void)ldcache_lookup(&c, "libc.so.6", 0x303, hw, 2, &path, &why);
      (void)ldcache_lookup(&c, "libfoo.so.1", 0x303, hw, 2, &path, &why);
      (void)ldcache_hwcaps_name(&c, 0);
    }
  }
  return 0;
}
