#pragma once
// Undoable move of one or several stages to a device (one QUndoStack entry per drop).
#include "core/placement/Placement.h"

#include <QUndoCommand>

namespace splitseg::ui {

class Session;

class MoveStagesCommand : public QUndoCommand {
public:
  MoveStagesCommand(Session* session, const placement::Placement& before, const placement::Placement& after,
                    const QString& text);
  void redo() override;
  void undo() override;

  // The placement with `stages` moved to `device`.
  static placement::Placement moved(const placement::Placement& p, const QStringList& stages, const std::string& device);

private:
  Session* session_;
  placement::Placement before_, after_;
};

} // namespace splitseg::ui
