// `walhook inbox source add|update|remove|list`: the senders the ingest server accepts
// (walhook.inbox_sources) and the internal destinations their events go to (endpoints of the
// source's tenant, "inbox:NAME"). docs/inbox.md.

#include "delivery/signing.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/inbox/schemes.hpp"
#include "relay/inbox/sources.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/schema.hpp"

#include <fmt/format.h>

#include <charconv>
#include <iostream>
#include <memory>

namespace walhook::relay::cli {

namespace {

/// The flags add and update share; empty or unset: not given.
struct source_flags {
  std::string database_url;
  std::string name;
  std::string scheme;
  std::string secret, secret_file;
  std::vector<std::string> destinations;
  std::string id_from, type_from, order_key;
  std::string signature_header, signature_encoding, signed_content, timestamp_header;
  std::optional<int> tolerance_s;
  std::optional<int> max_body_bytes;
  std::optional<std::string> defer_status, retry_schedule;  ///< as given: "409,425" or "none"; "1m,5m,15m"
  std::optional<int> max_deferrals;
  int max_concurrency = 4;
  std::string grace = "24h";
};

void add_config_flags(CLI::App* c, source_flags& f) {
  add_database_url(c, f.database_url);
  c->add_option("--name", f.name, "Source name: POST /in/NAME (1–63 of a-z 0-9 _ -)")->required();
  c->add_option("--secret", f.secret,
                "The sender's signing secret (standard-webhooks: whsec_…; stripe: its whsec_… as given; github, "
                "hmac-sha256: the shared secret); visible in the process list: prefer --secret-file");
  c->add_option("--secret-file", f.secret_file, "Read the secret from the first line of FILE (- for stdin)");
  c->add_option("--id-from", f.id_from, "Where the event id is: header:NAME or a JSON pointer (/id); default: the scheme's");
  c->add_option("--type-from", f.type_from, "Where the event type is: header:NAME or a JSON pointer (/type)");
  c->add_option("--order-key", f.order_key,
                "Where the ordering key is (header:NAME or a JSON pointer): events of one key are processed in order");
  c->add_option("--signature-header", f.signature_header, "hmac-sha256: the header holding the signature");
  c->add_option("--signature-encoding", f.signature_encoding, "hmac-sha256: hex or base64")
      ->check(CLI::IsMember({"hex", "base64"}));
  c->add_option("--signed-content", f.signed_content, "hmac-sha256: body, or timestamp.body")
      ->check(CLI::IsMember({"body", "timestamp.body"}));
  c->add_option("--timestamp-header", f.timestamp_header, "hmac-sha256 with timestamp.body: the header of the Unix time");
  c->add_option("--tolerance-s", f.tolerance_s, "How far a signed timestamp may be from now, seconds (default 300)");
  c->add_option("--max-body-bytes", f.max_body_bytes, "Largest body accepted (default 1 MiB; 413 past it)");
  c->add_option("--defer-status", f.defer_status,
                "Handler answers that mean \"not yet\" (comma-separated, 400–599; none: off): retried soon, out of "
                "their key's line, quarantined past --max-deferrals (default 409,425)");
  c->add_option("--max-deferrals", f.max_deferrals, "Deferrals before an event is quarantined (default 12, about 7 min)");
  c->add_option("--retry-schedule", f.retry_schedule,
                "Waits after each failed attempt, then quarantine (comma-separated durations; default 1m,5m,15m)");
}

/// The items of a comma-separated list, blanks around them dropped.
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    auto item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    out.push_back(item);
    start = end + 1;
  }
  return out;
}

/// "409,425" as a PostgreSQL array literal ("none": the empty array); the statuses checked.
std::string defer_statuses_literal(const std::string& text) {
  if (text == "none") return "{}";
  std::string out;
  std::size_t n = 0;
  for (const auto& item : split_list(text)) {
    int status = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), status);
    if (ec != std::errc{} || p != item.data() + item.size() || status < 400 || status > 599)
      throw cli_error(fmt::format("--defer-status: '{}' is not an HTTP status from 400 to 599", item));
    out += (out.empty() ? "" : ",") + std::to_string(status);
    ++n;
  }
  if (n == 0 || n > 16) throw cli_error("--defer-status takes 1 to 16 statuses, or none");
  return "{" + out + "}";
}

