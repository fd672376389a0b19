#include "ui/mainwindow/MainWindow.h"
#include "ui/mainwindow/ModelExport.h"
#include "ui/mainwindow/SessionFile.h"

#include "core/base/Printable.h"
#include "core/base/Units.h"
#include "core/data/Phantom.h"
#include "ui/mainwindow/AsyncVolumeLoader.h"
#include "ui/mainwindow/DataPanel.h"
#include "ui/mainwindow/VolumeLoader.h"
#include "ui/placement/PlacementView.h"
#include "ui/review/ReviewPanel.h"
#include "ui/training/TrainingPanel.h"
#include "ui/render/SliceView.h"
#include "ui/render/ViewState.h"
#include "ui/render/VolumeView3d.h"
#include "ui/session/Session.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QUndoStack>

namespace splitseg::ui {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), session_(new Session(this)), viewState_(new ViewState(this)) {
  setWindowTitle(tr("SplitSeg"));
  // The seed network of the design (32 base channels, depth 5); the Training tab may change it.
  session_->createUNet(32, 5);
  setWindowIcon(QIcon(":/icons/splitseg.svg"));

  auto* centre = new QWidget(this);
  auto* grid = new QGridLayout(centre);
  grid->setContentsMargins(2, 2, 2, 2);
  grid->setSpacing(2);
  slices_[0] = new SliceView(SliceOrientation::Axial, viewState_, centre);
  slices_[1] = new SliceView(SliceOrientation::Coronal, viewState_, centre);
  slices_[2] = new SliceView(SliceOrientation::Sagittal, viewState_, centre);
  view3d_ = new VolumeView3d(centre);
  grid->addWidget(slices_[0], 0, 0);
  grid->addWidget(view3d_, 0, 1);
  grid->addWidget(slices_[1], 1, 0);
  grid->addWidget(slices_[2], 1, 1);
  for (auto* s : slices_) connect(s, &SliceView::hovered, this, [this](const QString& t) { hoverLabel_->setText(t); });

  data_ = new DataPanel(session_, viewState_, this);
  auto* dataDock = dataDock_ = new QDockWidget(tr("Data"), this);
  dataDock->setObjectName("dataDock");
  dataDock->setWidget(data_);
  dataDock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  addDockWidget(Qt::LeftDockWidgetArea, dataDock);

  tabs_ = new QTabWidget(this);
  placement_ = new PlacementView(session_, tabs_);
  tabs_->addTab(placement_, tr("Placement"));
  training_ = new TrainingPanel(session_, tabs_);
  tabs_->addTab(training_, tr("Training"));
  review_ = new ReviewPanel(session_, tabs_);
  tabs_->addTab(review_, tr("Review"));
  connect(review_, &ReviewPanel::overlayChanged, this, [this](std::shared_ptr<const Volume> labels, const LabelStyle& style) {
    for (auto* s : slices_) {
      if (labels) s->setOverlay(labels, style);
      else s->clearOverlay();
    }
  });
  connect(review_, &ReviewPanel::surfacesChanged, this, [this](std::shared_ptr<const Volume> labels, const LabelStyle& style) {
    if (labels) view3d_->setLabelSurfaces(labels, style);
    else view3d_->clearLabelSurfaces();
  });
  connect(review_, &ReviewPanel::saveRequested, this, &MainWindow::saveSegmentation);
  // Training on a dataset may end with its validation cases evaluated (the training panel's box).
  connect(training_, &TrainingPanel::runFinished, this, [this](bool stopped, const QString& error) {
    if (!stopped && error.isEmpty() && training_->evaluatesAfterwards()) review_->evaluateValidationCases();
  });
  connect(review_, &ReviewPanel::caseOpenRequested, this, [this](const QString& image, const QString& label, const QString& prediction) {
    openVolumeWithPrediction(image, label, prediction, Loading::Background);
  });
  auto* tabDock = tabDock_ = new QDockWidget(tr("Model"), this);
  tabDock->setObjectName("tabDock");
  tabDock->setWidget(tabs_);
  tabDock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  addDockWidget(Qt::RightDockWidgetArea, tabDock);
  setCentralWidget(centre);
  connect(tabs_, &QTabWidget::currentChanged, this, [this] { fitPlacementRoom(); });
  connect(session_, &Session::devicesChanged, this, [this] { fitPlacementRoom(); });

