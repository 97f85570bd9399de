// docs/tenant-api.openapi.json describes exactly the routes relay/tenant/router.hpp serves: the
// same (method, path) pairs, each with an operationId and the answers every route can give.

#include "relay/tenant/router.hpp"

#include <doctest/doctest.h>
#include <simdjson.h>

#include <cctype>
#include <set>
#include <string>

using namespace walhook::relay::tenant;

TEST_CASE("the OpenAPI description and the router's table name the same routes") {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string file = std::string(WALHOOK_SOURCE_DIR) + "/docs/tenant-api.openapi.json";
  REQUIRE_MESSAGE(!parser.load(file).get(doc), "cannot read or parse ", file);
  CHECK(std::string_view(doc["openapi"]).starts_with("3."));
  std::set<std::pair<std::string, std::string>> described, served;
  for (auto [path, ops] : simdjson::dom::object(doc["paths"])) {
    for (auto [method, op] : simdjson::dom::object(ops)) {
      if (method == "parameters" || method == "summary" || method == "description") continue;
      std::string m(method);
      for (auto& ch : m) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      described.emplace(m, std::string(path));
      INFO(m << " " << path);
      CHECK(op["operationId"].is_string());
      CHECK(op["responses"]["401"].error() == simdjson::SUCCESS);
      CHECK(op["responses"]["429"].error() == simdjson::SUCCESS);
    }
  }
  for (const auto& spec : routes()) served.emplace(std::string(spec.method), std::string(spec.path));
  CHECK(described == served);
}
