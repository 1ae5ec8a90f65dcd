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
 * component) to out->aliases and recording each lstat (and link) in `memo` (may be
 * NULL). `real` receives the real path. Returns 0 or < 0. */
int pin_walk(struct closure_result *out, struct closure_memo *memo, const char *path,
             char real[PATH_MAX]);

/* Adds the file `real` (open on fd, fstat `st`) to out->files, hashing it unless the
 * cache holds an entry with the same key (and `rehash` is false). A file already in the
 * result only gets the stronger (lower) role. The hash is noted in `memo` (may be NULL)
 * for the file's stat key. Returns 0 or < 0. */
int pin_add_file(struct closure_result *out, struct hash_cache *cache, bool rehash,
                 struct closure_memo *memo, const char *real, int fd, const struct stat *st,
                 enum closure_role role, size_t of);

/* Recording observations into a closure_memo (every function accepts a NULL memo and
 * then does nothing; running out of memory makes the memo never hold). */

/* Starts a recording: forgets the earlier one and reads the clock that decides which
 * stat keys may vouch for a file's bytes (see closure_memo_holds). */
void memo_begin(struct closure_memo *memo);

/* stat(path) (following symlinks) gave `st`, or failed with errno `err` (st NULL).
 * `content`: the file's bytes decided something (it was parsed), not just its existence. */
void memo_stat(struct closure_memo *memo, const char *path, const struct stat *st, int err,
               bool content);

/* Same for a file whose bytes (buf, len) were read whole through a descriptor whose
 * fstat is `st` (ld.so.cache): they are hashed when the stat key cannot vouch for them. */
void memo_stat_bytes(struct closure_memo *memo, const char *path, const struct stat *st,
                     const uint8_t *buf, size_t len);

/* lstat(path) of a path component gave `st`; `target` is readlink's answer when it is a
 * symlink (NULL otherwise). */
void memo_lstat(struct closure_memo *memo, const char *path, const struct stat *st,
                const char *target);

/* Ends the recording: the memo holds from now on if `ok` and nothing seen was
 * inconsistent (the same path giving two answers, a file hashed under another key). */
void memo_end(struct closure_memo *memo, bool ok);
