#include "core/shard/ShardComm.h"

namespace splitseg::shard {

namespace {
thread_local ShardComm* tCurrent = nullptr;
} // namespace

ShardComm* current() { return tCurrent; }

ShardScope::ShardScope(ShardComm* comm) : previous_(tCurrent) { tCurrent = comm; }
ShardScope::~ShardScope() { tCurrent = previous_; }

} // namespace splitseg::shard
