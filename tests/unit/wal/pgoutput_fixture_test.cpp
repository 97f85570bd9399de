// Decodes messages captured from a real PostgreSQL 15 (tests/fixtures/pgoutput/capture.sh) and
// checks their fields against the SQL that produced them. Server-assigned values (OIDs, xids,
// LSNs, commit times) are checked by their relations: a row's relation OID is the preceding
// Relation's, Begin's final_lsn is Commit's commit_lsn, and so on.

#include "wal/pgoutput.hpp"

#include "tests/unit/wal/wal_test_support.hpp"
#include "wal/relation_cache.hpp"

#include <doctest/doctest.h>

#include <chrono>

namespace pg = walhook::wal::pgoutput;
using walhook::lsn;
using walhook::wal::test::decode_ok;
using walhook::wal::test::fixture_message;
using walhook::wal::test::load_fixture;

namespace {

// Built-in type OIDs (src/include/catalog/pg_type.dat); stable across PostgreSQL versions.
constexpr std::uint32_t bool_oid = 16;
constexpr std::uint32_t int4_oid = 23;
constexpr std::uint32_t text_oid = 25;
constexpr std::uint32_t float8_oid = 701;
constexpr std::uint32_t varchar_oid = 1043;
constexpr std::uint32_t numeric_oid = 1700;

// atttypmod encodings: varchar(n) is n + VARHDRSZ; numeric(p, s) is ((p << 16) | s) + VARHDRSZ.
constexpr std::int32_t varhdrsz = 4;
constexpr std::int32_t varchar_typmod(std::int32_t n) { return n + varhdrsz; }
constexpr std::int32_t numeric_typmod(std::int32_t p, std::int32_t s) { return ((p << 16) | s) + varhdrsz; }

pg::tuple_value t(std::string s) { return {pg::value_kind::text, std::move(s)}; }
pg::tuple_value b(std::string s) { return {pg::value_kind::binary, std::move(s)}; }
const pg::tuple_value n{pg::value_kind::null, {}};
const pg::tuple_value u{pg::value_kind::unchanged_toast, {}};

template <class T>
T as(const fixture_message& m) {
  auto decoded = decode_ok(m.data);
  INFO("fixture message: ", m.name);
  REQUIRE(std::holds_alternative<T>(decoded));
  return std::get<T>(decoded);
}

std::vector<std::string> column_names(const pg::relation& r) {
  std::vector<std::string> names;
  for (const auto& c : r.columns) names.push_back(c.name);
  return names;
}

// µs between 2000-01-01 00:00 UTC (the PostgreSQL epoch) and a UTC date and time.
std::int64_t pg_epoch_us(std::chrono::sys_days day, std::chrono::microseconds time_of_day) {
  using namespace std::chrono;
  constexpr sys_days pg_epoch = year{2000} / January / 1;
  return duration_cast<microseconds>(day - pg_epoch).count() + time_of_day.count();
}

// A commit time the capture could have produced: after 2024-01-01, before 2100.
bool plausible_commit_time(std::int64_t us) {
  using namespace std::chrono;
  return us > pg_epoch_us(year{2024} / January / 1, {}) && us < pg_epoch_us(year{2100} / January / 1, {});
}

// Checks the framing every transaction in a fixture must have: Begin ... Commit with
// final_lsn == commit_lsn, the same commit time, Begin recorded at the first change's LSN.
void check_transaction(const std::vector<fixture_message>& msgs, std::size_t begin_at, std::size_t commit_at) {
  auto bg = as<pg::begin>(msgs[begin_at]);
  auto cm = as<pg::commit>(msgs[commit_at]);
  CHECK(bg.final_lsn.valid());
  CHECK(bg.final_lsn == cm.commit_lsn);
  CHECK(cm.commit_lsn < cm.end_lsn);
  CHECK(bg.commit_time_us == cm.commit_time_us);
  CHECK(bg.xid != 0);
  CHECK(cm.flags == 0);
  // The SQL interface reports a commit at the end of its record: the LSN walhook acknowledges.
  CHECK(msgs[commit_at].row_lsn == cm.end_lsn);
  // PG15 sends Begin lazily, with the first change, so it carries that change's LSN.
  CHECK(msgs[begin_at].row_lsn == msgs[begin_at + 1].row_lsn);
  for (std::size_t i = begin_at; i <= commit_at; ++i) CHECK(msgs[i].row_lsn <= cm.end_lsn);
}

}  // namespace

