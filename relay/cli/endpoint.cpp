// `walhook endpoint add|list|enable|disable|pause|resume|remove|update|rotate-secret`: customer
// endpoints, through relay/operations/operations.hpp where the admin API does the same.

#include "delivery/signing.hpp"
#include "delivery/url.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/core/endpoint_policies.hpp"
#include "relay/core/notifications.hpp"
#include "relay/cli/plural.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/operations.hpp"
#include "relay/operations/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <memory>
#include <string_view>

#include <termios.h>
#include <unistd.h>

namespace walhook::relay::cli {

namespace {

constexpr const char* url_help =
    "http(s):// URL that receives the POSTs, or a broker: nats://host:port/SUBJECT, "
    "amqp://user:pass@host:port/VHOST?exchange=X&routing_key=K (docs/brokers.md)";

/// "endpoint 3: resumed; 12 deliveries due now" (1 delivery) and the change's note.
void print_change(const operations::change& c, std::string_view one = "delivery due now",
                  std::string_view many = "deliveries due now") {
  std::cout << fmt::format("endpoint {}: {}", c.endpoint_id, c.action);
  if (c.deliveries > 0) std::cout << "; " << plural(c.deliveries, one, many);
  std::cout << "\n";
  if (!c.note.empty()) std::cout << "note: " << c.note << "\n";
}

// ---------------------------------------------------------------------------------------- add

/// --secret and --secret-file (one or the other): a secret on the command line is visible in the
/// process list and kept in the shell's history.
void add_secret_flags(CLI::App* c, std::string& secret, std::string& file, const std::string& help) {
  auto* given = c->add_option("--secret", secret,
                              help + "; visible to other users in the process list: prefer --secret-file");
  auto* from_file = c->add_option("--secret-file", file,
                                  "Read the secret from the first line of FILE (- for stdin) instead of --secret");
  given->excludes(from_file);
}

/// The secret as `endpoint add` and `rotate-secret` print it: itself (generated, or given on the
/// command line anyway), or, read from a file, only its fingerprint (it stays out of terminals and logs).
std::string shown_secret(const std::string& secret, const std::string& file) {
  if (file.empty()) return secret;
  return fmt::format("from --secret-file ({})", operations::secret_fingerprints(secret));
}

/// --header, --header-secret, --filter, --max-rate, --rate-burst, --oauth-*, --proxy: what they were given.
struct policy_flags {
  std::vector<std::string> headers, secret_headers;
  std::string filter, max_rate, rate_burst;
  std::string token_url, client_id, client_secret, client_secret_file, scope, proxy;
  CLI::Option *o_headers = nullptr, *o_secret_headers = nullptr, *o_filter = nullptr, *o_max_rate = nullptr,
              *o_rate_burst = nullptr, *o_token_url = nullptr, *o_client_id = nullptr, *o_client_secret = nullptr,
              *o_client_secret_file = nullptr, *o_scope = nullptr, *o_proxy = nullptr;
};

/// --oauth-token-url, --oauth-client-id, --oauth-client-secret(-file), --oauth-scope and --proxy.
void add_egress_flags(CLI::App* c, policy_flags& f, bool clearable) {
  f.o_token_url = c->add_option("--oauth-token-url", f.token_url,
                                "OAuth2 client credentials: each attempt carries a bearer token from this token URL "
                                "(with --oauth-client-id and --oauth-client-secret; docs/endpoint-policies.md)" +
                                    std::string(clearable ? "; none removes the OAuth2 settings" : ""));
  f.o_client_id = c->add_option("--oauth-client-id", f.client_id, "OAuth2 client id");
  f.o_client_secret = c->add_option("--oauth-client-secret", f.client_secret,
                                    "OAuth2 client secret; visible in the process list: prefer --oauth-client-secret-file");
  f.o_client_secret_file = c->add_option("--oauth-client-secret-file", f.client_secret_file,
                                         "Read the OAuth2 client secret from the first line of FILE (- for stdin)");
  f.o_client_secret->excludes(f.o_client_secret_file);
  f.o_scope = c->add_option("--oauth-scope", f.scope,
                            "OAuth2 scope asked for (space-separated)" + std::string(clearable ? "; none removes it" : ""));
  f.o_proxy = c->add_option("--proxy", f.proxy,
                            "How this endpoint's attempts leave: direct (never through walhook run --proxy), or "
                            "http://host:port (a proxy of its own)" +
                                std::string(clearable ? "; none: as walhook run says" : ""));
}

/// The flags, on add (`clearable` false) and update (true: `none` removes what is set).
void add_policy_flags(CLI::App* c, policy_flags& f, bool clearable) {
  const std::string none = clearable ? "; none removes them" : "";
  f.o_headers = c->add_option("--header", f.headers,
                              "A header sent with every attempt, 'Name: value' (repeatable; not Host, Content-*, "
                              "webhook-*, …)" + none);
  f.o_secret_headers = c->add_option(
      "--header-secret", f.secret_headers,
      "A header whose value is a secret (an API key, 'Authorization: Bearer …'): 'Name: value', or 'Name' alone to "
      "read its value from a line of stdin; stored like the signing secret, shown only as a fingerprint "
      "(repeatable)" + none);
  f.o_filter = c->add_option("--filter", f.filter,
                             "Only events whose webhook body matches this JSON filter, e.g. '{\"data.amount\": {\"$gte\": "
                             "100}}' (docs/endpoint-policies.md)" + std::string(clearable ? "; none removes it" : ""));
  f.o_max_rate = c->add_option("--max-rate", f.max_rate,
                               "At most N attempts started per second or minute, over any such window: N/s or N/m "
                               "(e.g. 20/s)" + std::string(clearable ? "; none removes it" : ""));
  f.o_rate_burst = c->add_option("--rate-burst", f.rate_burst,
                                 "With --max-rate: at most this many attempts at once (default: the whole rate)" +
                                     std::string(clearable ? "; none removes it" : ""));
  add_egress_flags(c, f, clearable);
}

/// --header-secret NAME (no colon): the value is the next line of stdin, so it never shows in
/// the process list or the shell's history; on a terminal it is read without echo. Something
/// that is not a header name (a value given alone, say) is refused without being repeated.
std::string secret_header_line(const std::string& given) {
  if (given.find(':') != std::string::npos) return given;
  std::string why;
  if (given.size() > 64 || !parse_header(given + ": x", &why))
    throw cli_error("--header-secret takes 'Name: value', or a header name alone (its value then read from stdin); "
                    "what was given is neither");
  std::string value;
  const bool terminal = ::isatty(STDIN_FILENO);
  termios saved{};
  bool quiet = false;
  if (terminal) {
    std::cerr << "value of header " << given << " (not echoed): " << std::flush;
    if (::tcgetattr(STDIN_FILENO, &saved) == 0) {
      termios no_echo = saved;
      no_echo.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      quiet = ::tcsetattr(STDIN_FILENO, TCSANOW, &no_echo) == 0;
    }
  }
  const bool read = static_cast<bool>(std::getline(std::cin, value));
  if (quiet) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  if (terminal) std::cerr << "\n";
  if (!read) throw cli_error("--header-secret " + given + ": no value on stdin");
  if (!value.empty() && value.back() == '\r') value.pop_back();
  return given + ": " + value;
}

/// What the flags set (an absent flag: left as it is).
operations::endpoint_policies policies_of(const policy_flags& f) {
  operations::endpoint_policies p;
  auto cleared = [](const std::vector<std::string>& v) { return v.size() == 1 && v.front() == "none"; };
  if (f.o_headers->count()) p.headers = cleared(f.headers) ? std::vector<std::string>{} : f.headers;
  if (f.o_secret_headers->count()) {
    std::vector<std::string> lines;
    if (!cleared(f.secret_headers))
      for (const auto& h : f.secret_headers) lines.push_back(secret_header_line(h));
    p.secret_headers = std::move(lines);
  }
  auto text = [](const std::string& v) { return v == "none" ? std::nullopt : std::optional<std::string>(v); };
  if (f.o_token_url->count() && f.token_url == "none") {  // all of them go
    p.oauth_token_url = p.oauth_client_id = p.oauth_client_secret = p.oauth_scope = std::optional<std::string>();
  } else if (f.o_token_url->count()) {
    p.oauth_token_url = f.token_url;
  }
  if (f.o_client_id->count()) p.oauth_client_id = text(f.client_id);
  if (f.o_client_secret->count()) p.oauth_client_secret = text(f.client_secret);
  if (f.o_client_secret_file->count()) p.oauth_client_secret = read_secret_file(f.client_secret_file, "--oauth-client-secret-file");
  if (f.o_scope->count()) p.oauth_scope = text(f.scope);
  if (f.o_proxy->count()) p.proxy = text(f.proxy);
  if (f.o_filter->count()) p.filter = text(f.filter);
  if (f.o_max_rate->count()) p.max_rate = text(f.max_rate);
  if (f.o_rate_burst->count()) {
    if (f.rate_burst == "none") {
      p.rate_burst = std::optional<int>();
    } else {
      std::size_t used = 0;
      int n = 0;
      try {
        n = std::stoi(f.rate_burst, &used);
      } catch (const std::logic_error&) {
        used = 0;
      }
      if (used == 0 || used != f.rate_burst.size()) throw cli_error("--rate-burst must be a number (or none, on update)");
      p.rate_burst = std::optional<int>(n);
    }
  }
  return p;
}

struct add_args {
  std::string database_url;
  std::string tenant;
  bool operator_endpoint = false;  ///< --operator: meant for the operator tenant
  std::string url;
  std::string secret;       ///< empty: generate one
  std::string secret_file;  ///< --secret-file: read it from there ("-": stdin)
  int max_concurrency = 4;
  std::vector<std::string> event_types;  ///< empty: all types
  std::string ordering = "none";
  std::string description;
  long long contact_endpoint_id = 0;  ///< where notifications about it go, if `contact` was given
  CLI::Option* contact = nullptr;
  policy_flags policy;
};

/// The tenant of a new endpoint. The operator tenant's default name is reserved: its endpoints
/// receive walhook's notifications about every tenant's endpoints (URLs, errors), so a customer
/// whose tenant id happens to be that name must not get them by accident — it takes --operator
/// to mean it. --operator alone is that tenant; with --tenant, a tenant `walhook run
/// --operator-tenant` names.
std::string tenant_of(const add_args& a) {
  if (a.tenant.empty() && !a.operator_endpoint)
    throw cli_error("--tenant is required (or --operator, for an endpoint of the operator tenant that receives "
                    "walhook's notifications)");
  if (a.tenant.empty()) return std::string(default_operator_tenant);
  // An inbox source's tenant: its endpoints are the operator's handlers, exempt from the SSRF
  // guard's private-network rule (relay/core/rows.hpp, is_inbox_tenant). Only `walhook inbox
  // source` makes them.
  if (a.tenant.size() >= 6 && std::equal(a.tenant.begin(), a.tenant.begin() + 6, "inbox:",
                                         [](char x, char y) { return std::tolower(static_cast<unsigned char>(x)) == y; }))
    throw cli_error(fmt::format("tenant '{}' is an inbox source's: its destinations are managed with `walhook inbox "
                                "source add|update --destination URL`",
                                a.tenant));
  if (a.tenant == default_operator_tenant && !a.operator_endpoint)
    throw cli_error(fmt::format("tenant '{}' is reserved for walhook's operator notifications (about every tenant's "
                                "endpoints): give --operator to add an operator endpoint, or choose another tenant",
                                default_operator_tenant));
  return a.tenant;
}

/// Prints "id: N" and "secret: whsec_…".
int add(const add_args& a) {
  operations::new_endpoint e;
  e.tenant = tenant_of(a);
  e.url = a.url;
  e.max_concurrency = a.max_concurrency;
  e.event_types = a.event_types;
  e.ordering = a.ordering;
  e.description = a.description;
  if (a.contact->count()) e.contact_endpoint_id = a.contact_endpoint_id;
  operations::check_url(e.url);  // before a secret file is read
  e.secret = !a.secret_file.empty() ? read_secret_file(a.secret_file) : a.secret;
  e.policies = policies_of(a.policy);
  operations::check_new_endpoint(e);  // before the database is reached
  blocking_db db(a.database_url);
  operations::require_schema(db);
  const auto added = operations::add_endpoint(db, e);
  std::cout << "id: " << added.id << "\nsecret: " << shown_secret(added.secret, a.secret_file) << "\n";
  return 0;
}

command add_add(CLI::App* endpoint) {
  auto a = std::make_shared<add_args>();
  auto* c = endpoint->add_subcommand("add", "Add an endpoint; prints its id and signing secret");
  add_database_url(c, a->database_url);
  c->add_option("--tenant", a->tenant, "Tenant whose events go to this endpoint (required, unless --operator)");
  c->add_flag("--operator", a->operator_endpoint,
              "An endpoint of the operator tenant (walhook-operator, or --tenant NAME as walhook run "
              "--operator-tenant names it): it receives walhook's notifications about every tenant's endpoints");
  c->add_option("--url", a->url, url_help)->required();
  add_secret_flags(c, a->secret, a->secret_file, "whsec_… signing secret (default: generated)");
  c->add_option("--max-concurrency", a->max_concurrency, "Attempts in flight to this endpoint at most")->capture_default_str();
  c->add_option("--event-types", a->event_types,
                "Only these event types: comma-separated, exact match of event_type (no wildcards); default all")
      ->delimiter(',');
  c->add_option("--ordering", a->ordering, "none, or aggregate: one delivery in flight per aggregate_id")
      ->check(CLI::IsMember({"none", "aggregate"}))
      ->capture_default_str();
  c->add_option("--description", a->description, "Free text for operators");
  a->contact = c->add_option("--contact-endpoint", a->contact_endpoint_id,
                             "Endpoint that receives the walhook.endpoint.* notifications about this one");
  add_policy_flags(c, a->policy, false);
  return {c, [a] { return add(*a); }};
}

// --------------------------------------------------------------------------------------- list

command add_list(CLI::App* endpoint) {
  struct state {
    std::string database_url;
    std::string tenant;
  };
  auto s = std::make_shared<state>();
  auto* c = endpoint->add_subcommand("list", "List endpoints");
  add_database_url(c, s->database_url);
  c->add_option("--tenant", s->tenant, "Only this tenant");
  return {c, [s] {
            blocking_db db(s->database_url);
            operations::require_schema(db);
            auto r = db.exec(
                "SELECT id, tenant_id, status, max_concurrency, ordering, coalesce(array_to_string(event_types, ','), "
                "'*'), url FROM walhook.endpoints WHERE $1::text IS NULL OR tenant_id = $1 ORDER BY id",
                pg::params{text_or_null(s->tenant)});
            const auto line = [](const auto&... v) {
              return fmt::format("{:>6}  {:<16} {:<9} {:>4}  {:<9} {:<24} {}\n", v...);
            };
            std::cout << line("id", "tenant", "status", "conc", "ordering", "event types", "url");
            for (int i = 0; i < r.rows(); ++i)
              std::cout << line(r.value(i, 0), r.value(i, 1), r.value(i, 2), r.value(i, 3), r.value(i, 4), r.value(i, 5),
                                delivery::redact_url(r.value(i, 6)));
            return 0;
          }};
}

// ------------------------------------------------------------- enable, disable, pause, resume

/// A verb on one endpoint, given by its id: --database-url and the positional id.
struct one_endpoint {
  std::string database_url;
  long long id = 0;
};

CLI::App* add_one_endpoint_verb(CLI::App* endpoint, const char* verb, const char* help, one_endpoint& e) {
  auto* c = endpoint->add_subcommand(verb, help);
  add_database_url(c, e.database_url);
  c->add_option("id", e.id, "Endpoint id")->required();
  return c;
}

/// action: enable | disable | pause | resume (operations::set_status); prints what changed.
command add_set_status(CLI::App* endpoint, const char* action, const char* help) {
  auto e = std::make_shared<one_endpoint>();
  auto* c = add_one_endpoint_verb(endpoint, action, help, *e);
  return {c, [e, action = std::string(action)] {
            blocking_db db(e->database_url);
            operations::require_schema(db);
            print_change(operations::set_status(db, e->id, action));
            return 0;
          }};
}

// ------------------------------------------------------------------------------------- remove

/// Removes an endpoint. With open deliveries and without --force: asks on a terminal (stdin),
/// and refuses (cli_error naming --force) when stdin is not one.
int remove(const one_endpoint& e, bool force) {
  blocking_db db(e.database_url);
  operations::require_schema(db);
  if (const auto pending = force ? 0 : operations::open_deliveries(db, e.id); pending > 0) {
    const std::string question = fmt::format("endpoint {} has {} pending deliver{}; removing it ends {}.", e.id, pending,
                                             pending == 1 ? "y" : "ies", pending == 1 ? "it" : "them");
    if (!::isatty(STDIN_FILENO)) throw cli_error(question + " Not removed: confirm on a terminal, or give --force");
    std::cerr << question << " Remove it? [y/N] " << std::flush;
    std::string answer;
    std::getline(std::cin, answer);
    if (answer != "y" && answer != "Y" && answer != "yes") {
      std::cerr << "not removed\n";
      return 1;
    }
  }
  auto c = operations::remove(db, e.id);
  print_change(c, "open delivery ended dead", "open deliveries ended dead");
  return 0;
}

command add_remove(CLI::App* endpoint) {
  struct state {
    one_endpoint e;
    bool force = false;
  };
  auto s = std::make_shared<state>();
  auto* c = add_one_endpoint_verb(endpoint, "remove",
                                  "Remove an endpoint; its pending deliveries end dead (asks first if there are any; "
                                  "--force does not ask)",
                                  s->e);
  c->add_flag("--force", s->force, "Remove without asking, even with pending deliveries");
  return {c, [s] { return remove(s->e, s->force); }};
}

// ------------------------------------------------------------------------------------- update

struct update_args {
  one_endpoint e;
  std::string url, description, contact;
  std::vector<std::string> types;
  int concurrency = 0;
  CLI::Option *o_url = nullptr, *o_types = nullptr, *o_concurrency = nullptr, *o_description = nullptr,
              *o_contact = nullptr;
  policy_flags policy;
};

/// --contact-endpoint ID or none.
std::optional<std::int64_t> contact_flag(const std::string& text) {
  if (text == "none") return std::nullopt;
  try {
    std::size_t used = 0;
    const auto id = std::stoll(text, &used);
    if (used != text.size()) throw std::invalid_argument("trailing");
    return id;
  } catch (const std::logic_error&) {
    throw cli_error("--contact-endpoint must be an endpoint id or none");
  }
}

/// Changes the given columns (operations::update); walhook run follows through the stream.
int update(const update_args& a) {
  operations::endpoint_update u;
  if (a.o_url->count()) u.url = a.url;
  if (a.o_types->count()) {
    const bool all = std::all_of(a.types.begin(), a.types.end(), [](const auto& t) { return t.empty(); });
    u.event_types = all ? std::vector<std::string>{} : a.types;  // --event-types "": all types
  }
  if (a.o_concurrency->count()) u.max_concurrency = a.concurrency;
  if (a.o_description->count()) u.description = a.description;
  if (a.o_contact->count()) u.contact_endpoint_id = contact_flag(a.contact);
  u.policies = policies_of(a.policy);
  blocking_db db(a.e.database_url);
  operations::require_schema(db);
  print_change(operations::update(db, a.e.id, u));
  return 0;
}

command add_update(CLI::App* endpoint) {
  auto a = std::make_shared<update_args>();
  auto* c = add_one_endpoint_verb(endpoint, "update",
                                  "Change an endpoint's URL, event types, concurrency, description, contact endpoint, "
                                  "headers, filter or rate limit (walhook run follows at once)",
                                  a->e);
  a->o_url = c->add_option("--url", a->url, url_help);
  a->o_types = c->add_option("--event-types", a->types,
                             "Only these event types: comma-separated, exact match of event_type (no wildcards); \"\" "
                             "for all")
                   ->delimiter(',');
  a->o_concurrency = c->add_option("--max-concurrency", a->concurrency, "Attempts in flight to this endpoint at most");
  a->o_description = c->add_option("--description", a->description, "Free text for operators");
  a->o_contact =
      c->add_option("--contact-endpoint", a->contact, "Endpoint that receives the notifications about this one, or none");
  add_policy_flags(c, a->policy, true);
  return {c, [a] { return update(*a); }};
}

// ------------------------------------------------------------------------------ rotate-secret

/// New secret first, the old ones valid for --grace; prints the new secret and when the old
/// ones stop being valid.
command add_rotate_secret(CLI::App* endpoint) {
  struct state {
    one_endpoint e;
    std::string grace = "24h";
    std::string secret;
    std::string secret_file;
  };
  auto s = std::make_shared<state>();
  auto* c = add_one_endpoint_verb(endpoint, "rotate-secret",
                                  "New signing secret; the old one stays valid (deliveries carry both signatures) for "
                                  "--grace, then walhook run signs with the new one alone and drops it",
                                  s->e);
  c->add_option("--grace", s->grace, "How long the old secret stays valid (e.g. 24h, 90m, 7d; 0: not at all)")
      ->capture_default_str();
  add_secret_flags(c, s->secret, s->secret_file, "The new whsec_… secret (default: generated)");
  return {c, [s] {
            const auto grace = parse_duration(s->grace, "--grace");
            const std::string secret = s->secret_file.empty() ? s->secret : read_secret_file(s->secret_file);
            blocking_db db(s->e.database_url);
            operations::require_schema(db);
            auto r = operations::rotate_secret(db, s->e.id, grace, secret);
            std::cout << "secret: " << shown_secret(r.secret, s->secret_file) << "\n";
            if (r.grace_until.empty())
              std::cout << fmt::format("endpoint {}: the old secret(s) are gone; deliveries are signed with the new "
                                       "secret alone from now on\n",
                                       s->e.id);
            else
              std::cout << fmt::format("endpoint {}: deliveries are signed with the new secret and the old one(s) "
                                       "until {}, then with the new one alone (walhook run drops the old ones)\n",
                                       s->e.id, r.grace_until);
            return 0;
          }};
}

}  // namespace

command add_endpoint(CLI::App& app) {
  auto* c = app.add_subcommand("endpoint", "Manage customer endpoints");
  c->require_subcommand(1);
  std::vector<command> verbs{add_add(c), add_list(c)};
  for (auto [action, help] : {std::pair{"enable", "Enable an endpoint (closes its circuit breaker; pending deliveries due now)"},
                              std::pair{"disable", "Disable an endpoint (its deliveries wait, pending)"},
                              std::pair{"pause", "Pause an endpoint (its deliveries wait, pending)"},
                              std::pair{"resume", "Resume an endpoint: closes its circuit breaker and retries its pending "
                                                  "deliveries now (\"retry pending now\")"}})
    verbs.push_back(add_set_status(c, action, help));
  verbs.push_back(add_remove(c));
  verbs.push_back(add_update(c));
  verbs.push_back(add_rotate_secret(c));
  return {c, [verbs] {
            for (const auto& v : verbs)
              if (v.app->parsed()) return v.run();
            return 0;
          }};
}

}  // namespace walhook::relay::cli
