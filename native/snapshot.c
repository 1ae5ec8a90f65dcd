/* Snapshot rules and the snapshot digest (spec: snapshotDigest and "Snapshot paths are ...").
 * Pure functions over plain buffers; SHA-256 through Node's OpenSSL. */
#include "snapshot.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHA256_SIZE 32
/* How much of an offending path a reason quotes. */
#define REASON_PATH_BYTES 96

bool snapshot_status_is_invalid(enum snapshot_status status) {
  switch (status) {
  case SNAPSHOT_TOO_MANY_FILES:
  case SNAPSHOT_PATH_NOT_STRING:
  case SNAPSHOT_PATH_EMPTY:
  case SNAPSHOT_PATH_CHARACTER:
  case SNAPSHOT_PATH_TOO_LONG:
  case SNAPSHOT_PATH_ABSOLUTE:
  case SNAPSHOT_PATH_TOO_MANY_SEGMENTS:
  case SNAPSHOT_PATH_EMPTY_SEGMENT:
  case SNAPSHOT_PATH_DOT_SEGMENT:
  case SNAPSHOT_CONTENT_NOT_BYTES:
  case SNAPSHOT_TOO_LARGE:
  case SNAPSHOT_DUPLICATE:
  case SNAPSHOT_CLASH:
    return true;
  case SNAPSHOT_OK:
  case SNAPSHOT_NO_MEMORY:
  case SNAPSHOT_CRYPTO_FAILED:
    return false;
  }
  return false;
}

static bool path_char_allowed(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '/';
}

enum snapshot_status snapshot_check_path(const char *path, size_t len) {
  if (path == NULL)
    return SNAPSHOT_PATH_NOT_STRING;
  if (len == 0)
    return SNAPSHOT_PATH_EMPTY;
  size_t segments = 1;
  for (size_t i = 0; i < len; i++) {
    if (!path_char_allowed((unsigned char)path[i]))
      return SNAPSHOT_PATH_CHARACTER;
    segments += path[i] == '/';
  }
  /* Every allowed character is one byte, so from here on bytes count characters. */
  if (len > SNAPSHOT_PATH_MAX_CHARS)
    return SNAPSHOT_PATH_TOO_LONG;
  if (path[0] == '/')
    return SNAPSHOT_PATH_ABSOLUTE;
  if (segments > SNAPSHOT_PATH_MAX_SEGMENTS)
    return SNAPSHOT_PATH_TOO_MANY_SEGMENTS;
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && path[i] != '/')
      continue;
    size_t n = i - start;
    const char *segment = path + start;
    if (n == 0)
      return SNAPSHOT_PATH_EMPTY_SEGMENT;
    if ((n == 1 && segment[0] == '.') || (n == 2 && segment[0] == '.' && segment[1] == '.'))
      return SNAPSHOT_PATH_DOT_SEGMENT;
    start = i + 1;
  }
  return SNAPSHOT_OK;
}

static struct snapshot_check check_result(enum snapshot_status status, size_t index, size_t other,
                                          uint64_t limit) {
  struct snapshot_check c = {status, index, other, limit};
  return c;
}

/* The order used to find collisions: ASCII case folded, and '/' below every other allowed
 * character, so that the paths inside a directory "d" sort immediately after a path "d"
 * (with "-" or "." lower than "/", "d-x" and "d.x" would sit in between). Ties keep the
 * input order, so a duplicate is reported on the later file. */
static unsigned char fold_key(unsigned char c) {
  if (c == '/')
    return 0;
  if (c >= 'A' && c <= 'Z')
    return (unsigned char)(c - 'A' + 'a');
  return c;
}