TEST_CASE("fixture basic.txt: insert, update, delete with REPLICA IDENTITY DEFAULT") {
  auto msgs = load_fixture("basic.txt");
  REQUIRE(msgs.size() == 7);
  check_transaction(msgs, 0, 6);
  CHECK(plausible_commit_time(as<pg::begin>(msgs[0]).commit_time_us));

  auto rel = as<pg::relation>(msgs[1]);
  CHECK(rel.schema == "public");
  CHECK(rel.name == "items");
  CHECK(rel.replica_identity == 'd');
  REQUIRE(rel.columns.size() == 5);
  CHECK(rel.columns[0] == pg::column{1, "id", int4_oid, -1});
  CHECK(rel.columns[1] == pg::column{0, "name", text_oid, -1});
  CHECK(rel.columns[2] == pg::column{0, "note", text_oid, -1});
  CHECK(rel.columns[3] == pg::column{0, "price", numeric_oid, numeric_typmod(10, 2)});
  CHECK(rel.columns[4] == pg::column{0, "code", varchar_oid, varchar_typmod(20)});
  CHECK(rel.columns[0].is_key());
  CHECK_FALSE(rel.columns[1].is_key());
  CHECK(rel.oid >= 16384);  // FirstNormalObjectId: a user table

  auto ins1 = as<pg::insert>(msgs[2]);
  CHECK(ins1.relation_oid == rel.oid);
  CHECK(ins1.new_tuple == pg::tuple{t("1"), t("widget"), n, t("9.99"), t("W-1")});
  auto ins2 = as<pg::insert>(msgs[3]);
  CHECK(ins2.relation_oid == rel.oid);
  CHECK(ins2.new_tuple == pg::tuple{t("2"), t("gadget"), t("fragile"), t("20.00"), t("G-2")});

  // The key did not change: no old key is sent, only the new row.
  auto upd = as<pg::update>(msgs[4]);
  CHECK(upd.relation_oid == rel.oid);
  CHECK_FALSE(upd.key_tuple.has_value());
  CHECK_FALSE(upd.old_tuple.has_value());
  CHECK(upd.new_tuple == pg::tuple{t("1"), t("widget"), n, t("10.49"), t("W-1")});

  // A delete sends the replica identity key; the other columns arrive as NULLs.
  auto del = as<pg::delete_>(msgs[5]);
  CHECK(del.relation_oid == rel.oid);
  REQUIRE(del.key_tuple.has_value());
  CHECK_FALSE(del.old_tuple.has_value());
  CHECK(*del.key_tuple == pg::tuple{t("2"), n, n, n, n});

  // Rows follow WAL order.
  CHECK(msgs[2].row_lsn < msgs[3].row_lsn);
  CHECK(msgs[3].row_lsn < msgs[4].row_lsn);
  CHECK(msgs[4].row_lsn < msgs[5].row_lsn);
  CHECK(msgs[5].row_lsn < as<pg::commit>(msgs[6]).commit_lsn);
}

TEST_CASE("fixture update_key.txt: an update that changes the primary key sends the old key") {
  auto msgs = load_fixture("update_key.txt");
  REQUIRE(msgs.size() == 4);
  check_transaction(msgs, 0, 3);
  auto rel = as<pg::relation>(msgs[1]);
  CHECK(rel.name == "items");
  auto upd = as<pg::update>(msgs[2]);
  CHECK(upd.relation_oid == rel.oid);
  REQUIRE(upd.key_tuple.has_value());
  CHECK_FALSE(upd.old_tuple.has_value());
  CHECK(*upd.key_tuple == pg::tuple{t("1"), n, n, n, n});
  CHECK(upd.new_tuple == pg::tuple{t("100"), t("widget"), n, t("10.49"), t("W-1")});
}

TEST_CASE("fixture replica_full.txt: REPLICA IDENTITY FULL sends whole old rows") {
  auto msgs = load_fixture("replica_full.txt");
  REQUIRE(msgs.size() == 6);
  check_transaction(msgs, 0, 5);
  auto rel = as<pg::relation>(msgs[1]);
  CHECK(rel.schema == "public");
  CHECK(rel.name == "audit_log");
  CHECK(rel.replica_identity == 'f');
  CHECK(column_names(rel) == std::vector<std::string>{"id", "actor", "action"});
  for (const auto& c : rel.columns) CHECK(c.is_key());  // FULL: every column is part of the identity

  CHECK(as<pg::insert>(msgs[2]).new_tuple == pg::tuple{t("1"), t("alice"), t("login")});
  auto upd = as<pg::update>(msgs[3]);
  CHECK(upd.relation_oid == rel.oid);
  CHECK_FALSE(upd.key_tuple.has_value());
  REQUIRE(upd.old_tuple.has_value());
  CHECK(*upd.old_tuple == pg::tuple{t("1"), t("alice"), t("login")});
  CHECK(upd.new_tuple == pg::tuple{t("1"), t("alice"), t("logout")});
  auto del = as<pg::delete_>(msgs[4]);
  CHECK_FALSE(del.key_tuple.has_value());
  REQUIRE(del.old_tuple.has_value());
  CHECK(*del.old_tuple == pg::tuple{t("1"), t("alice"), t("logout")});
}