/// "1m,5m,15m" as milliseconds in a PostgreSQL array literal; each 1 s to 7 d, at most 32.
std::string retry_schedule_literal(const std::string& text) {
  std::string out;
  std::size_t n = 0;
  for (const auto& item : split_list(text)) {
    const auto wait = parse_duration(item, "--retry-schedule");
    if (wait < std::chrono::seconds{1} || wait > std::chrono::hours{7 * 24})
      throw cli_error(fmt::format("--retry-schedule: {} is not from 1s to 7d", item));
    out += (out.empty() ? "" : ",") + std::to_string(std::chrono::milliseconds(wait).count());
    ++n;
  }
  if (n == 0 || n > 32) throw cli_error("--retry-schedule takes 1 to 32 durations, e.g. 1m,5m,15m");
  return "{" + out + "}";
}

std::string secret_of(const source_flags& f) {
  if (!f.secret_file.empty()) return read_secret_file(f.secret_file);
  return f.secret;
}

std::optional<std::string> given(const std::string& s) { return s.empty() ? std::nullopt : std::optional(s); }

/// The source as it will be stored, checked by the same rules the ingest server applies, and the
/// table's bounds said in words (not as a constraint's name).
void check(const source_flags& f, const std::string& secret) {
  // Secrets are stored space-separated (newest first, during a rotation): one with a blank would
  // become several shorter ones, each accepted.
  if (secret.empty() || secret.find_first_of(" \t\r\n\f\v") != std::string::npos || secret.size() > 1024)
    throw cli_error("the secret must be 1 to 1024 characters without spaces or line breaks");
  if (f.tolerance_s && (*f.tolerance_s < 1 || *f.tolerance_s > 86400)) throw cli_error("--tolerance-s must be 1 to 86400");
  if (f.max_body_bytes && (*f.max_body_bytes < 1 || *f.max_body_bytes > 16 * 1024 * 1024))
    throw cli_error("--max-body-bytes must be 1 to 16777216 (16 MiB)");
  if (f.max_concurrency < 1 || f.max_concurrency > 1000) throw cli_error("--max-concurrency must be 1 to 1000");
  if (f.max_deferrals && (*f.max_deferrals < 0 || *f.max_deferrals > 1000)) throw cli_error("--max-deferrals must be 0 to 1000");
  if (f.defer_status) (void)defer_statuses_literal(*f.defer_status);
  if (f.retry_schedule) (void)retry_schedule_literal(*f.retry_schedule);
  for (const auto* from : {&f.id_from, &f.type_from, &f.order_key})
    if (from->size() > 256) throw cli_error(fmt::format("'{}…' is longer than 256 characters", from->substr(0, 32)));
  for (const auto& url : f.destinations) operations::check_url(url);
  if (!inbox::valid_source_name(f.name))
    throw cli_error(fmt::format("--name {}: 1–63 characters of a-z, 0-9, _ and -, starting with a letter or digit", f.name));
  inbox::source_config s;
  s.name = f.name;
  const auto kind = inbox::parse_scheme(f.scheme);
  if (!kind) throw cli_error("--scheme must be standard-webhooks, stripe, github or hmac-sha256");
  s.kind = *kind;
  s.secrets = {secret};
  if (f.tolerance_s) s.tolerance = std::chrono::seconds(*f.tolerance_s);
  const std::pair<const std::string*, std::optional<inbox::value_source>*> sources[] = {
      {&f.id_from, &s.id_from}, {&f.type_from, &s.type_from}, {&f.order_key, &s.order_key_from}};
  for (auto [text, target] : sources) {
    if (text->empty()) continue;
    *target = inbox::parse_value_source(*text);
    if (!*target) throw cli_error(fmt::format("'{}' is neither header:NAME nor a JSON pointer such as /data/id", *text));
  }
  s.signature_header = f.signature_header;
  s.base64 = f.signature_encoding == "base64";
  s.signs_timestamp = f.signed_content == "timestamp.body";
  s.timestamp_header = f.timestamp_header;
  if (auto problem = inbox::check_source(s)) throw cli_error(fmt::format("source {}: {}", f.name, *problem));
}

