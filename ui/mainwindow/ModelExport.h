#pragma once
// File > Export model: the session's network as TorchScript plus the preprocessing JSON the
// workstation trained it with, for torch.jit.load in Python or torch::jit::load in C++ (the
// same exporter as `splitseg-cli export`).
#include <QString>

namespace splitseg::ui {

class Session;

struct ModelExportResult {
  bool ok = false;
  QString message;  // one line for the status bar: what was written, or why nothing was
};

// Refuses while a run uses the network. On failure nothing is left at `path`.
ModelExportResult exportSessionModel(Session& session, const QString& path);

} // namespace splitseg::ui
