// The CLI as users call it: JSON lines per step, clear one-line errors, non-zero exits.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

namespace {
struct Result {
  int code;
  QString out;
  QString err;
};
Result cli(const QStringList& args) {
  QProcess p;
  p.start(SPLITSEG_CLI, args);
  p.waitForFinished(300000);
  return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

// The same, as bytes and with how the process ended: for output that must hold no raw bytes
// and for runs that used to die on a signal.
struct RawResult {
  QProcess::ExitStatus status;
  int code;
  QByteArray out;
  QByteArray err;
};
RawResult cliRaw(const QString& program, const QStringList& args, const QString& workingDirectory = {}) {
  QProcess p;
  if (!workingDirectory.isEmpty()) p.setWorkingDirectory(workingDirectory);
  p.start(program, args);
  p.waitForFinished(300000);
  return {p.exitStatus(), p.exitCode(), p.readAllStandardOutput(), p.readAllStandardError()};
}

QJsonObject parseObject(const QString& text) {
  QJsonParseError error;
  const auto doc = QJsonDocument::fromJson(text.toUtf8(), &error);
  if (error.error != QJsonParseError::NoError) qWarning("not JSON: %s", qPrintable(text));
  return doc.object();
}

// A session file holding `run` (a version-2 session, as the GUI and `session save` write it).
void writeSession(const QString& file, const QByteArray& runJson) {
  QFile f(file);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  f.write(R"({"splitseg_session": 2, "volumes": [], "run": )" + runJson + "}\n");
}

// A run as the CLI writes it (every network option resolved), then moved away from the
// defaults in a few fields: what a session saved by the GUI holds.
QJsonObject sessionRun() {
  const auto r = cli({"train", "--synthetic", "32", "--base", "4", "--depth", "3", "--print-run"});
  if (r.code != 0) qWarning("%s", qPrintable(r.err));
  QJsonObject run = parseObject(r.out);
  run["learning_rate"] = 0.002;
  run["seed"] = 9;
  run["batch"] = 2;
  run["patch"] = QJsonArray{32, 32, 16};
  run["precision"] = "bf16:enc0";
  run["recompute"] = QJsonArray{"dec0"};
  run["placement"] = QJsonObject{{"enc0", "cpu"}};
  auto schedule = run["schedule"].toObject();
  schedule["steps"] = 11;
  schedule["validate_every"] = 5;
  run["schedule"] = schedule;
  return run;
}
} // namespace

class CliTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void trainPrintsJsonLines() {
    auto r = cli({"train", "--synthetic", "32", "--base", "4", "--steps", "5", "--placement", "enc0=cpu",
                  "--progress", "jsonl"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto lines = r.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 5);
    int step = 0;
    for (const auto& line : lines) {
      QJsonParseError error;
      const auto doc = QJsonDocument::fromJson(line.toUtf8(), &error);
      QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(line));
      const auto o = doc.object();
      QCOMPARE(o.value("step").toInt(), ++step);
      QVERIFY(o.value("loss").isDouble());
      QVERIFY(o.value("memory").toArray().size() >= 1);
      // The CPU's planned peak beside its measured one (the planner's figure in the same terms:
      // PlannerMeasuredTest holds it to the measurement; here that it is the run's).
      const auto cpu = o.value("memory").toArray().last().toObject();
      QCOMPARE(cpu.value("device").toString(), QString("cpu"));
      QVERIFY(cpu.value("planned").toDouble() > 0);
      QVERIFY2(std::abs(cpu.value("planned").toDouble() / cpu.value("peak").toDouble() - 1) <= 0.05, qPrintable(line));
    }
  }

