/* Placeholder: registers nothing yet. */
#include "addon.h"

bool confined_snapshot_init(napi_env env, napi_value exports) {
  (void)env;
  (void)exports;
  return true;
}
