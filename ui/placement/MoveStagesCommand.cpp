#include "ui/placement/MoveStagesCommand.h"

#include "ui/session/Session.h"

#include <QStringList>

namespace splitseg::ui {

MoveStagesCommand::MoveStagesCommand(Session* session, const placement::Placement& before,
                                     const placement::Placement& after, const QString& text)
    : session_(session), before_(before), after_(after) {
  setText(text);
}

void MoveStagesCommand::redo() { session_->setPlacement(after_); }
void MoveStagesCommand::undo() { session_->setPlacement(before_); }

placement::Placement MoveStagesCommand::moved(const placement::Placement& p, const QStringList& stages,
                                              const std::string& device) {
  auto out = p;
  for (const auto& s : stages) out.assign(s.toStdString(), device);
  return out;
}

} // namespace splitseg::ui
