#include "core/engine/Loss.h"

#include <QtTest>
#include <torch/torch.h>

using namespace splitseg;

class LossTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void dice_data() {
    QTest::addColumn<int>("overlap");
    QTest::addColumn<double>("expected");
    // Two 1x1x4 segments of 4 voxels, shifted: Dice = 2*overlap / 8.
    QTest::newRow("identical") << 4 << 1.0;
    QTest::newRow("half") << 2 << 0.5;
    QTest::newRow("disjoint") << 0 << 0.0;
  }
  void dice() {
    QFETCH(int, overlap);
    QFETCH(double, expected);
    auto a = torch::zeros({1, 1, 1, 12}, torch::kLong), b = torch::zeros({1, 1, 1, 12}, torch::kLong);
    a.narrow(3, 0, 4).fill_(1);
    b.narrow(3, 4 - overlap, 4).fill_(1);
    QCOMPARE(engine::dicePerClass(a, b, 1).at(0), expected);
  }

  void lossFallsTowardsTarget_data() {
    QTest::addColumn<int>("channels");
    QTest::newRow("binary dice+bce") << 1;
    QTest::newRow("multi dice+ce") << 3;
  }
  void lossFallsTowardsTarget() {
    QFETCH(int, channels);
    torch::manual_seed(0);
    auto target = torch::randint(0, channels == 1 ? 2 : channels, {1, 4, 4, 4}, torch::kLong);
    auto onehot = channels == 1 ? (target == 1).unsqueeze(1).to(torch::kFloat)
                                : torch::one_hot(target, channels).permute({0, 4, 1, 2, 3}).to(torch::kFloat);
    auto good = engine::segmentationLoss((onehot * 2 - 1) * 8, target);
    auto bad = engine::segmentationLoss(-(onehot * 2 - 1) * 8, target);
    QVERIFY(good.loss.item<double>() < 0.05);
    QVERIFY(bad.loss.item<double>() > 1.0);
    for (double d : good.dice) QCOMPARE(d, 1.0);
    QCOMPARE(int(good.dice.size()), channels == 1 ? 1 : channels - 1);
  }
};

QTEST_GUILESS_MAIN(LossTest)
#include "LossTest.moc"
