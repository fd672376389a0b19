#pragma once
// A failure of the run over ranks, one line naming the rank ("rank 1: ..."), on every rank.
#include "core/base/Error.h"

namespace splitseg::ranks {

class RankError : public Error {
public:
  using Error::Error;
};

} // namespace splitseg::ranks
