/* libFuzzer target for the Mach-O reader: clang -fsanitize=fuzzer,address,undefined
 * -Inative fuzz/macho_fuzz.c native/macho.c -o macho_fuzz. The reader must never read
 * outside the input and every reported string must lie inside it and be NUL-free. */
#include "macho.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int cpu = MACHO_CPU_ARM64; cpu <= MACHO_CPU_X86_64; cpu++) {
    struct macho_result r;
    if (macho_parse(data, size, (enum macho_cpu)cpu, &r) == 0) {
      if (r.slice_offset > size || r.slice_size > size - r.slice_offset)
        abort();
      for (size_t i = 0; i < r.n_entries; i++) {
        const struct macho_entry *e = &r.entries[i];
        if (e->offset > size || e->length >= size - e->offset || data[e->offset + e->length] != 0 ||
            memchr(data + e->offset, 0, e->length) != NULL)
          abort();
      }
    }
    macho_result_free(&r);
  }
  return 0;
}
