#pragma once
// Hosts a VTK render window inside Qt 6. Debian's QVTKOpenGLNativeWidget is built for Qt 5, so
// this widget owns a vtkGenericOpenGLRenderWindow that renders into its own framebuffer in an
// offscreen OpenGL context, reads the frame back and paints it as an image. A plain widget, not
// a QOpenGLWidget: a window holding a QOpenGLWidget is composed through OpenGL on every repaint of
// any of its widgets, which with a software renderer made every chart update of a training run
// stall the UI thread (splitseg-bench-ui, Training tab in front: 99th percentile 140 ms).
#include <QImage>
#include <QSurfaceFormat>
#include <QWidget>

#include <vtkGenericOpenGLRenderWindow.h>
#include <vtkGenericRenderWindowInteractor.h>
#include <vtkRenderer.h>
#include <vtkSmartPointer.h>

#include <memory>

class QOpenGLContext;
class QOffscreenSurface;

namespace splitseg::ui {

class VtkOpenGLWidget : public QWidget {
  Q_OBJECT
public:
  explicit VtkOpenGLWidget(QWidget* parent = nullptr);
  ~VtkOpenGLWidget() override;

  vtkGenericOpenGLRenderWindow* renderWindow() const { return window_; }
  vtkGenericRenderWindowInteractor* interactor() const { return interactor_; }
  vtkRenderer* renderer() const { return renderer_; }

  // Format the bridge needs (3.2 core, no multisampling); main() sets it as the default.
  static QSurfaceFormat defaultFormat();
  // Frames rendered so far (tests wait for the first one).
  int framesRendered() const { return frames_; }
  // Renders a frame now and returns it (screenshots); a null image when OpenGL is unavailable.
  QImage grabFramebuffer();

Q_SIGNALS:
  void frameRendered();

protected:
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

  void mousePressEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void enterEvent(QEnterEvent* e) override;
  void leaveEvent(QEvent* e) override;

private:
  void onMakeCurrent(vtkObject*, unsigned long, void*);
  void onIsCurrent(vtkObject*, unsigned long, void* callData);
  void onRenderRequest(vtkObject*, unsigned long, void*);
  bool makeCurrent();
  void doneCurrent();
  bool initializeGL();
  void renderFrame();
  void cleanupGL();
  void forwardMouse(QMouseEvent* e, unsigned long event);

  vtkSmartPointer<vtkGenericOpenGLRenderWindow> window_;
  vtkSmartPointer<vtkGenericRenderWindowInteractor> interactor_;
  vtkSmartPointer<vtkRenderer> renderer_;
  std::unique_ptr<QOpenGLContext> context_;
  std::unique_ptr<QOffscreenSurface> surface_;
  QImage frame_;
  bool initialized_ = false;
  bool failed_ = false;  // no OpenGL context could be made: the view shows a line instead
  int frames_ = 0;
};

} // namespace splitseg::ui