  devicesLabel_ = new QLabel(this);
  hoverLabel_ = new QLabel(this);
  // Busy indicator while a volume is read in the background (the message says which file).
  loadingBar_ = new QProgressBar(this);
  loadingBar_->setObjectName("loadingBar");
  loadingBar_->setRange(0, 0);
  loadingBar_->setTextVisible(false);
  loadingBar_->setMaximumWidth(160);
  loadingBar_->setMaximumHeight(14);
  loadingBar_->setToolTip(tr("Reading the volume; the window stays usable"));
  loadingBar_->hide();
  statusBar()->addPermanentWidget(loadingBar_);
  statusBar()->addPermanentWidget(hoverLabel_);
  statusBar()->addPermanentWidget(devicesLabel_);

  loader_ = new AsyncVolumeLoader(this);
  connect(loader_, &AsyncVolumeLoader::busyChanged, this, &MainWindow::setLoadingIndicator);
  connect(loader_, &AsyncVolumeLoader::finished, this, [this](const AsyncVolumeLoader::Outcome& o) {
    if (o.imagePath.isEmpty()) Q_EMIT volumeLoadFinished(o.labelPath, applyLabel(o.labelPath, o.label));
    else applyImage(o.imagePath, o.image, o.labelPath, o.label);
  });

  connect(data_, &DataPanel::openFileRequested, this, [this] { chooseAndOpen(false); });
  connect(data_, &DataPanel::openFolderRequested, this, [this] { chooseAndOpen(true); });
  connect(data_, &DataPanel::openDicomRequested, this, [this] { chooseAndOpen(true); });
  connect(data_, &DataPanel::openDatasetRequested, this, &MainWindow::chooseDataset);
  connect(data_, &DataPanel::loadLabelRequested, this, &MainWindow::chooseLabel);
  connect(data_, &DataPanel::recentFileActivated, this, [this](const QString& p) { openVolume(p, {}, Loading::Background); });
  connect(data_, &DataPanel::caseActivated, this, [this](int i) {
    if (i >= 0 && i < datasetCases_.size()) openVolume(datasetCases_[i], datasetLabels_.value(i), Loading::Background);
  });
  connect(data_, &DataPanel::volumePresetChosen, this, [this](int i) {
    const auto presets = TransferFunctionPreset::loadAll();
    if (i >= 0 && i < presets.size()) view3d_->setPreset(presets[i]);
  });
  connect(session_, &Session::imageChanged, this, &MainWindow::showVolume);
  connect(session_, &Session::devicesChanged, this, &MainWindow::updateDeviceSummary);
  connect(session_, &Session::message, this, [this](const QString& t) { showStatus(t); });

  buildMenus();
  updateDeviceSummary();

