#include "api/cli/parse.h"

#include <charconv>
#include <sstream>

#include "core/status.h"

namespace deepinfer::cli {

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int32_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    DI_CHECK(!item.empty() && ec == std::errc() && p == item.data() + item.size() && v >= 0,
             ErrorCode::kInvalidArgument, "{}: '{}' is not a non-negative token id", flag, item);
    ids.push_back(v);
    pos = comma + 1;
  }
  DI_CHECK(!ids.empty(), ErrorCode::kInvalidArgument, "{} is empty", flag);
  return ids;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

}  // namespace deepinfer::cli
