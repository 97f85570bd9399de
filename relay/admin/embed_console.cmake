# Writes OUT, a C++ file holding every file under DIR (relay/admin/console/, relay/tenant/portal/)
# as a byte array, returned by the function NAME (default console_files) for
# relay/admin/console_assets.cpp. Run at build time by relay/CMakeLists.txt (cmake -P), so editing a
# page rebuilds only this file. Bytes, not string literals: no delimiter to collide with, no
# literal length limit, binary files (images) too.
if(NOT NAME)
  set(NAME console_files)
endif()
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
file(WRITE "${OUT}.tmp" "// Generated from ${DIR} by relay/admin/embed_console.cmake. Do not edit.
#include \"relay/admin/console_assets.hpp\"
namespace walhook::relay::detail {
namespace {
${arrays}}  // namespace
std::span<const embedded_file> ${NAME}() {
  static const embedded_file all[] = {
${table}    {\"\", {}}};
  return {all, sizeof all / sizeof all[0] - 1};
}
}  // namespace walhook::relay::detail
")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
