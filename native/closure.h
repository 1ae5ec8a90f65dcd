#pragma once
/* The runtime closure of executables, resolved as glibc's ld.so resolves it, and the
 * SHA-256 of every file in it (through Node's OpenSSL), with a stat-keyed hash cache.
 * Linux only (closure_linux.c resolves, pin_linux.c hashes). Returns errors as values
 * with a reason string. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum closure_role { ROLE_NODE = 0, ROLE_LAUNCHER = 1, ROLE_INTERPRETER = 2, ROLE_LIBRARY = 3 };

/* What one program interpreter (ld.so) does, as its `--help` reports it. */
struct loader_config {
  char *interp; /* the PT_INTERP string it serves */
  char **dirs;  /* system search path, in order */
  size_t n_dirs;
  char **hwcaps; /* glibc-hwcaps subdirectories that are searched, best first */
  size_t n_hwcaps;
  char **legacy; /* legacy hwcap subdirectory names that are searched */
  size_t n_legacy;
  char *platform; /* expansion of $PLATFORM, or NULL (then $PLATFORM is refused) */
  char *lib;      /* expansion of $LIB, or NULL (then $LIB is refused) */
};

struct closure_file {
  char *path; /* real path */
  uint64_t size;
  uint8_t sha256[32];
  enum closure_role role;
  size_t of;   /* index of the executable whose closure first reached it */
  bool cached; /* the hash came from the cache */
};

struct closure_alias {
  char *link;   /* absolute path of a symlink that was traversed */
  char *target; /* its contents, as readlink returns them */
};

struct closure_result {
  struct closure_file *files;
  size_t n_files;
  struct closure_alias *aliases;
  size_t n_aliases;
  char error[1024]; /* set when a call returns < 0 */
};

struct hash_cache;
struct hash_cache *hash_cache_new(void);
void hash_cache_free(struct hash_cache *cache);

/* Everything one closure_resolve call looked at (each path it opened, stat'd, lstat'd or
 * read a link of, the lookups that found nothing included) and what it saw, so that a
 * later call can tell, with one system call per observation, that resolving again would
 * give the same result (pin_linux.c, closure_memo_holds, has the soundness argument). */
struct closure_memo;
struct closure_memo *closure_memo_new(void);
void closure_memo_free(struct closure_memo *memo);
/* Forgets the observations: the memo holds again only after a new recording. */
void closure_memo_clear(struct closure_memo *memo);

/* Resolves the closure of each executable (absolute paths) and hashes every file.
 * `cache_path` is the ld.so.cache to read (normally /etc/ld.so.cache). `rehash`
 * ignores the cache's entries (they are still refreshed). When `memo` is not NULL, it is
 * cleared and records what this call observed; it holds only if the call succeeds.
 * Returns 0 or a negative errno with out->error set; free the result with
 * closure_result_free either way. */
int closure_resolve(const char *const *exes, const enum closure_role *roles, size_t n_exes,
                    const struct loader_config *loaders, size_t n_loaders, const char *cache_path,
                    struct hash_cache *cache, bool rehash, struct closure_memo *memo,
                    struct closure_result *out);

/* Re-checks every observation of the recording: 1 when all still hold, so that
 * closure_resolve with the same arguments (and loader configurations) would return the
 * same result; 0 when one changed or cannot be re-checked, with `why` (if not NULL) set
 * to the first difference. Files whose stat cannot vouch for their bytes are re-hashed
 * (through `cache`'s rules). Never fails otherwise. */
int closure_memo_holds(struct closure_memo *memo, char *why, size_t why_len);

/* Hashes the given files (each by its real path, symlinks recorded as aliases), with
 * the same cache. Roles are ROLE_LIBRARY and `of` is the input index. */
int closure_hash_files(const char *const *paths, size_t n, struct hash_cache *cache, bool rehash,
                       struct closure_result *out);

void closure_result_free(struct closure_result *out);
