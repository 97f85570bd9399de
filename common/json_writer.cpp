#include "common/json_writer.hpp"

#include <fmt/format.h>

namespace walhook {

json_writer& json_writer::number(double v) {
  sep();
  out_ += fmt::format("{}", v);
  return *this;
}

}  // namespace walhook
