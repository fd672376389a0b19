#include "ui/render/VolumeView3d.h"

#include <vtkActor.h>
#include <vtkCamera.h>
#include <vtkColorTransferFunction.h>
#include <vtkDiscreteFlyingEdges3D.h>
#include <vtkFloatArray.h>
#include <vtkImageData.h>
#include <vtkMatrix4x4.h>
#include <vtkPiecewiseFunction.h>
#include <vtkPointData.h>
#include <vtkPolyDataMapper.h>
#include <vtkPolyDataNormals.h>
#include <vtkProperty.h>
#include <vtkRenderer.h>
#include <vtkSmartVolumeMapper.h>
#include <vtkUnsignedCharArray.h>
#include <vtkVolume.h>
#include <vtkVolumeProperty.h>
#include <vtkWindowedSincPolyDataFilter.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace splitseg::ui {

vtkSmartPointer<vtkImageData> toImageData(const Volume& volume, bool asLabels) {
  auto img = vtkSmartPointer<vtkImageData>::New();
  const auto& g = volume.geometry();
  img->SetDimensions(static_cast<int>(g.size[0]), static_cast<int>(g.size[1]), static_cast<int>(g.size[2]));
  img->SetSpacing(g.spacing.data());
  // Origin and direction go into the actor's matrix (patientMatrix): VTK 9.1's volume mappers
  // do not all honour an image's direction matrix.
  img->SetOrigin(0, 0, 0);
  const auto n = static_cast<vtkIdType>(volume.voxelCount());
  if (asLabels) {
    auto arr = vtkSmartPointer<vtkUnsignedCharArray>::New();
    arr->SetNumberOfValues(n);
    for (vtkIdType i = 0; i < n; ++i)
      arr->SetValue(i, static_cast<unsigned char>(std::clamp<long>(std::lround(volume.data()[i]), 0, 255)));
    arr->SetName("labels");
    img->GetPointData()->SetScalars(arr);
  } else {
    auto arr = vtkSmartPointer<vtkFloatArray>::New();
    // save = 1: VTK never frees or writes it; volume_ (held beside image_) keeps it alive.
    arr->SetArray(const_cast<float*>(volume.data()), n, 1);
    arr->SetName("intensity");
    img->GetPointData()->SetScalars(arr);
  }
  return img;
}

vtkSmartPointer<vtkMatrix4x4> patientMatrix(const Geometry& g) {
  auto m = vtkSmartPointer<vtkMatrix4x4>::New();
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) m->SetElement(r, c, g.direction[static_cast<std::size_t>(r * 3 + c)]);
    m->SetElement(r, 3, g.origin[static_cast<std::size_t>(r)]);
  }
  return m;
}

VolumeView3d::VolumeView3d(QWidget* parent) : VtkOpenGLWidget(parent) {
  const auto presets = TransferFunctionPreset::loadAll();
  for (const auto& p : presets)
    if (p.name == "CT Bone") preset_ = p;
  if (preset_.name.isEmpty() && !presets.isEmpty()) preset_ = presets.front();
}

VolumeView3d::~VolumeView3d() = default;

void VolumeView3d::setVolume(std::shared_ptr<const Volume> volume) {
  if (actor_) renderer()->RemoveVolume(actor_);
  actor_ = nullptr;
  image_ = nullptr;  // it refers to the old volume's voxels
  volume_ = std::move(volume);
  clearLabelSurfaces();
  if (!volume_ || volume_->empty()) {
    update();
    return;
  }
  range_ = volume_->range();
  image_ = toImageData(*volume_, false);
  auto mapper = vtkSmartPointer<vtkSmartVolumeMapper>::New();
  mapper->SetInputData(image_);
  mapper->SetBlendModeToComposite();
  // Software GL (llvmpipe) is slow: trade quality for speed while the user drags.
  mapper->SetAutoAdjustSampleDistances(true);
  mapper->SetInteractiveUpdateRate(2.0);
  actor_ = vtkSmartPointer<vtkVolume>::New();
  actor_->SetMapper(mapper);
  actor_->SetProperty(vtkSmartPointer<vtkVolumeProperty>::New());
  actor_->SetUserMatrix(patientMatrix(volume_->geometry()));
  applyPreset();
  renderer()->AddVolume(actor_);
  resetCamera();
}

