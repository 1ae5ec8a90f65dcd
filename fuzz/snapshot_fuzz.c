/* libFuzzer target for the snapshot rules (native/snapshot.c): path grammar, limits,
 * duplicates and clashes, the digest's line building and the reason text. Built by
 * `npm run fuzz` with fuzz/evp_shim.c in place of OpenSSL (the digest bytes are not
 * SHA-256 there; what is checked is memory safety and the rules' own consistency).
 *
 * Input: byte 0 picks the byte limit (and the reason buffer's size), then records separated
 * by 0xff. In a record, byte 0 has flags (1: path is "not a string", 2: content is "not
 * bytes") and the rest is the path up to the first NUL, the content after it. */
#include "snapshot.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORDS 512

static char lower(char c) {
  return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Independent of snapshot.c: equal ignoring ASCII case. */
static int folded_equal(const char *a, size_t an, const char *b, size_t bn) {
  if (an != bn)
    return 0;
  for (size_t i = 0; i < an; i++)
    if (lower(a[i]) != lower(b[i]))
      return 0;
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  static const uint64_t limits[] = {0, 1, 16, 1024, UINT64_MAX};
  uint64_t max_bytes = limits[data[0] % 5];
  size_t reason_size = (size_t)(data[0] >> 3) * 4; /* 0 .. 124 */

  struct snapshot_file *files = calloc(MAX_RECORDS, sizeof *files);
  if (files == NULL)
    return 0;
  size_t n = 0;
  size_t pos = 1;
  while (pos < size && n < MAX_RECORDS) {
    const uint8_t *end = memchr(data + pos, 0xff, size - pos);
    size_t len = end ? (size_t)(end - (data + pos)) : size - pos;
    const uint8_t *rec = data + pos;
    pos += len + 1;
    uint8_t flags = len ? rec[0] : 0;
    const uint8_t *body = len ? rec + 1 : rec;
    size_t body_len = len ? len - 1 : 0;
    const uint8_t *nul = memchr(body, 0, body_len);
    size_t path_len = nul ? (size_t)(nul - body) : body_len;
    struct snapshot_file *f = &files[n++];
    f->path = (flags & 1) ? NULL : (const char *)body;
    f->path_len = (flags & 1) ? 0 : path_len;
    /* An empty content still points somewhere, as the header requires. */
    f->content = (flags & 2) ? NULL : (nul ? nul + 1 : body + body_len);
    f->size = nul ? body_len - path_len - 1 : 0;
  }

  for (size_t i = 0; i < n; i++)
    (void)snapshot_check_path(files[i].path, files[i].path_len);

  struct snapshot_check v = snapshot_validate(files, n, max_bytes);
  char digest[SNAPSHOT_DIGEST_SIZE];
  memset(digest, 'x', sizeof digest);
  struct snapshot_check d = snapshot_digest(files, n, max_bytes, digest);
  /* The digest applies exactly the rules validate applies. */
  if (v.status != d.status || v.index != d.index || v.other != d.other)
    abort();
  if (v.status == SNAPSHOT_OK) {
    if (memcmp(digest, "sha256:", 7) != 0 || digest[SNAPSHOT_DIGEST_SIZE - 1] != '\0' ||
        strlen(digest) != SNAPSHOT_DIGEST_SIZE - 1)
      abort();
    for (size_t i = 7; i < SNAPSHOT_DIGEST_SIZE - 1; i++)
      if (!((digest[i] >= '0' && digest[i] <= '9') || (digest[i] >= 'a' && digest[i] <= 'f')))
        abort();
    /* Accepted: every path passes the grammar, no two are equal ignoring case, no file is a
     * directory of another, and the sizes fit. */
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
      if (snapshot_check_path(files[i].path, files[i].path_len) != SNAPSHOT_OK ||
          files[i].content == NULL)
        abort();
      total += files[i].size;
      for (size_t k = i + 1; k < n; k++) {
        const struct snapshot_file *a = &files[i], *b = &files[k];
        if (folded_equal(a->path, a->path_len, b->path, b->path_len))
          abort();
        const struct snapshot_file *s = a->path_len < b->path_len ? a : b;
        const struct snapshot_file *l = s == a ? b : a;
        if (l->path_len > s->path_len && l->path[s->path_len] == '/' &&
            folded_equal(s->path, s->path_len, l->path, s->path_len))
          abort();
      }
    }
    if (total > max_bytes)
      abort();
  } else if (snapshot_status_is_invalid(v.status)) {
    if (v.status != SNAPSHOT_TOO_MANY_FILES && v.index >= n)
      abort();
    if ((v.status == SNAPSHOT_DUPLICATE || v.status == SNAPSHOT_CLASH) && v.other >= n)
      abort();
  }

  char *reason = malloc(reason_size ? reason_size : 1);
  if (reason != NULL) {
    snapshot_reason(v, files, reason, reason_size);
    if (reason_size > 0 && memchr(reason, 0, reason_size) == NULL)
      abort();
    free(reason);
  }
  free(files);
  return 0;
}
