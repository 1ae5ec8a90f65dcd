#pragma once
/* Filesystem primitives of the namespace code (OS wrappers, kept apart from the lifecycle
 * logic in namespace.c). Each returns what the kernel said: -1 with errno on failure.
 * EINTR is retried everywhere; every descriptor is close-on-exec. */

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define NS_DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
/* Components that only need to be searched (and fstat'ed), not read. */
#ifdef O_PATH
#define NS_SEARCH_FLAGS (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
#else
#define NS_SEARCH_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
#endif

int ns_openat(int dirfd, const char *name, int flags, mode_t mode);
/* Closes and keeps errno (so a failure path can still report the original error). */
void ns_close(int fd);
int ns_mkdirat(int dirfd, const char *name, mode_t mode);
/* fstatat without following a symbolic link. */
int ns_lstatat(int dirfd, const char *name, struct stat *st);
int ns_unlinkat(int dirfd, const char *name, int flags);
int ns_fsync(int fd);

/* "a regular file", "a directory", "a symbolic link", ... for reasons. */
const char *ns_type_name(mode_t mode);

/* A single component that cannot climb or alias: not empty, not "." or "..", no '/',
 * at most NAME_MAX bytes. */
bool ns_valid_name(const char *s, size_t len);

/* Opens an absolute path one component at a time from "/" with O_NOFOLLOW, so a symbolic
 * link anywhere on the way is refused; "." and ".." components are refused (EINVAL). The
 * last component is opened with last_flags. Returns the descriptor or -1 with errno. */
int ns_open_path(const char *path, int last_flags);

/* Calls fn for every name of the directory open at fd except "." and ".."; fn returns 0
 * to go on. Returns what stopped it (> 0), 0 at the end, or -1 with errno. buf (size
 * bytes, 8-aligned) is scratch space for the kernel's records. */
typedef int (*ns_name_fn)(void *ctx, const char *name);
int ns_list_dir(int fd, uint8_t *buf, size_t size, ns_name_fn fn, void *ctx);
