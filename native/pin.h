#pragma once
/* Shared by closure_linux.c and pin_linux.c: the hash cache, hashing into a
 * closure_result, and path resolution that records the symlinks it traverses. */

#include "closure.h"

#include <limits.h>
#include <sys/stat.h>

/* Formats out->error and returns rc (or -EINVAL when rc >= 0). */
__attribute__((format(printf, 3, 4))) int closure_fail(struct closure_result *out, int rc,
                                                       const char *fmt, ...);

/* Resolves an absolute path as the kernel does, appending every symlink met (in any
 * component) to out->aliases. `real` receives the real path. Returns 0 or < 0. */
int pin_walk(struct closure_result *out, const char *path, char real[PATH_MAX]);

/* Adds the file `real` (open on fd, fstat `st`) to out->files, hashing it unless the
 * cache holds an entry with the same key (and `rehash` is false). A file already in the
 * result only gets the stronger (lower) role. Returns 0 or < 0. */
int pin_add_file(struct closure_result *out, struct hash_cache *cache, bool rehash,
                 const char *real, int fd, const struct stat *st, enum closure_role role,
                 size_t of);
