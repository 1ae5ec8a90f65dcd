/* A stand-in for the six OpenSSL EVP calls native/snapshot.c makes, so the snapshot rules
 * can be fuzzed without linking libcrypto (the addon takes them from the running node).
 * It is NOT SHA-256: a deterministic 32-byte mix, enough to drive every code path of
 * snapshot_digest (sizes, lines, hex encoding) under the sanitizers. Fuzzing only. */
#include <openssl/evp.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct evp_md_st {
  int unused;
};
struct evp_md_ctx_st {
  uint64_t state[4];
  uint64_t length;
};

EVP_MD *EVP_MD_fetch(OSSL_LIB_CTX *ctx, const char *algorithm, const char *properties) {
  (void)ctx;
  (void)properties;
  if (strcmp(algorithm, "SHA256") != 0)
    return NULL;
  return calloc(1, sizeof(struct evp_md_st));
}

void EVP_MD_free(EVP_MD *md) {
  free(md);
}

EVP_MD_CTX *EVP_MD_CTX_new(void) {
  return calloc(1, sizeof(struct evp_md_ctx_st));
}

void EVP_MD_CTX_free(EVP_MD_CTX *ctx) {
  free(ctx);
}

int EVP_DigestInit_ex(EVP_MD_CTX *ctx, const EVP_MD *type, ENGINE *impl) {
  (void)impl;
  if (ctx == NULL || type == NULL)
    return 0;
  for (int i = 0; i < 4; i++)
    ctx->state[i] = 0xcbf29ce484222325ULL + (uint64_t)i;
  ctx->length = 0;
  return 1;
}

int EVP_DigestUpdate(EVP_MD_CTX *ctx, const void *d, size_t cnt) {
  const unsigned char *p = d;
  for (size_t i = 0; i < cnt; i++) {
    uint64_t *s = &ctx->state[(ctx->length + i) & 3];
    *s = (*s ^ p[i]) * 0x100000001b3ULL;
  }
  ctx->length += cnt;
  return 1;
}

int EVP_DigestFinal_ex(EVP_MD_CTX *ctx, unsigned char *md, unsigned int *s) {
  for (int i = 0; i < 32; i++)
    md[i] = (unsigned char)(ctx->state[i / 8] >> (8 * (i % 8)) ^ ctx->length);
  if (s != NULL)
    *s = 32;
  return 1;
}
