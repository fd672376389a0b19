// The architecture registry: the built-in U-Net through the plugin interface, the residual
// U-Net plugin loaded from its .so (built, split-executed, planned within 15% of a measured
// training step, checkpoint-loaded by name), and broken plugins refused with reasons.
#include "core/base/Error.h"
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/NetworkFactory.h"
#include "core/engine/SplitExecutor.h"
#include "core/model/NetworkStructureOf.h"
#include "core/planner/MemoryPlanner.h"
#include "core/plugin/PluginRegistry.h"

#include <QTemporaryDir>
#include <QtTest>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

using namespace splitseg;
namespace fs = std::filesystem;

namespace {
bool hasFailure(const plugin::PluginRegistry& r, const std::string& file, const std::string& text) {
  for (const auto& f : r.failures())
    if (f.path.find(file) != std::string::npos && f.reason.find(text) != std::string::npos) return true;
  return false;
}
QString failuresText(const plugin::PluginRegistry& r) {
  QString s;
  for (const auto& f : r.failures()) s += QString::fromStdString(f.path + ": " + f.reason + "\n");
  return s;
}
const std::string kSmall = R"({"base_channels":4,"depth":4})";
} // namespace

class PluginRegistryTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { at::set_num_threads(2); }

  void builtinUNetGoesThroughTheRegistry() {
    plugin::PluginRegistry r;
    QVERIFY(r.has("unet3d"));
    QCOMPARE(r.info("unet3d").source, std::string("built-in"));
    auto net = r.create("unet3d", "");  // defaults
    QCOMPARE(net->architecture(), std::string("unet3d"));
    QCOMPARE(net->stageSpecs().size(), std::size_t{10});
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, r.create("nope", "{}"));
  }

  void residualUNetPluginLoads() {
    plugin::PluginRegistry r;
    QVERIFY2(r.loadLibrary(RESUNET_PLUGIN), qPrintable(failuresText(r)));
    QVERIFY(r.loadLibrary(RESUNET_PLUGIN));  // the same file again: no duplicate, no failure
    QVERIFY(r.failures().empty());
    QCOMPARE(r.info("resunet3d").source, std::string(RESUNET_PLUGIN));
    auto net = r.create("resunet3d", kSmall);
    QCOMPARE(net->stageNames(), (std::vector<std::string>{"stem", "enc1", "enc2", "bottleneck", "dec2", "dec1", "head"}));
    const auto specs = net->stageSpecs();
    QCOMPARE(specs[4].inputs, (std::vector<std::string>{"bottleneck", "enc2"}));
    QCOMPARE(specs[6].inputs, (std::vector<std::string>{"dec1", "stem"}));
    QCOMPARE(net->sizeDivisor(), std::int64_t{8});
    // Split across two "devices" (both CPU here) through the engine's executor.
    auto p = placement::Placement::uniform(net->stageNames(), "cpu");
    engine::SplitExecutor ex(net, p);
    auto y = ex.forward(torch::randn({2, 1, 16, 24, 16}));
    QCOMPARE(y.sizes().vec(), (std::vector<std::int64_t>{2, 1, 16, 24, 16}));
    // Bad options: a clear message, not a crash.
    try {
      r.create("resunet3d", R"({"depht":3})");
      QFAIL("accepted an unknown option");
    } catch (const InvalidArgument& e) {
      QVERIFY2(std::string(e.what()).find("unknown option 'depht'") != std::string::npos, e.what());
    }
  }

  // The planner reads the plugin's stages unchanged and its prediction holds for a real step.
  void plannerPredictsThePluginNetwork() {
    plugin::PluginRegistry r;
    QVERIFY(r.loadLibrary(RESUNET_PLUGIN));
    torch::manual_seed(0);
    auto net = r.create("resunet3d", R"({"base_channels":4,"depth":3})");
    auto structure = model::networkStructure(*net);
    QCOMPARE(structure.parameters(), net->parameterCount());
    net->root().train();
    engine::SplitExecutor executor(net, placement::Placement::uniform(net->stageNames(), "cpu"));
    torch::optim::Adam adam(net->root().parameters(), torch::optim::AdamOptions(1e-3));
    const int edge = 48;
    auto step = [&] {
      auto logits = executor.forward(torch::randn({1, 1, edge, edge, edge}));
      auto loss = engine::segmentationLoss(logits, torch::randint(0, 2, {1, edge, edge, edge}, torch::kLong));
      loss.loss.backward();
      adam.step();
    };
    adam.zero_grad();
    step();
    adam.zero_grad();
    engine::CpuMemoryCounter counter;
    {
      engine::CpuMemoryScope scope(counter);
      step();
    }
    planner::MemoryPlanner planner(structure);
    planner::PlanRequest req;
    req.size = {edge, edge, edge};
    req.devices = {{"cpu", std::int64_t{64} << 30}};
    const auto plan = planner.plan(req);
    const double predicted =
        static_cast<double>(plan.devices[0].peak - plan.devices[0].allowance - plan.devices[0].persistentBytes);
    const double measured = static_cast<double>(counter.peak());
    qInfo("resunet3d b4 d3 48^3: predicted %.2f MiB measured %.2f MiB", predicted / (1 << 20), measured / (1 << 20));
    QVERIFY2(std::abs(predicted - measured) / measured <= 0.15, "planner off by more than 15% on the plugin network");
  }

  // Checked before dlopen (which runs the plugin's code): a file or folder others can write.
  void pluginsOthersCouldReplaceAreNotLoaded_data() {
    QTest::addColumn<int>("fileMode");
    QTest::addColumn<int>("folderMode");
    QTest::addColumn<QString>("reason");
    QTest::newRow("safe") << 0755 << 0755 << "";
    QTest::newRow("world-writable file") << 0757 << 0755 << "the file is writable by other users (mode 0757)";
    QTest::newRow("group-writable file") << 0775 << 0755 << "the file is writable by other users (mode 0775)";
    QTest::newRow("world-writable folder") << 0755 << 0777 << "is writable by other users (mode 0777)";
  }
  void pluginsOthersCouldReplaceAreNotLoaded() {
    QFETCH(int, fileMode);
    QFETCH(int, folderMode);
    QFETCH(QString, reason);
    QTemporaryDir tmp;
    const fs::path dir = fs::path(tmp.path().toStdString()) / "plugins";
    fs::create_directories(dir);
    const fs::path file = dir / "resunet.so";
    fs::copy_file(RESUNET_PLUGIN, file);
    fs::permissions(file, static_cast<fs::perms>(fileMode));
    fs::permissions(dir, static_cast<fs::perms>(folderMode));
    plugin::PluginRegistry r;
    const bool loaded = r.loadLibrary(file.string());
    fs::permissions(dir, static_cast<fs::perms>(0755));
    QCOMPARE(loaded, reason.isEmpty());
    if (!reason.isEmpty()) QVERIFY2(hasFailure(r, "resunet.so", reason.toStdString()), qPrintable(failuresText(r)));
  }

  void brokenPluginsAreSkippedWithReasons() {
    plugin::PluginRegistry r;
    const fs::path dir = fs::path(QDir::tempPath().toStdString()) / "splitseg-badplugins";
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(BAD_PLUGIN_DIR)) fs::copy_file(e.path(), dir / e.path().filename(), fs::copy_options::overwrite_existing);
    std::ofstream(dir / "garbage.so") << "this is not an ELF file";
    fs::copy_file(RESUNET_PLUGIN, dir / "copy_of_resunet.so", fs::copy_options::overwrite_existing);
    QVERIFY(r.loadLibrary(RESUNET_PLUGIN));
    const int loaded = r.addFolder(dir.string());
    QCOMPARE(loaded, 1);  // only the throwing one has a valid descriptor
    QVERIFY2(hasFailure(r, "garbage.so", "cannot load"), qPrintable(failuresText(r)));
    QVERIFY2(hasFailure(r, "NoEntry", "no splitseg_plugin_entry() entry point"), qPrintable(failuresText(r)));
    QVERIFY2(hasFailure(r, "BadApiVersion", "plugin API version 99"), qPrintable(failuresText(r)));
    QVERIFY2(hasFailure(r, "BadTorchVersion", "built against LibTorch 1.13.0"), qPrintable(failuresText(r)));
    QVERIFY2(hasFailure(r, "copy_of_resunet", "already provided by"), qPrintable(failuresText(r)));
    QVERIFY(!r.has("future-net"));
    try {
      r.create("throwing-net", "");
      QFAIL("no error from a throwing factory");
    } catch (const InvalidArgument& e) {
      QVERIFY2(std::string(e.what()).find("broken on purpose") != std::string::npos, e.what());
    }
    r.addFolder((dir / "does-not-exist").string());
    QVERIFY(hasFailure(r, "does-not-exist", "not a folder"));
    // Not fs::remove_all: the torch wheel's libtorch.so exports its own std::filesystem, whose
    // remove_all crashes (null call) when the program binds to it.
    QDir(QString::fromStdString(dir.string())).removeRecursively();
  }

  // Checkpoints name their architecture; the engine's factory finds plugin ones through the
  // process registry, which scans <exe>/../lib/splitseg/plugins (the build tree's too).
  void engineFactoryFindsPluginArchitectures() {
    auto net = engine::createNetwork("resunet3d", kSmall);
    QCOMPARE(net->architecture(), std::string("resunet3d"));
    QCOMPARE(nlohmann::json::parse(net->optionsJson())["base_channels"].get<int>(), 4);
  }
};

QTEST_GUILESS_MAIN(PluginRegistryTest)
#include "PluginRegistryTest.moc"
