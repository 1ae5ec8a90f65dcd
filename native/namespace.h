#pragma once
/* Executor namespace lifecycle (spec invariants 2, 3, 4, 12): root checks, capacity
 * count, exclusive slot claim, materialisation with a manifest, pre-launch verification
 * and verify-first, non-recursive removal. Pure filesystem code: every function returns a
 * result value with a reason; nothing here throws, exits or knows about Node-API.
 *
 * Every path below the root is reached with openat/mkdirat/unlinkat relative to directory
 * descriptors opened O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC, so no symbolic link is ever
 * followed, and the root itself is reached one component at a time from "/" the same way. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_REASON_MAX 512

/* ok, or a reason (NUL-terminated, at most NS_REASON_MAX - 1 bytes). */
typedef struct ns_result {
  bool ok;
  char reason[NS_REASON_MAX];
} ns_result;

typedef struct ns_manifest ns_manifest;

/* One file to write: `path` is relative to the slot ("program/src/a.js"), `data` is
 * borrowed for the duration of ns_materialise only. */
typedef struct ns_file {
  const char *path;
  const uint8_t *data;
  size_t size;
} ns_file;

/* A recorded entry, as ns_manifest_entry reports it (for diagnostics and tests). */
typedef struct ns_entry_info {
  const char *path; /* relative to the slot; "." for the slot itself */
  bool is_dir;
  uint64_t dev, ino;
  uint32_t uid, mode;
  uint64_t size, nlink;
  const uint8_t *sha256; /* 32 bytes, files only; NULL for directories */
} ns_entry_info;

/* The root must be absolute, canonical (realpath equals it), a directory, owned by the
 * effective uid, and private (mode & 0077 == 0). */
ns_result ns_check_root(const char *root);

/* Counts every entry of the root (foreign files, leftovers and dot-files alike) into
 * *count. */
ns_result ns_count_entries(const char *root, uint64_t *count);

/* Claims the lowest slot-<n>, n < max_retained, with an exclusive mkdir (0700). On
 * success writes the slot's absolute path into out (out_size bytes). If every slot is
 * taken, returns !ok with *full set and the reason "every slot is taken"; any other
 * failure returns !ok with *full clear. */
ns_result ns_claim_slot(const char *root, uint32_t max_retained, char *out, size_t out_size,
                        bool *full);

/* Creates the top-level directories `dirs` (each a single name, e.g. program, input,
 * home) in the claimed, empty slot `slot`, then the parents of every file and the files
 * themselves (directories 0700, files with file_mode, which must not grant write to
 * group or other), recording every entry as it is created. *out always receives a
 * manifest (NULL only when memory ran out before anything was created): on failure it
 * describes exactly what was created, for ns_remove to take away. */
ns_result ns_materialise(const char *slot, const char *const *dirs, size_t ndirs,
                         const ns_file *files, size_t nfiles, uint32_t file_mode,
                         ns_manifest **out);

/* The pre-launch integrity check (invariant 4): the root's and every entry's device,
 * inode and owner; for directories the privacy bits and the exact listing; for files a
 * regular file, link count 1, the size and the sha256 of the content read back now.
 * A change of a file's mode alone is not detected (the spec says so). Returns the first
 * problem, naming the entry. */
ns_result ns_verify(ns_manifest *m);

/* Removal (invariant 12): re-verifies; at the first surprise stops and returns !ok with
 * the reason (the caller quarantines: nothing on disk changes beyond what was already
 * unlinked). Otherwise unlinks only the recorded entries, children first, never
 * recursively (rmdir of a directory that is not empty fails), then the slot, then
 * fsyncs the root: *durable tells whether that fsync succeeded. */
ns_result ns_remove(ns_manifest *m, bool *durable);

/* The slot's absolute path. */
const char *ns_manifest_slot(const ns_manifest *m);
/* Whether ns_remove has removed the namespace. */
bool ns_manifest_removed(const ns_manifest *m);
size_t ns_manifest_count(const ns_manifest *m);
/* Fills *info for entry i < ns_manifest_count(m); pointers stay valid until the free. */
void ns_manifest_entry(const ns_manifest *m, size_t i, ns_entry_info *info);
void ns_manifest_free(ns_manifest *m);
