#include "ui/session/RunEditCommand.h"

#include "ui/session/Session.h"

#include "core/volume/Intensity.h"

#include <QCoreApplication>
#include <QUndoStack>

namespace splitseg::ui {

RunField RunField::precision() {
  return {"precision",
          [](const run::RunSpec& from, run::RunSpec& to) { to.precision = from.precision; },
          [](const run::RunSpec& a, const run::RunSpec& b) {
            return a.precision.fallback == b.precision.fallback && a.precision.stages == b.precision.stages;
          }};
}

RunField RunField::stagePrecision(const std::string& stage) {
  const auto of = [stage](const run::RunSpec& r) -> const placement::Precision* {
    const auto it = r.precision.stages.find(stage);
    return it == r.precision.stages.end() ? nullptr : &it->second;
  };
  return {"precision:" + QString::fromStdString(stage),
          [stage, of](const run::RunSpec& from, run::RunSpec& to) {
            if (const auto* p = of(from)) to.precision.stages[stage] = *p;
            else to.precision.stages.erase(stage);
          },
          [of](const run::RunSpec& a, const run::RunSpec& b) {
            const auto *pa = of(a), *pb = of(b);
            return pa && pb ? *pa == *pb : pa == pb;
          }};
}

RunField RunField::recompute(const std::string& stage) {
  return {"recompute:" + QString::fromStdString(stage),
          [stage](const run::RunSpec& from, run::RunSpec& to) {
            if (from.recompute.count(stage)) to.recompute.insert(stage);
            else to.recompute.erase(stage);
          },
          [stage](const run::RunSpec& a, const run::RunSpec& b) {
            return a.recompute.count(stage) == b.recompute.count(stage);
          }};
}

RunField RunField::intensity() {
  // IntensityOptions has no ==: compared as the preprocessing's JSON of it alone.
  const auto text = [](const run::RunSpec& r) {
    Preprocessing p;
    p.intensity = r.preprocessing.intensity;
    return p.toJson();
  };
  return {"intensity",
          [](const run::RunSpec& from, run::RunSpec& to) { to.preprocessing.intensity = from.preprocessing.intensity; },
          [text](const run::RunSpec& a, const run::RunSpec& b) { return text(a) == text(b); }};
}

RunField RunField::wholeRun() {
  // The network stays the session's own (Session::setRun keeps it too).
  const auto withNetworkOf = [](run::RunSpec r, const run::RunSpec& of) {
    r.architecture = of.architecture;
    r.networkOptions = of.networkOptions;
    return r;
  };
  return {"run", [withNetworkOf](const run::RunSpec& from, run::RunSpec& to) { to = withNetworkOf(from, to); },
          [withNetworkOf](const run::RunSpec& a, const run::RunSpec& b) { return withNetworkOf(a, b) == b; }};
}

RunEditCommand::RunEditCommand(Session* session, RunField field, const run::RunSpec& after, const QString& text,
                               Merge merge)
    : session_(session), field_(std::move(field)), before_(session->run()), after_(after), merge_(merge) {
  setText(text);
}

void RunEditCommand::apply(const run::RunSpec& from) {
  // Only this field: what other edits did to the rest of the run since stays.
  run::RunSpec r = session_->run();
  field_.copy(from, r);
  session_->setRun(r);
}

void RunEditCommand::redo() { apply(after_); }
void RunEditCommand::undo() { apply(before_); }

bool RunEditCommand::mergeWith(const QUndoCommand* other) {
  const auto* o = dynamic_cast<const RunEditCommand*>(other);
  if (!o || o->merge_ != Merge::Consecutive || o->field_.key != field_.key || o->session_ != session_) return false;
  after_ = o->after_;
  setText(o->text());
  // Back where it started (112, 128, 112... then 96 again): no step at all.
  setObsolete(field_.same(before_, after_));
  return true;
}

bool RunEditCommand::push(Session* session, RunField field, const run::RunSpec& after, const QString& text,
                          Merge merge) {
  if (field.same(session->run(), after)) return false;
  session->undoStack()->push(new RunEditCommand(session, std::move(field), after, text, merge));
  return true;
}

namespace runedit {
namespace {
using Merge = RunEditCommand::Merge;
QString tr(const char* text) { return QCoreApplication::translate("RunEdit", text); }
QString name(const std::string& s) { return QString::fromStdString(s); }
QString name(placement::Precision p) { return QString::fromStdString(placement::toString(p)); }
// (QString::arg would read "%1³" as %13: the superscript is a digit to it.)
QString cube(std::int64_t edge) { return QString::number(edge) + "³"; }
} // namespace

bool edit(Session* session, RunField field, const std::function<void(run::RunSpec&)>& apply, const QString& text,
          Merge merge) {
  auto r = session->run();
  apply(r);
  return RunEditCommand::push(session, std::move(field), r, text, merge);
}

bool setPatch(Session* session, std::int64_t edge) {
  return edit(session, RunField::member("patch", &run::RunSpec::patch), [edge](run::RunSpec& r) { r.patch = {edge, edge, edge}; },
              tr("set patch to %1").arg(cube(edge)), Merge::Consecutive);
}

bool setBatch(Session* session, int batch) {
  return edit(session, RunField::member("batch", &run::RunSpec::batch), [batch](run::RunSpec& r) { r.batch = batch; },
              tr("set batch to %1").arg(batch), Merge::Consecutive);
}

bool setAllPrecision(Session* session, placement::Precision p) {
  return edit(session, RunField::precision(),
              [p](run::RunSpec& r) {
                r.precision = {};
                r.precision.fallback = p;
              },
              tr("set every stage to %1").arg(name(p)));
}

bool setStagePrecision(Session* session, const std::string& stage, placement::Precision p) {
  return edit(session, RunField::stagePrecision(stage),
              [&](run::RunSpec& r) {
                if (p == r.precision.fallback) r.precision.stages.erase(stage);
                else r.precision.stages[stage] = p;
              },
              tr("set %1 to %2").arg(name(stage), name(p)));
}

bool setRecompute(Session* session, const std::string& stage, bool on) {
  return edit(session, RunField::recompute(stage),
              [&](run::RunSpec& r) {
                if (on) r.recompute.insert(stage);
                else r.recompute.erase(stage);
              },
              (on ? tr("recompute %1") : tr("stop recomputing %1")).arg(name(stage)));
}

bool setOffload(Session* session, bool on) {
  return edit(session, RunField::member("offload", &run::RunSpec::offload), [on](run::RunSpec& r) { r.offload = on; },
              on ? tr("turn host offload on") : tr("turn host offload off"));
}

bool setSteps(Session* session, std::int64_t steps) {
  return edit(session, RunField::member("steps", &run::RunSpec::steps), [steps](run::RunSpec& r) { r.steps = steps; },
              tr("set steps to %1").arg(steps), Merge::Consecutive);
}

bool setIntensity(Session* session, const std::string& preset) {
  const auto options = intensityPreset(preset);  // throws before anything is pushed
  return edit(session, RunField::intensity(), [&](run::RunSpec& r) { r.preprocessing.intensity = options; },
              tr("set intensity to %1").arg(name(preset)));
}

bool setWindow(Session* session, std::int64_t edge, Merge merge) {
  return edit(session, RunField::member("window", &run::RunSpec::window), [edge](run::RunSpec& r) { r.window = {edge, edge, edge}; },
              edge > 0 ? tr("set window to %1").arg(cube(edge)) : tr("infer the whole volume"), merge);
}

bool setOverlap(Session* session, double overlap) {
  return edit(session, RunField::member("overlap", &run::RunSpec::overlap), [overlap](run::RunSpec& r) { r.overlap = overlap; },
              tr("set overlap to %1").arg(overlap), Merge::Consecutive);
}

bool setMirror(Session* session, const std::array<bool, 3>& axes) {
  const QString text = QString::fromStdString(run::mirrorToString(axes));
  return edit(session, RunField::member("mirror", &run::RunSpec::mirror), [axes](run::RunSpec& r) { r.mirror = axes; },
              text.isEmpty() ? tr("turn mirroring off") : tr("mirror along %1").arg(text));
}

bool setKeepLargest(Session* session, bool on) {
  return edit(session, RunField::member("keepLargest", &run::RunSpec::keepLargest), [on](run::RunSpec& r) { r.keepLargest = on; },
              on ? tr("keep each label's largest region") : tr("keep every region"));
}

bool setRun(Session* session, const run::RunSpec& run, const QString& text) {
  return RunEditCommand::push(session, RunField::wholeRun(), run, text);
}
} // namespace runedit

} // namespace splitseg::ui