  QSettings settings;
  recent_ = settings.value("recentFiles").toStringList();
  data_->setRecentFiles(recent_);
  if (!restoreGeometry(settings.value("window/geometry").toByteArray())) resize(1400, 860);
  restoreState(settings.value("window/state").toByteArray());
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus() {
  auto* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open file…"), QKeySequence::Open, this, [this] { chooseAndOpen(false); });
  file->addAction(tr("Open &DICOM folder…"), QKeySequence(tr("Ctrl+Shift+O")), this, [this] { chooseAndOpen(true); });
  file->addAction(tr("Open data&set…"), QKeySequence(tr("Ctrl+D")), this, &MainWindow::chooseDataset);
  file->addAction(tr("Load &label…"), QKeySequence(tr("Ctrl+L")), this, &MainWindow::chooseLabel);
  file->addAction(tr("Open &phantom"), this, [this] { openPhantom(tr("Synthetic phantom opened")); });
  file->addSeparator();
  file->addAction(tr("&Save segmentation…"), QKeySequence::Save, this, &MainWindow::saveSegmentation);
  file->addSeparator();
  file->addAction(tr("Open sess&ion…"), QKeySequence(tr("Ctrl+Shift+S")), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open session"), QSettings().value("lastDir").toString(),
                                                      tr("SplitSeg sessions (*.splitseg);;All files (*)"));
    if (path.isEmpty()) return;
    const QStringList warnings = openSessionFile(path, Loading::Background);
    if (!warnings.isEmpty()) QMessageBox::warning(this, tr("Session opened with problems"), warnings.join("\n"));
  });
  file->addAction(tr("Save session &as…"), QKeySequence(tr("Ctrl+Alt+S")), this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Save session"), QSettings().value("lastDir").toString(),
                                                tr("SplitSeg sessions (*.splitseg)"));
    if (path.isEmpty()) return;
    if (!path.endsWith(".splitseg")) path += ".splitseg";
    saveSessionFile(path);
  });
  file->addSeparator();
  file->addAction(tr("&Export model (TorchScript)…"), QKeySequence(tr("Ctrl+E")), this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Export model"), QSettings().value("lastDir").toString(),
                                                tr("TorchScript (*.pt)"));
    if (path.isEmpty()) return;
    if (!path.endsWith(".pt")) path += ".pt";
    exportModel(path);
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  auto* edit = menuBar()->addMenu(tr("&Edit"));
  auto* undo = session_->undoStack()->createUndoAction(this, tr("&Undo"));
  undo->setShortcut(QKeySequence::Undo);
  auto* redo = session_->undoStack()->createRedoAction(this, tr("&Redo"));
  redo->setShortcut(QKeySequence::Redo);
  edit->addAction(undo);
  edit->addAction(redo);

  auto* view = menuBar()->addMenu(tr("&View"));
  int key = 1;
  for (const auto& p : ViewState::presets()) {
    const double w = p.window, l = p.level;
    view->addAction(tr("Window: %1").arg(p.name), QKeySequence(QString("Ctrl+%1").arg(key++)), this,
                    [this, w, l] { viewState_->setWindowLevel(w, l); });
  }
  view->addSeparator();
  view->addAction(tr("Reset 3D camera"), QKeySequence(tr("Ctrl+R")), this, [this] { view3d_->resetCamera(); });
  auto* show3d = view->addAction(tr("Show volume rendering"));
  show3d->setCheckable(true);
  show3d->setChecked(true);
  connect(show3d, &QAction::toggled, view3d_, &VolumeView3d::setVolumeVisible);

  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About SplitSeg"), this, [this] {
    QMessageBox::about(this, tr("About SplitSeg"),
                       tr("<b>SplitSeg</b> %1<br>3D segmentation with a U-Net split across devices.<br>"
                          "Slices: click = crosshair, wheel = scroll, right-drag = window/level.<br>"
                          "3D: left-drag rotate, middle-drag pan, wheel zoom.")
                           .arg(QApplication::applicationVersion()));
  });
}

void MainWindow::showStatus(const QString& text, bool error, int timeoutMs) {
  statusBar()->showMessage(text, error ? 0 : timeoutMs);
  if (error) statusBar()->setStyleSheet("QStatusBar { color: #e05050; }");
  else statusBar()->setStyleSheet({});
}

QString MainWindow::statusText() const { return statusBar()->currentMessage(); }

void MainWindow::chooseAndOpen(bool folder) {
  QSettings settings;
  const QString dir = settings.value("lastDir").toString();
  const QString path = folder ? QFileDialog::getExistingDirectory(this, tr("Open DICOM folder"), dir)
                              : QFileDialog::getOpenFileName(this, tr("Open volume"), dir,
                                                             tr("Volumes (*.nii *.nii.gz *.nrrd *.nhdr *.mha *.mhd *.inv3);;All files (*)"));
  if (path.isEmpty()) return;
  settings.setValue("lastDir", QFileInfo(path).absolutePath());
  openVolume(path, {}, Loading::Background);
}

void MainWindow::chooseLabel() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Load label"), QSettings().value("lastDir").toString(),
                                                    tr("Volumes (*.nii *.nii.gz *.nrrd *.nhdr *.mha *.mhd);;All files (*)"));
  if (!path.isEmpty()) loadLabel(path, Loading::Background);
}

