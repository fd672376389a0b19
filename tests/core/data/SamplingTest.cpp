// Patch sampler (foreground fraction over 1000 draws, padding, bounds), augmentation
// (seeded, flips consistent between image and label) and the bounded cache.
#include "core/base/Error.h"
#include "core/data/Augment.h"
#include "core/data/BoundedCache.h"
#include "core/data/PatchSampler.h"

#include <QtTest>

using namespace splitseg;
using namespace splitseg::data;

namespace {

// 64^3 case with one 2^3 foreground cube: uniform 8^3 patches almost never hit it.
Sample tinyForeground() {
  Geometry g;
  g.size = {64, 64, 64};
  Sample s;
  s.channels.push_back(Volume(g, 1.0f));
  s.label = Volume(g);
  for (int z = 40; z < 42; ++z)
    for (int y = 10; y < 12; ++y)
      for (int x = 50; x < 52; ++x) s.label.at(x, y, z) = 1.0f;
  return s;
}

bool hasForeground(const Sample& s) {
  for (float v : s.label.voxels())
    if (v > 0) return true;
  return false;
}

} // namespace

class SamplingTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void foregroundFraction_data() {
    QTest::addColumn<double>("fraction");
    QTest::newRow("default 1/3") << 1.0 / 3.0;
    QTest::newRow("0") << 0.0;
    QTest::newRow("0.5") << 0.5;
    QTest::newRow("1") << 1.0;
  }
  void foregroundFraction() {
    QFETCH(double, fraction);
    PatchSamplerOptions o;
    o.foregroundFraction = fraction;
    PatchSampler sampler(o);
    const Sample whole = tinyForeground();
    const auto fg = sampler.indexForeground(whole.label, 1);
    QCOMPARE(fg.perClass[0].size(), std::size_t(8));
    std::mt19937_64 rng(42);
    int withFg = 0;
    for (int i = 0; i < 1000; ++i) withFg += hasForeground(sampler.sample(whole, fg, {8, 8, 8}, rng));
    const double measured = withFg / 1000.0;
    QVERIFY2(std::fabs(measured - fraction) <= 0.05, qPrintable(QString("measured %1, setting %2").arg(measured).arg(fraction)));
  }

  void defaultIsOneThird() { QCOMPARE(PatchSamplerOptions{}.foregroundFraction, 1.0 / 3.0); }

  void paddingAtBorders() {
    // Case smaller than the patch: the whole case lands inside, the rest is padding.
    Geometry g;
    g.size = {4, 5, 6};
    Sample whole;
    whole.channels.push_back(Volume(g, 7.0f));
    whole.label = Volume(g, 1.0f);
    PatchSamplerOptions o;
    o.imagePad = -3.0f;
    PatchSampler sampler(o);
    const auto fg = sampler.indexForeground(whole.label, 1);
    std::mt19937_64 rng(1);
    for (int i = 0; i < 50; ++i) {
      const Sample p = sampler.sample(whole, fg, {8, 8, 8}, rng);
      QCOMPARE(p.label.size(), (std::array<std::int64_t, 3>{8, 8, 8}));
      std::int64_t inside = 0, pad = 0;
      for (std::size_t k = 0; k < p.label.voxels().size(); ++k) {
        if (p.label.voxels()[k] == 1.0f) { ++inside; QCOMPARE(p.channels[0].voxels()[k], 7.0f); }
        else { ++pad; QCOMPARE(p.channels[0].voxels()[k], -3.0f); }
      }
      QCOMPARE(inside, std::int64_t(4 * 5 * 6));
      QCOMPARE(pad, std::int64_t(512 - 120));
    }
    // Explicit crop past a corner.
    const Sample c = PatchSampler::crop(whole, {-2, 3, 5}, {3, 3, 3}, 0.0f);
    QCOMPARE(c.label.at(0, 0, 0), 0.0f);
    QCOMPARE(c.label.at(2, 0, 0), 1.0f);
    QCOMPARE(c.label.at(2, 2, 0), 0.0f);  // y = 5 is outside
    QCOMPARE(c.label.at(2, 1, 1), 0.0f);  // z = 6 is outside
  }

  void patchesInsideWhenTheyFit() {
    PatchSampler sampler;
    const Sample whole = tinyForeground();
    const auto fg = sampler.indexForeground(whole.label, 1);
    std::mt19937_64 rng(3);
    for (int i = 0; i < 300; ++i) {
      bool forced = false;
      const auto c = sampler.chooseCorner(whole.label.size(), {16, 16, 16}, fg, rng, &forced);
      for (int a = 0; a < 3; ++a) QVERIFY(c[a] >= 0 && c[a] + 16 <= 64);
      if (forced) QVERIFY(hasForeground(PatchSampler::crop(whole, c, {16, 16, 16}, 0)));
    }
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, PatchSampler(PatchSamplerOptions{1.5}));
  }

  void augmentSeededAndConsistent() {
    Geometry g;
    g.size = {5, 4, 3};
    Sample s;
    s.channels.push_back(Volume(g));
    s.label = Volume(g);
    for (std::size_t i = 0; i < s.label.voxels().size(); ++i) s.label.voxels()[i] = s.channels[0].voxels()[i] = float(i);
    AugmentOptions o;
    o.scaleRange = 0;
    o.shiftRange = 0;
    o.flipProbability = {1, 1, 1};
    Sample a = s;
    std::mt19937_64 r1(9);
    QCOMPARE(augment(a, o, r1), (std::array<bool, 3>{true, true, true}));
    QCOMPARE(a.label.at(0, 0, 0), s.label.at(4, 3, 2));
    QCOMPARE(a.label.at(1, 2, 0), s.label.at(3, 1, 2));
    QVERIFY(a.label.voxels() == a.channels[0].voxels());
    // Same seed, same result; intensity changes leave labels alone.
    AugmentOptions full;
    Sample b = s, c = s;
    std::mt19937_64 rb(5), rc(5);
    augment(b, full, rb);
    augment(c, full, rc);
    QVERIFY(b.channels[0].voxels() == c.channels[0].voxels());
    for (float v : b.label.voxels()) QVERIFY(v == std::floor(v));
    // Flip twice is identity.
    Volume f = s.label;
    flipAxis(f, 1);
    QVERIFY(f.voxels() != s.label.voxels());
    flipAxis(f, 1);
    QVERIFY(f.voxels() == s.label.voxels());
  }

  void boundedCache() {
    int loads = 0;
    BoundedCache<int, std::vector<char>> cache(100, [](const std::vector<char>& v) { return v.size(); });
    auto load = [&](std::size_t n) { return [&loads, n] { ++loads; return std::vector<char>(n); }; };
    cache.get(1, load(40));
    cache.get(2, load(40));
    cache.get(1, load(40));  // hit, 1 is most recent
    QCOMPARE(loads, 2);
    cache.get(3, load(40));  // evicts 2
    QVERIFY(cache.bytes() <= 100);
    QCOMPARE(cache.size(), std::size_t(2));
    cache.get(1, load(40));
    QCOMPARE(loads, 3);
    cache.get(2, load(40));
    QCOMPARE(loads, 4);
    auto big = cache.get(9, load(500));  // above the bound: returned, not kept
    QCOMPARE(big->size(), std::size_t(500));
    QVERIFY(cache.bytes() <= 100);
  }
};

QTEST_GUILESS_MAIN(SamplingTest)
#include "SamplingTest.moc"
