#include "wal/replication_stream.hpp"

#include "common/log.hpp"
#include "common/pg_connection.hpp"
#include "common/time.hpp"
#include "wal/copy_both.hpp"
#include "wal/errc.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace walhook::wal {
namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
using boost::system::error_code;

struct replication_stream::impl {
  impl(asio::any_io_executor ex, stream_options o) : options(std::move(o)), conn(ex), hold_timer(ex) {}

  stream_options options;
  pg::connection conn;
  asio::steady_timer hold_timer;
  system_info info;
  lsn confirmed;
  lsn resume;
  std::string resume_system_id;
  lsn reported;  ///< flush LSN of the last status update sent
  lsn received;
  bool reply_owed = false;
  bool streaming = false;
  bool opened = false;  ///< connected and inspected by async_open(), in command mode
  clock::time_point last_status{};
  clock::time_point last_server_message{};
  std::string last_error;

  bool status_due(clock::time_point now) const {
    if (reply_owed) return true;
    if (now - last_status >= options.status_interval) return true;
    return confirmed > reported && now - last_status >= options.min_status_interval;
  }
  clock::time_point next_status_at() const {
    auto t = last_status + options.status_interval;
    if (confirmed > reported) t = std::min(t, last_status + options.min_status_interval);
    return t;
  }
};

replication_stream::replication_stream(asio::any_io_executor ex, stream_options options)
    : impl_(std::make_unique<impl>(ex, std::move(options))) {}

replication_stream::~replication_stream() = default;

const system_info& replication_stream::info() const { return impl_->info; }
const std::string& replication_stream::last_error() const { return impl_->last_error; }
lsn replication_stream::confirmed() const { return impl_->confirmed; }
lsn replication_stream::received() const { return impl_->received; }

void replication_stream::confirm(lsn flush) {
  if (flush.valid() && flush > impl_->confirmed) impl_->confirmed = flush;
}

void replication_stream::resume_from(lsn position, std::string system_id) {
  impl_->resume = position;
  impl_->resume_system_id = std::move(system_id);
}

void replication_stream::wake() { impl_->hold_timer.cancel(); }

void replication_stream::interrupt() {
  impl_->conn.cancel();
  impl_->hold_timer.cancel();
}

void replication_stream::close() {
  impl_->streaming = false;
  impl_->opened = false;
  impl_->conn.close();
}