TEST_CASE("fixture unchanged_toast.txt: an untouched TOASTed column is sent as 'u'") {
  auto msgs = load_fixture("unchanged_toast.txt");
  REQUIRE(msgs.size() == 4);
  check_transaction(msgs, 0, 3);
  auto rel = as<pg::relation>(msgs[1]);
  CHECK(rel.name == "documents");
  CHECK(column_names(rel) == std::vector<std::string>{"id", "title", "body"});
  auto upd = as<pg::update>(msgs[2]);
  CHECK(upd.relation_oid == rel.oid);
  CHECK_FALSE(upd.key_tuple.has_value());
  CHECK_FALSE(upd.old_tuple.has_value());
  CHECK(upd.new_tuple == pg::tuple{t("1"), t("final"), u});
  CHECK(upd.new_tuple[2].data.empty());
}

TEST_CASE("fixture truncate.txt: TRUNCATE with RESTART IDENTITY CASCADE, then a plain one") {
  auto msgs = load_fixture("truncate.txt");
  REQUIRE(msgs.size() == 9);
  check_transaction(msgs, 0, 4);
  check_transaction(msgs, 5, 8);

  auto customers = as<pg::relation>(msgs[1]);
  auto invoices = as<pg::relation>(msgs[2]);
  CHECK(customers.name == "customers");
  CHECK(column_names(customers) == std::vector<std::string>{"id", "name"});
  CHECK(invoices.name == "invoices");
  CHECK(column_names(invoices) == std::vector<std::string>{"id", "customer_id", "total"});
  CHECK(invoices.columns[2] == pg::column{0, "total", numeric_oid, -1});  // numeric without typmod
  auto cascade = as<pg::truncate>(msgs[3]);
  CHECK(cascade.options == (1 | 2));  // CASCADE | RESTART IDENTITY
  CHECK(cascade.relation_oids == std::vector<std::uint32_t>{customers.oid, invoices.oid});

  auto documents = as<pg::relation>(msgs[6]);
  CHECK(documents.name == "documents");
  auto plain = as<pg::truncate>(msgs[7]);
  CHECK(plain.options == 0);
  CHECK(plain.relation_oids == std::vector<std::uint32_t>{documents.oid});

  CHECK(as<pg::commit>(msgs[4]).end_lsn < as<pg::begin>(msgs[5]).final_lsn);
}

TEST_CASE("fixture messages.txt: logical decoding messages, transactional and not") {
  auto msgs = load_fixture("messages.txt");
  REQUIRE(msgs.size() == 9);

  // Non-transactional: on its own, outside any Begin/Commit.
  auto loose = as<pg::logical_message>(msgs[0]);
  CHECK(loose.flags == 0);
  CHECK(loose.prefix == "walhook.test");
  CHECK(loose.content == "non-transactional hello");
  CHECK(loose.message_lsn == msgs[0].row_lsn);

  check_transaction(msgs, 1, 5);
  auto in_txn = as<pg::logical_message>(msgs[2]);
  CHECK(in_txn.flags == 1);
  CHECK(in_txn.prefix == "walhook.test");
  CHECK(in_txn.content == std::string("\0\xff" "A", 3));  // bytea content, NUL included
  CHECK(in_txn.message_lsn == msgs[2].row_lsn);
  CHECK(in_txn.message_lsn > loose.message_lsn);
  auto rel = as<pg::relation>(msgs[3]);
  CHECK(rel.name == "items");
  auto ins = as<pg::insert>(msgs[4]);
  CHECK(ins.relation_oid == rel.oid);
  CHECK(ins.new_tuple == pg::tuple{t("3"), t("gizmo"), n, t("1.00"), n});

  // A transaction whose only content is a transactional message still gets Begin and Commit.
  check_transaction(msgs, 6, 8);
  auto alone = as<pg::logical_message>(msgs[7]);
  CHECK(alone.flags == 1);
  CHECK(alone.prefix == "walhook.only");
  CHECK(alone.content == "alone");
}

