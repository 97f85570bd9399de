// W3C Trace Context's traceparent (delivery/trace_context.hpp): the specification's example,
// what it says must not be propagated, and walhook's child.

#include "delivery/trace_context.hpp"

#include <doctest/doctest.h>

using namespace walhook::delivery;

TEST_CASE("traceparent: the specification's example parses; its child keeps the trace and the flags") {
  auto p = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  REQUIRE(p.has_value());
  CHECK(p->trace_id == "4bf92f3577b34da6a3ce929d0e0e4736");
  CHECK(p->parent_id == "00f067aa0ba902b7");
  CHECK(p->flags == "01");
  CHECK(child_traceparent(*p, 0xabcdefULL) == "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000abcdef-01");
  CHECK(child_traceparent(*p, 0) == "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000001-01");
  // A later version: its first fields are read, what follows a '-' ignored.
  CHECK(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra").has_value());
}

TEST_CASE("traceparent: values the specification says not to propagate") {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",         // short
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",      // version 00 with more
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        // version ff
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",        // uppercase
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",        // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",        // zero parent id
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        // separator
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",        // not hex
           "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",       // a later version, no '-'
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX: y",  // injection
       }) {
    INFO(bad);
    CHECK_FALSE(parse_traceparent(bad).has_value());
  }
}
