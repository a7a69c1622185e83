// One command-line flag library for every tent tool: gflags, as Mooncake's tebench
// uses, so flags are spelled and read the same way (`--name=value` or `--name value`,
// `--flag` / `--noflag` for booleans, `--flagfile=FILE`, `--fromenv=a,b`,
// `--helpon=MODULE`). On top of gflags, the same rules for every tool:
//   --help (-h, --helpfull) prints the usage and every flag of the tool with its type
//     and default on stdout and exits 0 (gflags' own --help exits 1);
//   a usage error (an unknown flag, a flag without its value, a value gflags cannot
//     read) is one line on stderr naming it and exit code 2 (gflags exits 1);
//   sizes are read by the one rule of flags and config (base/byte_size.h): declare
//     them as string flags and read them with sizeFlag().
// The tools define their flags with gflags' DEFINE_* macros.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tent/status.h"

namespace tent::cli {

inline constexpr int kContinue = -1;

// Parses the flags. kContinue: go on, `*argc` / `*argv` keep argv[0] and the
// positional arguments; otherwise exit with the returned code (0 after --help).
int parseFlags(int* argc, char*** argv, std::string_view usage);

// The --help text: the usage, then every flag defined outside gflags itself,
// "--name=<type>  help (default: value)", sorted by name, then gflags' own flags in one line.
std::string helpText(std::string_view usage);

// A size flag's value by the one rule (base/byte_size.h); the error names the flag.
Result<uint64_t> sizeFlag(std::string_view name, std::string_view value);

}  // namespace tent::cli
