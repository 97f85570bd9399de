// The dispatcher's attempts (relay/engine/dispatcher.hpp): a job the scheduler hands out is
// signed and sent through the transport; its response is classified and decide()
// (relay/core/decisions.hpp) says what follows, which apply() does.
#include "relay/engine/dispatcher.hpp"

#include "common/log.hpp"
#include "common/time.hpp"
#include "delivery/outcome_class.hpp"
#include "delivery/signing.hpp"
#include "delivery/trace_context.hpp"
#include "relay/core/outcome_log.hpp"
#include "relay/core/secret_rotation.hpp"
#include "relay/engine/dispatcher_detail.hpp"

#include <chrono>
#include <random>

namespace walhook::relay {
namespace asio = boost::asio;
using delivery::job;
using namespace dispatcher_detail;

void dispatcher::dispatch() {
  if (!active_) return;  // a standby starts nothing
  const auto now = clock_.steady_now();
  while (auto j = sched_.next(now)) {
    auto r = std::make_shared<running>();
    r->j = std::move(*j);
    r->started = clock_.steady_now();
    r->started_at = clock_.system_now();
    r->id = next_attempt_id_++;
    r->session = session_;
    running_.emplace(r->id, r);
    last_started_[r->j.endpoint_id] = r->started;
    attempts_.spawn(attempt(std::move(r)), "attempt");
  }
  // An endpoint over its rate limit was held back: rate_loop dispatches again when it may start.
  if (auto release = sched_.next_rate_release(); release && *release < rate_deadline_) rate_wake_.notify();
}

endpoint_load dispatcher::load_of(std::int64_t id) const {
  endpoint_load l;
  l.queued = sched_.queued(id);
  l.in_flight = sched_.in_flight(id);
  if (const endpoint* ep = directory_.find(id)) l.max_concurrency = ep->max_concurrency;
  l.oldest_queued = sched_.oldest_enqueued(id);
  // The most recent start: no attempt in flight is younger, so "stalled" is never early.
  if (auto it = last_started_.find(id); it != last_started_.end() && l.in_flight > 0) l.youngest_attempt = it->second;
  l.probing = delivery::mode(directory_.health(id), clock_.system_now()) == delivery::breaker_mode::probing;
  return l;
}

void dispatcher::finished(std::int64_t endpoint_id, steady_time now, std::optional<steady_time::duration> took) {
  if (took) backlog_.attempt_finished(endpoint_id, *took);
  if (!removals_.empty()) finish_removals();
  if (backlog_.has_backlog(endpoint_id) && backlog_.claim_size(endpoint_id, load_of(endpoint_id), now) > 0)
    claims_wake_.notify();
  if (hooks_.room) hooks_.room();
}

asio::awaitable<delivery::post_result> dispatcher::send(std::int64_t id, const endpoint& ep, const delivery::event& ev,
                                                       sys_time sent_at) {
  const auto ts = unix_seconds(sent_at);
  // A rotation's old secrets stop signing when its grace ends, not when their drop lands.
  std::vector<std::pair<std::string, std::string>> headers{
      {"webhook-id", ev.id},
      {"webhook-timestamp", std::to_string(ts)},
      {"webhook-signature", delivery::signature_header(signing_keys(ep, sent_at), ev.id, ts, ev.body)}};
  // The endpoint's own headers (migration 012), after walhook's: names it may not set are refused
  // when they are set, and make the endpoint unusable if they reach the table anyway.
  headers.insert(headers.end(), ep.headers.begin(), ep.headers.end());
  headers.insert(headers.end(), ep.secret_headers.begin(), ep.secret_headers.end());
  // The event's trace (migration 012): this attempt is a child span of the transaction's.
  if (ev.traceparent)
    if (auto parent = delivery::parse_traceparent(*ev.traceparent))
      headers.emplace_back("traceparent", delivery::child_traceparent(*parent, rng_()));
  const delivery::destination& to = *ep.target;
  if (to.kind == delivery::sink_kind::http) {
    delivery::http_request req{ev.body, std::move(headers)};
    if (!ep.oauth) co_return co_await transport_.async_post(std::to_string(id), to.http, req);
    co_return co_await send_with_token(id, *ep.oauth, to.http, std::move(req));
  }
  // A broker: the same body and signature, the event's identity in the message's own fields.
  delivery::broker_message m;
  auto subject = delivery::render_template(
      to.broker.subject, {ev.type, ev.tenant_id, ev.aggregate_id, ev.aggregate_type}, to.kind == delivery::sink_kind::nats);
  if (!subject) co_return delivery::transport_error(delivery::transport_errc::bad_message, subject.error().message);
  m.subject = std::move(*subject);
  m.message_id = ev.id;
  m.body = ev.body;
  m.headers = std::move(headers);
  m.headers.emplace_back("walhook-event-type", ev.type);
  m.headers.emplace_back("walhook-tenant-id", ev.tenant_id);
  if (ev.aggregate_id) m.headers.emplace_back("walhook-aggregate-id", *ev.aggregate_id);
  if (ev.aggregate_type) m.headers.emplace_back("walhook-aggregate-type", *ev.aggregate_type);
  co_return co_await transport_.async_publish(std::to_string(id), to.broker, m, options_.broker_deadline);
}

asio::awaitable<delivery::post_result> dispatcher::send_with_token(std::int64_t id, delivery::oauth2_client client,
                                                                  delivery::http_target target,
                                                                  delivery::http_request req) {
  const std::string key = std::to_string(id);
  // The attempt's one deadline (walhook run --deadline-ms) covers its token requests and POSTs.
  const auto started = clock_.steady_now();
  auto left = [&] {
    return options_.broker_deadline - std::chrono::duration_cast<std::chrono::milliseconds>(clock_.steady_now() - started);
  };
  auto token = co_await tokens_.bearer(transport_, key, client, left());
  if (!token) co_return token.error();
  req.headers.emplace_back("Authorization", "Bearer " + *token);
  req.deadline = left();
  auto answer = co_await transport_.async_post(key, target, req);
  if (!answer || answer->status != 401) co_return answer;
  // Refused: the token may have been revoked before it expired. Once more with a new one (an
  // attempt that already got one since is given that, not another), for the endpoint's
  // credentials of now: they may have changed while the POST ran.
  const endpoint* now = directory_.find(id);
  if (!now || !now->oauth || left() <= std::chrono::milliseconds::zero()) co_return answer;
  const delivery::oauth2_client current = *now->oauth;
  const std::string rejected = *token;
  token = co_await tokens_.bearer(transport_, key, current, left(), rejected);
  if (!token) co_return token.error();
  req.headers.back().second = "Bearer " + *token;
  req.deadline = left();
  co_return co_await transport_.async_post(key, target, req);
}

asio::awaitable<void> dispatcher::attempt(std::shared_ptr<running> r) {
  const std::int64_t id = r->j.endpoint_id;
  const endpoint* ep = directory_.find(id);
  delivery::post_result response = delivery::transport_errc::protocol_error;
  std::optional<steady_time::duration> took;
  delivery::outcome_class outcome = delivery::outcome_class::other;  ///< of the attempt, once made
  // Checked at send time: the endpoint may have changed since the delivery was admitted.
  auto sendable = [&r](const endpoint* e) {
    // A config_error (its headers or filter became unusable since): ends dead with the reason
    // rather than go out without them.
    return e && e->target && e->config_error.empty() && (r->j.ev->tenant_id.empty() || e->tenant_id == r->j.ev->tenant_id);
  };
  if (sendable(ep)) {
    const auto sent_at = clock_.system_now();
    ++stats_.attempts;
    try {
      response = co_await send(id, *ep, *r->j.ev, sent_at);
    } catch (const std::exception& e) {
      // Never leave the job (and its LSN ticket) behind: an unexpected exception is a failed attempt.
      log::error("delivery.attempt_exception", {{"endpoint_id", id}, {"error", e.what()}});
    }
    took = clock_.steady_now() - r->started;
    outcome = count_attempt(id, response, *took);
  }
  // The job leaves the registry; its ticket (unless a durable mark took it) goes with it.
  running_.erase(r->id);
  job j = r->j;
  r->j.ticket = 0;
  j.marked = r->marked;
  sched_.finished(j);
  if (r->session != session_) {
    // Abandoned: its session ended (end_session), and another instance — or this one's next
    // session — may own the delivery by now. Nothing is written and the breaker is not touched;
    // the event is streamed again, or its row reset to pending.
    if (j.row_id) disown(key_of(j));
    release(j, false);  // not handled: the next session's cursors must not skip it
    finished(id, clock_.steady_now(), std::nullopt);
    co_return;
  }
  auto now_sys = clock_.system_now();
  ep = directory_.find(id);  // it may have changed or gone while the attempt ran
  const bool delivered_to_removed = !ep && took && !j.row_id && !j.marked &&
                                    delivery::classify(response, now_sys, options_.outcomes.retry).kind ==
                                        delivery::verdict::delivered;
  // The in-memory record of finished attempts (relay/core/outcome_log.hpp).
  auto note = [&](const char* result) {
    if (!options_.recent_outcomes) return;
    options_.recent_outcomes->add({j.ev->id, id, now_sys, j.attempts + 1,
                                   response ? static_cast<int>(response->status) : 0,
                                   std::string(delivery::to_string(outcome)), result,
                                   std::chrono::duration<double>(*took).count()});
  };
  if (delivered_to_removed) {
    note("delivered");
    release(j);  // it arrived before the endpoint went: nothing to record
  } else if (!took || !ep || !ep->target) {
    auto a = admit(j, ep, directory_.health(id), lane::memory, now_sys, options_.admission);
    apply(std::move(j), a);
  } else {
    // A 429 or a Retry-After: a rate-limited endpoint gets half its rate for a while.
    if (response && (response->status == 429 || !response->retry_after.empty())) sched_.slow_down(id, clock_.steady_now());
    auto classified = delivery::classify(response, now_sys, options_.outcomes.retry);
    double unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    auto d = decide(j, *ep, directory_.health(id), classified, now_sys, unit, options_.outcomes);
    note(d.result == verdict::delivered ? "delivered" : d.result == verdict::retry ? "retry" : "dead");
    apply(std::move(j), d);
  }
  finished(id, clock_.steady_now(), took);
  dispatch();
}

}  // namespace walhook::relay
