#pragma once
// Clocks and time formats. Deadlines and backoff use the monotonic clock; what humans and
// customers see (webhook-timestamp, ISO 8601 in logs and bodies) uses the system clock.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walhook {

using steady_clock = std::chrono::steady_clock;
using system_clock = std::chrono::system_clock;
using sys_micros = std::chrono::time_point<system_clock, std::chrono::microseconds>;

/// The injectable clock seam (Envoy's TimeSource): policies and schedulers take one of these
/// instead of reading clocks themselves, so tests can drive time.
class clock_source {
 public:
  virtual ~clock_source() = default;
  virtual steady_clock::time_point steady_now() const = 0;
  virtual system_clock::time_point system_now() const = 0;
};

/// The real clocks.
class real_clock final : public clock_source {
 public:
  steady_clock::time_point steady_now() const override { return steady_clock::now(); }
  system_clock::time_point system_now() const override { return system_clock::now(); }
  static const real_clock& instance();
};

inline system_clock::time_point system_now() { return system_clock::now(); }

/// "2026-11-30T03:23:51.123456Z" (RFC 3339 / ISO 8601, UTC, microseconds).
std::string format_iso8601(system_clock::time_point t);
/// The same for any microsecond time point, exactly (no nanosecond cast, so no overflow outside
/// 1678–2262); std::nullopt outside the years 0001–9999, which RFC 3339 cannot express.
std::optional<std::string> format_iso8601_exact(sys_micros t);

/// `t` as a system_clock time point, clamped to within 100 years of `now` first (system_clock
/// counts nanoseconds in 64 bits: it spans only 1678–2262).
system_clock::time_point clamp_to_system_clock(sys_micros t, system_clock::time_point now);

/// Parses PostgreSQL's text output of a timestamptz in DateStyle ISO, e.g.
/// "2026-11-30 03:23:51.123456+00", "2026-11-30 03:23:51+05:30", "2026-11-30 03:23:51.5-08",
/// and walhook's own RFC 3339 form ("2026-11-30T03:23:51.123456Z"). Years 0001–9999 only.
/// Returns std::nullopt on anything else (including 'infinity', BC dates, five-digit years).
std::optional<sys_micros> parse_pg_timestamptz(std::string_view text);

/// Unix seconds of a system time point (for webhook-timestamp).
inline std::int64_t unix_seconds(system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

/// PostgreSQL epoch (2000-01-01 00:00:00 UTC) microseconds, as used by the streaming
/// replication protocol's timestamps (XLogData send time, keepalive, standby status update).
std::int64_t to_pg_epoch_micros(system_clock::time_point t);
system_clock::time_point from_pg_epoch_micros(std::int64_t us);

}  // namespace walhook

namespace walhook {
/// PostgreSQL's ISO timestamptz text → ISO 8601 UTC ("…T…Z"), exactly; std::nullopt if it
/// cannot be expressed (infinite, BC, after 9999, or not a timestamptz), with the reason in `why`.
std::optional<std::string> pg_timestamptz_to_iso8601(std::string_view text, std::string* why = nullptr);
}  // namespace walhook
