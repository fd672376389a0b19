#pragma once
// "Add host…" in the placement toolbar: a rank process on this machine (one per device it has),
// or a `splitseg-cli worker` on another machine that joins this workstation's rendezvous. Each
// adds its device as a column "r<rank>:<device>" (Session::addRank).
#include <QToolButton>

namespace splitseg::ui {

class Session;

class AddHostButton : public QToolButton {
  Q_OBJECT
public:
  explicit AddHostButton(Session* session, QWidget* parent = nullptr);


private:
  void fillMenu();
  void askRemote();

  Session* session_;
};

} // namespace splitseg::ui