void MainWindow::chooseDataset() {
  const QString path = QFileDialog::getExistingDirectory(this, tr("Open dataset folder"), QSettings().value("lastDir").toString());
  if (!path.isEmpty()) openDataset(path, Loading::Background);
}

bool MainWindow::saveSessionFile(const QString& path) {
  try {
    session::saveSession(captureSession(*this), path.toStdString());
  } catch (const std::exception& e) {
    showStatus(tr("Could not save session: %1").arg(e.what()), true);
    return false;
  }
  showStatus(tr("Session saved to %1").arg(path));
  return true;
}

bool MainWindow::exportModel(const QString& path) {
  const auto result = exportSessionModel(*session_, path);
  showStatus(result.message, !result.ok);
  return result.ok;
}

QStringList MainWindow::openSessionFile(const QString& path, Loading mode) {
  // A session replaces the network and the run: not while a training or inference run uses them.
  if (session_->busy()) {
    const QString why = tr("Cannot open a session while a run is busy: stop it or wait for it to finish");
    showStatus(why, true);
    return {why};
  }
  session::LoadResult loaded;
  try {
    loaded = session::loadSession(path.toStdString());
  } catch (const std::exception& e) {
    // splitseg::Error messages are already one escaped line; any other exception is made so too.
    const QString why = QString::fromStdString(printable(e.what()));
    showStatus(tr("Could not open session: %1").arg(why), true);
    return {tr("could not open session: %1").arg(why)};
  }
  const QStringList warnings = applySession(*this, loaded, mode);
  showStatus(warnings.isEmpty() ? tr("Session %1 opened").arg(QFileInfo(path).fileName())
                                : tr("Session %1 opened with %2 problem(s): %3")
                                      .arg(QFileInfo(path).fileName()).arg(warnings.size()).arg(warnings.front()),
             !warnings.isEmpty());
  return warnings;
}

bool MainWindow::isLoading() const { return loader_->busy(); }

void MainWindow::setLoadingIndicator(bool busy) {
  loadingBar_->setVisible(busy);
  if (busy) setCursor(Qt::BusyCursor);
  else unsetCursor();
}

bool MainWindow::openVolume(const QString& path, const QString& labelPath, Loading mode) {
  if (mode == Loading::Background) {
    loader_->start(path, labelPath);
    showStatus(tr("Loading %1…").arg(QFileInfo(path).fileName()), false, 0);  // no time-out while loading
    return true;
  }
  loader_->cancel();  // a background load would overwrite this one when it arrives
  QApplication::setOverrideCursor(Qt::WaitCursor);
  const auto image = VolumeLoader::load(path);
  const auto label = image.volume && !labelPath.isEmpty() ? VolumeLoader::load(labelPath) : VolumeLoader::Result{};
  QApplication::restoreOverrideCursor();
  return applyImage(path, image, labelPath, label);
}

bool MainWindow::applyImage(const QString& path, const VolumeLoader::Result& image,
                            const QString& labelPath, const VolumeLoader::Result& label) {
  if (!image.volume) {
    showStatus(tr("Could not open %1: %2").arg(path, image.error), true);
    Q_EMIT volumeLoadFinished(path, false);
    return false;
  }
  session_->setImage(image.volume, path);
  if (image.label && image.label->geometry().sameGrid(image.volume->geometry(), 1e-3))
    session_->setGroundTruth(image.label, path + tr(" (bone mask)"));
  addRecent(path);
  showStatus(tr("Opened %1").arg(QFileInfo(path).fileName()));
  if (!labelPath.isEmpty()) applyLabel(labelPath, label);
  if (pendingPrediction_.first == path) {
    // A label map the size of the image: read here, as a ground truth is read with its image.
    const QString predictionPath = pendingPrediction_.second;
    pendingPrediction_ = {};
    const auto p = VolumeLoader::load(predictionPath);
    if (!p.volume) {
      showStatus(tr("Could not open prediction %1: %2").arg(predictionPath, p.error), true);
    } else if (!p.volume->geometry().sameGrid(image.volume->geometry(), 1e-3)) {
      showStatus(tr("Prediction %1 does not match the image: %2")
                     .arg(QFileInfo(predictionPath).fileName(),
                          QString::fromStdString(p.volume->geometry().differenceTo(image.volume->geometry(), 1e-3))), true);
    } else {
      session_->setPrediction(p.volume);
      showStatus(tr("Opened %1 with its prediction %2").arg(QFileInfo(path).fileName(), QFileInfo(predictionPath).fileName()));
    }
  }
  Q_EMIT volumeLoadFinished(path, true);
  return true;
}

