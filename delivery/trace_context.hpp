#pragma once
// W3C Trace Context (https://www.w3.org/TR/trace-context/, §3.2 "traceparent"): an outbox row's
// traceparent (walhook.outbox.traceparent, migration 012) is the trace of the transaction that
// produced the event; each attempt carries it on as a child — the same trace id and flags, a
// span id of walhook's own — so the customer's traces link to it. Pure.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walhook::delivery {

struct trace_parent {
  std::string trace_id;   ///< 32 lowercase hex digits, not all zero
  std::string parent_id;  ///< 16 lowercase hex digits, not all zero
  std::string flags;      ///< 2 lowercase hex digits (01: sampled)
};

/// Parses a traceparent header value by §3.2.2: version 2 hex digits but not "ff"; version 00
/// exactly 55 characters; a later version at least 55, with '-' after them if longer (its
/// extra fields ignored). nullopt for anything else (uppercase hex, an all-zero id, …): per the
/// specification such a value is not propagated.
std::optional<trace_parent> parse_traceparent(std::string_view value);

/// The traceparent of walhook's attempt: "00-<trace_id>-<span>-<flags>", `span` as 16 lowercase
/// hex digits (0 is replaced by 1: an all-zero id is invalid).
std::string child_traceparent(const trace_parent& parent, std::uint64_t span);

}  // namespace walhook::delivery
