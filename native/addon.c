/* The addon's entry point: registers each concern's functions. The JavaScript in lib/
 * is the only caller; these functions are internal and validate only what native code
 * needs to be memory-safe (lib/ validates the public API). */
#include "addon.h"

static napi_value init(napi_env env, napi_value exports) {
  if (!confined_snapshot_init(env, exports) || !confined_runtime_init(env, exports) ||
      !confined_macho_init(env, exports) || !confined_namespace_init(env, exports) ||
      !confined_launch_init(env, exports) || !confined_seatbelt_init(env, exports))
    return NULL;
  return exports;
}

/* node_api.h defines exported registration functions without prototypes. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
