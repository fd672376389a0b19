#pragma once
// Undoable edits of the session's run (the document's patch, batch, precisions, recompute, ...):
// one QUndoStack entry per edit a person makes, beside the placement's MoveStagesCommand. A
// command sets one field of the run: it keeps the field's value before and after and, undone or
// redone, writes only that field back into the session's current run, so edits of other fields
// made since (another panel, a run starting) stay. Consecutive edits of one field can merge into
// one step (stepping or typing in a spin box); a merge that lands on the old value drops the step.
#include "core/placement/Precision.h"
#include "core/run/RunSpec.h"

#include <QString>
#include <QUndoCommand>

#include <array>
#include <functional>
#include <string>

namespace splitseg::ui {

class Session;

// One field of a run: its key (equal keys merge) and how to copy it from one run into another
// and compare it between two.
struct RunField {
  QString key;
  std::function<void(const run::RunSpec& from, run::RunSpec& to)> copy;
  std::function<bool(const run::RunSpec& a, const run::RunSpec& b)> same;

  // A plain member of RunSpec (run::RunSpec::batch, ::patch, ::offload, ::window, ...).
  template <class T>
  static RunField member(const QString& key, T run::RunSpec::*field) {
    return {key, [field](const run::RunSpec& from, run::RunSpec& to) { to.*field = from.*field; },
            [field](const run::RunSpec& a, const run::RunSpec& b) { return a.*field == b.*field; }};
  }
  // The whole precision setting: the fallback and every stage's override.
  static RunField precision();
  // One stage's override of the precision (present or absent: absent follows the fallback).
  static RunField stagePrecision(const std::string& stage);
  // Whether one stage recomputes its activations in backward.
  static RunField recompute(const std::string& stage);
  // The intensity normalisation of the preprocessing.
  static RunField intensity();
  // Everything but the network (which the session keeps its own): All settings' OK.
  static RunField wholeRun();
};

class RunEditCommand : public QUndoCommand {
public:
  enum class Merge { Never, Consecutive };
  // `after` is the session's run with the edit made; `before` is taken from the session.
  RunEditCommand(Session* session, RunField field, const run::RunSpec& after, const QString& text,
                 Merge merge = Merge::Never);

  void redo() override;
  void undo() override;
  int id() const override { return merge_ == Merge::Consecutive ? kMergeId : -1; }
  bool mergeWith(const QUndoCommand* other) override;

  const QString& key() const { return field_.key; }
  const run::RunSpec& before() const { return before_; }
  const run::RunSpec& after() const { return after_; }

  // Pushes the edit onto the session's undo stack (which applies it); false, and nothing pushed,
  // when the field already has that value.
  static bool push(Session* session, RunField field, const run::RunSpec& after, const QString& text,
                   Merge merge = Merge::Never);

private:
  static constexpr int kMergeId = 0x52756e;  // "Run"
  void apply(const run::RunSpec& from);

  Session* session_;
  RunField field_;
  run::RunSpec before_, after_;
  Merge merge_;
};

// The edits the panels make, each one undo step with its text ("set enc1 to bf16"); false when
// the run already is so.
namespace runedit {
// Cubic patch of `edge`³ (spin boxes: consecutive edits merge).
bool setPatch(Session* session, std::int64_t edge);
bool setBatch(Session* session, int batch);
// Every stage in `p`: per-stage overrides go.
bool setAllPrecision(Session* session, placement::Precision p);
// One stage's precision: an override, or none when `p` is the fallback.
bool setStagePrecision(Session* session, const std::string& stage, placement::Precision p);
bool setRecompute(Session* session, const std::string& stage, bool on);
bool setOffload(Session* session, bool on);
bool setSteps(Session* session, std::int64_t steps);
// An intensity preset by name (intensityPresetNames; throws InvalidArgument for another).
bool setIntensity(Session* session, const std::string& preset);
// Review: a cubic window of `edge`³, 0 for the whole volume; `merge` for the spin box's steps.
bool setWindow(Session* session, std::int64_t edge, RunEditCommand::Merge merge = RunEditCommand::Merge::Never);
bool setOverlap(Session* session, double overlap);
bool setMirror(Session* session, const std::array<bool, 3>& axes);
bool setKeepLargest(Session* session, bool on);
// Every field of `run` but the network, as one step.
bool setRun(Session* session, const run::RunSpec& run, const QString& text);
// Any other field: `apply` edits a copy of the session's run; `field` says what it touched.
bool edit(Session* session, RunField field, const std::function<void(run::RunSpec&)>& apply, const QString& text,
          RunEditCommand::Merge merge = RunEditCommand::Merge::Never);
} // namespace runedit

} // namespace splitseg::ui
