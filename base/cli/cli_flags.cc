#include "base/cli/cli_flags.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/byte_size.h"

namespace tent::cli {
namespace {

bool isHelp(std::string_view a) {
  return a == "--help" || a == "-help" || a == "-h" || a == "--helpfull" || a == "-helpfull";
}

// gflags' own flags (--flagfile, --helpon, ...) are defined in its sources.
bool gflagsOwn(const gflags::CommandLineFlagInfo& f) {
  return f.filename.find("gflags") != std::string::npos;
}

// "--name[=value]" or "-name[=value]": the name; "" for a positional argument.
std::string_view flagName(std::string_view arg, bool* has_value) {
  if (arg.size() < 2 || arg[0] != '-') return {};
  arg.remove_prefix(arg[1] == '-' ? 2 : 1);
  const size_t eq = arg.find('=');
  *has_value = eq != std::string_view::npos;
  return arg.substr(0, eq);
}

bool isBoolFlag(std::string_view name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(std::string(name).c_str(), &info) && info.type == "bool";
}

bool exists(std::string_view name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(std::string(name).c_str(), &info);
}

// A flag given without "=value" takes the next argument, unless it is a boolean
// ("--human") or a negated boolean ("--nohuman").
bool takesValue(std::string_view name) {
  if (exists(name)) return !isBoolFlag(name);
  return !(name.substr(0, 2) == "no" && isBoolFlag(name.substr(2)));
}

bool isKnown(std::string_view name) {
  return exists(name) || (name.substr(0, 2) == "no" && isBoolFlag(name.substr(2)));
}

std::string programName(const char* argv0) {
  std::string_view p = argv0 != nullptr ? argv0 : "tool";
  const size_t slash = p.rfind('/');
  return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
}

std::string firstLine(std::string_view text) {
  return std::string(text.substr(0, text.find('\n')));
}

}  // namespace

std::string helpText(std::string_view usage) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::string out = std::string(usage) + "\n\nflags:\n";
  for (const auto& f : all) {
    if (gflagsOwn(f)) continue;
    std::string left = "  --" + f.name + (f.type == "bool" ? "" : "=<" + f.type + ">");
    if (left.size() < 32) left.resize(32, ' ');
    out += left + " " + f.description +
           " (default: " + (f.type == "string" ? "'" + f.default_value + "'" : f.default_value) +
           ")\n";
  }
  out +=
      "\ngflags' own: --flagfile=FILE (one --flag=value a line), --fromenv=a,b "
      "(FLAGS_a from the environment), --helpon=MODULE, --help\n";
  return out;
}

int parseFlags(int* argc, char*** argv, std::string_view usage) {
  gflags::SetUsageMessage(std::string(usage));
  const std::string program = programName(*argc > 0 ? (*argv)[0] : nullptr);
  for (int i = 1; i < *argc; ++i) {
    if (std::string_view((*argv)[i]) == "--") break;
    if (isHelp((*argv)[i])) {
      std::fputs(helpText(usage).c_str(), stdout);
      return 0;
    }
  }
  // Every flag as one "--name=value" line for gflags' non-fatal reader; positional
  // arguments stay in argv.
  std::string lines;
  std::vector<char*> positional = {(*argv)[0]};
  for (int i = 1; i < *argc; ++i) {
    const std::string_view arg = (*argv)[i];
    if (arg == "--") {
      for (++i; i < *argc; ++i) positional.push_back((*argv)[i]);
      break;
    }
    bool has_value = false;
    const std::string_view name = flagName(arg, &has_value);
    if (name.empty()) {
      positional.push_back((*argv)[i]);
      continue;
    }
    if (!isKnown(name)) {
      std::fprintf(stderr, "%s: unknown flag --%.*s (%s; --help lists every flag)\n",
                   program.c_str(), static_cast<int>(name.size()), name.data(),
                   firstLine(usage).c_str());
      return 2;
    }
    std::string line = "--" + std::string(name);
    if (has_value) {
      line += std::string(arg.substr(arg.find('=')));
    } else if (takesValue(name)) {
      if (i + 1 >= *argc) {
        std::fprintf(stderr, "%s: --%.*s needs a value (%s)\n", program.c_str(),
                     static_cast<int>(name.size()), name.data(), firstLine(usage).c_str());
        return 2;
      }
      line += "=" + std::string((*argv)[++i]);
    }
    if (line.find('\n') != std::string::npos) {
      // A value over several lines (a JSON text) cannot be a flagfile line: set it alone.
      const std::string value = line.substr(line.find('=') + 1);
      if (gflags::SetCommandLineOption(std::string(name).c_str(), value.c_str()).empty()) {
        std::fprintf(stderr, "%s: bad value for --%.*s (%s)\n", program.c_str(),
                     static_cast<int>(name.size()), name.data(), firstLine(usage).c_str());
        return 2;
      }
      continue;
    }
    lines += line + "\n";
  }
  if (!gflags::ReadFlagsFromString(lines, program.c_str(), false)) return 2;  // gflags said why
  gflags::HandleCommandLineHelpFlags();  // --helpon, --helpmatch: gflags prints and exits
  static std::vector<char*> kept;
  kept = positional;
  kept.push_back(nullptr);
  *argc = static_cast<int>(positional.size());
  *argv = kept.data();
  return kContinue;
}

Result<uint64_t> sizeFlag(std::string_view name, std::string_view value) {
  auto v = parseByteSize(value);
  if (!v.ok()) return v.status().withContext("--" + std::string(name));
  return v;
}

}  // namespace tent::cli
