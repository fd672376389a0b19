#pragma once
// Hosts a VTK render window inside Qt 6. Debian's QVTKOpenGLNativeWidget is built for Qt 5,
// so this QOpenGLWidget owns a vtkGenericOpenGLRenderWindow that renders into its own
// framebuffer inside paintGL, and the result is blitted into the widget's FBO.
#include <QOpenGLWidget>

#include <vtkGenericOpenGLRenderWindow.h>
#include <vtkGenericRenderWindowInteractor.h>
#include <vtkRenderer.h>
#include <vtkSmartPointer.h>

namespace splitseg::ui {

class VtkOpenGLWidget : public QOpenGLWidget {
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

Q_SIGNALS:
  void frameRendered();

protected:
  void initializeGL() override;
  void resizeGL(int w, int h) override;
  void paintGL() override;

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
  void cleanupGL();
  void forwardMouse(QMouseEvent* e, unsigned long event);

  vtkSmartPointer<vtkGenericOpenGLRenderWindow> window_;
  vtkSmartPointer<vtkGenericRenderWindowInteractor> interactor_;
  vtkSmartPointer<vtkRenderer> renderer_;
  QMetaObject::Connection destroyConnection_;
  bool initialized_ = false;
  int frames_ = 0;
};

} // namespace splitseg::ui