bool MainWindow::openVolumeWithPrediction(const QString& path, const QString& labelPath, const QString& predictionPath, Loading mode) {
  pendingPrediction_ = {path, predictionPath};
  const bool ok = openVolume(path, labelPath, mode);
  if (mode == Loading::Blocking || !ok) pendingPrediction_ = {};
  return ok;
}

bool MainWindow::loadLabel(const QString& path, Loading mode) {
  if (mode == Loading::Background) {
    if (loader_->busy()) {
      showStatus(tr("Still loading %1: load the label once it is open").arg(QFileInfo(loader_->pendingPath()).fileName()), true);
      return false;
    }
    loader_->start({}, path);
    showStatus(tr("Loading label %1…").arg(QFileInfo(path).fileName()), false, 0);
    return true;
  }
  const bool ok = applyLabel(path, VolumeLoader::load(path));
  Q_EMIT volumeLoadFinished(path, ok);
  return ok;
}

bool MainWindow::applyLabel(const QString& path, const VolumeLoader::Result& result) {
  if (!result.volume) {
    showStatus(tr("Could not open label %1: %2").arg(path, result.error), true);
    return false;
  }
  if (!session_->image() || !result.volume->geometry().sameGrid(session_->image()->geometry(), 1e-3)) {
    const auto diff = session_->image() ? QString::fromStdString(result.volume->geometry().differenceTo(session_->image()->geometry(), 1e-3))
                                        : tr("no image open");
    showStatus(tr("Label %1 does not match the image: %2").arg(QFileInfo(path).fileName(), diff), true);
    return false;
  }
  session_->setGroundTruth(result.volume, path);
  return true;
}

void MainWindow::openPhantom(const QString& why) {
  data::PhantomOptions o;
  o.size = {96, 96, 64};
  o.spacing = {1.5, 1.5, 2.0};
  o.ellipsoidsPerClass = 3;
  const auto ph = data::makePhantom(o);
  session_->setImage(std::make_shared<Volume>(ph.image), tr("phantom"));
  session_->setGroundTruth(std::make_shared<Volume>(ph.label), tr("phantom label"));
  showStatus(why);
}

bool MainWindow::openDataset(const QString& path, Loading mode) {
  const auto ds = VolumeLoader::listDataset(path);
  if (!ds.error.isEmpty()) {
    showStatus(tr("Could not open dataset %1: %2").arg(path, ds.error), true);
    return false;
  }
  session_->setDatasetFolder(path);
  datasetCases_ = ds.images;
  datasetLabels_ = ds.labels;
  QStringList names;
  for (const auto& c : ds.images) names << QFileInfo(c).fileName();
  data_->setCases(names);
  return openVolume(ds.images.front(), ds.labels.value(0), mode);
}

void MainWindow::showVolume() {
  const auto img = session_->image();
  for (auto* s : slices_) s->setVolume(img);
  view3d_->setVolume(img);
  if (!img) return;
  const auto& size = img->size();
  viewState_->setCursor({size[0] / 2, size[1] / 2, size[2] / 2});
  // CT in Hounsfield units gets the soft-tissue window and the bone preset; anything else a
  // window over its own range and the relative preset.
  const auto r = img->range();
  const bool ct = r.first < -500 && r.second > 300;
  const auto presets = TransferFunctionPreset::loadAll();
  const QString wanted = ct ? QSettings().value("volumePreset", "CT Bone").toString() : QString("Generic (relative range)");
  bool applied = false;
  for (int i = 0; i < presets.size(); ++i)
    if (presets[i].name == wanted && presets[i].relative == !ct) {
      applied = true;
      view3d_->setPreset(presets[i]);
      data_->volumePresetBox()->setCurrentIndex(i);
    }
  if (!applied)
    for (int i = 0; i < presets.size(); ++i)
      if (presets[i].name == (ct ? "CT Bone" : "Generic (relative range)")) {
        view3d_->setPreset(presets[i]);
        data_->volumePresetBox()->setCurrentIndex(i);
      }
  if (ct) viewState_->setWindowLevel(400, 40);
  else viewState_->setWindowLevel(std::max(1e-3f, r.second - r.first), (r.first + r.second) / 2.0);
  // Slice views dropped their overlay with the old volume; the review panel publishes again.
  review_->evaluate();
}