void VolumeView3d::setPreset(const TransferFunctionPreset& preset) {
  preset_ = preset;
  applyPreset();
}

void VolumeView3d::applyPreset() {
  if (!actor_) return;
  // Relative presets map [0,1] onto the volume's range (phantoms, MR).
  const double lo = preset_.relative ? range_.first : 0.0;
  const double span = preset_.relative ? std::max(1e-6f, range_.second - range_.first) : 1.0;
  auto x = [&](double v) { return lo + v * span; };
  auto opacity = vtkSmartPointer<vtkPiecewiseFunction>::New();
  for (const auto& p : preset_.opacity) opacity->AddPoint(x(p[0]), p[1]);
  auto color = vtkSmartPointer<vtkColorTransferFunction>::New();
  for (const auto& p : preset_.color) color->AddRGBPoint(x(p[0]), p[1], p[2], p[3]);
  auto* prop = actor_->GetProperty();
  prop->SetScalarOpacity(opacity);
  prop->SetColor(color);
  if (!preset_.gradientOpacity.isEmpty()) {
    auto grad = vtkSmartPointer<vtkPiecewiseFunction>::New();
    for (const auto& p : preset_.gradientOpacity) grad->AddPoint(p[0], p[1]);
    prop->SetGradientOpacity(grad);
    prop->DisableGradientOpacityOff();
  } else {
    prop->DisableGradientOpacityOn();
  }
  prop->SetShade(preset_.shade ? 1 : 0);
  prop->SetAmbient(preset_.ambient);
  prop->SetDiffuse(preset_.diffuse);
  prop->SetSpecular(preset_.specular);
  prop->SetSpecularPower(preset_.specularPower);
  prop->SetInterpolationTypeToLinear();
  update();
}

void VolumeView3d::setVolumeVisible(bool visible) {
  if (actor_) actor_->SetVisibility(visible);
  update();
}

void VolumeView3d::clearLabelSurfaces() {
  for (auto& a : surfaces_) renderer()->RemoveActor(a);
  surfaces_.clear();
  update();
}

void VolumeView3d::setLabelSurfaces(std::shared_ptr<const Volume> labels, const LabelStyle& style) {
  clearLabelSurfaces();
  if (!labels || labels->empty()) return;
  const auto img = toImageData(*labels, true);
  const auto r = labels->range();
  for (int label = 1; label <= static_cast<int>(r.second); ++label) {
    if (!style.isVisible(label)) continue;
    auto fe = vtkSmartPointer<vtkDiscreteFlyingEdges3D>::New();
    fe->SetInputData(img);
    fe->SetValue(0, label);
    fe->ComputeNormalsOff();
    auto smooth = vtkSmartPointer<vtkWindowedSincPolyDataFilter>::New();
    smooth->SetInputConnection(fe->GetOutputPort());
    smooth->SetNumberOfIterations(12);
    smooth->SetPassBand(0.08);
    smooth->NormalizeCoordinatesOn();
    auto normals = vtkSmartPointer<vtkPolyDataNormals>::New();
    normals->SetInputConnection(smooth->GetOutputPort());
    normals->Update();
    if (normals->GetOutput()->GetNumberOfPoints() == 0) continue;
    auto mapper = vtkSmartPointer<vtkPolyDataMapper>::New();
    mapper->SetInputConnection(normals->GetOutputPort());
    mapper->ScalarVisibilityOff();
    auto actor = vtkSmartPointer<vtkActor>::New();
    actor->SetMapper(mapper);
    actor->SetUserMatrix(patientMatrix(labels->geometry()));
    const QColor c = style.color(label);
    actor->GetProperty()->SetColor(c.redF(), c.greenF(), c.blueF());
    actor->GetProperty()->SetOpacity(std::clamp(style.opacity * 1.6, 0.2, 1.0));
    renderer()->AddActor(actor);
    surfaces_.push_back(actor);
  }
  if (!actor_) resetCamera();
  update();
}

void VolumeView3d::resetCamera() {
  // Anterior view, head up (LPS: anterior is -y, superior +z), as radiologists expect.
  auto* cam = renderer()->GetActiveCamera();
  cam->SetFocalPoint(0, 0, 0);
  cam->SetPosition(0, -1, 0);
  cam->SetViewUp(0, 0, 1);
  renderer()->ResetCamera();
  cam->Zoom(1.3);
  update();
}

} // namespace splitseg::ui
