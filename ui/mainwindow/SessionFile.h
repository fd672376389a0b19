#pragma once
// File > Save/Open Session: the window's state <-> a .splitseg file (core/session), so the
// GUI and the CLI (--session) share one format.
#include "core/session/Session.h"
#include "ui/mainwindow/MainWindow.h"

#include <QString>
#include <QStringList>

namespace splitseg::ui {

// What the window holds now, as a session (image and label paths, dataset, network,
// placement, run settings).
session::Session captureSession(const MainWindow& window);
// Applies a loaded session to the window. Missing files and entries that no longer fit (a
// placement naming an absent device) become warnings; everything else is applied. `mode`: how
// the image and label are read (MainWindow::Loading; in the background a read that fails is
// reported in the status bar when it ends, not among the warnings).
QStringList applySession(MainWindow& window, const session::LoadResult& loaded, MainWindow::Loading mode);

} // namespace splitseg::ui
