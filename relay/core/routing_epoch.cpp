#include "relay/core/routing_epoch.hpp"

#include "common/json_writer.hpp"
#include "relay/core/rows.hpp"

#include <simdjson.h>

#include <algorithm>

namespace walhook::relay {
namespace dom = simdjson::dom;

routing_epoch routing_epoch::of(const endpoint& e, const pg_snapshot& before, std::string before_text,
                                std::vector<std::uint64_t> also) {
  routing_epoch r;
  r.event_types = e.event_types;
  r.filter_text = e.policies.filter;
  r.filter = e.filter;
  r.before = before;
  r.before_text = std::move(before_text);
  std::sort(also.begin(), also.end());
  r.before_also = std::move(also);
  return r;
}

bool routing_epoch::holds(std::uint32_t xid) const {
  const auto wide = before.widen(xid);
  return before.visible(wide) || std::binary_search(before_also.begin(), before_also.end(), wide);
}

bool routing_epoch::shown_by(const pg_snapshot& s) const {
  for (auto x : before_also)
    if (!s.visible(x)) return false;
  // Every id below s.xmin had ended when `s` was taken (visible in it); from there up to
  // before.xmax, each one `before` shows must be shown by `s` too.
  if (before.xmax <= s.xmin) return true;
  if (before.xmax - s.xmin > 1'000'000) return false;
  for (std::uint64_t x = s.xmin; x < before.xmax; ++x)
    if (before.visible(x) && !s.visible(x)) return false;
  return true;
}

bool routing_epoch::routes(std::string_view event_type, std::optional<std::string_view> body, std::string* why) const {
  if (event_types && std::find(event_types->begin(), event_types->end(), event_type) == event_types->end()) return false;
  if (!filter || !body) return true;
  return filter->evaluate(*body, why) != payload_filter::result::no_match;
}

std::string routing_epochs_json(const std::vector<routing_epoch>& epochs) {
  json_writer w;
  w.begin_array();
  for (const auto& e : epochs) {
    w.begin_object().key("event_types");
    if (e.event_types) {
      w.begin_array();
      for (const auto& t : *e.event_types) w.string(t);
      w.end_array();
    } else {
      w.null();
    }
    w.field("filter", e.filter_text).field("before", e.before_text).key("before_also").begin_array();
    for (auto x : e.before_also) w.raw(std::to_string(x));
    w.end_array().end_object();
  }
  w.end_array();
  return w.str();
}

boost::system::result<std::vector<routing_epoch>> parse_routing_epochs(std::string_view json, std::string* why) {
  const auto fail = [&](std::string what) -> boost::system::result<std::vector<routing_epoch>> {
    if (why) *why = "routing: " + std::move(what);
    return boost::system::error_code(std::make_error_code(std::errc::invalid_argument));
  };
  dom::parser parser;
  const simdjson::padded_string text(json);
  dom::element doc;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS) return fail("not JSON");
  dom::array items;
  if (doc.get_array().get(items) != simdjson::SUCCESS) return fail("not an array");
  std::vector<routing_epoch> out;
  for (dom::element item : items) {
    routing_epoch r;
    dom::element types, filter, also;
    std::string_view before;
    if (item["before"].get_string().get(before) != simdjson::SUCCESS) return fail("an epoch without 'before'");
    auto snap = pg_snapshot::parse(before);
    if (!snap) return fail("'before' is not a pg_snapshot");
    r.before = *snap;
    r.before_text = std::string(before);
    if (item["event_types"].get(types) == simdjson::SUCCESS && !types.is_null()) {
      dom::array list;
      if (types.get_array().get(list) != simdjson::SUCCESS) return fail("'event_types' is not an array");
      r.event_types.emplace();
      for (dom::element t : list) {
        std::string_view s;
        if (t.get_string().get(s) != simdjson::SUCCESS) return fail("an event type is not a string");
        r.event_types->emplace_back(s);
      }
    }
    if (item["filter"].get(filter) == simdjson::SUCCESS && !filter.is_null()) {
      std::string_view f;
      if (filter.get_string().get(f) != simdjson::SUCCESS) return fail("'filter' is not a string");
      std::string reason;
      auto compiled = payload_filter::compile(f, &reason);
      if (!compiled) return fail("filter: " + reason);
      r.filter_text = std::string(f);
      r.filter = std::move(*compiled);
    }
    if (item["before_also"].get(also) == simdjson::SUCCESS) {
      dom::array list;
      if (also.get_array().get(list) != simdjson::SUCCESS) return fail("'before_also' is not an array");
      for (dom::element x : list) {
        std::uint64_t v = 0;
        if (x.get_uint64().get(v) != simdjson::SUCCESS) return fail("an xid is not a number");
        r.before_also.push_back(v);
      }
      std::sort(r.before_also.begin(), r.before_also.end());
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace walhook::relay
