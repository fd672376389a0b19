#include "ui/mainwindow/VolumeLoader.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <exception>

#ifdef SPLITSEG_HAVE_IO
#include "core/base/Error.h"
#include "core/base/JsonText.h"
#include "core/io/InVesalius.h"
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

QString VolumeLoader::findDemo(const QString& name, const QString& sourceDir) {
  QStringList dirs;
  QStringList roots = {QDir::currentPath(), QCoreApplication::applicationDirPath() + "/../..",
                       QCoreApplication::applicationDirPath() + "/.."};
  if (!sourceDir.isEmpty()) roots << sourceDir;
  for (const auto& root : roots) dirs << root + "/data/demo";
  if (qEnvironmentVariableIsSet("SPLITSEG_DATA_DIR")) dirs << qEnvironmentVariable("SPLITSEG_DATA_DIR") + "/cranium";
  if (qEnvironmentVariableIsSet("XDG_DATA_HOME")) dirs << qEnvironmentVariable("XDG_DATA_HOME") + "/splitseg/demo/cranium";
  dirs << QDir::homePath() + "/.local/share/splitseg/demo/cranium";
  for (const auto& dir : dirs) {
    const QString p = QDir::cleanPath(dir + "/" + name);
    if (QFileInfo::exists(p)) return p;
  }
  return {};
}

QString VolumeLoader::findInVesaliusSample() {
#ifdef SPLITSEG_HAVE_IO
  return QString::fromStdString(io::findInVesaliusSample());
#else
  return {};
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
    if (path.endsWith(".inv3", Qt::CaseInsensitive)) {
      auto project = io::readInVesalius(path.toStdString());
      r.volume = std::make_shared<Volume>(std::move(project.image));
      // Bone is the mask thresholded highest (as the CLI's import does).
      const io::InVesaliusMask* bone = nullptr;
      for (const auto& m : project.masks)
        if (!bone || m.thresholdLow > bone->thresholdLow) bone = &m;
      if (bone) r.label = std::make_shared<Volume>(bone->mask);
    } else {
      r.volume = std::make_shared<Volume>(io::readVolume(path.toStdString()));
    }
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
  nlohmann::json o;
  try {
    o = readJsonFile(dir.filePath("dataset.json").toStdString());  // bounded in size and depth
  } catch (const Error&) {
    // No list, or a broken one: the folder is still scanned below.
  }
  const auto text = [](const nlohmann::json& c, const char* key) {
    return c.is_object() && c.contains(key) && c.at(key).is_string() ? QString::fromStdString(c.at(key).get<std::string>()) : QString();
  };
  if (o.is_object() && o.contains("training") && o.at("training").is_array()) {
    for (const auto& c : o.at("training")) {
      const QString img = text(c, "image"), lab = text(c, "label");
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
