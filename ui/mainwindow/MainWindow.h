#pragma once
// The workstation window: data panel on the left, 2x2 axial/coronal/sagittal/3D in the
// centre, Placement/Training/Review tabs on the right, device summary in the status bar.
#include <QMainWindow>

#include <memory>

class QLabel;
class QTabWidget;

namespace splitseg { class Volume; }

namespace splitseg::ui {

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

  // Opens an image (file or DICOM folder); a label path, if given, becomes the ground truth.
  // Errors are shown in the status bar and returned as false.
  bool openVolume(const QString& path, const QString& labelPath = {});
  bool loadLabel(const QString& path);
  // Shows a synthetic phantom (with its exact label), e.g. when the demo CT is missing.
  void openPhantom(const QString& why);
  // Opens a dataset folder (dataset.json or nnU-Net raw) and its first case.
  bool openDataset(const QString& path);
  // File > Save/Open Session (.splitseg). Open returns the warnings (missing files, ...);
  // both report failures in the status bar and return false / an error line.
  bool saveSessionFile(const QString& path);
  QStringList openSessionFile(const QString& path);

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

protected:
  void closeEvent(QCloseEvent* e) override;

private:
  void buildMenus();
  void showVolume();
  void updateDeviceSummary();
  void addRecent(const QString& path);
  void chooseAndOpen(bool folder);
  void chooseDataset();
  void chooseLabel();
  void saveSegmentation();
  void showStatus(const QString& text, bool error = false);

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
  QStringList recent_;
  QStringList datasetCases_, datasetLabels_;
};

} // namespace splitseg::ui
