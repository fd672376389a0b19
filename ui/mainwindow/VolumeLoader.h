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
};

} // namespace splitseg::ui
