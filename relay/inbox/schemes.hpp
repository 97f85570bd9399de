#pragma once
// The inbox's signature schemes (issue 21): is this request really from the source's sender, is
// it fresh, and which event is it? Pure: no I/O, no clock read (`now` is a parameter), no
// executor. The ingest server calls `verify` on the raw body as received, byte for byte, before
// anything is written.
//
// Sources (the providers' public documentation; docs/inbox.md "Signature schemes"):
//   standard-webhooks  the Standard Webhooks specification, "Signature scheme" and "Webhook headers"
//                      (walhook's own deliveries: delivery/signing.hpp)
//   stripe             Stripe's docs, "Check the webhook signatures" / "Verify manually"
//   github             GitHub's docs, "Validating webhook deliveries"
//   hmac-sha256        walhook's own generic form for senders that sign the body (or
//                      "timestamp.body") with HMAC-SHA256 in one header

#include <boost/system/result.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay::inbox {

/// How a source's sender signs its requests.
enum class scheme { standard_webhooks, stripe, github, hmac_sha256 };

/// "standard-webhooks", "stripe", "github" or "hmac-sha256" (exactly; `walhook inbox source add
/// --scheme`); std::nullopt for anything else.
std::optional<scheme> parse_scheme(std::string_view text);
/// The name `parse_scheme` reads ("standard-webhooks", …).
std::string_view scheme_name(scheme s);

/// Where a value of a request comes from: a request header (its name compared
/// case-insensitively) or a JSON pointer (RFC 6901) into the body.
struct value_source {
  enum kind { header, json_pointer } kind;
  std::string name;  ///< the header's name, or the pointer ("/data/id")
  bool operator==(const value_source&) const = default;
};

/// "header:X-Id" (a header; the name is an RFC 9110 token) or "/data/id" (a JSON pointer: starts
/// with "/", every "~" followed by "0" or "1"). std::nullopt for anything else, the empty
/// pointer (the whole body) included.
std::optional<value_source> parse_value_source(std::string_view text);
/// The text `parse_value_source` reads back ("header:X-Id", "/data/id").
std::string to_string(const value_source& v);

/// One source of walhook.inbox_sources, parsed. Defaults are the CLI's.
struct source_config {
  std::string name;
  scheme kind = scheme::standard_webhooks;
  /// Newest first; every one is accepted (rotation). standard-webhooks: "whsec_<base64 key>"
  /// (the key is the decoded bytes); every other scheme: the HMAC key is the string's bytes as
  /// they are (Stripe's "whsec_…" is not decoded).
  std::vector<std::string> secrets;
  /// How far the signed timestamp may be from `now`, either way (seconds). Unused by github and
  /// by hmac-sha256 without `signs_timestamp`.
  std::chrono::seconds tolerance{300};
  /// Overrides of the scheme's defaults (docs/inbox.md); `id_from` is required by hmac-sha256.
  std::optional<value_source> id_from, type_from, order_key_from;
  // hmac-sha256 only:
  std::string signature_header;  ///< the header that holds the signature (required)
  bool base64 = false;           ///< the signature is base64 (RFC 4648 §4), else hex
  bool signs_timestamp = false;  ///< signed content is "{timestamp}.{body}", else the body alone
  std::string timestamp_header;  ///< with `signs_timestamp`: the header of the Unix time (s)
  /// The largest body ingest reads (bytes; 413 past it). `verify` does not check it: the
  /// server refuses a larger body before reading it whole.
  std::size_t max_body_bytes = 1 << 20;
};

/// The first problem of a source's configuration in words (never a secret), or std::nullopt
/// if it can verify requests: at least one secret; standard-webhooks secrets that parse
/// (delivery::parse_secret); hmac-sha256's signature header and `id_from`, its timestamp
/// header when it signs the timestamp; header names that are RFC 9110 tokens; a positive
/// tolerance.
std::optional<std::string> check_source(const source_config& source);

/// One header of a request as received.
struct header_field {
  std::string_view name;
  std::string_view value;
};
/// A request's headers, in the order received. Views: the request owns the text.
using header_fields = std::span<const header_field>;
/// The value of the first header named `name`, compared ASCII case-insensitively (RFC 9110
/// §5.1); std::nullopt if there is none.
std::optional<std::string_view> find_header(header_fields headers, std::string_view name);

/// Lengths of what `verify` extracts (bytes).
inline constexpr std::size_t max_event_id_bytes = 256;
inline constexpr std::size_t max_event_type_bytes = 256;
inline constexpr std::size_t max_order_key_bytes = 1024;

/// What a request that passed is.
struct verified {
  std::string event_id;                  ///< the sender's id of the event (the dedupe key)
  std::string event_type;                ///< never starts with "walhook." (any case)
  std::optional<std::string> order_key;  ///< events of one key are processed in order
  /// The Unix time (s) the sender signed, for the schemes that sign one.
  std::optional<std::int64_t> signed_at;
  /// Which of the source's secrets matched (0 = the newest): an old one still in use shows a
  /// sender that has not moved to the new secret yet.
  std::size_t secret_index = 0;
  bool operator==(const verified&) const = default;
};

/// Why a request was refused. Checked in this order: the scheme's headers, the signature, the
/// timestamp, the body is JSON, the values (so an unauthenticated body is never parsed, and a
/// stale timestamp is reported only for an authentic request).
enum class refusal {
  missing_header,   ///< a header the scheme requires is absent
  bad_signature,    ///< malformed signature or timestamp header, or no signature matches a secret
  stale_timestamp,  ///< authentic, but the signed time is more than `tolerance` from now
  not_json,         ///< authentic, but the body is not JSON
  no_event_id,      ///< the id's header is absent, or its pointer names no string or number
  bad_value,        ///< an id, type or order key out of its bounds, or no type
};
std::string_view refusal_name(refusal r);  ///< "missing_header", …

struct refused {
  refusal why;
  std::string detail;  ///< readable; names headers and pointers, never a secret or a signature
};

/// Verifies one request of `source` (docs/inbox.md has each scheme's rules) and extracts its
/// event id, type and order key. `raw_body` is the body as received; `now` is the receiving
/// time (system clock: senders sign Unix time). MACs are compared in constant time.
boost::system::result<verified, refused> verify(const source_config& source, header_fields headers,
                                                std::string_view raw_body,
                                                std::chrono::system_clock::time_point now);

/// SHA-256 of the body (the raw 32 bytes): an id seen again with another fingerprint is a
/// reused key, not a duplicate (DESIGN.md §4 invariant 12).
std::string fingerprint(std::string_view body);

}  // namespace walhook::relay::inbox
