#pragma once
#include <span>
#include <string_view>
namespace walhook::sql {
struct migration { int version; std::string_view name; std::string_view sql; };
std::span<const migration> embedded_migrations();
}
