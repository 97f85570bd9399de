#include "common/json_writer.hpp"

#include <fmt/format.h>

#include <cmath>

namespace walhook {

json_writer& json_writer::number(double v) {
  // JSON has no NaN or infinity; fmt would write "nan"/"inf" and break the whole document.
  if (!std::isfinite(v)) return null();
  sep();
  out_ += fmt::format("{}", v);
  return *this;
}

}  // namespace walhook
