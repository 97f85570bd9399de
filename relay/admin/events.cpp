// GET /api/events/{event_id} (docs/api.md): did endpoint X get event Y? The answer is
// relay/admin/event_answer.hpp's — the facts, the verdicts of verdict.hpp, the JSON — with this
// walhook's in-memory record of attempts (`walhook event` gives the same answer without it).

#include "relay/admin/db_worker.hpp"
#include "relay/admin/event_answer.hpp"
#include "relay/admin/routes.hpp"
#include "relay/core/outcome_log.hpp"
#include "relay/engine/engine.hpp"
#include "relay/operations/errors.hpp"

#include <fmt/format.h>

namespace walhook::relay {
namespace asio = boost::asio;

asio::awaitable<api_response> get_event(const route_context& ctx, const std::string& event_id) {
  const auto& log = ctx.eng.recent_outcomes();
  const auto& o = ctx.eng.options();
  return ctx.worker.run([event_id, base = shard_slot_base(o.slot, o.shard), recent = log.of_event(event_id),
                         window = record_window{.kept = log.size(), .oldest = log.oldest()}](blocking_db& db) {
    auto answer = answer_event(db, event_id, base, recent, window);
    if (!answer) throw not_found(fmt::format("no event with id {} (the outbox row is gone, or never was)", event_id));
    return api_response{200, event_json(*answer)};
  });
}

}  // namespace walhook::relay
