// Private to config/: the schema. One function per YAML section; each runs the
// same reads whether the walk parses, describes keys or emits YAML (yaml_reader.h).
#pragma once

#include "config/config.h"
#include "config/yaml_reader.h"

namespace tent::config::detail {

// Reads every top-level section into `config`, cross-field checks included.
// The caller calls top.finish() (unknown top-level keys) afterwards.
void readConfig(MapReader& top, Config* config);
// The `metadata` section (parse_metadata.cc).
void readMetadata(MapReader& m, MetadataConfig* metadata);
// The text rules parse.cc keeps, for the other schema files.
bool isHostPort(std::string_view s);
bool isHost(std::string_view s);

}  // namespace tent::config::detail