static int compare_folded(const void *a, const void *b) {
  const struct snapshot_file *x = *(const struct snapshot_file *const *)a;
  const struct snapshot_file *y = *(const struct snapshot_file *const *)b;
  size_t n = x->path_len < y->path_len ? x->path_len : y->path_len;
  for (size_t i = 0; i < n; i++) {
    unsigned char kx = fold_key((unsigned char)x->path[i]);
    unsigned char ky = fold_key((unsigned char)y->path[i]);
    if (kx != ky)
      return kx < ky ? -1 : 1;
  }
  if (x->path_len != y->path_len)
    return x->path_len < y->path_len ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* The digest's order: plain byte order of the paths (they are unique once validated). */
static int compare_bytes(const void *a, const void *b) {
  const struct snapshot_file *x = *(const struct snapshot_file *const *)a;
  const struct snapshot_file *y = *(const struct snapshot_file *const *)b;
  size_t n = x->path_len < y->path_len ? x->path_len : y->path_len;
  int c = memcmp(x->path, y->path, n);
  if (c != 0)
    return c;
  return x->path_len < y->path_len ? -1 : x->path_len > y->path_len;
}

static bool folded_prefix(const struct snapshot_file *prefix, const struct snapshot_file *f) {
  if (prefix->path_len > f->path_len)
    return false;
  for (size_t i = 0; i < prefix->path_len; i++)
    if (fold_key((unsigned char)prefix->path[i]) != fold_key((unsigned char)f->path[i]))
      return false;
  return true;
}

/* Checks every rule; order (n entries) is scratch space, left holding the files sorted by
 * compare_folded when the paths were valid. */
static struct snapshot_check validate(const struct snapshot_file *files, size_t n,
                                      uint64_t max_bytes, const struct snapshot_file **order) {
  if (n > SNAPSHOT_MAX_FILES)
    return check_result(SNAPSHOT_TOO_MANY_FILES, SNAPSHOT_MAX_FILES, 0, SNAPSHOT_MAX_FILES);
  uint64_t total = 0; /* invariant: total <= max_bytes, so the subtraction cannot wrap */
  for (size_t i = 0; i < n; i++) {
    enum snapshot_status s = snapshot_check_path(files[i].path, files[i].path_len);
    if (s != SNAPSHOT_OK)
      return check_result(s, i, 0, 0);
    if (files[i].content == NULL)
      return check_result(SNAPSHOT_CONTENT_NOT_BYTES, i, 0, 0);
    if (files[i].size > max_bytes - total)
      return check_result(SNAPSHOT_TOO_LARGE, i, 0, max_bytes);
    total += files[i].size;
    order[i] = &files[i];
  }
  if (n > 1)
    qsort(order, n, sizeof *order, compare_folded);
  /* With compare_folded, a duplicate or a path inside a file's "directory" is the file's
   * neighbour, so comparing neighbours finds every collision. */
  for (size_t i = 1; i < n; i++) {
    const struct snapshot_file *a = order[i - 1], *b = order[i];
    if (!folded_prefix(a, b))
      continue;
    if (a->path_len == b->path_len)
      return check_result(SNAPSHOT_DUPLICATE, (size_t)(b - files), (size_t)(a - files), 0);
    if (b->path[a->path_len] == '/')
      return check_result(SNAPSHOT_CLASH, (size_t)(a - files), (size_t)(b - files), 0);
  }
  return check_result(SNAPSHOT_OK, 0, 0, 0);
}

struct snapshot_check snapshot_validate(const struct snapshot_file *files, size_t n,
                                        uint64_t max_bytes) {
  const struct snapshot_file **order = malloc((n ? n : 1) * sizeof *order);
  if (order == NULL)
    return check_result(SNAPSHOT_NO_MEMORY, 0, 0, 0);
  struct snapshot_check c = validate(files, n, max_bytes, order);
  free(order);
  return c;
}

static void hex_encode(const unsigned char *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
}

/* Writes the decimal form of v to out (at least 20 bytes); returns its length. */
static size_t decimal(uint64_t v, char *out) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  return n;
}

/* Hashes valid files in byte order of their paths: one line "path\tsize\tsha256hex\n" per
 * file after the protocol line. Each content is hashed in place in one update (no copy). */
static bool hash_files(const struct snapshot_file **order, size_t n,
                       char out[SNAPSHOT_DIGEST_SIZE]) {
  if (n > 1)
    qsort(order, n, sizeof *order, compare_bytes);
  /* Fetched once (OpenSSL 3): EVP_sha256() makes every init fetch again, measured here at
   * about 0.7 us per file, half the time of hashing 1 KiB. */
  EVP_MD *md = EVP_MD_fetch(NULL, "SHA256", NULL);
  EVP_MD_CTX *outer = EVP_MD_CTX_new();
  EVP_MD_CTX *inner = EVP_MD_CTX_new();
  bool ok = md != NULL && outer != NULL && inner != NULL && EVP_DigestInit_ex(outer, md, NULL) &&
            EVP_DigestUpdate(outer, SNAPSHOT_PROTOCOL_LINE, strlen(SNAPSHOT_PROTOCOL_LINE));
  char line[SNAPSHOT_PATH_MAX_CHARS + 1 + 20 + 1 + 2 * SHA256_SIZE + 1];
  for (size_t i = 0; ok && i < n; i++) {
    const struct snapshot_file *f = order[i];
    unsigned char sum[EVP_MAX_MD_SIZE];
    unsigned int sum_len = 0;
    ok = EVP_DigestInit_ex(inner, md, NULL) && EVP_DigestUpdate(inner, f->content, f->size) &&
         EVP_DigestFinal_ex(inner, sum, &sum_len) && sum_len == SHA256_SIZE;
    if (!ok)
      break;
    size_t len = f->path_len; /* at most SNAPSHOT_PATH_MAX_CHARS: validated */
    memcpy(line, f->path, len);
    line[len++] = '\t';
    len += decimal(f->size, line + len);
    line[len++] = '\t';
    hex_encode(sum, SHA256_SIZE, line + len);
    len += 2 * SHA256_SIZE;
    line[len++] = '\n';
    ok = EVP_DigestUpdate(outer, line, len);
  }
  unsigned char sum[EVP_MAX_MD_SIZE];
  unsigned int sum_len = 0;
  ok = ok && EVP_DigestFinal_ex(outer, sum, &sum_len) && sum_len == SHA256_SIZE;
  if (ok) {
    memcpy(out, "sha256:", 7);
    hex_encode(sum, SHA256_SIZE, out + 7);
    out[7 + 2 * SHA256_SIZE] = '\0';
  }
  EVP_MD_CTX_free(inner);
  EVP_MD_CTX_free(outer);
  EVP_MD_free(md);
  return ok;
}

