#include "wal/relation_cache.hpp"

#include "wal/errc.hpp"

#include <type_traits>

namespace walhook::wal {

const pgoutput::relation* relation_cache::find(std::uint32_t oid) const {
  auto it = relations_.find(oid);
  return it == relations_.end() ? nullptr : &it->second;
}

std::optional<std::size_t> relation_cache::column_index(const pgoutput::relation& rel, std::string_view name) {
  for (std::size_t i = 0; i < rel.columns.size(); ++i) {
    if (rel.columns[i].name == name) return i;
  }
  return std::nullopt;
}

namespace {

bool fits(const pgoutput::relation& rel, const pgoutput::tuple& t) { return t.size() == rel.columns.size(); }
bool fits(const pgoutput::relation& rel, const std::optional<pgoutput::tuple>& t) { return !t || fits(rel, *t); }

}  // namespace

boost::system::error_code relation_cache::observe(const pgoutput::message& m) {
  return std::visit(
      [this](const auto& msg) -> boost::system::error_code {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, pgoutput::relation>) {
          apply(msg);
          return {};
        } else if constexpr (std::is_same_v<T, pgoutput::insert> || std::is_same_v<T, pgoutput::update> ||
                             std::is_same_v<T, pgoutput::delete_>) {
          const pgoutput::relation* rel = find(msg.relation_oid);
          if (rel == nullptr) return errc::unknown_relation;
          bool ok = true;
          if constexpr (!std::is_same_v<T, pgoutput::delete_>) ok = ok && fits(*rel, msg.new_tuple);
          if constexpr (!std::is_same_v<T, pgoutput::insert>) {
            ok = ok && fits(*rel, msg.key_tuple) && fits(*rel, msg.old_tuple);
          }
          if (!ok) return errc::column_mismatch;
          return {};
        } else if constexpr (std::is_same_v<T, pgoutput::truncate>) {
          for (std::uint32_t oid : msg.relation_oids) {
            if (find(oid) == nullptr) return errc::unknown_relation;
          }
          return {};
        } else {
          return {};
        }
      },
      m);
}

}  // namespace walhook::wal
