#include "ui/render/VtkOpenGLWidget.h"

#include <QMouseEvent>
#include <QOffscreenSurface>
#include <QOpenGLContext>
#include <QOpenGLExtraFunctions>
#include <QPainter>
#include <QWheelEvent>

#include <vtkCommand.h>
#include <vtkGenericOpenGLRenderWindow.h>
#include <vtkGenericRenderWindowInteractor.h>
#include <vtkInteractorStyleTrackballCamera.h>
#include <vtkOpenGLFramebufferObject.h>
#include <vtkOpenGLState.h>
#include <vtkRenderer.h>

#include <algorithm>

namespace splitseg::ui {

VtkOpenGLWidget::VtkOpenGLWidget(QWidget* parent)
    : QWidget(parent),
      window_(vtkSmartPointer<vtkGenericOpenGLRenderWindow>::New()),
      interactor_(vtkSmartPointer<vtkGenericRenderWindowInteractor>::New()),
      renderer_(vtkSmartPointer<vtkRenderer>::New()) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(false);
  setAttribute(Qt::WA_OpaquePaintEvent);  // the frame covers the whole widget
  // Qt owns the context: VTK must neither create, swap nor blit it.
  window_->SetOwnContext(false);
  window_->SetFrameBlitModeToNoBlit();
  window_->SetReadyForRendering(false);
  window_->SetMultiSamples(0);
  window_->AddRenderer(renderer_);
  window_->SetInteractor(interactor_);
  window_->AddObserver(vtkCommand::WindowMakeCurrentEvent, this, &VtkOpenGLWidget::onMakeCurrent);
  window_->AddObserver(vtkCommand::WindowIsCurrentEvent, this, &VtkOpenGLWidget::onIsCurrent);

  // The interactor must not render by itself (outside paintEvent no context is current); its
  // render requests become Qt repaints.
  interactor_->SetEnableRender(false);
  interactor_->AddObserver(vtkCommand::RenderEvent, this, &VtkOpenGLWidget::onRenderRequest);
  auto style = vtkSmartPointer<vtkInteractorStyleTrackballCamera>::New();
  interactor_->SetInteractorStyle(style);
  interactor_->Initialize();
  renderer_->SetBackground(0.08, 0.09, 0.11);
}

VtkOpenGLWidget::~VtkOpenGLWidget() {
  if (makeCurrent()) {
    cleanupGL();
    doneCurrent();
  }
  window_->RemoveAllObservers();
  interactor_->RemoveAllObservers();
}

QSurfaceFormat VtkOpenGLWidget::defaultFormat() {
  QSurfaceFormat fmt;
  fmt.setRenderableType(QSurfaceFormat::OpenGL);
  fmt.setVersion(3, 2);
  fmt.setProfile(QSurfaceFormat::CoreProfile);
  fmt.setSwapBehavior(QSurfaceFormat::DoubleBuffer);
  fmt.setRedBufferSize(8);
  fmt.setGreenBufferSize(8);
  fmt.setBlueBufferSize(8);
  fmt.setAlphaBufferSize(8);
  fmt.setDepthBufferSize(24);
  fmt.setStencilBufferSize(0);
  fmt.setSamples(0);
  return fmt;
}

bool VtkOpenGLWidget::makeCurrent() {
  if (!context_) return false;
  return QOpenGLContext::currentContext() == context_.get() || context_->makeCurrent(surface_.get());
}

void VtkOpenGLWidget::doneCurrent() {
  if (context_) context_->doneCurrent();
}

bool VtkOpenGLWidget::initializeGL() {
  if (initialized_ || failed_) return initialized_;
  context_ = std::make_unique<QOpenGLContext>();
  context_->setFormat(defaultFormat());
  surface_ = std::make_unique<QOffscreenSurface>();
  surface_->setFormat(defaultFormat());
  surface_->create();
  if (!context_->create() || !surface_->isValid() || !context_->makeCurrent(surface_.get())) {
    failed_ = true;
    context_.reset();
    return false;
  }
  window_->SetReadyForRendering(true);
  window_->InitializeFromCurrentContext();
  window_->SetReadyForRendering(false);
  initialized_ = true;
  return true;
}

void VtkOpenGLWidget::cleanupGL() {
  if (!initialized_) return;
  // Releases VTK's GL resources while the context they belong to is still alive.
  window_->ReleaseGraphicsResources(window_);
  window_->Finalize();
  initialized_ = false;
}

void VtkOpenGLWidget::resizeEvent(QResizeEvent*) {
  const qreal dpr = devicePixelRatioF();
  const int pw = std::max(1, static_cast<int>(width() * dpr)), ph = std::max(1, static_cast<int>(height() * dpr));
  window_->SetSize(pw, ph);
  interactor_->SetSize(pw, ph);
  interactor_->InvokeEvent(vtkCommand::ConfigureEvent, nullptr);
}

