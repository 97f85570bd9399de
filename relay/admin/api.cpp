// The router: access, then the route (router.hpp), then the route family's entry point
// (routes.hpp). Nothing else happens here.

#include "relay/admin/api.hpp"

#include "relay/admin/db_worker.hpp"
#include "relay/admin/router.hpp"
#include "relay/admin/routes.hpp"
#include "relay/engine/engine.hpp"
#include "relay/engine/options.hpp"

#include "common/log.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace walhook::relay {
namespace asio = boost::asio;

struct admin_api::impl {
  impl(asio::any_io_executor ex, engine& e, admin_access a)
      : executor(ex), eng(e), access(std::move(a)), worker(e.options().database_url) {}

  asio::any_io_executor executor;
  engine& eng;
  admin_access access;
  auth_failure_log failures;
  // Destroyed on the engine's executor (the admin server's, or a finished request's), never on
  // the worker, so joining it is safe; a query still running ends within statement_timeout.
  db_worker worker;

  asio::awaitable<std::optional<api_response>> admit(const api_request& req) {
    auto denied = check_request(access, req);
    if (!denied || denied->status != 401) co_return denied;
    if (const auto n = failures.failed(std::chrono::steady_clock::now()); n > 0)
      log::warn("admin.auth_failed", {{"remote", req.remote.empty() ? std::string("-") : req.remote},
                                      {"target", req.target.substr(0, req.target.find('?'))},
                                      {"failures", n}});
    // Only this request waits: its own coroutine, on the listener's executor.
    asio::steady_timer delay(executor, auth_failure_delay);
    co_await delay.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return denied;
  }

  asio::awaitable<api_response> handle(const api_request& req) {
    if (auto denied = co_await admit(req)) co_return *denied;
    auto routed = route_of(req.method, req.target);
    if (auto* answer = std::get_if<api_response>(&routed)) co_return std::move(*answer);
    const auto& r = std::get<api_route>(routed);
    const route_context ctx{.eng = eng, .worker = worker, .access = access};
    switch (r.kind) {
      case route_kind::overview: co_return co_await get_overview(ctx);
      case route_kind::endpoints: co_return co_await get_endpoints(ctx, r.page);
      case route_kind::endpoint: co_return co_await get_endpoint(ctx, r.endpoint_id);
      case route_kind::endpoint_status: co_return co_await post_status(ctx, r.endpoint_id, r.arg, req);
      case route_kind::replay: co_return co_await post_replay(ctx, r.endpoint_id, req);
      case route_kind::event: co_return co_await get_event(ctx, r.arg);
      case route_kind::resend: co_return co_await post_resend(ctx, req);
      case route_kind::sources: co_return co_await get_sources(ctx);
      case route_kind::source: co_return co_await get_source(ctx, r.arg);
    }
    co_return error_response(500, "unrouted route kind");  // not reached: the switch is exhaustive
  }
};

admin_api::admin_api(asio::any_io_executor ex, engine& e, admin_access access)
    : impl_(std::make_shared<impl>(ex, e, std::move(access))) {}

admin_api::~admin_api() = default;

void admin_api::stop() { impl_->worker.stop(); }

asio::awaitable<api_response> admin_api::handle(const api_request& req) {
  auto self = impl_;  // the worker's answer may come after stop()
  co_return co_await self->handle(req);
}

asio::awaitable<std::optional<api_response>> admin_api::admit(const api_request& req) {
  auto self = impl_;
  co_return co_await self->admit(req);
}

}  // namespace walhook::relay