asio::awaitable<error_code> replication_stream::async_open() {
  auto& s = *impl_;
  s.streaming = false;
  s.reply_owed = false;
  s.opened = false;
  auto fail = [&s](error_code ec, std::string why) {
    s.last_error = std::move(why);
    s.conn.close();
    return ec;
  };
  pg::connection::connect_params extra{
      {"replication", "database"},
      {"application_name", s.options.application_name},
      // pgoutput prints values with the walsender's settings: make timestamps parseable.
      {"options", "-c DateStyle=ISO -c TimeZone=UTC -c extra_float_digits=3"},
  };
  if (auto ec = co_await s.conn.async_connect(s.options.conninfo, s.options.connect_timeout, extra))
    co_return fail(ec, s.conn.last_error());
  auto timeout = s.options.connect_timeout;

  auto ident = co_await s.conn.async_simple("IDENTIFY_SYSTEM", timeout);
  if (!ident) co_return fail(ident.error(), s.conn.last_error());
  if (ident->rows() != 1 || ident->columns() < 4) co_return fail(errc::server_error, "unexpected IDENTIFY_SYSTEM answer");
  s.info.system_id = ident->value(0, 0);
  s.info.timeline = std::stoi(std::string(ident->value(0, 1)));
  s.info.server_flush = lsn::parse(ident->value(0, 2)).value_or(lsn{});
  if (ident->is_null(0, 3))
    co_return fail(errc::server_error, "the connection has no database (use a database URL, not replication=true)");

  auto level = co_await s.conn.async_simple("SHOW wal_level", timeout);
  if (!level) co_return fail(level.error(), s.conn.last_error());
  if (level->value(0, 0) != "logical")
    co_return fail(errc::not_logical, fmt::format("wal_level is '{}', walhook needs wal_level = logical "
                                                  "(ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL)",
                                                  level->value(0, 0)));

  std::string slot_query = fmt::format(
      "SELECT plugin, database = current_database(), confirmed_flush_lsn, active_pid, coalesce(wal_status, '') "
      "FROM pg_replication_slots WHERE slot_name = {}",
      pg::quote_literal(s.options.slot));
  auto slot = co_await s.conn.async_simple(slot_query, timeout);
  if (!slot) co_return fail(slot.error(), s.conn.last_error());
  s.info.slot_created = false;
  if (slot->rows() == 0) {
    if (!s.options.create_slot) {
      s.last_error = fmt::format("replication slot \"{}\" does not exist", s.options.slot);
      co_return errc::slot_missing;  // the connection stays open for async_create_slot()
    }
    auto created = co_await s.conn.async_simple(
        fmt::format("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT 'nothing')", pg::quote_identifier(s.options.slot)),
        std::chrono::milliseconds{60000});
    if (!created && s.conn.last_sqlstate() != "42710")  // 42710: created meanwhile by another instance
      co_return fail(created.error() == pg::errc::query_failed ? error_code(errc::server_error) : created.error(),
                     "could not create replication slot: " + s.conn.last_error());
    s.info.slot_created = static_cast<bool>(created);
    slot = co_await s.conn.async_simple(slot_query, timeout);
    if (!slot) co_return fail(slot.error(), s.conn.last_error());
    if (slot->rows() == 0) co_return fail(errc::server_error, "replication slot vanished after creation");
  }
  if (slot->value(0, 0) != "pgoutput")
    co_return fail(errc::server_error, fmt::format("replication slot \"{}\" uses plugin '{}', not pgoutput", s.options.slot,
                                                   slot->value(0, 0)));
  if (slot->value(0, 1) != "t")
    co_return fail(errc::server_error, fmt::format("replication slot \"{}\" belongs to another database", s.options.slot));
  if (slot->value(0, 4) == "lost") {
    s.last_error = fmt::format("replication slot \"{}\" was invalidated: PostgreSQL removed WAL it needed "
                               "(max_slot_wal_keep_size)", s.options.slot);
    co_return errc::slot_invalidated;  // the connection stays open for async_create_slot()
  }
  s.info.slot_confirmed = lsn::parse(slot->value(0, 2)).value_or(lsn{});
  s.opened = true;
  co_return error_code{};
}

asio::awaitable<error_code> replication_stream::async_start() {
  auto& s = *impl_;
  if (!s.opened || !s.conn.is_open()) {
    if (auto ec = co_await async_open()) co_return ec;
  }
  s.opened = false;  // whatever happens next, the connection leaves command mode
  auto fail = [&s](error_code ec, std::string why) {
    s.last_error = std::move(why);
    s.conn.close();
    return ec;
  };
  auto timeout = s.options.connect_timeout;
  lsn resume = s.resume;
  // A slot created this session starts at its own consistent point, after IDENTIFY_SYSTEM's
  // xlogpos: the record (reset to that point) is not used, so it is no reason to warn.
  if (resume.valid() && !s.info.slot_created &&
      (s.resume_system_id != s.info.system_id || resume > s.info.server_flush)) {
    log::warn("replication.progress_ignored", {{"recorded_lsn", resume.to_string()},
                                               {"recorded_system_id", s.resume_system_id},
                                               {"system_id", s.info.system_id},
                                               {"server_wal", s.info.server_flush.to_string()}});
    resume = lsn{};
  }
  s.info.start = s.info.slot_created ? s.info.slot_confirmed : std::max(s.info.slot_confirmed, resume);
  // A new slot starts a new history: what was acknowledged to the old one means nothing here (after
  // a failover, the old primary's positions can even lie ahead of this server's WAL).
  s.confirmed = s.info.slot_created ? s.info.start : std::max(s.confirmed, s.info.start);

  std::string pubs;
  for (const auto& p : s.options.publications) {
    if (!pubs.empty()) pubs += ',';
    pubs += pg::quote_identifier(p);
  }
  auto start = co_await s.conn.async_simple(
      fmt::format("START_REPLICATION SLOT {} LOGICAL {} (proto_version '1', publication_names {}, messages '{}')",
                  pg::quote_identifier(s.options.slot), s.info.start.to_string(), pg::quote_literal(pubs),
                  s.options.messages ? "true" : "false"),
      timeout);
  if (!start) {
    if (s.conn.last_sqlstate() == "55006") co_return fail(errc::slot_in_use, s.conn.last_error());
    co_return fail(start.error() == pg::errc::query_failed ? error_code(errc::server_error) : start.error(),
                   s.conn.last_error());
  }
  if (start->status() != PGRES_COPY_BOTH) co_return fail(errc::server_error, "START_REPLICATION did not enter COPY BOTH mode");
  s.streaming = true;
  s.reported = lsn{};
  s.last_status = s.options.clock->steady_now() - s.options.status_interval;  // first update at once
  s.last_server_message = s.options.clock->steady_now();
  co_return error_code{};
}

