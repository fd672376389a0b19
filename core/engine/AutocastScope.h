#pragma once
// bf16 autocast for one stage on its device type; weights stay fp32 (master copy). Used by every
// code path that runs a stage (SplitExecutor in one process, the ranks' pipeline).
#include <ATen/autocast_mode.h>

namespace splitseg::engine {

class AutocastScope {
public:
  AutocastScope(bool enabled, c10::DeviceType type) : enabled_(enabled), type_(type) {
    if (!enabled_) return;
    previous_ = at::autocast::is_autocast_enabled(type_);
    previousType_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, previous_);
    at::autocast::set_autocast_dtype(type_, previousType_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

private:
  bool enabled_;
  c10::DeviceType type_;
  bool previous_ = false;
  at::ScalarType previousType_ = at::kBFloat16;
};

} // namespace splitseg::engine
