#pragma once
// Left-hand panel: open a file, folder, DICOM series or dataset, load a label, recent
// files, what is open, and the display presets (window/level, 3D transfer function).
#include <QWidget>

class QComboBox;
class QLabel;
class QListWidget;
class QPushButton;

namespace splitseg::ui {

class Session;
class ViewState;
struct TransferFunctionPreset;

class DataPanel : public QWidget {
  Q_OBJECT
public:
  DataPanel(Session* session, ViewState* viewState, QWidget* parent = nullptr);

  void setRecentFiles(const QStringList& files);
  void setCasesVisible(bool visible);
  void setCases(const QStringList& cases);
  QComboBox* volumePresetBox() const { return volumePreset_; }
  QComboBox* windowPresetBox() const { return windowPreset_; }

Q_SIGNALS:
  void openFileRequested();
  void openFolderRequested();
  void openDicomRequested();
  void openDatasetRequested();
  void loadLabelRequested();
  void recentFileActivated(const QString& path);
  void caseActivated(int index);
  void volumePresetChosen(int index);

private:
  void refreshInfo();

  Session* session_;
  ViewState* viewState_;
  QLabel* info_;
  QListWidget* recent_;
  QListWidget* cases_;
  QLabel* casesLabel_;
  QComboBox* windowPreset_;
  QComboBox* volumePreset_;
};

} // namespace splitseg::ui
