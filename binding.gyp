{
  "target_defaults": {
    "cflags": [
      "-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden",
      "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wmissing-prototypes",
      "-Wstrict-prototypes", "-Wformat=2", "-Wswitch-enum", "-Wvla",
      "-Wno-unused-parameter"
    ],
    "xcode_settings": {
      "OTHER_CFLAGS": [
        "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wmissing-prototypes",
        "-Wstrict-prototypes", "-Wformat=2", "-Wvla", "-Wno-unused-parameter"
      ]
    },
    "conditions": [
      ["OS=='linux' and '<!(node -p \"process.env.CONFINED_SANITIZE||''\")'!=''", {
        "cflags": ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"],
        "ldflags": ["-fsanitize=address,undefined"]
      }]
    ]
  },
  "targets": [
    {
      "target_name": "confined",
      "sources": ["<!@(node scripts/sources.mjs addon <(OS))"],
      "defines": ["NAPI_VERSION=8"],
      "conditions": [
        ["OS=='linux'", { "libraries": ["-lseccomp"] }]
      ]
    },
    {
      "target_name": "confined-stage",
      "type": "executable",
      "sources": ["<!@(node scripts/sources.mjs stage)"]
    },
    {
      "target_name": "confined-forwarder",
      "type": "executable",
      "sources": ["<!@(node scripts/sources.mjs forwarder)"]
    }
  ]
}