/// Adds one destination endpoint of the source's tenant; prints its id and signing secret.
void add_destination(blocking_db& db, const source_flags& f, const std::string& url, bool ordered) {
  operations::check_url(url);
  const std::string secret = delivery::generate_secret();
  // The source's processing policies go with each destination (migration 011): they are what
  // walhook run reads.
  auto r = db.exec(
      "INSERT INTO walhook.endpoints (tenant_id, url, secret, max_concurrency, ordering, description, "
      "                               defer_statuses, max_deferrals, retry_schedule_ms) "
      "SELECT $1, $2, $3, $4::int, $5, $6, nullif(s.defer_statuses, '{}'), s.max_deferrals, s.retry_schedule_ms "
      "  FROM walhook.inbox_sources s WHERE s.name = $7 RETURNING id",
      {inbox::inbox_tenant(f.name), url, secret, std::to_string(f.max_concurrency), ordered ? "aggregate" : "none",
       fmt::format("inbox destination of source {}", f.name), f.name});
  std::cout << fmt::format("destination: endpoint {} {}\n  secret: {}\n", r.value(0, 0), url, secret);
}

int add(const source_flags& f) {
  if (f.destinations.empty()) throw cli_error("give at least one --destination URL (the handler of these events)");
  const std::string secret = secret_of(f);
  if (secret.empty()) throw cli_error("--secret (or --secret-file) is required: the sender's signing secret");
  check(f, secret);
  blocking_db db(f.database_url);
  operations::require_schema(db);
  if (db.exec("SELECT 1 FROM walhook.inbox_sources WHERE name = $1", {f.name}).rows() > 0)
    throw conflict(fmt::format("an inbox source named {} exists (walhook inbox source update changes it)", f.name));
  db.exec("BEGIN");
  db.exec(
      "INSERT INTO walhook.inbox_sources (name, scheme, secret, tolerance_s, id_from, type_from, order_key_from, "
      "signature_header, signature_encoding, signed_content, timestamp_header, max_body_bytes, defer_statuses, "
      "max_deferrals, retry_schedule_ms) "
      "VALUES ($1, $2, $3, coalesce($4::int, 300), $5, $6, $7, $8, $9, $10, $11, coalesce($12::int, 1048576), "
      "        coalesce($13::smallint[], '{409,425}'), coalesce($14::int, 12), coalesce($15::int[], '{60000,300000,900000}'))",
      {f.name, f.scheme, secret, f.tolerance_s ? std::optional(std::to_string(*f.tolerance_s)) : std::nullopt,
       given(f.id_from), given(f.type_from), given(f.order_key), given(f.signature_header),
       given(f.signature_encoding), given(f.signed_content), given(f.timestamp_header),
       f.max_body_bytes ? std::optional(std::to_string(*f.max_body_bytes)) : std::nullopt,
       f.defer_status ? std::optional(defer_statuses_literal(*f.defer_status)) : std::nullopt,
       f.max_deferrals ? std::optional(std::to_string(*f.max_deferrals)) : std::nullopt,
       f.retry_schedule ? std::optional(retry_schedule_literal(*f.retry_schedule)) : std::nullopt});
  std::cout << fmt::format("source: {} ({})\nreceives: POST /in/{}\n", f.name, f.scheme, f.name);
  for (const auto& url : f.destinations) add_destination(db, f, url, !f.order_key.empty());
  db.exec("COMMIT");
  return 0;
}

/// The stored source's settings as flags (the secret apart), for update to merge with.
source_flags stored_flags(blocking_db& db, const std::string& name) {
  auto r = db.exec(
      "SELECT scheme, tolerance_s, coalesce(id_from, ''), coalesce(type_from, ''), coalesce(order_key_from, ''), "
      "coalesce(signature_header, ''), coalesce(signature_encoding, ''), coalesce(signed_content, ''), "
      "coalesce(timestamp_header, ''), max_body_bytes, split_part(secret, ' ', 1) "
      "FROM walhook.inbox_sources WHERE name = $1",
      {name});
  if (r.rows() == 0) throw not_found(fmt::format("no inbox source named {}", name));
  source_flags s;
  s.name = name;
  s.scheme = std::string(r.value(0, 0));
  s.tolerance_s = std::stoi(std::string(r.value(0, 1)));
  s.id_from = std::string(r.value(0, 2));
  s.type_from = std::string(r.value(0, 3));
  s.order_key = std::string(r.value(0, 4));
  s.signature_header = std::string(r.value(0, 5));
  s.signature_encoding = std::string(r.value(0, 6));
  s.signed_content = std::string(r.value(0, 7));
  s.timestamp_header = std::string(r.value(0, 8));
  s.max_body_bytes = std::stoi(std::string(r.value(0, 9)));
  s.secret = std::string(r.value(0, 10));
  return s;
}

