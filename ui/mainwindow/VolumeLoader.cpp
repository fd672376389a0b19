#include "ui/mainwindow/VolumeLoader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <exception>

#ifdef SPLITSEG_HAVE_IO
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#endif

namespace splitseg::ui {

bool VolumeLoader::canReadFiles() {
#ifdef SPLITSEG_HAVE_IO
  return true;
#else
  return false;
#endif
}

VolumeLoader::Result VolumeLoader::load(const QString& path) {
  Result r;
  if (!QFileInfo::exists(path)) {
    r.error = QObject::tr("no such file or folder");
    return r;
  }
#ifdef SPLITSEG_HAVE_IO
  try {
    r.volume = std::make_shared<Volume>(io::readVolume(path.toStdString()));
  } catch (const std::exception& e) {
    r.error = QString::fromStdString(e.what());
  }
#else
  r.error = QObject::tr("this build has no image IO (built without ITK)");
#endif
  return r;
}

QString VolumeLoader::saveSegmentation(const Volume& labels, const Geometry& source, const QString& path) {
#ifdef SPLITSEG_HAVE_IO
  try {
    io::writeSegmentation(labels, source, path.toStdString());
    return {};
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
#else
  (void)labels; (void)source; (void)path;
  return QObject::tr("this build has no image IO (built without ITK)");
#endif
}

VolumeLoader::Dataset VolumeLoader::listDataset(const QString& folder) {
  Dataset ds;
  const QDir dir(folder);
  QFile json(dir.filePath("dataset.json"));
  if (json.open(QIODevice::ReadOnly)) {
    const auto o = QJsonDocument::fromJson(json.readAll()).object();
    for (const auto& v : o.value("training").toArray()) {
      const auto c = v.toObject();
      const QString img = c.value("image").toString(), lab = c.value("label").toString();
      // MSD lists the image path; nnU-Net v2's dataset.json has no list (handled below).
      if (!img.isEmpty()) {
        ds.images << QDir::cleanPath(dir.filePath(img));
        ds.labels << (lab.isEmpty() ? QString() : QDir::cleanPath(dir.filePath(lab)));
      }
    }
  }
  if (ds.images.isEmpty()) {
    const QDir images(dir.filePath("imagesTr"));
    for (const auto& f : images.entryList({"*_0000.nii.gz", "*_0000.nii", "*_0000.nrrd", "*_0000.mha"}, QDir::Files, QDir::Name)) {
      ds.images << images.filePath(f);
      QString labelName = f;
      labelName.replace("_0000.", ".");
      const QString label = dir.filePath("labelsTr/" + labelName);
      ds.labels << (QFileInfo::exists(label) ? label : QString());
    }
  }
  if (ds.images.isEmpty()) ds.error = QObject::tr("no dataset.json training list and no imagesTr/*_0000.* files");
  return ds;
}

} // namespace splitseg::ui