asio::awaitable<boost::system::result<created_slot>> replication_stream::async_create_slot() {
  auto& s = *impl_;
  auto fail = [&s](error_code ec, std::string why) {
    s.last_error = std::move(why);
    s.conn.close();
    return ec;
  };
  if (!s.conn.is_open() || s.streaming) {
    if (auto ec = co_await async_open(); ec && ec != errc::slot_missing && ec != errc::slot_invalidated) co_return ec;
  }
  const auto slot = pg::quote_identifier(s.options.slot);
  auto exists = co_await s.conn.async_simple(
      fmt::format("SELECT 1 FROM pg_replication_slots WHERE slot_name = {}", pg::quote_literal(s.options.slot)),
      s.options.connect_timeout);
  if (!exists) co_return fail(exists.error(), s.conn.last_error());
  if (exists->rows() > 0) {
    // Only walhook streams this slot, and it holds the slot's lock: nothing waits on it.
    auto dropped = co_await s.conn.async_simple(fmt::format("DROP_REPLICATION_SLOT {}", slot), s.options.connect_timeout);
    if (!dropped && s.conn.last_sqlstate() != "42704")  // 42704: dropped meanwhile
      co_return fail(dropped.error() == pg::errc::query_failed ? error_code(errc::server_error) : dropped.error(),
                     "could not drop replication slot: " + s.conn.last_error());
  }
  // Waits for transactions running now to end (the slot's consistent point comes after them).
  auto created = co_await s.conn.async_simple(
      fmt::format("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT 'export')", slot), std::chrono::milliseconds{300000});
  if (!created)
    co_return fail(created.error() == pg::errc::query_failed ? error_code(errc::server_error) : created.error(),
                   "could not create replication slot: " + s.conn.last_error());
  if (created->rows() != 1 || created->columns() < 3)
    co_return fail(errc::server_error, "unexpected CREATE_REPLICATION_SLOT answer");
  created_slot out;
  out.consistent_point = lsn::parse(created->value(0, 1)).value_or(lsn{});
  out.snapshot_name = std::string(created->value(0, 2));
  s.info.slot_created = true;
  s.info.slot_confirmed = out.consistent_point;
  s.opened = true;  // async_start() streams the new slot from this connection
  co_return out;
}

asio::awaitable<error_code> replication_stream::async_send_status(bool reply_requested) {
  auto& s = *impl_;
  if (!s.streaming) co_return pg::errc::not_connected;
  lsn flush = s.confirmed;
  lsn write = std::max(s.received, flush);
  auto msg = standby_status_update(write, flush, flush, to_pg_epoch_micros(system_now()), reply_requested);
  auto ec = co_await s.conn.async_write_copy_data(msg, std::chrono::milliseconds{10000});
  if (ec) {
    s.last_error = s.conn.last_error();
    s.streaming = false;
    co_return ec;
  }
  s.reply_owed = false;
  s.reported = flush;
  s.last_status = s.options.clock->steady_now();
  co_return error_code{};
}