void MainWindow::updateDeviceSummary() {
  QStringList parts;
  for (const auto& d : session_->devices())
    parts << QString("%1%2: %3").arg(QString::fromStdString(d.name), d.planningOnly ? tr(" (plan)") : QString(),
                                     QString::fromStdString(formatBytes(double(d.totalBytes))));
  devicesLabel_->setText(parts.join("  |  "));
}

void MainWindow::addRecent(const QString& path) {
  recent_.removeAll(path);
  recent_.prepend(path);
  while (recent_.size() > 10) recent_.removeLast();
  QSettings().setValue("recentFiles", recent_);
  data_->setRecentFiles(recent_);
}

void MainWindow::saveSegmentation() {
  const auto seg = session_->prediction();
  if (!seg || !session_->image()) {
    showStatus(tr("No segmentation to save: run inference in the Review tab first"), true);
    return;
  }
  const QString path = QFileDialog::getSaveFileName(this, tr("Save segmentation"), QSettings().value("lastDir").toString(),
                                                    tr("NIfTI (*.nii.gz *.nii);;NRRD (*.nrrd);;MetaImage (*.mha)"));
  if (path.isEmpty()) return;
  const QString err = VolumeLoader::saveSegmentation(*seg, session_->image()->geometry(), path);
  if (err.isEmpty()) showStatus(tr("Saved %1").arg(path));
  else showStatus(tr("Could not save %1: %2").arg(path, err), true);
}

void MainWindow::closeEvent(QCloseEvent* e) {
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  // Only CT presets are remembered: a relative one (phantom, MR) would not suit the next CT.
  if (!view3d_->preset().relative) settings.setValue("volumePreset", view3d_->preset().name);
  QMainWindow::closeEvent(e);
}

void MainWindow::showEvent(QShowEvent* e) {
  QMainWindow::showEvent(e);
  fitPlacementRoom();
}

void MainWindow::resizeEvent(QResizeEvent* e) {
  QMainWindow::resizeEvent(e);
  if (isVisible()) fitPlacementRoom();
}

void MainWindow::fitPlacementRoom() {
  constexpr int kMinCentre = 320;  // two slice views side by side stay readable
  if (!tabDock_ || !isVisible() || tabDock_->isFloating()) return;
  const bool placing = tabs_->currentWidget() == placement_;
  if (!placing) {
    if (dockWidthBeforePlacing_ >= 0) resizeDocks({tabDock_}, {dockWidthBeforePlacing_}, Qt::Horizontal);
    dockWidthBeforePlacing_ = -1;
    if (dataDockHiddenForPlacing_) dataDock_->show();
    dataDockHiddenForPlacing_ = false;
    return;
  }
  const int columns = static_cast<int>(session_->devices().size());
  const int want = placement_->widthForColumns(columns) + (tabDock_->width() - placement_->width());
  const int dataWidth = dataDock_->isVisible() && !dataDock_->isFloating() ? dataDock_->width() : 0;
  if (dockWidthBeforePlacing_ < 0) dockWidthBeforePlacing_ = tabDock_->width();
  if (dataWidth > 0 && want + dataWidth + kMinCentre > width()) {
    dataDock_->hide();
    dataDockHiddenForPlacing_ = true;
  }
  const int room = std::max(tabDock_->width(), std::min(want, width() - kMinCentre));
  if (room != tabDock_->width()) resizeDocks({tabDock_}, {room}, Qt::Horizontal);
}

} // namespace splitseg::ui
