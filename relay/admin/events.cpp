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

namespace {

/// --slot as given: the slot's name without the shard's "_K_of_N" (relay/core/shard.hpp), which
/// `walhook run --shard` appends; the event's tenant picks its own shard's slot.
std::string slot_base(const run_options& o) {
  if (!o.shard.sharded()) return o.slot;
  const std::string suffix = fmt::format("_{}_of_{}", o.shard.index, o.shard.count);
  return o.slot.ends_with(suffix) ? o.slot.substr(0, o.slot.size() - suffix.size()) : o.slot;
}

}  // namespace

asio::awaitable<api_response> get_event(const route_context& ctx, const std::string& event_id) {
  const auto& log = ctx.eng.recent_outcomes();
  return ctx.worker.run([event_id, base = slot_base(ctx.eng.options()), recent = log.of_event(event_id),
                         window = record_window{.kept = log.size(), .oldest = log.oldest()}](blocking_db& db) {
    auto answer = answer_event(db, event_id, base, recent, window);
    if (!answer) throw not_found(fmt::format("no event with id {} (the outbox row is gone, or never was)", event_id));
    return api_response{200, event_json(*answer)};
  });
}

}  // namespace walhook::relay
