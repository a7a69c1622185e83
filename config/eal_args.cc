// DPDK 22.11 (Debian 12) parses its arguments with getopt_long, which also accepts
// any unambiguous prefix of a long option (--hel is --help) and clusters of short
// options (-vh is -v -h). Its rte_eal_init() calls exit(0) after printing for -h,
// --help and --log-level=help, and only prints for -v; --version is no EAL option
// (init fails after printing the usage). The checks follow getopt's rules, erring on
// the side of refusing: an argument that only looks like one of these is refused too.
#include "config/eal_args.h"

namespace tent::config::detail {
namespace {

// EAL's short options that take a value: the rest of a cluster is that value.
constexpr std::string_view kShortWithValue = "abcsdlSmnr";

// True when `name` is a non-empty prefix of the long option `full`, as getopt matches.
bool abbreviates(std::string_view name, std::string_view full) {
  return !name.empty() && full.substr(0, name.size()) == name;
}

std::string refused(std::string_view arg, std::string_view effect) {
  return "'" + std::string(arg) + "' " + std::string(effect) +
         "; allowed: " + std::string(kEalArgsAllowed);
}

std::string longOptionProblem(std::string_view arg) {
  const std::string_view body = arg.substr(2);
  const size_t eq = body.find('=');
  const std::string_view name = body.substr(0, eq);
  if (abbreviates(name, "help"))
    return refused(arg, "makes DPDK print its usage and exit the process");
  if (abbreviates(name, "version")) {
    return refused(arg, "is no EAL option: DPDK prints its usage and fails to start");
  }
  if (name.size() >= 2 && abbreviates(name, "log-level") && eq != std::string_view::npos &&
      body.substr(eq + 1) == "help") {
    return refused(arg, "prints DPDK's log types and exits the process");
  }
  return "";
}

std::string shortClusterProblem(std::string_view arg) {
  // The options of "-vh" are v and h; those of "-dvh" only d (its value is "vh").
  std::string_view options = arg.substr(1);
  const size_t with_value = options.find_first_of(kShortWithValue);
  if (with_value != std::string_view::npos) options = options.substr(0, with_value + 1);
  const std::string in_cluster = arg.size() > 2 ? " (a cluster of short options)" : "";
  if (options.find('h') != std::string_view::npos) {
    return refused(arg, "makes DPDK print its usage and exit the process" + in_cluster);
  }
  if (options.find('v') != std::string_view::npos) {
    return refused(arg, "only prints DPDK's version" + in_cluster);
  }
  return "";
}

}  // namespace

std::string ealArgumentProblem(std::string_view arg, std::string_view previous) {
  const bool previous_is_log_level = previous.size() >= 4 && previous.substr(0, 2) == "--" &&
                                     previous.find('=') == std::string_view::npos &&
                                     abbreviates(previous.substr(2), "log-level");
  if (arg == "help" && previous_is_log_level) {
    return refused(std::string(previous) + " help",
                   "prints DPDK's log types and exits the process");
  }
  if (arg.size() > 2 && arg.substr(0, 2) == "--") return longOptionProblem(arg);
  if (arg.size() > 1 && arg[0] == '-' && arg[1] != '-') return shortClusterProblem(arg);
  return "";
}

}  // namespace tent::config::detail
