#pragma once
// The signature check of each scheme (relay/inbox/schemes.hpp): the first half of `verify`,
// before the timestamp's freshness and before the body is read as JSON. Pure.

#include "relay/inbox/schemes.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

namespace walhook::relay::inbox {

/// A request whose signature matched one of its source's secrets.
struct authentic {
  std::size_t secret_index = 0;           ///< which secret matched (0 = the newest)
  std::optional<std::int64_t> signed_at;  ///< the signed Unix time (s), for schemes that sign one
  std::string_view timestamp_from;        ///< where `signed_at` came from ("webhook-timestamp")
  /// standard-webhooks: the signed message id (webhook-id, or svix-id), the default event id.
  std::optional<std::string_view> message_id;
};

/// Checks the signature of `body` under `source`'s scheme and secrets (docs/inbox.md).
/// Refusals: missing_header, bad_signature. Views point into `headers`.
boost::system::result<authentic, refused> authenticate(const source_config& source, header_fields headers,
                                                       std::string_view body);

/// A Unix time in seconds as senders write it: decimal digits only (no sign, no blanks), at
/// most 18 of them; std::nullopt otherwise.
std::optional<std::int64_t> parse_unix_seconds(std::string_view text);

}  // namespace walhook::relay::inbox
