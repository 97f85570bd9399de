# Writes OUT, a C++ file holding every file under DIR (relay/admin/console/) as a byte array, for
# relay/admin/console_assets.cpp. Run at build time by relay/CMakeLists.txt (cmake -P), so editing a
# page rebuilds only this file. Bytes, not string literals: no delimiter to collide with, no
# literal length limit, binary files (images) too.
file(GLOB_RECURSE files RELATIVE "${DIR}" "${DIR}/*")
list(FILTER files EXCLUDE REGEX "(^|/)\\.")  # editor and VCS leftovers
list(SORT files)
set(arrays "")
set(table "")
set(i 0)
foreach(rel ${files})
  file(READ "${DIR}/${rel}" hex HEX)
  string(LENGTH "${hex}" digits)
  math(EXPR bytes "${digits} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  # A trailing 0 so an empty file is a valid array too; not counted in its size.
  string(APPEND arrays "static const unsigned char file_${i}[] = {${hex}0};\n")
  string(APPEND table "    {\"/${rel}\", {reinterpret_cast<const char*>(file_${i}), ${bytes}}},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${OUT}.tmp" "// Generated from relay/admin/console/* by relay/admin/embed_console.cmake. Do not edit.
#include <span>
#include <string_view>
namespace walhook::relay::detail {
struct embedded_file {
  std::string_view path;
  std::string_view body;
};
namespace {
${arrays}}  // namespace
std::span<const embedded_file> console_files() {
  static const embedded_file all[] = {
${table}    {\"\", {}}};
  return {all, sizeof all / sizeof all[0] - 1};
}
}  // namespace walhook::relay::detail
")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
