#include "relay/engine/cursors.hpp"

#include "common/log.hpp"
#include "relay/core/endpoint_directory.hpp"
#include "relay/core/rows.hpp"
#include "relay/engine/dispatcher.hpp"
#include "relay/engine/recovery.hpp"
#include "sql/state_store.hpp"

#include <fmt/format.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <charconv>

namespace walhook::relay {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {
/// A cursor's durable position is written at most this often while it drains (a crash re-sends
/// at most this much); entering, a rejoin and the end of a window's pages are written at once.
constexpr auto write_interval = 250ms;
/// Streamed transactions kept for an entering cursor's `also` (beyond: re-sent, never skipped).
constexpr std::size_t max_streamed = 200000;
/// An entering cursor waits this long at most for the endpoint's attempts in flight to end.
constexpr auto entry_wait = 1s;

/// xid8[] text "{1,2,3}" → sorted ids; nullopt if malformed.
std::optional<std::vector<std::uint64_t>> parse_xid_array(std::string_view text) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return std::nullopt;
  std::vector<std::uint64_t> out;
  text = text.substr(1, text.size() - 2);
  while (!text.empty()) {
    auto comma = text.find(',');
    auto item = text.substr(0, comma);
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc{} || p != item.data() + item.size()) return std::nullopt;
    out.push_back(v);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

outbox_cursors::outbox_cursors(asio::any_io_executor ex, sql::state_store& store, lsn_tracker& tracker,
                               endpoint_directory& directory, dispatcher& deliveries, slot_recovery& recovery,
                               const clock_source& clock)
    : executor_(ex), store_(store), tracker_(tracker), directory_(directory), deliveries_(deliveries),
      recovery_(recovery), clock_(clock), wake_(ex) {}

// ------------------------------------------------------------------ the stream's side

void outbox_cursors::streamed(std::uint32_t xid, const std::string* tenant, lsn end) {
  streamed_until_ = std::max(streamed_until_, end);
  if (!tenant) return;
  if (states_.empty() && streamed_.size() >= 64) {
    // Nothing is entering: keep only what a cursor entering now could still need.
    if (const auto& d = recovery_.last_delivered())
      if (auto snap = pg_snapshot::parse(*d))
        while (!streamed_.empty() && snap->visible(snap->widen(streamed_.front().first))) streamed_.pop_front();
  }
  streamed_.emplace_back(xid, *tenant);
  if (streamed_.size() > max_streamed) streamed_.pop_front();
}

bool outbox_cursors::covers(const state& s, std::uint32_t xid) const {
  const auto wide = s.covered.widen(xid);
  return s.covered.visible(wide) || std::binary_search(s.also.begin(), s.also.end(), wide);
}

void outbox_cursors::take(state& s, delivery::job& j) {
  ++stats_.skipped;
  if (j.ticket == 0) return;
  for (auto& id : deliveries_.handled_of(j.ticket, j.endpoint_id)) s.sent.insert(std::move(id));
  if (s.durable) {
    tracker_.release(j.ticket);
  } else {
    s.held.push_back(j.ticket);  // released once the cursor that owes it is durable
  }
  j.ticket = 0;
}

outbox_cursors::state* outbox_cursors::find(std::int64_t endpoint_id) {
  auto it = states_.find(endpoint_id);
  if (it == states_.end()) return nullptr;
  const endpoint* ep = directory_.find(endpoint_id);
  if (!ep || ep->tenant_id != it->second.tenant_id) {
    for (const auto& w : it->second.open) tracker_.end_detached(w.ticket);
    for (auto t : it->second.held) tracker_.release(t);  // none is owed by a cursor any more
    states_.erase(it);
    return nullptr;
  }
  auto& s = it->second;
  // Rejoined: its row deleted, and everything its last window's snapshot shows streamed.
  if (s.ph == phase::rejoined && s.deleted && s.open.empty() && streamed_until_ >= s.rejoin_until) {
    ++stats_.rejoined;
    log::info("endpoint.following_stream", {{"endpoint_id", endpoint_id}, {"drained", s.drained_total}});
    states_.erase(it);
    return nullptr;
  }
  return &s;
}

bool outbox_cursors::skips(delivery::job& j) {
  auto* found = find(j.endpoint_id);
  if (!found) return false;
  auto& s = *found;
  // A backfill's delivery (a detached ticket) the cursor owes is read back by it; one it covers
  // was handled — sent again only because an operator asked (walhook recover).
  if (lsn_tracker::is_detached(j.ticket) && s.write_issued && covers(s, j.ev->xid)) return false;
  if (s.ph == phase::rejoined) {
    // The final window read everything visible in its snapshot: the stream brings the rest.
    if (!s.rejoin_snapshot.visible(s.rejoin_snapshot.widen(j.ev->xid))) return false;
    ++stats_.skipped;
    tracker_.release(j.ticket);
    j.ticket = 0;
    return true;
  }
  if (s.ph == phase::entering && !s.write_issued) {
    s.dropped.insert(j.ev->xid);
    if (!s.dropped_from.valid() || j.ev->commit_lsn < s.dropped_from) s.dropped_from = j.ev->commit_lsn;
  }
  ++s.skipped_while_reading;
  take(s, j);
  return true;
}

follow_result outbox_cursors::follow(delivery::job& j, std::string_view reason) {
  find(j.endpoint_id);  // a stale state goes first
  auto it = states_.find(j.endpoint_id);
  if (j.drained) {  // back into its open window: the cursor stays before it
    if (it == states_.end()) return follow_result::refused;
    auto& pages = it->second.open;
    auto page = std::find_if(pages.begin(), pages.end(), [&](const window& w) { return w.ticket == j.ticket; });
    if (page == pages.end() || page->final) return follow_result::refused;
    auto& s = it->second;
    s.min_dropped_seq = std::min(s.min_dropped_seq.value_or(j.ev->seq), j.ev->seq);
    tracker_.release(j.ticket);
    j.ticket = 0;
    return follow_result::taken;
  }
  if (lsn_tracker::is_detached(j.ticket)) {  // a backfill's: taken only by a cursor that owes it
    if (it == states_.end() || !it->second.write_issued || it->second.ph == phase::rejoined ||
        covers(it->second, j.ev->xid))
      return follow_result::refused;
    take(it->second, j);
    return follow_result::taken;
  }
  bool entered = false;
  if (it == states_.end()) {
    const endpoint* ep = directory_.find(j.endpoint_id);
    // A lower bound is needed: the delivered snapshot (recorded ~1 s after the first stream).
    if (!allow_entering_ || !ep || ep->retired || !recovery_.last_delivered()) return follow_result::refused;
    it = states_.emplace(j.endpoint_id, state{}).first;
    it->second.reason = std::string(reason);
    it->second.tenant_id = ep->tenant_id;
    it->second.covered_at = clock_.steady_now();
    it->second.epochs = take_recent_routing(j.endpoint_id);  // its deliveries in memory were routed so
    entered = true;
    ++stats_.entered;
    log::warn("endpoint.following_outbox", {{"endpoint_id", j.endpoint_id}, {"reason", std::string(reason)},
                                            {"note", "its deliveries are read back from walhook.outbox when it can take them"}});
    asio::post(executor_, [this, id = j.endpoint_id] { issue_entry_write(id); });
  }
  auto& s = it->second;
  if (s.ph == phase::rejoined) return follow_result::refused;  // its final window is short: rows
  if (s.ph == phase::entering && !s.write_issued) {
    s.dropped.insert(j.ev->xid);
    if (!s.dropped_from.valid() || j.ev->commit_lsn < s.dropped_from) s.dropped_from = j.ev->commit_lsn;
  } else if (covers(s, j.ev->xid)) {
    return follow_result::refused;  // counted handled already: it must be written
  }
  take(s, j);
  return entered ? follow_result::entered : follow_result::taken;
}

void outbox_cursors::issue_entry_write(std::int64_t endpoint_id) {
  auto it = states_.find(endpoint_id);
  if (it == states_.end() || it->second.ph != phase::entering || it->second.write_issued) return;
  auto& s = it->second;
  // Attempts of the endpoint in flight end first (for a second at most): a delivered one is then
  // covered, a failed one taken — not sent again after the endpoint is back.
  const auto in_flight = deliveries_.in_flight_stream(endpoint_id);
  if (!in_flight.empty() && clock_.steady_now() - s.covered_at < entry_wait) return;  // run() tries again
  // Not handled yet: what was taken, and the attempts still in flight (they may end either way).
  std::unordered_set<std::uint32_t> unhandled = s.dropped;
  lsn bound = streamed_until_;
  if (s.dropped_from.valid()) bound = std::min(bound, s.dropped_from);
  for (const auto& [xid, commit] : in_flight) {
    unhandled.insert(xid);
    if (commit.valid()) bound = std::min(bound, commit);
  }
  // The newest snapshot no unhandled transaction is visible in (each committed at or after
  // `bound`, which is at most the last streamed Commit: all it shows was streamed before).
  auto text = recovery_.snapshot_before(bound);
  auto base = text ? pg_snapshot::parse(*text) : std::nullopt;
  const endpoint* ep = directory_.find(endpoint_id);
  s.write_issued = true;
  if (!base || !ep) {  // cannot happen (follow() checked) — but never skip without a cursor
    log::error("cursor.no_lower_bound", {{"endpoint_id", endpoint_id}});
    for (auto t : s.held) tracker_.release(t);  // nothing acknowledged past them: streamed again
    states_.erase(it);
    return;
  }
  s.covered = *base;
  s.covered_text = *text;
  s.also.clear();
  for (const auto& [xid, tenant] : streamed_) {
    if (!tenant.empty() && tenant != ep->tenant_id) continue;
    const auto wide = base->widen(xid);
    if (!base->visible(wide) && !unhandled.contains(xid)) s.also.push_back(wide);
  }
  std::sort(s.also.begin(), s.also.end());
  s.also.erase(std::unique(s.also.begin(), s.also.end()), s.also.end());
  s.dropped.clear();
  write_cursor(endpoint_id, s);
}

void outbox_cursors::write_cursor(std::int64_t endpoint_id, state& s) {
  sql::cursor_write w;
  w.endpoint_id = endpoint_id;
  w.covered = s.covered_text;
  w.also = s.also;
  if (s.window_snapshot) w.window_snapshot = s.window_text;
  w.window_after = s.window_after;
  w.reason = s.reason;
  w.drained = static_cast<std::int64_t>(s.drained_unwritten);
  w.tenant_id = s.tenant_id;
  if (!s.epochs.empty()) w.routing = routing_epochs_json(s.epochs);
  s.drained_unwritten = 0;
  s.dirty = false;
  s.last_write = clock_.steady_now();
  ++stats_.writes;
  ++s.writes_in_flight;
  store_.enqueue(std::move(w), [this, endpoint_id] {
    auto it = states_.find(endpoint_id);
    if (it == states_.end()) return;
    auto& st = it->second;
    if (st.writes_in_flight > 0) --st.writes_in_flight;
    if (st.durable) return;
    st.durable = true;
    if (st.ph == phase::entering) st.ph = phase::following;
    for (auto t : st.held) tracker_.release(t);
    st.held.clear();
    wake();
  });
}

// ------------------------------------------------------------------ reading back

std::size_t outbox_cursors::submit_page(std::int64_t endpoint_id, const sql::text_rows& page, window& w) {
  const auto rel = relation_of_columns(page.columns);
  // Merge keys are resolved at read time: of a page's rows with one key, only the newest is sent.
  std::unordered_map<std::string, std::size_t> newest;
  const auto key_col = static_cast<std::size_t>(
      std::find(page.columns.begin(), page.columns.end(), "merge_key") - page.columns.begin());
  for (std::size_t k = 0; k < page.rows.size(); ++k)
    if (key_col < page.columns.size() && page.rows[k][key_col]) newest[*page.rows[k][key_col]] = k;
  std::size_t rows = 0;
  const endpoint* ep = directory_.find(endpoint_id);
  const auto& s = states_.at(endpoint_id);
  const auto& sent = s.sent;
  for (std::size_t k = 0; k < page.rows.size(); ++k) {
    const auto& row = page.rows[k];
    if (!row[2]) continue;  // the one row of an empty page
    ++rows;
    w.last_seq = std::stoll(*row[2]);
    if (key_col < page.columns.size() && row[key_col] && newest[*row[key_col]] != k) continue;  // merged
    const auto tuple = tuple_of_text(row);
    std::string why;
    // No commit LSN: a state read back wins over an older one pending in the table (merge).
    auto ev = event_from_row(row_view(rel, tuple), lsn{}, why);
    if (!ev || !ep || sent.contains(ev->id)) continue;  // handled by the stream already
    const auto xid8 = row[3] ? std::stoull(*row[3]) : 0;
    const auto body = why.empty() ? std::optional<std::string_view>(ev->body) : std::nullopt;  // as the stream routes
    if (!owed(s, endpoint_id, *ev, static_cast<std::uint32_t>(xid8), body, why)) continue;
    ev->seq = w.last_seq;
    delivery::job j;
    j.ev = deliveries_.track(std::move(*ev));
    j.endpoint_id = endpoint_id;
    j.ticket = w.ticket;
    j.drained = true;
    tracker_.hold(w.ticket);
    ++w.deliveries;
    if (why.empty()) deliveries_.submit_drained(std::move(j));
    else deliveries_.submit_dead(std::move(j), why);
  }
  return rows;
}

std::size_t outbox_cursors::page_size(std::int64_t endpoint_id, const state& s) const {
  if (s.ph != phase::following || !s.durable) return 0;
  // The next page of an open window: only while the last was full and nothing went back.
  if (!s.open.empty() && (!s.open.back().full || s.min_dropped_seq || s.open.size() >= 4)) return 0;
  const endpoint* ep = directory_.find(endpoint_id);
  if (!ep || ep->retired || ep->status != endpoint_status::active || !ep->config_error.empty()) return 0;
  const auto health = directory_.health(endpoint_id);
  const auto now = clock_.system_now();
  const auto mode = delivery::mode(health, now);
  if (mode == delivery::breaker_mode::paused) return 0;
  // Failing (its last attempt failed): one event at a time, after the retry backoff of its
  // streak — what just failed is not sent again at once.
  const bool failing = health.consecutive_failures > 0 && health.last_failure_at;
  if (failing && mode != delivery::breaker_mode::probing) {
    const int doublings = std::min(health.consecutive_failures - 1, 20);
    const auto wait = std::min<std::chrono::milliseconds>(backoff_.backoff_max, backoff_.backoff_base * (1LL << doublings));
    if (now < *health.last_failure_at + wait) return 0;
  }
  // Aggregate order: the table's rows of this endpoint (older) go first.
  if (ep->aggregate_ordering && deliveries_.backlog().has_backlog(endpoint_id)) return 0;
  const auto room = deliveries_.drain_room(endpoint_id);
  if (room == 0) return 0;
  return mode == delivery::breaker_mode::probing || failing ? 1 : room;  // a probe first after a pause or failure
}

asio::awaitable<void> outbox_cursors::read_window(std::int64_t endpoint_id, std::size_t limit) {
  const endpoint* ep = directory_.find(endpoint_id);
  auto& s = states_.at(endpoint_id);
  const std::int64_t after = s.open.empty() ? s.window_after : s.open.back().last_seq;
  sql::cursor_page_request q{ep->tenant_id, s.covered_text, s.also, std::nullopt, after, static_cast<int>(limit), endpoint_id};
  if (s.window_snapshot) q.window_snapshot = s.window_text;
  // After a window smaller than a page, the next one may be the last: the stream waits while it
  // is read, so no delivery of the endpoint is streamed between its snapshot and the rejoin.
  const bool may_rejoin = s.small_last && !s.window_snapshot && s.open.empty();
  holding_ = may_rejoin;
  s.skipped_while_reading = 0;
  const auto asked_at = clock_.steady_now();  // the page's snapshot is taken after this
  auto page = co_await store_.cursor_page(q);
  holding_ = false;
  auto it = states_.find(endpoint_id);
  if (it == states_.end() || it->second.ph != phase::following) co_return;  // the session ended meanwhile
  if (!page || page->rows.empty()) {
    if (!page) log::warn("cursor.read_failed", {{"endpoint_id", endpoint_id}, {"error", store_.last_read_error()}});
    co_return;
  }
  auto& st = it->second;
  const auto& first = page->rows.front();
  window w;
  w.snapshot_text = first[0].value_or("");
  auto snap = pg_snapshot::parse(w.snapshot_text);
  if (!snap) co_return;
  w.snapshot = *snap;
  w.insert_lsn = lsn::parse(first[1].value_or("")).value_or(lsn{});
  w.ticket = tracker_.begin_detached();
  w.read_at = asked_at;
  const std::size_t rows = submit_page(endpoint_id, *page, w);
  ++stats_.windows;
  stats_.drained += w.deliveries;
  st.drained_unwritten += w.deliveries;
  st.drained_total += w.deliveries;
  w.full = rows >= limit;
  if (!st.window_snapshot) {  // a new window: its snapshot bounds the pages after this one
    st.window_snapshot = w.snapshot;
    st.window_text = w.snapshot_text;
  }
  // (A delivery skipped while the page was read — the stream was already waiting for a message —
  // may be of a transaction the window's snapshot does not show: then it is not the last.)
  if (may_rejoin && !w.full && st.skipped_while_reading == 0) {
    // The last window: the stream brings what is not visible in its snapshot from now on.
    w.final = true;
    st.ph = phase::rejoined;
    st.rejoin_snapshot = w.snapshot;
    st.rejoin_until = w.insert_lsn;
    log::info("endpoint.rejoining_stream", {{"endpoint_id", endpoint_id}, {"final_window", w.deliveries},
                                            {"drained", st.drained_total}});
  }
  st.open.push_back(std::move(w));
  finish_window(endpoint_id, st);  // an empty one ends at once
}

void outbox_cursors::finish_window(std::int64_t endpoint_id, state& s) {
  if (!s.open.empty() && s.open.front().final) {
    if (tracker_.detached_outstanding(s.open.front().ticket) > 0) return;
    tracker_.end_detached(s.open.front().ticket);
    s.open.clear();
    s.reason = "rejoined";
    store_.enqueue(sql::cursor_delete{endpoint_id}, [this, endpoint_id] {
      if (auto it = states_.find(endpoint_id); it != states_.end() && it->second.ph == phase::rejoined) {
        it->second.deleted = true;
        wake();
      }
    });
    return;
  }
  finish_pages(s);
  if (s.dirty && (s.small_last || clock_.steady_now() - s.last_write >= write_interval)) write_cursor(endpoint_id, s);
}

void outbox_cursors::finish_pages(state& s) {
  while (!s.open.empty() && tracker_.detached_outstanding(s.open.front().ticket) == 0) {
    window w = std::move(s.open.front());
    s.open.pop_front();
    tracker_.end_detached(w.ticket);
    s.dirty = true;
    if (s.min_dropped_seq) {  // the window goes on from the first delivery it could not take
      if (s.open.empty()) {
        s.window_after = std::max(s.window_after, *s.min_dropped_seq - 1);
        s.min_dropped_seq.reset();
        s.small_last = false;
      }
    } else if (w.full) {
      s.window_after = w.last_seq;
      s.small_last = false;
    } else {  // the window is done: its snapshot is covered
      // Covered from now on: a routing before a change whose transactions it all shows is done.
      std::erase_if(s.epochs, [&](const routing_epoch& e) { return e.shown_by(w.snapshot); });
      s.covered_at = w.read_at;
      s.covered = w.snapshot;
      s.covered_text = w.snapshot_text;
      s.also.clear();
      s.window_snapshot.reset();
      s.window_text.clear();
      s.window_after = 0;
      s.small_last = true;
    }
  }
}

asio::awaitable<void> outbox_cursors::run(std::function<bool()> active) {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
  while (active()) {
    if (!woken_) {
      co_await wake_.wait_until(steady_clock::now() + 10ms);  // a finished delivery or a durable write wakes it
      if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) co_return;
    }
    woken_ = false;
    if (clock_.steady_now() - last_give_up_check_ >= 5s) {
      last_give_up_check_ = clock_.steady_now();
      co_await give_up_stale();
    }
    std::vector<std::int64_t> ids;
    for (auto& [id, s] : states_) ids.push_back(id);
    for (auto id : ids) {
      auto* found = find(id);  // removed: nothing is owed to it any more
      if (!found) continue;
      auto& s = *found;
      if (s.ph == phase::entering && !s.write_issued) {
        issue_entry_write(id);
        continue;
      }
      finish_window(id, s);
      if (s.ph == phase::rejoined) {
        find(id);  // ends it once its row is deleted and the stream has passed its window
        continue;
      }
      if (s.dirty && clock_.steady_now() - s.last_write >= write_interval) write_cursor(id, s);
      if (auto n = page_size(id, s); n > 0 && active()) co_await read_window(id, n);
    }
  }
}

asio::awaitable<void> outbox_cursors::give_up_stale() {
  if (states_.empty()) co_return;
  auto stale = co_await store_.stale_cursors(give_up_after_);
  if (!stale) {
    log::warn("cursor.give_up_check_failed", {{"error", store_.last_read_error()}});
    co_return;
  }
  for (auto id : *stale) {
    auto* s = find(id);
    // Only a cursor at rest: no window open, nothing of its own queued for writing (the range
    // statement moves the row itself; a write queued earlier must not move it back).
    if (!s || s->ph != phase::following || !s->durable || !s->open.empty() || s->dirty || s->writes_in_flight > 0) continue;
    const auto reason = fmt::format("given up: the endpoint followed the outbox for more than {} h without catching up",
                                    give_up_after_.count());
    auto moved = co_await store_.give_up_cursor(id, s->tenant_id, s->covered_text, s->also, reason);
    if (!moved) {
      log::warn("cursor.give_up_failed", {{"endpoint_id", id}, {"error", store_.last_read_error()}});
      continue;
    }
    s = find(id);
    auto snap = pg_snapshot::parse(moved->first);
    if (!s || !snap) continue;
    s->covered = *snap;
    s->covered_text = moved->first;
    s->also.clear();
    s->epochs.clear();  // what they held ended dead
    s->window_snapshot.reset();
    s->window_text.clear();
    s->window_after = 0;
    s->covered_at = clock_.steady_now();
    ++stats_.given_up;
    stats_.given_up_events += static_cast<std::uint64_t>(moved->second);
    log::error("cursor.given_up", {{"endpoint_id", id}, {"events", moved->second}, {"reason", reason},
                                   {"note", "the range is in walhook.dead_ranges"}});
  }
}

void outbox_cursors::wake() {
  woken_ = true;
  wake_.notify();
}

asio::awaitable<error_code> outbox_cursors::start_session(const std::optional<std::string>& delivered) {
  end_session();
  recovery_.seed_delivered(delivered);
  auto rows = co_await store_.load_cursors();
  if (!rows) co_return rows.error();
  for (auto& r : *rows) {
    auto covered = pg_snapshot::parse(r.covered);
    auto also = parse_xid_array(r.also);
    std::optional<pg_snapshot> window;
    if (r.window_snapshot) window = pg_snapshot::parse(*r.window_snapshot);
    std::string why;
    auto epochs = r.routing ? parse_routing_epochs(*r.routing, &why)
                            : boost::system::result<std::vector<routing_epoch>>(std::vector<routing_epoch>{});
    if (!covered || !also || (r.window_snapshot && !window) || !epochs) {
      log::error("cursor.unreadable", {{"endpoint_id", r.endpoint_id}, {"covered", r.covered}, {"error", why}});
      continue;
    }
    state s;
    s.epochs = std::move(*epochs);
    s.ph = phase::following;
    s.durable = true;
    s.write_issued = true;
    s.covered = *covered;
    s.covered_text = r.covered;
    s.also = std::move(*also);
    s.window_snapshot = window;
    s.window_text = r.window_snapshot.value_or("");
    s.window_after = r.window_after;
    s.tenant_id = r.tenant_id;
    s.reason = "following the outbox since before this session";
    s.covered_at = clock_.steady_now();  // not known: counted from this session's start
    states_.emplace(r.endpoint_id, std::move(s));
  }
  if (!states_.empty())
    log::info("cursor.loaded", {{"endpoints", static_cast<std::uint64_t>(states_.size())}});
  co_return error_code{};
}

void outbox_cursors::flush() {
  for (auto& [id, s] : states_) {
    if (!s.durable) continue;
    finish_window(id, s);
    if (s.dirty) write_cursor(id, s);
  }
}

void outbox_cursors::end_session() {
  states_.clear();  // tickets and windows belong to the tracker's session, reset with it
  recent_routing_.clear();
  streamed_.clear();
  streamed_until_ = lsn{};
  holding_ = false;
}

std::vector<cursor_view> outbox_cursors::views() const {
  std::vector<cursor_view> out;
  for (const auto& [id, s] : states_)
    out.push_back({id, s.ph == phase::entering ? "entering" : s.ph == phase::following ? "following" : "rejoining",
                   s.drained_total, std::chrono::duration<double>(clock_.steady_now() - s.covered_at).count()});
  return out;
}

}  // namespace walhook::relay
