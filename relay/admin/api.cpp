// The router: access, then the route (router.hpp), then the route family's entry point
// (routes.hpp). Nothing else happens here.

#include "relay/admin/api.hpp"

#include "relay/admin/db_worker.hpp"
#include "relay/admin/router.hpp"
#include "relay/admin/routes.hpp"
#include "relay/engine/engine.hpp"
#include "relay/engine/options.hpp"

namespace walhook::relay {
namespace asio = boost::asio;

struct admin_api::impl {
  impl(engine& e, admin_access a) : eng(e), access(std::move(a)), worker(e.options().database_url) {}

  engine& eng;
  admin_access access;
  // Destroyed on the engine's executor (the admin server's, or a finished request's), never on
  // the worker, so joining it is safe; a query still running ends within statement_timeout.
  db_worker worker;

  asio::awaitable<api_response> handle(const api_request& req) {
    if (auto denied = check_request(access, req)) co_return *denied;
    auto routed = route_of(req.method, req.target);
    if (auto* answer = std::get_if<api_response>(&routed)) co_return std::move(*answer);
    const auto& r = std::get<api_route>(routed);
    const route_context ctx{.eng = eng, .worker = worker, .access = access};
    switch (r.kind) {
      case route_kind::overview: co_return co_await get_overview(ctx);
      case route_kind::endpoints: co_return co_await get_endpoints(ctx);
      case route_kind::endpoint: co_return co_await get_endpoint(ctx, r.endpoint_id);
      case route_kind::endpoint_status: co_return co_await post_status(ctx, r.endpoint_id, r.arg, req);
      case route_kind::replay: co_return co_await post_replay(ctx, r.endpoint_id, req);
      case route_kind::event: co_return co_await get_event(ctx, r.arg);
      case route_kind::resend: co_return co_await post_resend(ctx, req);
    }
    co_return error_response(500, "unrouted route kind");  // not reached: the switch is exhaustive
  }
};

admin_api::admin_api(asio::any_io_executor, engine& e, admin_access access)
    : impl_(std::make_shared<impl>(e, std::move(access))) {}

admin_api::~admin_api() = default;

void admin_api::stop() { impl_->worker.stop(); }

asio::awaitable<api_response> admin_api::handle(const api_request& req) {
  auto self = impl_;  // the worker's answer may come after stop()
  co_return co_await self->handle(req);
}

}  // namespace walhook::relay