TEST_CASE("fixture types.txt: Type messages for an enum and a domain precede the Relation") {
  auto msgs = load_fixture("types.txt");
  REQUIRE(msgs.size() == 6);
  check_transaction(msgs, 0, 5);

  auto enum_type = as<pg::type>(msgs[1]);
  CHECK(enum_type.schema == "shop");
  CHECK(enum_type.name == "order_status");
  // A domain is announced with its own OID but its base type's name, in pg_catalog ("").
  auto domain_type = as<pg::type>(msgs[2]);
  CHECK(domain_type.schema == "");
  CHECK(domain_type.name == "int4");
  CHECK(domain_type.oid != int4_oid);
  CHECK(domain_type.oid != enum_type.oid);

  auto rel = as<pg::relation>(msgs[3]);
  CHECK(rel.schema == "shop");
  CHECK(rel.name == "orders");
  REQUIRE(rel.columns.size() == 3);
  CHECK(rel.columns[0] == pg::column{1, "id", int4_oid, -1});
  CHECK(rel.columns[1] == pg::column{0, "status", enum_type.oid, -1});
  CHECK(rel.columns[2] == pg::column{0, "qty", domain_type.oid, -1});

  auto ins = as<pg::insert>(msgs[4]);
  CHECK(ins.relation_oid == rel.oid);
  CHECK(ins.new_tuple == pg::tuple{t("1"), t("paid"), t("3")});
}

TEST_CASE("fixture origin.txt: a transaction replayed under a replication origin") {
  auto msgs = load_fixture("origin.txt");
  REQUIRE(msgs.size() == 5);
  check_transaction(msgs, 0, 4);

  auto org = as<pg::origin>(msgs[1]);
  CHECK(org.name == "walhook_fixture_origin");
  CHECK(org.commit_lsn == *lsn::parse("0/ABCDEF0"));  // pg_replication_origin_xact_setup's LSN

  // The decoded commit time is the origin's timestamp, 2024-01-02 03:04:05.678901+00.
  using namespace std::chrono;
  auto origin_time = pg_epoch_us(year{2024} / January / 2, hours{3} + minutes{4} + seconds{5} + microseconds{678901});
  CHECK(origin_time == 757479845678901);
  CHECK(as<pg::begin>(msgs[0]).commit_time_us == origin_time);
  CHECK(as<pg::commit>(msgs[4]).commit_time_us == origin_time);

  auto rel = as<pg::relation>(msgs[2]);
  auto ins = as<pg::insert>(msgs[3]);
  CHECK(ins.relation_oid == rel.oid);
  CHECK(ins.new_tuple == pg::tuple{t("4"), t("replicated"), n, n, n});
}

TEST_CASE("fixture binary.txt: the binary option sends 'b' values in send format") {
  auto msgs = load_fixture("binary.txt");
  REQUIRE(msgs.size() == 4);
  check_transaction(msgs, 0, 3);
  auto rel = as<pg::relation>(msgs[1]);
  CHECK(rel.name == "measurements");
  REQUIRE(rel.columns.size() == 5);
  CHECK(rel.columns[0].type_oid == int4_oid);
  CHECK(rel.columns[1].type_oid == text_oid);
  CHECK(rel.columns[2].type_oid == bool_oid);
  CHECK(rel.columns[3].type_oid == float8_oid);
  CHECK(rel.columns[4].type_oid == text_oid);

  auto ins = as<pg::insert>(msgs[2]);
  CHECK(ins.relation_oid == rel.oid);
  // int4send: 4 bytes big-endian; textsend: raw bytes; boolsend: one byte; float8send: IEEE 754
  // big-endian (1.5 = 0x3FF8000000000000); NULL stays 'n'.
  CHECK(ins.new_tuple == pg::tuple{b(std::string("\0\0\0\1", 4)), b("probe"), b("\1"),
                                   b(std::string("\x3f\xf8\0\0\0\0\0\0", 8)), n});
}

TEST_CASE("every fixture decodes, follows WAL order and refers only to announced relations") {
  auto files = walhook::wal::test::fixture_files();
  CHECK(files.size() >= 9);
  for (const auto& file : files) {
    CAPTURE(file);
    auto msgs = load_fixture(file);
    CHECK_FALSE(msgs.empty());
    walhook::wal::relation_cache cache;  // one decoding session per fixture
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      CAPTURE(msgs[i].name);
      auto decoded = pg::decode(msgs[i].data);
      REQUIRE(decoded.has_value());
      // The comment written by capture.sh names the type by the same first byte.
      CHECK(msgs[i].name.find(std::string("(") + static_cast<char>(msgs[i].data[0]) + ")") != std::string::npos);
      CHECK(cache.observe(*decoded) == boost::system::error_code{});
      if (i > 0) CHECK(msgs[i - 1].row_lsn <= msgs[i].row_lsn);
    }
  }
}