/// The stored source with the flags given on top; a setting only the generic scheme's signed
/// timestamp uses goes when it no longer signs one.
source_flags merged_flags(source_flags stored, const source_flags& f) {
  for (auto [given_value, into] : {std::pair{&f.id_from, &stored.id_from}, {&f.type_from, &stored.type_from},
                                   {&f.order_key, &stored.order_key}, {&f.signature_header, &stored.signature_header},
                                   {&f.signature_encoding, &stored.signature_encoding},
                                   {&f.signed_content, &stored.signed_content},
                                   {&f.timestamp_header, &stored.timestamp_header}})
    if (!given_value->empty()) *into = *given_value;
  if (f.tolerance_s) stored.tolerance_s = f.tolerance_s;
  if (f.max_body_bytes) stored.max_body_bytes = f.max_body_bytes;
  if (stored.signed_content != "timestamp.body") stored.timestamp_header.clear();
  if (f.defer_status) stored.defer_status = f.defer_status;
  if (f.max_deferrals) stored.max_deferrals = f.max_deferrals;
  if (f.retry_schedule) stored.retry_schedule = f.retry_schedule;
  stored.destinations = f.destinations;
  stored.max_concurrency = f.max_concurrency;
  stored.database_url = f.database_url;
  return stored;
}

int update(const source_flags& f) {
  blocking_db db(f.database_url);
  operations::require_schema(db);
  const source_flags m = merged_flags(stored_flags(db, f.name), f);
  const std::string secret = secret_of(f);
  check(m, secret.empty() ? m.secret : secret);  // the whole source as it will be, not the flags alone
  const auto grace = parse_duration(f.grace, "--grace");
  db.exec("BEGIN");
  db.exec(
      "UPDATE walhook.inbox_sources SET "
      "  secret = CASE WHEN $2::text IS NULL THEN secret ELSE $2 || ' ' || split_part(secret, ' ', 1) END, "
      "  secret_grace_until = CASE WHEN $2::text IS NULL THEN secret_grace_until "
      "                            ELSE now() + make_interval(secs => $3::bigint) END, "
      "  tolerance_s = $4::int, id_from = $5, type_from = $6, order_key_from = $7, signature_header = $8, "
      "  signature_encoding = $9, signed_content = $10, timestamp_header = $11, max_body_bytes = $12::int, "
      "  defer_statuses = coalesce($13::smallint[], defer_statuses), max_deferrals = coalesce($14::int, max_deferrals), "
      "  retry_schedule_ms = coalesce($15::int[], retry_schedule_ms), updated_at = now() "
      "WHERE name = $1",
      {f.name, given(secret), std::to_string(grace.count()), std::to_string(*m.tolerance_s), given(m.id_from),
       given(m.type_from), given(m.order_key), given(m.signature_header), given(m.signature_encoding),
       given(m.signed_content), given(m.timestamp_header), std::to_string(*m.max_body_bytes),
       m.defer_status ? std::optional(defer_statuses_literal(*m.defer_status)) : std::nullopt,
       m.max_deferrals ? std::optional(std::to_string(*m.max_deferrals)) : std::nullopt,
       m.retry_schedule ? std::optional(retry_schedule_literal(*m.retry_schedule)) : std::nullopt});
  // The processing policies hold for every destination, old and new.
  db.exec(
      "UPDATE walhook.endpoints e SET defer_statuses = nullif(s.defer_statuses, '{}'), max_deferrals = s.max_deferrals, "
      "       retry_schedule_ms = s.retry_schedule_ms, updated_at = now() "
      "  FROM walhook.inbox_sources s WHERE s.name = $1 AND e.tenant_id = 'inbox:' || s.name "
      "   AND (e.defer_statuses, e.max_deferrals, e.retry_schedule_ms) IS DISTINCT FROM "
      "       (nullif(s.defer_statuses, '{}'), s.max_deferrals, s.retry_schedule_ms)",
      {f.name});
  // Per-key order holds for every destination of a source with an order key, old and new.
  if (!m.order_key.empty())
    db.exec("UPDATE walhook.endpoints SET ordering = 'aggregate' WHERE tenant_id = $1 AND ordering <> 'aggregate'",
            {inbox::inbox_tenant(f.name)});
  std::cout << fmt::format("source {}: updated{}\n", f.name,
                           secret.empty() ? "" : fmt::format("; the previous secret is accepted for {} more", f.grace));
  for (const auto& url : m.destinations) add_destination(db, m, url, !m.order_key.empty());
  db.exec("COMMIT");
  return 0;
}

