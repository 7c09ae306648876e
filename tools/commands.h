// Non-benchmark subcommands of the moekit tool.
#pragma once

namespace moekit::tools {
int jit_warm_main(int argc, char** argv);  ///< argv[0] == "warm"
int info_main(int argc, char** argv);      ///< argv[0] == "info"
}  // namespace moekit::tools
