#include "delivery/rate_limit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace walhook::delivery {

namespace {
constexpr int max_count = 100000;
}

boost::system::result<rate> parse_rate(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 2 != text.size())
    return std::make_error_code(std::errc::invalid_argument);
  int count = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + slash, count);
  if (ec != std::errc{} || p != text.data() + slash || count < 1 || count > max_count || text.front() == '0')
    return std::make_error_code(std::errc::invalid_argument);
  switch (text.back()) {
    case 's': return rate{count, std::chrono::seconds(1)};
    case 'm': return rate{count, std::chrono::minutes(1)};
    default: return std::make_error_code(std::errc::invalid_argument);
  }
}

std::string to_string(const rate& r) {
  return fmt::format("{}/{}", r.count, r.period == std::chrono::minutes(1) ? 'm' : 's');
}

rate_limiter::rate_limiter(rate r, int burst)
    : rate_(r), burst_(burst <= 0 || burst > r.count ? r.count : burst), tokens_(burst_) {
  rate_.count = std::max(1, rate_.count);
}

int rate_limiter::allowed(time_point now) const {
  return now < slowed_until_ ? std::max(1, rate_.count / 2) : rate_.count;
}

rate_limiter::time_point rate_limiter::available_at(time_point now) const {
  const int n = allowed(now);
  time_point at = now;
  // Window: fewer than n starts in (at − period, at] — the n-th most recent must have left it.
  if (log_.size() >= static_cast<std::size_t>(n)) {
    const std::size_t size = log_.size();
    const time_point nth = log_[(next_ + size - static_cast<std::size_t>(n)) % size];
    at = std::max(at, nth + rate_.period);
  }
  // Burst: a whole token, refilled at n per period.
  if (burst_ < n) {
    const double per_ns = static_cast<double>(n) / static_cast<double>(std::chrono::nanoseconds(rate_.period).count());
    const double elapsed = refilled_ == time_point{} ? 0.0 : static_cast<double>((now - refilled_).count());
    const double tokens = refilled_ == time_point{} ? tokens_ : std::min<double>(burst_, tokens_ + elapsed * per_ns);
    if (tokens < 1.0) at = std::max(at, now + std::chrono::nanoseconds(static_cast<std::int64_t>((1.0 - tokens) / per_ns) + 1));
  }
  return at;
}

void rate_limiter::started(time_point now) {
  const int n = allowed(now);
  const double per_ns = static_cast<double>(n) / static_cast<double>(std::chrono::nanoseconds(rate_.period).count());
  if (refilled_ != time_point{})
    tokens_ = std::min<double>(burst_, tokens_ + static_cast<double>((now - refilled_).count()) * per_ns);
  refilled_ = now;
  tokens_ -= 1.0;
  // The ring grows to rate_.count entries, then overwrites the oldest.
  const auto count = static_cast<std::size_t>(rate_.count);
  if (log_.size() < count) {
    log_.push_back(now);
    next_ = log_.size() % count;
  } else {
    log_[next_] = now;
    next_ = (next_ + 1) % count;
  }
}

void rate_limiter::slow_down(time_point now, std::chrono::milliseconds for_how_long) {
  slowed_until_ = std::max(slowed_until_, now + for_how_long);
}

}  // namespace walhook::delivery
