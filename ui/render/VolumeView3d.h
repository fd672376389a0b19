#pragma once
// The 3D view: ray-cast volume rendering of the open volume with a transfer-function preset,
// plus one smoothed surface per label of a segmentation. Trackball rotate (left), pan
// (middle / shift-left), zoom (right / wheel) come from VTK's interactor style.
#include "core/volume/Volume.h"
#include "ui/render/LabelStyle.h"
#include "ui/render/TransferFunctionPreset.h"
#include "ui/render/VtkOpenGLWidget.h"

#include <memory>
#include <vector>

class vtkVolume;
class vtkActor;
class vtkImageData;
class vtkMatrix4x4;

namespace splitseg::ui {

class VolumeView3d : public VtkOpenGLWidget {
  Q_OBJECT
public:
  explicit VolumeView3d(QWidget* parent = nullptr);
  ~VolumeView3d() override;

  void setVolume(std::shared_ptr<const Volume> volume);
  void setPreset(const TransferFunctionPreset& preset);
  const TransferFunctionPreset& preset() const { return preset_; }
  void setVolumeVisible(bool visible);
  // One surface per visible label (flying edges + windowed-sinc smoothing).
  void setLabelSurfaces(std::shared_ptr<const Volume> labels, const LabelStyle& style);
  void clearLabelSurfaces();
  int surfaceCount() const { return static_cast<int>(surfaces_.size()); }
  void resetCamera();
  QSize minimumSizeHint() const override { return {160, 160}; }

private:
  void applyPreset();

  std::shared_ptr<const Volume> volume_;
  vtkSmartPointer<vtkImageData> image_;
  vtkSmartPointer<vtkVolume> actor_;
  std::vector<vtkSmartPointer<vtkActor>> surfaces_;
  TransferFunctionPreset preset_;
  std::pair<float, float> range_{0.f, 1.f};
};

// Image data of a Volume (x fastest, same as VTK) with its spacing; origin and direction are
// applied by patientMatrix on the actor. Intensities are not copied (a 1 GB CT would be held
// twice): the image refers to the volume's voxels, which must outlive it. Labels become uint8.
vtkSmartPointer<vtkImageData> toImageData(const Volume& volume, bool asLabels);
vtkSmartPointer<vtkMatrix4x4> patientMatrix(const Geometry& geometry);

} // namespace splitseg::ui
