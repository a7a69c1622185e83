// Private to config/: which eal.extra_args would make rte_eal_init() print and exit
// the process, or only print, instead of configuring EAL.
#pragma once

#include <string>
#include <string_view>

namespace tent::config::detail {

// What EAL arguments may be, for messages and the key list.
inline constexpr std::string_view kEalArgsAllowed =
    "options that configure EAL, not -h/--help, -v/--version or --log-level=help";

// Why `arg` is refused, or "" when it is fine. `previous` is the argument before it:
// "--log-level help" gives the option's value as the next argument.
std::string ealArgumentProblem(std::string_view arg, std::string_view previous);

}  // namespace tent::config::detail