int remove(const source_flags& f) {
  blocking_db db(f.database_url);
  operations::require_schema(db);
  db.exec("BEGIN");
  auto gone = db.exec("DELETE FROM walhook.inbox_sources WHERE name = $1", {f.name});
  if (gone.affected() == 0) throw not_found(fmt::format("no inbox source named {}", f.name));
  auto endpoints = db.exec("DELETE FROM walhook.endpoints WHERE tenant_id = $1", {inbox::inbox_tenant(f.name)});
  db.exec("COMMIT");
  std::cout << fmt::format("source {}: removed, with {} destination endpoint(s); POST /in/{} now answers 404\n", f.name,
                           endpoints.affected(), f.name);
  return 0;
}

int list(const std::string& database_url) {
  blocking_db db(database_url);
  operations::require_schema(db);
  auto r = db.exec(
      "SELECT s.name, s.scheme, array_to_string(array(SELECT e.id || ' ' || e.url FROM walhook.endpoints e "
      "        WHERE e.tenant_id = 'inbox:' || s.name ORDER BY e.id), ', '), "
      "       coalesce(s.order_key_from, '-'), s.secret_grace_until IS NOT NULL AND s.secret_grace_until > now(), "
      "       coalesce(nullif(array_to_string(s.defer_statuses, ','), ''), 'none'), s.max_deferrals, "
      "       array_to_string(array(SELECT (ms / 1000) || 's' FROM unnest(s.retry_schedule_ms) ms), ',') "
      "  FROM walhook.inbox_sources s ORDER BY s.name");
  if (r.rows() == 0) std::cout << "no inbox sources (walhook inbox source add)\n";
  for (int i = 0; i < r.rows(); ++i)
    std::cout << fmt::format("{}  scheme {}  order key {}{}\n  destinations: {}\n"
                             "  defer on: {} (at most {} times)  retry schedule: {}, then quarantine\n",
                             r.value(i, 0), r.value(i, 1), r.value(i, 3),
                             r.value(i, 4) == "t" ? "  (secret rotation in grace)" : "",
                             r.value(i, 2).empty() ? "none" : r.value(i, 2), r.value(i, 5), r.value(i, 6), r.value(i, 7));
  return 0;
}

}  // namespace

command add_inbox(CLI::App& app) {
  auto* inbox = app.add_subcommand("inbox", "The receiving half: sources of incoming webhooks (docs/inbox.md)");
  auto* source = inbox->add_subcommand("source", "Senders the ingest server accepts, and where their events go");
  inbox->require_subcommand(1);
  source->require_subcommand(1);
  std::vector<command> subs;

  auto a = std::make_shared<source_flags>();
  auto* add_cmd = source->add_subcommand("add", "Add a source; prints its destinations' endpoint ids and secrets");
  add_config_flags(add_cmd, *a);
  add_cmd->add_option("--scheme", a->scheme, "standard-webhooks, stripe, github or hmac-sha256")->required();
  add_cmd->add_option("--destination", a->destinations,
                      "URL that receives each event as a walhook delivery (repeatable; http(s) or a broker URL)");
  add_cmd->add_option("--max-concurrency", a->max_concurrency, "Each destination's attempts in flight at most")
      ->capture_default_str();

  auto u = std::make_shared<source_flags>();
  auto* update_cmd = source->add_subcommand("update", "Change a source; a new --secret rotates (the old one stays valid for --grace)");
  add_config_flags(update_cmd, *u);
  update_cmd->add_option("--grace", u->grace, "With --secret: how long the previous secret stays valid (e.g. 24h)")
      ->capture_default_str();
  update_cmd->add_option("--add-destination", u->destinations, "Another destination URL (repeatable)");

  auto r = std::make_shared<source_flags>();
  auto* remove_cmd = source->add_subcommand("remove", "Remove a source and its destination endpoints");
  add_database_url(remove_cmd, r->database_url);
  remove_cmd->add_option("--name", r->name, "Source name")->required();

  auto l = std::make_shared<std::string>();
  auto* list_cmd = source->add_subcommand("list", "List sources and their destinations");
  add_database_url(list_cmd, *l);

  return {inbox, [=] {
            if (add_cmd->parsed()) return add(*a);
            if (update_cmd->parsed()) return update(*u);
            if (remove_cmd->parsed()) return remove(*r);
            if (list_cmd->parsed()) return list(*l);
            return 0;
          }};
}

}  // namespace walhook::relay::cli
