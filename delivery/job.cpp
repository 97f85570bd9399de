#include "delivery/job.hpp"

#include "common/log.hpp"

namespace walhook::delivery {

std::string make_body(const event& ev) {
  std::string body;
  body.reserve(ev.payload.size() + ev.type.size() + ev.id.size() + 96);
  body += "{\"id\":\"";
  log::append_json_escaped(body, ev.id);
  body += "\",\"type\":\"";
  log::append_json_escaped(body, ev.type);
  body += "\",\"timestamp\":\"";
  log::append_json_escaped(body, ev.created_at);
  body += "\",\"data\":";
  body += ev.payload;
  body += '}';
  return body;
}

std::shared_ptr<const event> event_budget::track(event ev) {
  const std::size_t size = ev.body.size() + ev.payload.size() + sizeof(event);
  *bytes_ += size;
  return std::shared_ptr<const event>(new event(std::move(ev)), [count = bytes_, size](const event* e) {
    *count -= size;
    delete e;
  });
}

}  // namespace walhook::delivery
