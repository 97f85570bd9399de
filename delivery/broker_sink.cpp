#include "delivery/broker_sink.hpp"

#include "delivery/destination.hpp"
#include "delivery/ssrf.hpp"

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

namespace walhook::delivery {

boost::system::result<std::vector<boost::asio::ip::tcp::endpoint>, transport_error> resolve_checked(
    const std::string& host, const std::string& port, ssrf_policy policy) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto results = resolver.resolve(host, port, ec);
  if (ec || results.empty())
    return transport_error(transport_errc::resolve_failed, ec ? ec.message() : std::string("no address"));
  std::vector<boost::asio::ip::tcp::endpoint> allowed;
  std::string refused;
  for (const auto& r : results) {
    const auto a = r.endpoint().address();
    if (refuses(a, policy)) {
      const auto why = why_blocked(a);
      refused += fmt::format("{}{} ({})", refused.empty() ? "" : "; ", a.to_string(),
                             is_metadata_address(a) ? std::string("cloud metadata") : std::string(why->range));
      continue;
    }
    allowed.push_back(r.endpoint());
  }
  if (allowed.empty()) return transport_error(transport_errc::address_blocked, refused);
  return allowed;
}

ssrf_policy policy_of(const broker_sink_options& options, const broker_target& target) {
  if (options.allow_private_networks) return ssrf_policy::open;
  return target.private_network_allowed ? ssrf_policy::private_allowed : ssrf_policy::guarded;
}

}  // namespace walhook::delivery
