{
  "targets": [
    {
      "target_name": "kube_ipvs_proxy",
      "sources": [
        "native/addon.cc",
        "native/codec.cc",
        "native/columns.cc",
        "native/constants.cc",
        "native/errors.cc",
        "native/js_common.cc",
        "native/js_socket.cc",
        "native/schemas.cc",
        "native/schemas_genl.cc",
        "native/schemas_ipset.cc",
        "native/schemas_ipvs.cc",
        "native/schemas_rtnl.cc",
        "native/socket.cc",
        "native/table.cc",
        "native/xtables.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra", "-Wno-missing-field-initializers", "-Wno-unused-parameter"],
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"]
    }
  ]
}