asio::awaitable<boost::system::result<stream_event>> replication_stream::async_next() {
  co_return co_await async_next(std::chrono::milliseconds::max());
}

asio::awaitable<boost::system::result<stream_event>> replication_stream::async_next(std::chrono::milliseconds max_wait) {
  auto& s = *impl_;
  if (!s.streaming) co_return error_code(pg::errc::not_connected);
  const auto give_up = max_wait == std::chrono::milliseconds::max() ? clock::time_point::max()
                                                                    : s.options.clock->steady_now() + max_wait;
  for (;;) {
    auto now = s.options.clock->steady_now();
    if (now >= give_up) co_return error_code(pg::errc::timeout);
    if (s.status_due(now)) {
      if (auto ec = co_await async_send_status()) co_return ec;
      now = s.options.clock->steady_now();
    }
    auto silence_deadline = s.last_server_message + s.options.server_silence_timeout;
    // Wake up at least every min_status_interval so a confirm() made meanwhile is reported soon.
    auto until = std::min({s.next_status_at(), silence_deadline, now + s.options.min_status_interval, give_up});
    auto wait = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(until - now), std::chrono::milliseconds{1});
    auto data = co_await s.conn.async_read_copy_data(wait);
    if (!data) {
      if (data.error() == pg::errc::timeout) {
        if (s.options.clock->steady_now() >= silence_deadline) {
          s.last_error = "no message from the server for " + std::to_string(s.options.server_silence_timeout.count()) + " ms";
          s.streaming = false;
          co_return error_code(pg::errc::connection_lost);
        }
        continue;
      }
      s.last_error = s.conn.last_error();
      if (data.error() != pg::errc::cancelled) s.streaming = false;
      co_return data.error();
    }
    s.last_server_message = s.options.clock->steady_now();
    auto parsed = parse_server_message(data->bytes());
    if (!parsed) {
      s.last_error = "malformed CopyData message from the server: " + parsed.error().message();
      co_return parsed.error();
    }
    if (auto* k = std::get_if<primary_keepalive>(&*parsed)) {
      s.received = std::max(s.received, k->wal_end);
      if (k->reply_requested) s.reply_owed = true;
      co_return stream_event{keepalive{k->wal_end}};
    }
    auto& x = std::get<xlog_data>(*parsed);
    s.received = std::max(s.received, x.wal_start);
    auto msg = pgoutput::decode(x.data);
    if (!msg) {
      s.last_error = fmt::format("undecodable pgoutput message at {}: {}", x.wal_start.to_string(), msg.error().message());
      co_return msg.error();
    }
    co_return stream_event{change{x.wal_start, std::move(*msg)}};
  }
}

asio::awaitable<error_code> replication_stream::async_hold(std::chrono::milliseconds max_wait) {
  auto& s = *impl_;
  if (!s.streaming) co_return error_code(pg::errc::not_connected);
  auto now = s.options.clock->steady_now();
  if (s.status_due(now)) {
    if (auto ec = co_await async_send_status()) co_return ec;
    now = s.options.clock->steady_now();
  }
  auto until = std::min(now + max_wait, s.next_status_at());
  s.hold_timer.expires_at(until);
  co_await s.hold_timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return error_code{};
}

asio::awaitable<void> replication_stream::async_stop() {
  auto& s = *impl_;
  if (s.streaming) {
    if (auto ec = co_await async_send_status())
      log::warn("replication.final_status_failed", {{"error", s.last_error}});
    else
      log::info("replication.final_status", {{"flush_lsn", s.confirmed.to_string()}});
  }
  close();
}

}  // namespace walhook::wal
