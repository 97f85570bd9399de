#pragma once
// Which walhook this is, for `walhook --version` and walhook_build_info: the version is the one
// in the top CMakeLists.txt's project(VERSION), the commit the git short SHA the build was
// configured at. relay/core/CMakeLists.txt generates the definitions (version.cpp in the build tree).

#include <string_view>

namespace walhook::relay {

/// "0.1.0": project(walhook VERSION …).
extern const std::string_view walhook_version;
/// `git rev-parse --short HEAD` when CMake configured the build; "unknown" without git (e.g. a
/// source tarball, or a container build without .git).
extern const std::string_view walhook_commit;

}  // namespace walhook::relay
