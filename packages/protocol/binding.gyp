{
  "targets": [
    {
      "target_name": "klog_crc32",
      "sources": ["native/crc32.cc", "native/kafka-messages.cc"],
      "libraries": ["-lisal"],
      "defines": ["NAPI_VERSION=8"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra"]
    }
  ]
}
