#pragma once
// The NATS JetStream sink (docs/brokers.md): publishes each message to JetStream and reports
// success only on the stream's PubAck. Built on nats.c (Debian libnats-dev); nothing of it is
// visible here.
//
// One connection per server (host, port, credentials, TLS), shared by every endpoint that names
// it; opened on first use on a thread of the sink's own (connect, TLS and the login block), never
// the engine's; closed and reopened after the server drops it (the library's own reconnection is
// off, so a lost connection fails its unconfirmed publishes at once instead of buffering them).
// A plain-TCP connection's socket is watched by the engine's reactor (nats.c's external event loop;
// TLS keeps nats.c's own reader and flusher threads):
// publishes are pipelined, written in one batch per engine turn, and their PubAcks are read and
// matched on the engine's thread — no thread hand-off per message. The event id goes out as
// Nats-Msg-Id: within the stream's duplicate window the server stores a redelivered event once.

#include "delivery/broker_sink.hpp"
#include "delivery/destination.hpp"
#include "delivery/transport.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace walhook::delivery {

class nats_sink final : public transport {
 public:
  nats_sink(boost::asio::any_io_executor ex, broker_sink_options options);
  ~nats_sink() override;  ///< closes every connection, joins its threads
  nats_sink(const nats_sink&) = delete;
  nats_sink& operator=(const nats_sink&) = delete;

  /// Not an HTTP sink: transport_errc::sink_unavailable.
  boost::asio::awaitable<post_result> async_post(const std::string& pool_key, const http_target& target,
                                                 const http_request& request) override;
  /// Publishes to target's server, subject message.subject, with the headers, Nats-Msg-Id =
  /// message_id and Content-Type: application/json. 200 on a PubAck (also one that says
  /// Duplicate: the stream has it); no_stream when no stream covers the subject;
  /// broker_refused with the server's text and JetStream error code (e.g. "maximum messages
  /// exceeded" from a stream with discard=new); broker_closed when the connection dropped first;
  /// timeout when no PubAck came within `deadline` (connect included); connect_failed,
  /// tls_failed, address_blocked, resolve_failed before a connection. Must be awaited on the
  /// sink's executor.
  boost::asio::awaitable<post_result> async_publish(const std::string& pool_key, const broker_target& target,
                                                    const broker_message& message,
                                                    std::chrono::milliseconds deadline) override;
  /// `pool_key` no longer publishes; its server's connection closes after a grace for its
  /// unconfirmed publishes once no other endpoint uses it.
  void forget(const std::string& pool_key) override;
  /// Fails every unconfirmed publish with cancelled; later calls fail the same way.
  void shutdown() override;
  /// Fails every unconfirmed publish with cancelled; later calls work.
  void cancel_all() override;

  /// PubAcks that said Duplicate (the stream already held that Nats-Msg-Id), since start.
  std::uint64_t duplicates() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace walhook::delivery
