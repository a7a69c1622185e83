// Reading a whole file that names an input (a config file, the topology XML, a secret,
// a workload description): it must be a regular file of bounded size. A FIFO, a device
// such as /dev/zero, a directory or a file over the cap is refused with a Status that
// names the input and the path, before (or instead of) reading without end.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "tent/status.h"

namespace tent {

struct BoundedFile {
  std::string bytes;
  mode_t mode = 0;  // st_mode, for callers that check permissions
};

struct BoundedFileOptions {
  uint64_t max_bytes = 16u << 20;
  bool no_follow = false;  // refuse a symbolic link as the last path component
};

// `what` names the input in messages ("topology.xml_file", "config file"):
//   "topology.xml_file '/dev/zero' is a character device; it must be a regular file".
// NotFound when the path does not exist; IoError otherwise.
Result<BoundedFile> readBoundedFile(const std::string& path, std::string_view what,
                                    BoundedFileOptions options = {});

// "16 MiB", "64 KiB", "100 bytes": a cap as messages state it.
std::string byteSizeText(uint64_t bytes);

}  // namespace tent
