// The one reader of other people's JSON (core/base/JsonText): nesting and size are bounded before
// anything copies, compares or prints the value, and every refusal is one line naming the source.
#include "core/base/JsonText.h"

#include <QtTest>

#include <filesystem>
#include <fstream>
#include <string>

using splitseg::JsonLimits;
using splitseg::JsonRefused;

namespace {
std::string nested(int levels, char open, char close) {
  std::string s;
  for (int i = 0; i < levels; ++i) s += open == '{' ? std::string("{\"a\":") : std::string(1, open);
  s += "1";
  for (int i = 0; i < levels; ++i) s += close;
  return s;
}
} // namespace

class JsonTextTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void boundsNesting_data() {
    QTest::addColumn<int>("levels");
    QTest::addColumn<char>("open");
    QTest::addColumn<bool>("accepted");
    QTest::newRow("64 arrays: the limit") << 64 << '[' << true;
    QTest::newRow("65 arrays") << 65 << '[' << false;
    QTest::newRow("64 objects") << 64 << '{' << true;
    QTest::newRow("65 objects") << 65 << '{' << false;
    QTest::newRow("200,000 arrays (the crash)") << 200000 << '[' << false;
    QTest::newRow("200,000 objects") << 200000 << '{' << false;
  }
  void boundsNesting() {
    QFETCH(int, levels);
    QFETCH(char, open);
    QFETCH(bool, accepted);
    const std::string text = nested(levels, open, open == '{' ? '}' : ']');
    try {
      const auto j = splitseg::parseJson(text, "session.splitseg");
      QVERIFY2(accepted, "parsed beyond the depth limit");
      QCOMPARE(j.dump(), text);  // the accepted value is whole and prints (recursion bounded)
    } catch (const JsonRefused& e) {
      QVERIFY2(!accepted, e.what());
      QCOMPARE(QString(e.what()), QString("session.splitseg: nests JSON arrays and objects deeper than 64 levels; refused"));
      QCOMPARE(e.path(), std::string("session.splitseg"));
    }
  }

  void boundsSize_data() {
    QTest::addColumn<std::size_t>("bytes");
    QTest::addColumn<bool>("accepted");
    QTest::newRow("at the limit") << std::size_t{1024} << true;
    QTest::newRow("one byte over") << std::size_t{1025} << false;
  }
  void boundsSize() {
    QFETCH(std::size_t, bytes);
    QFETCH(bool, accepted);
    std::string text = "\"" + std::string(bytes - 2, 'x') + "\"";
    JsonLimits limits;
    limits.maxBytes = 1024;
    try {
      const auto j = splitseg::parseJson(text, "peer", limits);
      QVERIFY(accepted);
      QCOMPARE(j.get<std::string>().size(), bytes - 2);
    } catch (const JsonRefused& e) {
      QVERIFY2(!accepted, e.what());
      QVERIFY2(QString(e.what()).startsWith("peer: is 1.0 KiB, larger than 1.0 KiB of JSON; refused"), e.what());
    }
  }

  // A file: its size is judged before it is read; a FIFO or folder is refused without blocking.
  void readsFiles() {
    QTemporaryDir dir;
    const std::string big = dir.filePath("big.json").toStdString();
    {
      std::ofstream f(big);
      f << "[" << std::string(3000, ' ') << "]";
    }
    JsonLimits small;
    small.maxBytes = 2048;
    QVERIFY_THROWS_EXCEPTION(JsonRefused, splitseg::readJsonFile(big, small));
    QCOMPARE(splitseg::readJsonFile(big).size(), std::size_t{0});
    const std::string deep = dir.filePath("deep.json").toStdString();
    {
      std::ofstream f(deep);
      f << nested(200000, '[', ']');
    }
    try {
      splitseg::readJsonFile(deep);
      QFAIL("a 200,000-deep file was read");
    } catch (const JsonRefused& e) {
      QCOMPARE(e.detail(), std::string("nests JSON arrays and objects deeper than 64 levels; refused"));
    }
    QVERIFY_THROWS_EXCEPTION(splitseg::IoError, splitseg::readJsonFile(dir.path().toStdString()));
    QVERIFY_THROWS_EXCEPTION(splitseg::IoError, splitseg::readJsonFile(dir.filePath("missing.json").toStdString()));
    const std::string broken = dir.filePath("broken.json").toStdString();
    {
      std::ofstream f(broken);
      f << "{\"a\": ";
    }
    try {
      splitseg::readJsonFile(broken);
      QFAIL("broken JSON was read");
    } catch (const JsonRefused& e) {
      QVERIFY2(QString(e.what()).startsWith(QString::fromStdString(broken) + ": is not valid JSON: "), e.what());
    }
  }
};

QTEST_APPLESS_MAIN(JsonTextTest)
#include "JsonTextTest.moc"
