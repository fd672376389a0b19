#include "ui/render/VtkOpenGLWidget.h"

#include <QMouseEvent>
#include <QOpenGLContext>
#include <QOpenGLFunctions>
#include <QOpenGLExtraFunctions>
#include <QWheelEvent>

#include <vtkCommand.h>
#include <vtkGenericOpenGLRenderWindow.h>
#include <vtkGenericRenderWindowInteractor.h>
#include <vtkInteractorStyleTrackballCamera.h>
#include <vtkOpenGLFramebufferObject.h>
#include <vtkOpenGLState.h>
#include <vtkRenderer.h>

namespace splitseg::ui {

VtkOpenGLWidget::VtkOpenGLWidget(QWidget* parent)
    : QOpenGLWidget(parent),
      window_(vtkSmartPointer<vtkGenericOpenGLRenderWindow>::New()),
      interactor_(vtkSmartPointer<vtkGenericRenderWindowInteractor>::New()),
      renderer_(vtkSmartPointer<vtkRenderer>::New()) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(false);
  // Qt owns the context: VTK must neither create, swap nor blit it.
  window_->SetOwnContext(false);
  window_->SetFrameBlitModeToNoBlit();
  window_->SetReadyForRendering(false);
  window_->SetMultiSamples(0);
  window_->AddRenderer(renderer_);
  window_->SetInteractor(interactor_);
  window_->AddObserver(vtkCommand::WindowMakeCurrentEvent, this, &VtkOpenGLWidget::onMakeCurrent);
  window_->AddObserver(vtkCommand::WindowIsCurrentEvent, this, &VtkOpenGLWidget::onIsCurrent);

  // The interactor must not render by itself (outside paintGL there is no current context);
  // its render requests become Qt repaints.
  interactor_->SetEnableRender(false);
  interactor_->AddObserver(vtkCommand::RenderEvent, this, &VtkOpenGLWidget::onRenderRequest);
  auto style = vtkSmartPointer<vtkInteractorStyleTrackballCamera>::New();
  interactor_->SetInteractorStyle(style);
  interactor_->Initialize();
  renderer_->SetBackground(0.08, 0.09, 0.11);
}

VtkOpenGLWidget::~VtkOpenGLWidget() {
  // The context may outlive us briefly; a late aboutToBeDestroyed would call into a dead object.
  QObject::disconnect(destroyConnection_);
  makeCurrent();
  cleanupGL();
  doneCurrent();
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

void VtkOpenGLWidget::initializeGL() {
  destroyConnection_ = connect(context(), &QOpenGLContext::aboutToBeDestroyed, this, [this] {
    makeCurrent();
    cleanupGL();
    doneCurrent();
  });
  window_->SetReadyForRendering(true);
  window_->InitializeFromCurrentContext();
  window_->SetReadyForRendering(false);
  initialized_ = true;
}

void VtkOpenGLWidget::cleanupGL() {
  if (!initialized_) return;
  // Releases VTK's GL resources while the context they belong to is still alive.
  window_->ReleaseGraphicsResources(window_);
  window_->Finalize();
  initialized_ = false;
}

void VtkOpenGLWidget::resizeGL(int w, int h) {
  const qreal dpr = devicePixelRatioF();
  const int pw = static_cast<int>(w * dpr), ph = static_cast<int>(h * dpr);
  window_->SetSize(pw, ph);
  interactor_->SetSize(pw, ph);
  interactor_->InvokeEvent(vtkCommand::ConfigureEvent, nullptr);
}

void VtkOpenGLWidget::paintGL() {
  if (!initialized_) return;
  window_->SetReadyForRendering(true);
  window_->Render();
  window_->SetReadyForRendering(false);
  // Rendering may have switched contexts (progress events repainting other widgets).
  if (QOpenGLContext::currentContext() != context()) makeCurrent();

  auto* f = QOpenGLContext::currentContext()->extraFunctions();
  auto* state = window_->GetState();
  const int w = window_->GetSize()[0], h = window_->GetSize()[1];
  state->PushFramebufferBindings();
  state->vtkglBindFramebuffer(GL_DRAW_FRAMEBUFFER, defaultFramebufferObject());
  state->vtkglDrawBuffer(GL_COLOR_ATTACHMENT0);
  window_->GetDisplayFramebuffer()->Bind(GL_READ_FRAMEBUFFER);
  window_->GetDisplayFramebuffer()->ActivateReadBuffer(0);
  state->vtkglViewport(0, 0, w, h);
  state->vtkglScissor(0, 0, w, h);
  const bool scissor = state->GetEnumState(GL_SCISSOR_TEST);
  if (scissor) state->vtkglDisable(GL_SCISSOR_TEST);
  if (f) f->glBlitFramebuffer(0, 0, w, h, 0, 0, w, h, GL_COLOR_BUFFER_BIT, GL_NEAREST);
  if (scissor) state->vtkglEnable(GL_SCISSOR_TEST);
  state->PopFramebufferBindings();
  // Qt composes the widget with its alpha and VTK leaves the background transparent: force
  // alpha to 1 so the view is not blended with the window behind it.
  // Through VTK's state cache, so VTK's own later clears are not confused.
  state->PushFramebufferBindings();
  state->vtkglBindFramebuffer(GL_FRAMEBUFFER, defaultFramebufferObject());
  state->vtkglColorMask(false, false, false, true);
  state->vtkglClearColor(0, 0, 0, 1);
  state->vtkglClear(GL_COLOR_BUFFER_BIT);
  state->vtkglColorMask(true, true, true, true);
  state->PopFramebufferBindings();
  ++frames_;
  Q_EMIT frameRendered();
}

void VtkOpenGLWidget::onMakeCurrent(vtkObject*, unsigned long, void*) {
  // Calling makeCurrent() while already current rebinds the default FBO under VTK (black view).
  if (context() && QOpenGLContext::currentContext() != context()) makeCurrent();
}

void VtkOpenGLWidget::onIsCurrent(vtkObject*, unsigned long, void* callData) {
  *static_cast<bool*>(callData) = context() && QOpenGLContext::currentContext() == context();
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
