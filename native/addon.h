#pragma once
/* Module registration: each concern's glue file adds its functions to the addon's
 * exports. Every init returns false with a pending exception on failure. */

#include <node_api.h>
#include <stdbool.h>

bool confined_snapshot_init(napi_env env, napi_value exports);  /* snapshot_napi.c */
bool confined_runtime_init(napi_env env, napi_value exports);   /* runtime_napi.c */
bool confined_macho_init(napi_env env, napi_value exports);     /* macho_napi.c */
bool confined_namespace_init(napi_env env, napi_value exports); /* namespace_napi.c */
bool confined_launch_init(napi_env env, napi_value exports);    /* launch_napi.c */
bool confined_seatbelt_init(napi_env env, napi_value exports);  /* profile_seatbelt_napi.c */
