#pragma once
/* Snapshot rules and digest over plain C buffers: no Node-API, errors as values, so the
 * rules can be fuzzed directly (libFuzzer) and the glue only converts arguments. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAPSHOT_PATH_MAX_CHARS 256
#define SNAPSHOT_PATH_MAX_SEGMENTS 16
#define SNAPSHOT_MAX_FILES 100000
#define SNAPSHOT_PROTOCOL_LINE "sf-confined-snapshot/1\n"
/* "sha256:" + 64 hex digits + NUL. */
#define SNAPSHOT_DIGEST_SIZE (7 + 64 + 1)

/* One file as the caller holds it. A NULL path means "not a string" and a NULL content
 * "not a byte array"; an empty content must still point somewhere (any non-NULL pointer). */
struct snapshot_file {
  const char *path;
  size_t path_len;
  const uint8_t *content;
  size_t size;
};

enum snapshot_status {
  SNAPSHOT_OK = 0,
  /* Input rules: the caller gave something a snapshot cannot hold. */
  SNAPSHOT_TOO_MANY_FILES,
  SNAPSHOT_PATH_NOT_STRING,
  SNAPSHOT_PATH_EMPTY,
  SNAPSHOT_PATH_CHARACTER,
  SNAPSHOT_PATH_TOO_LONG,
  SNAPSHOT_PATH_ABSOLUTE,
  SNAPSHOT_PATH_TOO_MANY_SEGMENTS,
  SNAPSHOT_PATH_EMPTY_SEGMENT,
  SNAPSHOT_PATH_DOT_SEGMENT,
  SNAPSHOT_CONTENT_NOT_BYTES,
  SNAPSHOT_TOO_LARGE,
  SNAPSHOT_DUPLICATE,
  SNAPSHOT_CLASH,
  /* Host failures: not the caller's fault. */
  SNAPSHOT_NO_MEMORY,
  SNAPSHOT_CRYPTO_FAILED,
};

/* The outcome of a check: `index` is the offending file, `other` the file it collides with
 * (SNAPSHOT_DUPLICATE, SNAPSHOT_CLASH), `limit` the limit it exceeds (SNAPSHOT_TOO_*). */
struct snapshot_check {
  enum snapshot_status status;
  size_t index;
  size_t other;
  uint64_t limit;
};

/* Returns true when the status is a rule violation (an invalid input), false for
 * SNAPSHOT_OK and for host failures. */
bool snapshot_status_is_invalid(enum snapshot_status status);

/* Checks one path against the grammar: SNAPSHOT_OK or the first rule it breaks. */
enum snapshot_status snapshot_check_path(const char *path, size_t len);

/* Checks every rule over n files whose contents total at most max_bytes. */
struct snapshot_check snapshot_validate(const struct snapshot_file *files, size_t n,
                                        uint64_t max_bytes);

/* Validates, then writes the NUL-terminated digest ("sha256:" + lowercase hex) to out. */
struct snapshot_check snapshot_digest(const struct snapshot_file *files, size_t n,
                                      uint64_t max_bytes, char out[SNAPSHOT_DIGEST_SIZE]);

/* Writes a one-line reason for a failed check, naming the offending file and path (the
 * files given to the check), into buf (always NUL-terminated when size > 0). */
void snapshot_reason(struct snapshot_check check, const struct snapshot_file *files, char *buf,
                     size_t size);
