#pragma once
/* Seatbelt (sandbox-exec) profile builder: one builder, two policies (the executor's and
 * the command runner's). Pure: no I/O; errors returned as values. Every path reaches
 * Seatbelt as a parameter value (-D NAME=value, read in the profile as (param "NAME")):
 * the profile text depends only on the policy and on how many paths (and distinct
 * ancestor directories) there are, never on their bytes, so no value can change the
 * text's syntax. */

#include <stddef.h>

enum seatbelt_policy {
  SEATBELT_POLICY_EXECUTOR, /* the spec's executor: read-only, no fork, no network */
  SEATBELT_POLICY_COMMAND,  /* runConfinedCommand: mounts ro/rw, fork and exec allowed */
};

struct seatbelt_mount {
  const char *path; /* absolute, normalised; the caller resolved symlinks (see README) */
  int writable;     /* 0: 'ro', 1: 'rw' */
};

struct seatbelt_request {
  enum seatbelt_policy policy;
  /* Executor only (NULL / 0 for the command policy). */
  const char *exec_path;            /* the node binary sandbox-exec executes */
  const char *const *runtime_files; /* the non-system closure (libraries), exact files */
  size_t n_runtime_files;
  const char *program_dir; /* program snapshot directory */
  const char *input_dir;   /* input snapshot directory (the working directory) */
  /* Command only (NULL / 0 for the executor policy). */
  const struct seatbelt_mount *mounts; /* in the caller's order: a later mount wins */
  size_t n_mounts;
  unsigned proxy_port; /* 0: no network at all; else outbound TCP to localhost:port only */
};

struct seatbelt_param {
  char name[24];
  char *value; /* owned */
};

struct seatbelt_profile {
  int ok;
  char reason[256];
  char *text; /* owned, NUL-terminated */
  size_t text_len;
  struct seatbelt_param *params; /* owned, in the order documented in profile_seatbelt.c */
  size_t n_params;
  char instantiated[7 + 64 + 1]; /* "sha256:" + hex, see seatbelt_instantiated() */
};

/* Limits (the builder refuses more). */
#define SEATBELT_MAX_PATH 1024
#define SEATBELT_MAX_RUNTIME_FILES 512
#define SEATBELT_MAX_MOUNTS 64

/* Builds the profile text, its ordered parameters and the instantiated digest. Returns 0
 * with out->ok = 1, or a negative errno with out->ok = 0 and out->reason (-EINVAL: the
 * request cannot be expressed with the policy's guarantees; -ENOMEM). */
int seatbelt_build(const struct seatbelt_request *req, struct seatbelt_profile *out);

/* Releases what seatbelt_build allocated; safe on a zeroed or failed profile. */
void seatbelt_profile_free(struct seatbelt_profile *p);

/* "sha256:<hex>" over the serialisation documented in profile_seatbelt.c of `text` and
 * the parameters. Returns 0, or -EIO if OpenSSL failed. */
int seatbelt_instantiated(const char *text, size_t text_len, const struct seatbelt_param *params,
                          size_t n_params, char out[7 + 64 + 1]);