  void devicesListsCpu() {
    auto r = cli({"devices", "--json"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.contains("\"cpu\""));
  }

  // --precision P (every stage) or P:stage,stage (those in P, the rest in the other), planned
  // per stage; train runs the same text.
  void stagePrecision_data() {
    QTest::addColumn<QString>("precision");
    QTest::addColumn<QString>("bf16Stages");
    QTest::newRow("fp32") << "fp32" << "";
    QTest::newRow("bf16") << "bf16" << "enc0,enc1,bottleneck,dec1,dec0,head";
    QTest::newRow("bf16:enc0,dec0") << "bf16:enc0,dec0" << "enc0,dec0";
    QTest::newRow("fp32:head") << "fp32:head" << "enc0,enc1,bottleneck,dec1,dec0";
  }
  void stagePrecision() {
    QFETCH(QString, precision);
    QFETCH(QString, bf16Stages);
    auto r = cli({"plan", "--size", "32", "--base", "4", "--depth", "3", "--precision", precision, "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto plan = QJsonDocument::fromJson(r.out.toUtf8()).object().value("plan").toObject();
    QStringList got;
    for (const auto& s : plan.value("stages").toArray())
      if (s.toObject().value("precision").toString() == "bf16") got << s.toObject().value("name").toString();
    QCOMPARE(got.join(','), bf16Stages);
    QCOMPARE(plan.value("stage_precision").toString(), precision);
    if (precision != "bf16:enc0,dec0") return;  // one training run is enough
    auto t = cli({"train", "--synthetic", "32", "--base", "4", "--depth", "3", "--steps", "2", "--precision", precision,
                  "--recompute", "dec0", "--progress", "jsonl"});
    QVERIFY2(t.code == 0, qPrintable(t.err));
    QCOMPARE(t.out.trimmed().split('\n').size(), 2);
  }

  // One vocabulary: plan says --patch X,Y,Z and --recompute like train; the old --size DxHxW
  // and --checkpoint stay as aliases for the same plan.
  void planSpeaksTheRunVocabulary() {
    auto now = cli({"plan", "--patch", "48,32,16", "--base", "4", "--depth", "3", "--recompute", "dec0", "--json"});
    QVERIFY2(now.code == 0, qPrintable(now.err));
    auto old = cli({"plan", "--size", "16x32x48", "--base", "4", "--depth", "3", "--checkpoint", "dec0", "--json"});
    QVERIFY2(old.code == 0, qPrintable(old.err));
    QCOMPARE(now.out, old.out);
    auto none = cli({"plan", "--patch", "48,32,16", "--base", "4", "--depth", "3", "--json"});
    QVERIFY2(none.code == 0, qPrintable(none.err));
    QVERIFY(none.out != now.out);  // recompute changes the plan
  }

  // plan --largest on GPUs reports the largest cube as asked and with host offload; offload puts
  // the recomputed stages' inputs on the host (offload_bytes), which a CPU-only run never has.
  void planLargestWithHostOffload() {
    const QStringList base{"plan", "--patch", "32", "--base", "4", "--depth", "3", "--precision", "bf16", "--recompute", "all",
                           "--devices", "cuda:0=1GiB,cuda:1=1GiB", "--placement", "enc0=cuda:0,enc1=cuda:0,bottleneck=cuda:1,"
                           "dec1=cuda:1,dec0=cuda:1,head=cuda:1", "--allowance", "0", "--json"};
    auto r = cli(base + QStringList{"--largest"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto top = QJsonDocument::fromJson(r.out.toUtf8()).object();
    const auto asked = top.value("largest").toObject(), offloaded = top.value("largest_offload").toObject();
    QVERIFY2(!offloaded.isEmpty(), qPrintable(r.out.left(400)));
    QCOMPARE(asked.value("offload").toBool(), false);
    QCOMPARE(offloaded.value("offload").toBool(), true);
    QVERIFY(asked.value("edge").toInt() > 0);
    // The stages recomputed at that size: here every stage, as asked (the auto-placer may add some).
    QCOMPARE(asked.value("recompute").toArray().size(), 6);
    auto plain = cli({"plan", "--patch", "32", "--base", "4", "--depth", "3", "--devices", "cuda:0=1GiB", "--allowance", "0",
                      "--json", "--largest"});
    QVERIFY2(plain.code == 0, qPrintable(plain.err));
    QCOMPARE(QJsonDocument::fromJson(plain.out.toUtf8()).object().value("largest").toObject().value("recompute").toArray().size(), 0);
    QVERIFY(offloaded.value("edge").toInt() >= asked.value("edge").toInt());
    QVERIFY(offloaded.value("offload_bytes").toDouble() > 0);
    QCOMPARE(top.value("plan").toObject().value("offload_bytes").toDouble(), 0.0);
    auto on = cli(base + QStringList{"--offload"});
    QVERIFY2(on.code == 0, qPrintable(on.err));
    QVERIFY(QJsonDocument::fromJson(on.out.toUtf8()).object().value("plan").toObject().value("offload_bytes").toDouble() > 0);
    auto cpu = cli({"plan", "--patch", "32", "--base", "4", "--depth", "3", "--recompute", "all", "--devices", "cpu=4GiB",
                    "--offload", "--json"});
    QVERIFY2(cpu.code == 0, qPrintable(cpu.err));
    QCOMPARE(QJsonDocument::fromJson(cpu.out.toUtf8()).object().value("plan").toObject().value("offload_bytes").toDouble(), 0.0);
  }

  // plan --measure-speed: the CPU's training speed measured (a few steps of the same network at
  // 64^3) and the predicted step time computed from it instead of the default speed; a rank's
  // "r1:cpu" on this host gets the same measurement.
  // plan --inference --largest: the largest cubic window whose pass fits. On a CPU given the 32^3
  // window's peak and 1 KiB, the window found fits and the next size does not; with room to spare
  // it is the whole volume (its longest side).
  void planLargestWindow() {
    const QStringList base{"plan", "--inference", "--volume", "64,64,48", "--base", "4", "--depth", "3", "--norm", "none", "--json"};
    auto plan = [&](const QStringList& extra) {
      auto r = cli(base + extra);
      [&] { QVERIFY2(r.code == 0, qPrintable(r.err)); }();
      return QJsonDocument::fromJson(r.out.toUtf8()).object();
    };
    const auto at32 = plan({"--window", "32", "--devices", "cpu=64GiB"});
    const auto peak = static_cast<std::int64_t>(at32["plan"].toObject()["devices"].toArray()[0].toObject()["peak"].toDouble());
    const QString tight = "cpu=" + QString::number(peak + 1024);
    const auto largest = plan({"--window", "16", "--devices", tight, "--largest"})["largest_window"].toObject();
    const int edge = largest["edge"].toInt(), step = largest["step"].toInt();
    QVERIFY2(edge >= 32 && edge < 64 && step > 0, qPrintable(QString::number(edge)));
    QCOMPARE(largest["limiting_device"].toString(), QString("cpu"));
    QCOMPARE(plan({"--window", QString::number(edge), "--devices", tight})["plan"].toObject()["fits"].toBool(), true);
    QCOMPARE(plan({"--window", QString::number(edge + step), "--devices", tight})["plan"].toObject()["fits"].toBool(), false);
    QCOMPARE(plan({"--devices", "cpu=64GiB", "--largest"})["largest_window"].toObject()["edge"].toInt(), 64);
  }

  void planMeasuresSpeed() {
    const QStringList base{"plan", "--patch", "32", "--base", "4", "--depth", "3", "--json"};
    auto plain = cli(base + QStringList{"--devices", "cpu=4GiB"});
    auto measured = cli(base + QStringList{"--devices", "cpu=4GiB", "--measure-speed"});
    QVERIFY2(plain.code == 0 && measured.code == 0, qPrintable(plain.err + measured.err));
    const auto p0 = QJsonDocument::fromJson(plain.out.toUtf8()).object().value("plan").toObject();
    const auto p1 = QJsonDocument::fromJson(measured.out.toUtf8()).object().value("plan").toObject();
    QVERIFY(!p0.contains("measured_speeds"));
    const auto cpu = p1.value("measured_speeds").toObject().value("cpu").toObject();
    const double speed = cpu.value("flops_per_second").toDouble();
    QVERIFY2(speed > 0 && cpu.value("step_seconds").toDouble() > 0, qPrintable(measured.out.left(600)));
    QCOMPARE(cpu.value("patch").toArray().size(), 3);
    QCOMPARE(cpu.value("patch").toArray().at(0).toInt(), 32);  // the planned patch
    // The prediction is the plan's FLOPs at the measured speed.
    double flops = 0;
    for (const auto st : p1.value("stages").toArray()) flops += st.toObject().value("flops").toDouble();
    const double compute = p1.value("predicted_compute_seconds").toDouble();
    QVERIFY2(std::abs(compute - flops / speed) <= 1e-9 * compute,
             qPrintable(QString("compute %1 s, flops/speed %2 s").arg(compute).arg(flops / speed)));
    QVERIFY(std::abs(compute - p0.value("predicted_compute_seconds").toDouble()) > 1e-12);
    auto ranks = cli(base + QStringList{"--devices", "r0:cpu=4GiB,r1:cpu=4GiB", "--placement",
                                        "enc0=r0:cpu,enc1=r0:cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu",
                                        "--measure-speed"});
    QVERIFY2(ranks.code == 0, qPrintable(ranks.err));
    const auto rp = QJsonDocument::fromJson(ranks.out.toUtf8()).object().value("plan").toObject();
    QCOMPARE(rp.value("measured_speeds").toObject().keys(), QStringList{"cpu"});
  }

  // plan for ranks with micro-batches: devices named by rank, the schedule in the plan; the same
  // bytes cross between the ranks per step whatever M is, the peaks change with M.
  void planOverRanksWithMicroBatches() {
    const QStringList base{"plan", "--patch", "32", "--batch", "4", "--base", "4", "--depth", "3", "--devices",
                           "r0:cpu=8GiB,r1:cpu=8GiB", "--placement",
                           "enc0=r0:cpu,enc1=r0:cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu", "--json"};
    auto one = cli(base), four = cli(base + QStringList{"--micro-batches", "4"});
    QVERIFY2(one.code == 0 && four.code == 0, qPrintable(one.err + four.err));
    const auto p1 = QJsonDocument::fromJson(one.out.toUtf8()).object().value("plan").toObject();
    const auto p4 = QJsonDocument::fromJson(four.out.toUtf8()).object().value("plan").toObject();
    QCOMPARE(p1.value("micro_batches").toInt(), 1);
    QCOMPARE(p4.value("micro_batches").toInt(), 4);
    QCOMPARE(p4.value("bytes_moved").toDouble(), p1.value("bytes_moved").toDouble());
    QVERIFY(p1.value("bytes_moved").toDouble() > 0);
    const auto d1 = p1.value("devices").toArray(), d4 = p4.value("devices").toArray();
    QCOMPARE(d4.size(), 2);
    QCOMPARE(d4[1].toObject().value("name").toString(), QString("r1:cpu"));
    QVERIFY(d4[1].toObject().value("peak").toDouble() != d1[1].toObject().value("peak").toDouble());
    auto bad = cli(base + QStringList{"--micro-batches", "5"});
    QVERIFY(bad.code != 0);
    QVERIFY2(bad.err.contains("micro_batches"), qPrintable(bad.err));
    // Without --devices: the ranks' devices, each like this host's (a capacity, not unknown); an
    // inference pass of 4 windows takes 2 micro-batches without a training batch to match.
    auto noDevices = cli({"plan", "--base", "4", "--depth", "3", "--placement",
                          "enc0=r0:cpu,enc1=r0:cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu", "--inference",
                          "--volume", "48,48,48", "--window", "32", "--windows-per-pass", "4", "--micro-batches", "2", "--json"});
    QVERIFY2(noDevices.code == 0, qPrintable(noDevices.err));
    const auto pi = QJsonDocument::fromJson(noDevices.out.toUtf8()).object().value("plan").toObject();
    QCOMPARE(pi.value("micro_batches").toInt(), 2);
    const auto di = pi.value("devices").toArray();
    QCOMPARE(di.size(), 2);
    for (int r = 0; r < 2; ++r) {
      QCOMPARE(di[r].toObject().value("name").toString(), QString("r%1:cpu").arg(r));
      QVERIFY(di[r].toObject().value("capacity").toDouble() > 0);
    }
  }

  // train --session S --print-run prints the session's run; typed flags overlay it and
  // change only their own fields.
  void sessionRunIsPrintedAndFlagsOverlayIt() {
    QTemporaryDir tmp;
    const QJsonObject run = sessionRun();
    QVERIFY(!run.isEmpty());
    const QString file = tmp.filePath("s.splitseg");
    writeSession(file, QJsonDocument(run).toJson());
    auto r = cli({"train", "--session", file, "--print-run"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(parseObject(r.out), run);
    // Printed again from a session holding the printed text: the same text, byte for byte.
    const QString again = tmp.filePath("again.splitseg");
    writeSession(again, r.out.toUtf8());
    auto r2 = cli({"train", "--session", again, "--print-run"});
    QVERIFY2(r2.code == 0, qPrintable(r2.err));
    QCOMPARE(r2.out, r.out);

    auto o = cli({"train", "--session", file, "--steps", "7", "--print-run"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    QJsonObject expected = run;
    auto schedule = expected["schedule"].toObject();
    schedule["steps"] = 7;
    expected["schedule"] = schedule;
    QCOMPARE(parseObject(o.out), expected);

    auto p = cli({"train", "--session", file, "--patch", "48,32,16", "--precision", "fp32", "--print-run"});
    QVERIFY2(p.code == 0, qPrintable(p.err));
    expected = run;
    expected["patch"] = QJsonArray{48, 32, 16};
    expected["precision"] = "fp32";
    QCOMPARE(parseObject(p.out), expected);
  }

  // A bad run in a session: one error line naming the field, nothing trained or written.
  // A shared session cannot make training write outside its folder: the checkpoint is dropped
  // with a warning and nothing is written there.
  void sessionCannotWriteOutsideItsFolder() {
    QTemporaryDir dir;
    QDir().mkpath(dir.filePath("shared"));
    const QString session = dir.filePath("shared/s.splitseg");
    QJsonObject run = sessionRun();
    run["checkpoint"] = "../victim.pt";
    auto schedule = run["schedule"].toObject();
    schedule["steps"] = 1;
    schedule["validate_every"] = 0;
    run["schedule"] = schedule;
    run["patch"] = QJsonArray{16, 16, 16};
    writeSession(session, QJsonDocument(run).toJson());
    const auto r = cli({"train", "--session", session, "--progress", "none"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("outside the session's folder"), qPrintable(r.err));
    QVERIFY(!QFile::exists(dir.filePath("victim.pt")));
  }

  void badSessionRunIsRefusedByField_data() {
    QTest::addColumn<QString>("field");  // what the error line names
    QTest::newRow("learning rate as text") << "learning_rate";
    QTest::newRow("unknown key") << "stepz";
    QTest::newRow("unknown nested key") << "schedule.stepz";
    QTest::newRow("depth 100") << "depth";
    QTest::newRow("patch 0") << "patch";
    QTest::newRow("device nobody has") << "placement.enc0";
    QTest::newRow("bad device string") << "placement.enc0";
    QTest::newRow("batch 0") << "batch";
  }
  void badSessionRunIsRefusedByField() {
    QFETCH(QString, field);
    const QString tag = QTest::currentDataTag();
    QJsonObject run = sessionRun();
    QVERIFY(!run.isEmpty());
    if (tag == "learning rate as text") {
      run["learning_rate"] = "fast";
    } else if (tag == "unknown key") {
      run["stepz"] = 3;
    } else if (tag == "unknown nested key") {
      auto schedule = run["schedule"].toObject();
      schedule["stepz"] = 3;
      run["schedule"] = schedule;
    } else if (tag == "depth 100") {
      auto network = run["network"].toObject();
      auto options = network["options"].toObject();
      options["depth"] = 100;
      network["options"] = options;
      run["network"] = network;
    } else if (tag == "patch 0") {
      run["patch"] = QJsonArray{0, 64, 64};
    } else if (tag == "device nobody has") {
      run["placement"] = QJsonObject{{"enc0", "cuda:9"}};
    } else if (tag == "bad device string") {
      run["placement"] = QJsonObject{{"enc0", "tpu:0"}};
    } else if (tag == "batch 0") {
      run["batch"] = 0;
    }
    QTemporaryDir tmp;
    const QString file = tmp.filePath("bad.splitseg"), checkpoint = tmp.filePath("never.ckpt");
    writeSession(file, QJsonDocument(run).toJson());
    auto r = cli({"train", "--session", file, "--steps", "1", "--save", checkpoint, "--progress", "jsonl"});
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains(field), qPrintable(r.err));
    QCOMPARE(r.err.trimmed().count('\n'), 0);  // one line
    QVERIFY2(!r.out.contains("\"loss\""), qPrintable(r.out));  // no step ran
    QVERIFY(!QFile::exists(checkpoint));
    QVERIFY(!QFile::exists(checkpoint + ".tmp"));
  }

  // Issue 50: a 400 KB session nesting 200,000 arrays crashed train on a stack overflow (signal,
  // exit 139) before anything ran. Now: exit 1 and one line saying why.
  void deepSessionIsOneErrorLine() {
    QTemporaryDir tmp;
    const QString file = tmp.filePath("deep.splitseg");
    QFile f(file);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"splitseg_session": 2, "volumes": [], "run": {"splitseg_run": 1}, "view": )" + QByteArray(200000, '[') +
            QByteArray(200000, ']') + "}\n");
    f.close();
    const auto r = cliRaw(SPLITSEG_CLI, {"train", "--session", file, "--steps", "1"});
    QCOMPARE(r.status, QProcess::NormalExit);
    QCOMPARE(r.code, 1);
    QCOMPARE(QString::fromUtf8(r.err),
             "splitseg-cli: " + file + ": session nests JSON arrays and objects deeper than 64 levels; refused\n");
    QVERIFY2(!r.out.contains("\"loss\""), r.out.constData());
  }

  // Issue 50: a session's paths are someone else's bytes. Not UTF-8 (0xFF) or a terminal control
  // sequence (ESC [2J clears the screen): warnings and errors show them as \xNN text, and no raw
  // 0xFF or ESC byte reaches the terminal. The bytes come from the file itself (then it is not
  // JSON) or from the folder the session lies in (then its paths hold them).
  void sessionPathBytesAreEscaped_data() {
    QTest::addColumn<QString>("where");    // "file" | "folder"
    QTest::addColumn<QString>("command");  // %1: the session file
    QTest::addColumn<int>("code");
    QTest::addColumn<QString>("stream");      // "err" | "out": where the escaped text is
    QTest::addColumn<QByteArray>("expected");  // <tmp>: the temporary folder
    QTest::addColumn<bool>("exact");          // the whole stream, or a part of it
    QTest::newRow("in the file: train") << "file" << "train --session %1 --steps 1" << 1 << "err"
                                        << QByteArray("last read: '\"scan\\xff'") << false;
    QTest::newRow("in the folder: train --print-run")
        << "folder" << "train --session %1 --print-run" << 0 << "err"
        << QByteArray("session dir\\xff\\x1b[2J/s.splitseg: image volume not found: <tmp>/dir\\xff\\x1b[2J/scan\\x1b[2J.nii.gz\n")
        << true;
    // The session's absolute paths hold the folder's bytes: JSON cannot, so they are escaped.
    QTest::newRow("in the folder: session show")
        << "folder" << "session show %1" << 0 << "out"
        << QByteArray("dir\\\\xff\\\\x1b[2J/scan\\\\x1b[2J.nii.gz\"") << false;
  }
  void sessionPathBytesAreEscaped() {
    QFETCH(QString, where);
    QFETCH(QString, command);
    QFETCH(int, code);
    QFETCH(QString, stream);
    QFETCH(QByteArray, expected);
    QFETCH(bool, exact);
    QTemporaryDir tmp;
    namespace fs = std::filesystem;
    const fs::path root = tmp.path().toStdString();
    const std::string folder = where == "folder" ? "dir\xff\x1b[2J" : "plain";
    fs::create_directories(root / folder);
    {
      std::ofstream f(root / folder / "s.splitseg", std::ios::binary);
      if (where == "file")  // raw bytes in a JSON string: not JSON; refused naming them
        f << "{\"splitseg_session\":2,\"volumes\":[{\"path\":\"scan\xff\x1b[2J.nii.gz\",\"role\":\"image\"}]}";
      else  // JSON (ESC written as JSON escapes it); the 0xFF comes from the session's folder
        f << "{\"splitseg_session\":2,\"volumes\":[{\"path\":\"scan\\u001b[2J.nii.gz\",\"role\":\"image\"}],\"run\":{\"splitseg_run\":1}}";
    }
    // A QString argument cannot hold byte 0xFF: the shell makes the path (printf octal) and runs
    // the CLI in the temporary folder, the session path relative to it.
    const QString octal = where == "folder" ? "dir\\377\\033[2J" : "plain";
    const QString script = "exec \"$0\" " + command.arg("\"$(printf '" + octal + "/s.splitseg')\"");
    const auto r = cliRaw("/bin/sh", {"-c", script, SPLITSEG_CLI}, tmp.path());
    QCOMPARE(r.status, QProcess::NormalExit);
    QVERIFY2(r.code == code, r.err.constData());
    expected.replace("<tmp>", tmp.path().toUtf8());
    const QByteArray& text = stream == "err" ? r.err : r.out;
    if (exact) QCOMPARE(text, expected);
    else QVERIFY2(text.contains(expected), text.constData());
    for (const QByteArray* b : {&r.out, &r.err}) {
      QVERIFY2(!b->contains('\xff'), b->toPercentEncoding(" /:\\[]'\"{},\n").constData());
      QVERIFY2(!b->contains('\x1b'), b->toPercentEncoding(" /:\\[]'\"{},\n").constData());
    }
    if (stream == "err") QCOMPARE(r.err.count('\n'), 1);  // one line: the one warning, or the error
    else QVERIFY2(r.err.isEmpty(), r.err.constData());      // session show: the warnings are in its JSON
  }

  void errors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("unknown stage") << QStringList{"train", "--synthetic", "32", "--base", "4", "--placement", "enc7=cpu"}
                                   << "unknown stage 'enc7'";
    QTest::newRow("absent device") << QStringList{"train", "--synthetic", "32", "--base", "4", "--placement", "enc0=cuda:9"}
                                   << "not available";
    QTest::newRow("bad size") << QStringList{"train", "--synthetic", "30", "--base", "4"} << "multiple of 16";
    QTest::newRow("no data") << QStringList{"train", "--base", "4"} << "give training data";
    QTest::newRow("precision: unknown stage")
        << QStringList{"train", "--synthetic", "32", "--base", "4", "--precision", "bf16:enc0,enc9"} << "unknown stage 'enc9'";
    QTest::newRow("precision: unknown type") << QStringList{"plan", "--size", "32", "--base", "4", "--precision", "fp16"}
                                             << "unknown precision 'fp16'";
    QTest::newRow("missing checkpoint") << QStringList{"infer", "--synthetic", "16", "--checkpoint", "/nonexistent.pt"}
                                        << "checkpoint not found";
  }
  void errors() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    auto r = cli(args);
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains(message), qPrintable(r.err));
    QCOMPARE(r.err.trimmed().count('\n'), 0);  // one line
  }
};

QTEST_GUILESS_MAIN(CliTest)
#include "CliTest.moc"
