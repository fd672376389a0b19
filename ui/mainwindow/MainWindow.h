#pragma once
// The workstation window: data panel on the left, 2x2 axial/coronal/sagittal/3D in the
// centre, Placement/Training/Review tabs on the right, device summary in the status bar.
#include "ui/mainwindow/VolumeLoader.h"

#include <QMainWindow>

#include <memory>

class QDockWidget;
class QLabel;
class QProgressBar;
class QTabWidget;

namespace splitseg { class Volume; }

namespace splitseg::ui {

class AsyncVolumeLoader;
class DataPanel;
class PlacementView;
class ReviewPanel;
class Session;
class SliceView;
class TrainingPanel;
class ViewState;
class VolumeView3d;

class MainWindow : public QMainWindow {
  Q_OBJECT
public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // How a volume is read. Background: on a worker thread; the call returns at once (true) while
  // the status bar shows "Loading <file>…", and the result is applied on the UI thread when it
  // arrives (volumeLoadFinished). Opening another volume meanwhile supersedes the first: its
  // result is dropped (the latest request wins). Blocking: read on the calling thread, as
  // sessions and tests need; it also drops any background load in flight.
  enum class Loading { Blocking, Background };

  // Opens an image (file or DICOM folder); a label path, if given, becomes the ground truth.
  // Errors are shown in the status bar (and returned as false when blocking); a failed open
  // leaves the volume already open untouched. The interactive paths (File menu, data panel,
  // recent files, dataset cases) and the command line use Background.
  bool openVolume(const QString& path, const QString& labelPath = {}, Loading mode = Loading::Blocking);
  // A label for the open image. In the background it is refused while an image is loading.
  bool loadLabel(const QString& path, Loading mode = Loading::Blocking);
  // Shows a synthetic phantom (with its exact label), e.g. when the demo CT is missing.
  void openPhantom(const QString& why);
  // Opens a dataset folder (dataset.json or nnU-Net raw) and its first case (listing is
  // immediate; false when the folder is no dataset).
  bool openDataset(const QString& path, Loading mode = Loading::Blocking);
  // A case with a prediction over it (Review > Evaluate dataset's "Open case"): the image and its
  // ground truth as openVolume opens them, then the prediction, which must be on the image's grid.
  bool openVolumeWithPrediction(const QString& path, const QString& labelPath, const QString& predictionPath,
                                Loading mode = Loading::Blocking);
  // A background read is in flight.
  bool isLoading() const;
  AsyncVolumeLoader* volumeLoader() const { return loader_; }
  // File > Save/Open Session (.splitseg). Open returns the warnings (missing files, ...);
  // both report failures in the status bar and return false / an error line. Opening in the
  // background (the File menu) applies the network, placement and run at once and reads the
  // image and label on the loader's worker, as File > Open does: a volume that cannot be read
  // is then reported in the status bar, not in the returned warnings.
  bool saveSessionFile(const QString& path);
  QStringList openSessionFile(const QString& path, Loading mode = Loading::Blocking);
  // File > Export model: TorchScript + preprocessing JSON; the outcome goes to the status bar.
  bool exportModel(const QString& path);

  Session* session() const { return session_; }
  ViewState* viewState() const { return viewState_; }
  SliceView* sliceView(int i) const { return slices_[i]; }
  VolumeView3d* volumeView() const { return view3d_; }
  QTabWidget* tabs() const { return tabs_; }
  PlacementView* placementView() const { return placement_; }
  TrainingPanel* trainingPanel() const { return training_; }
  ReviewPanel* reviewPanel() const { return review_; }
  DataPanel* dataPanel() const { return data_; }
  QString statusText() const;

Q_SIGNALS:
  // An open (image, or label-only) has been applied or has failed; not emitted for a
  // superseded background load.
  void volumeLoadFinished(const QString& path, bool ok);

protected:
  void closeEvent(QCloseEvent* e) override;
  void showEvent(QShowEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

private:
  void buildMenus();
  void showVolume();
  void updateDeviceSummary();
  void addRecent(const QString& path);
  void chooseAndOpen(bool folder);
  void chooseDataset();
  void chooseLabel();
  void saveSegmentation();
  // Errors stay until replaced; other messages for timeoutMs (0 = until replaced).
  void showStatus(const QString& text, bool error = false, int timeoutMs = 15000);
  // Applies what was read (on the UI thread), emits volumeLoadFinished; false on failure.
  bool applyImage(const QString& path, const VolumeLoader::Result& image,
                  const QString& labelPath, const VolumeLoader::Result& label);
  bool applyLabel(const QString& path, const VolumeLoader::Result& label);
  void setLoadingIndicator(bool busy);
  // While the Placement tab is shown the Model dock takes the width of every device column
  // (leaving the slices at least kMinCentre pixels), hiding the Data dock when both do not fit;
  // leaving the tab gives both back as they were.
  void fitPlacementRoom();

  Session* session_;
  ViewState* viewState_;
  SliceView* slices_[3];
  VolumeView3d* view3d_;
  DataPanel* data_;
  QTabWidget* tabs_;
  PlacementView* placement_ = nullptr;
  TrainingPanel* training_ = nullptr;
  ReviewPanel* review_ = nullptr;
  QLabel* devicesLabel_;
  QLabel* hoverLabel_;
  QProgressBar* loadingBar_;
  AsyncVolumeLoader* loader_;
  QStringList recent_;
  QStringList datasetCases_, datasetLabels_;
  // The prediction to show once this image is open (openVolumeWithPrediction): image, prediction.
  QPair<QString, QString> pendingPrediction_;
  QDockWidget *dataDock_ = nullptr, *tabDock_ = nullptr;
  int dockWidthBeforePlacing_ = -1;  // -1: not widened
  bool dataDockHiddenForPlacing_ = false;
};

} // namespace splitseg::ui