void VtkOpenGLWidget::renderFrame() {
  if (!initializeGL() || !makeCurrent()) return;
  window_->SetReadyForRendering(true);
  window_->Render();
  window_->SetReadyForRendering(false);
  // Rendering may have switched contexts (progress events repainting other widgets).
  if (!makeCurrent()) return;
  auto* f = context_->extraFunctions();
  auto* state = window_->GetState();
  const int w = window_->GetSize()[0], h = window_->GetSize()[1];
  // VTK leaves the background transparent: RGBX ignores alpha, so the view is opaque.
  QImage frame(w, h, QImage::Format_RGBX8888);
  state->PushFramebufferBindings();
  window_->GetDisplayFramebuffer()->Bind(GL_READ_FRAMEBUFFER);
  window_->GetDisplayFramebuffer()->ActivateReadBuffer(0);
  f->glPixelStorei(GL_PACK_ALIGNMENT, 4);
  f->glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, frame.bits());
  state->PopFramebufferBindings();
  doneCurrent();
  frame_ = frame.mirrored();  // OpenGL's rows run bottom-up
  frame_.setDevicePixelRatio(devicePixelRatioF());
  ++frames_;
  Q_EMIT frameRendered();
}

QImage VtkOpenGLWidget::grabFramebuffer() {
  renderFrame();
  return frame_;
}

void VtkOpenGLWidget::paintEvent(QPaintEvent*) {
  // A repaint is either a render request (update()) or an expose; both render a fresh frame, as
  // a QOpenGLWidget would. Repaints of other widgets do not reach this one.
  renderFrame();
  QPainter p(this);
  if (frame_.isNull()) {
    p.fillRect(rect(), QColor(20, 23, 28));
    p.setPen(QColor("#8b949e"));
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
               failed_ ? tr("3D view unavailable: no OpenGL 3.2 context could be created") : QString());
    return;
  }
  p.drawImage(rect(), frame_);
}

void VtkOpenGLWidget::onMakeCurrent(vtkObject*, unsigned long, void*) { makeCurrent(); }

void VtkOpenGLWidget::onIsCurrent(vtkObject*, unsigned long, void* callData) {
  *static_cast<bool*>(callData) = context_ && QOpenGLContext::currentContext() == context_.get();
}

void VtkOpenGLWidget::onRenderRequest(vtkObject*, unsigned long, void*) { update(); }

void VtkOpenGLWidget::forwardMouse(QMouseEvent* e, unsigned long event) {
  const qreal dpr = devicePixelRatioF();
  const QPointF p = e->position() * dpr;
  // VTK's origin is bottom-left.
  interactor_->SetEventInformation(static_cast<int>(p.x()), static_cast<int>(height() * dpr - p.y() - 1),
                                   (e->modifiers() & Qt::ControlModifier) ? 1 : 0,
                                   (e->modifiers() & Qt::ShiftModifier) ? 1 : 0);
  interactor_->InvokeEvent(event, e);
}

void VtkOpenGLWidget::mousePressEvent(QMouseEvent* e) {
  switch (e->button()) {
    case Qt::LeftButton: forwardMouse(e, vtkCommand::LeftButtonPressEvent); break;
    case Qt::MiddleButton: forwardMouse(e, vtkCommand::MiddleButtonPressEvent); break;
    case Qt::RightButton: forwardMouse(e, vtkCommand::RightButtonPressEvent); break;
    default: break;
  }
}

void VtkOpenGLWidget::mouseReleaseEvent(QMouseEvent* e) {
  switch (e->button()) {
    case Qt::LeftButton: forwardMouse(e, vtkCommand::LeftButtonReleaseEvent); break;
    case Qt::MiddleButton: forwardMouse(e, vtkCommand::MiddleButtonReleaseEvent); break;
    case Qt::RightButton: forwardMouse(e, vtkCommand::RightButtonReleaseEvent); break;
    default: break;
  }
}

void VtkOpenGLWidget::mouseMoveEvent(QMouseEvent* e) { forwardMouse(e, vtkCommand::MouseMoveEvent); }

void VtkOpenGLWidget::wheelEvent(QWheelEvent* e) {
  const qreal dpr = devicePixelRatioF();
  const QPointF p = e->position() * dpr;
  interactor_->SetEventInformation(static_cast<int>(p.x()), static_cast<int>(height() * dpr - p.y() - 1));
  interactor_->InvokeEvent(e->angleDelta().y() > 0 ? vtkCommand::MouseWheelForwardEvent
                                                   : vtkCommand::MouseWheelBackwardEvent, e);
}

void VtkOpenGLWidget::enterEvent(QEnterEvent*) { interactor_->InvokeEvent(vtkCommand::EnterEvent, nullptr); }
void VtkOpenGLWidget::leaveEvent(QEvent*) { interactor_->InvokeEvent(vtkCommand::LeaveEvent, nullptr); }

} // namespace splitseg::ui