struct snapshot_check snapshot_digest(const struct snapshot_file *files, size_t n,
                                      uint64_t max_bytes, char out[SNAPSHOT_DIGEST_SIZE]) {
  const struct snapshot_file **order = malloc((n ? n : 1) * sizeof *order);
  if (order == NULL)
    return check_result(SNAPSHOT_NO_MEMORY, 0, 0, 0);
  struct snapshot_check c = validate(files, n, max_bytes, order);
  if (c.status == SNAPSHOT_OK && !hash_files(order, n, out))
    c = check_result(SNAPSHOT_CRYPTO_FAILED, 0, 0, 0);
  free(order);
  return c;
}

/* Appends formatted text to buf, truncating at size; *pos may pass size (then nothing more
 * is written). */
__attribute__((format(printf, 4, 5))) static void append(char *buf, size_t size, size_t *pos,
                                                         const char *format, ...) {
  if (*pos >= size)
    return;
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(buf + *pos, size - *pos, format, ap);
  va_end(ap);
  if (n > 0)
    *pos += (size_t)n;
}

/* Appends `files[i] "path"`: the path quoted, bytes outside printable ASCII escaped, long
 * paths cut with "...". */
static void append_file(char *buf, size_t size, size_t *pos, const struct snapshot_file *files,
                        size_t i) {
  append(buf, size, pos, "files[%zu]", i);
  const char *p = files[i].path;
  if (p == NULL)
    return;
  size_t n = files[i].path_len < REASON_PATH_BYTES ? files[i].path_len : REASON_PATH_BYTES;
  append(buf, size, pos, " \"");
  for (size_t k = 0; k < n; k++) {
    unsigned char c = (unsigned char)p[k];
    if (c == '"' || c == '\\')
      append(buf, size, pos, "\\%c", c);
    else if (c >= 0x20 && c < 0x7f)
      append(buf, size, pos, "%c", c);
    else
      append(buf, size, pos, "\\x%02x", c);
  }
  append(buf, size, pos, "%s\"", n < files[i].path_len ? "..." : "");
}

void snapshot_reason(struct snapshot_check check, const struct snapshot_file *files, char *buf,
                     size_t size) {
  size_t pos = 0;
  if (size == 0)
    return;
  buf[0] = '\0';
  if (snapshot_status_is_invalid(check.status)) {
    append_file(buf, size, &pos, files, check.index);
    append(buf, size, &pos, ": ");
  }
  switch (check.status) {
  case SNAPSHOT_OK:
    append(buf, size, &pos, "valid");
    break;
  case SNAPSHOT_TOO_MANY_FILES:
    append(buf, size, &pos, "more than %llu files", (unsigned long long)check.limit);
    break;
  case SNAPSHOT_PATH_NOT_STRING:
    append(buf, size, &pos, "path is not a string");
    break;
  case SNAPSHOT_PATH_EMPTY:
    append(buf, size, &pos, "path is empty");
    break;
  case SNAPSHOT_PATH_CHARACTER:
    append(buf, size, &pos, "path has a character other than A-Z a-z 0-9 . _ - and /");
    break;
  case SNAPSHOT_PATH_TOO_LONG:
    append(buf, size, &pos, "path is longer than %d characters", SNAPSHOT_PATH_MAX_CHARS);
    break;
  case SNAPSHOT_PATH_ABSOLUTE:
    append(buf, size, &pos, "path is absolute (it must be relative)");
    break;
  case SNAPSHOT_PATH_TOO_MANY_SEGMENTS:
    append(buf, size, &pos, "path has more than %d segments", SNAPSHOT_PATH_MAX_SEGMENTS);
    break;
  case SNAPSHOT_PATH_EMPTY_SEGMENT:
    append(buf, size, &pos, "path has an empty segment");
    break;
  case SNAPSHOT_PATH_DOT_SEGMENT:
    append(buf, size, &pos, "path has a \".\" or \"..\" segment");
    break;
  case SNAPSHOT_CONTENT_NOT_BYTES:
    append(buf, size, &pos, "content is not a Uint8Array");
    break;
  case SNAPSHOT_TOO_LARGE:
    append(buf, size, &pos, "contents total more than %llu bytes", (unsigned long long)check.limit);
    break;
  case SNAPSHOT_DUPLICATE:
    append(buf, size, &pos, "path duplicates ");
    append_file(buf, size, &pos, files, check.other);
    append(buf, size, &pos, " (paths compare case-insensitively)");
    break;
  case SNAPSHOT_CLASH:
    append(buf, size, &pos, "path is a file and also a directory of ");
    append_file(buf, size, &pos, files, check.other);
    append(buf, size, &pos, " (paths compare case-insensitively)");
    break;
  case SNAPSHOT_NO_MEMORY:
    append(buf, size, &pos, "out of memory");
    break;
  case SNAPSHOT_CRYPTO_FAILED:
    append(buf, size, &pos, "SHA-256 failed in OpenSSL");
    break;
  }
}
