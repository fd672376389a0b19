#pragma once
// Reading and writing volumes for the window (core/io when built with ITK), turning every
// engine error into a message the status bar can show, and listing a dataset's cases.
#include "core/volume/Volume.h"

#include <QString>
#include <QStringList>

#include <memory>

namespace splitseg::ui {

class VolumeLoader {
public:
  struct Result {
    std::shared_ptr<Volume> volume;  // null on failure
    std::shared_ptr<Volume> label;   // an InVesalius project's bone mask (highest threshold)
    QString error;
  };
  struct Dataset {
    QStringList images, labels;      // same length; a missing label is an empty string
    QString error;
  };

  static Result load(const QString& path);
  // Empty string on success, else the message.
  static QString saveSegmentation(const Volume& labels, const Geometry& source, const QString& path);
  // MSD (dataset.json "training" list) or nnU-Net raw (imagesTr/*_0000.* + labelsTr/*).
  static Dataset listDataset(const QString& folder);
  static bool canReadFiles();
  // The demo case's file (image.nii.gz, bone.nii.gz): data/demo under the working directory,
  // next to build/bin, or under sourceDir; then where `splitseg-cli import-invesalius` writes
  // ($SPLITSEG_DATA_DIR/cranium, $XDG_DATA_HOME or ~/.local/share /splitseg/demo/cranium).
  static QString findDemo(const QString& name, const QString& sourceDir = {});
  // Debian's invesalius-examples head CT (Cranium.inv3), read directly when not imported yet.
  static QString findInVesaliusSample();
};

} // namespace splitseg::ui
