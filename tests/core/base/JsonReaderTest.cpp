// The one typed reader of other people's JSON (core/base/JsonReader): every refusal is one line
// naming the field's path as the file spells it, what was expected and what was found; unknown
// keys are refused or ignored as the reader is told; no number is cast unchecked.
#include "core/base/JsonReader.h"

#include <QtTest>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

using splitseg::JsonField;
using splitseg::JsonFieldError;
using splitseg::JsonReader;
using splitseg::UnknownKeys;

namespace {

enum class Mode { Fast, Slow };

struct Sample {
  std::string name;
  int size = 0;
  std::array<std::int64_t, 3> window{0, 0, 0};
  std::uint32_t depth = 0;
  std::vector<std::string> labels;
  bool flag = false;
  std::vector<std::pair<std::int64_t, double>> items;
  Mode mode = Mode::Fast;
  std::string device = "cpu";
  std::map<std::string, std::int64_t> peaks;
};

// A file of every shape a SplitSeg file has: nested objects, lists of values and of objects,
// an enumeration, parsed text and a map.
Sample readSample(const nlohmann::json& j, UnknownKeys unknown) {
  Sample s;
  auto top = JsonReader::document(j, "sample", unknown);
  s.name = top.get<std::string>("name");
  top.read("size", s.size);
  if (const auto w = top.take("window")) s.window = w->tuple<std::int64_t, 3>();
  {
    auto inner = top.sub("inner");
    inner.read("depth", s.depth);
    if (const auto l = inner.take("labels")) s.labels = l->list<std::string>();
    auto deep = inner.sub("deep");
    deep.read("flag", s.flag);
  }
  if (const auto items = top.take("items"))
    for (const auto& item : items->elements()) {
      auto i = item.fields(unknown);
      s.items.emplace_back(i.require("id").wholeIn(1, 100), i.get<double>("weight"));
    }
  if (const auto m = top.take("mode")) s.mode = m->oneOf<Mode>({{"fast", Mode::Fast}, {"slow", Mode::Slow}});
  top.read("device", s.device, [](const std::string& d) {
    if (d != "cpu" && d != "cuda") throw splitseg::InvalidArgument("unknown device '" + d + "'");
    return d;
  });
  if (const auto p = top.take("peaks"))
    for (const auto& [device, bytes] : p->entries()) s.peaks[device] = bytes.as<std::int64_t>();
  return s;
}

// The refusal's text, "" when the sample was read.
QString refusalOf(const std::string& text, UnknownKeys unknown = UnknownKeys::Refuse) {
  try {
    readSample(nlohmann::json::parse(text), unknown);
    return "";
  } catch (const JsonFieldError& e) {
    return QString::fromStdString(e.what());
  }
}

} // namespace

class JsonReaderTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void namesThePath_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("error");
    QTest::newRow("nested object") << R"({"name":"a","inner":{"deep":{"flag":"yes"}}})"
                                   << R"(inner.deep.flag: expected true or false, got text "yes")";
    QTest::newRow("list element") << R"({"name":"a","window":[1,"b",3]})"
                                  << R"(window[1]: expected a whole number, got text "b")";
    QTest::newRow("object in a list") << R"({"name":"a","items":[{"id":1,"weight":1},{"id":2,"weight":"x"}]})"
                                      << R"(items[1].weight: expected a number, got text "x")";
    QTest::newRow("list in an object") << R"({"name":"a","inner":{"labels":["x",3]}})"
                                       << "inner.labels[1]: expected text, got 3";
    QTest::newRow("map entry") << R"({"name":"a","peaks":{"cpu":1.5}})" << "peaks.cpu: expected a whole number, got 1.5";
    QTest::newRow("too few elements") << R"({"name":"a","window":[1,2]})" << "window: expected a list of 3 values, got 2 values";
    QTest::newRow("missing") << R"({"size":1})" << "name: missing";
    QTest::newRow("null is missing") << R"({"name":null})" << "name: missing";
    QTest::newRow("missing in a list's object") << R"({"name":"a","items":[{"weight":1}]})" << "items[0].id: missing";
    QTest::newRow("document not an object") << "[1]" << "sample: expected a JSON object, got a list";
    QTest::newRow("nested not an object") << R"({"name":"a","inner":[]})" << "inner: expected an object, got a list";
    QTest::newRow("enumeration") << R"({"name":"a","mode":"medium"})"
                                 << R"(mode: expected one of fast, slow, got text "medium")";
    QTest::newRow("parsed text") << R"({"name":"a","device":"tpu"})" << "device: unknown device 'tpu'";
    QTest::newRow("everything right") << R"({"name":"a","size":2,"window":[1,2,3],"inner":{"depth":4,"labels":["x"],)"
                                         R"("deep":{"flag":true}},"items":[{"id":5,"weight":0.5}],"mode":"slow",)"
                                         R"("device":"cuda","peaks":{"cpu":7}})"
                                      << "";
  }
  void namesThePath() {
    QFETCH(QString, json);
    QFETCH(QString, error);
    QCOMPARE(refusalOf(json.toStdString()), error);
  }

  void readsWhatIsThere() {
    const auto s = readSample(nlohmann::json::parse(R"({"name":"a","window":[1,2,3],"inner":{"labels":["x","y"]},)"
                                                    R"("items":[{"id":5,"weight":0.5}],"mode":"slow","peaks":{"r1:cpu":7}})"),
                              UnknownKeys::Refuse);
    QCOMPARE(s.name, std::string("a"));
    QCOMPARE(s.size, 0);  // absent: the default stays
    QVERIFY((s.window == std::array<std::int64_t, 3>{1, 2, 3}));
    QCOMPARE(s.labels, (std::vector<std::string>{"x", "y"}));
    QCOMPARE(s.items.size(), std::size_t{1});
    QCOMPARE(s.items[0].first, std::int64_t{5});
    QVERIFY(s.mode == Mode::Slow);
    QCOMPARE(s.device, std::string("cpu"));
    QCOMPARE(s.peaks.at("r1:cpu"), std::int64_t{7});
  }

  void unknownKeys_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<bool>("refuse");
    QTest::addColumn<QString>("error");
    QTest::newRow("top level, refused") << R"({"name":"a","nmae":1})" << true << "nmae: unknown key";
    QTest::newRow("nested, refused") << R"({"name":"a","inner":{"dpeth":3}})" << true << "inner.dpeth: unknown key";
    QTest::newRow("two levels down, refused") << R"({"name":"a","inner":{"deep":{"flga":true}}})" << true
                                              << "inner.deep.flga: unknown key";
    QTest::newRow("in a list's object, refused") << R"({"name":"a","items":[{"id":1,"weight":1,"colour":"red"}]})" << true
                                                 << "items[0].colour: unknown key";
    QTest::newRow("top level, ignored") << R"({"name":"a","nmae":1})" << false << "";
    QTest::newRow("nested, ignored") << R"({"name":"a","inner":{"deep":{"flga":true}}})" << false << "";
    QTest::newRow("in a list's object, ignored") << R"({"name":"a","items":[{"id":1,"weight":1,"colour":"red"}]})" << false
                                                 << "";
    // A wrong field is the refusal even with an unknown key beside it (read first, checked last).
    QTest::newRow("a wrong field wins") << R"({"name":"a","nmae":1,"size":"x"})" << true
                                        << R"(size: expected a whole number, got text "x")";
  }
  void unknownKeys() {
    QFETCH(QString, json);
    QFETCH(bool, refuse);
    QFETCH(QString, error);
    QCOMPARE(refusalOf(json.toStdString(), refuse ? UnknownKeys::Refuse : UnknownKeys::Ignore), error);
  }

  void finishRefusesNowAndOnce() {
    const auto j = nlohmann::json::parse(R"({"a":1,"b":2})");
    JsonReader r(j, "top");
    r.take("a");
    QVERIFY_THROWS_EXCEPTION(JsonFieldError, r.finish());
    // Checked once: the destructor adds nothing. Switched to ignore, nothing is refused.
    JsonReader lenient(j, "top");
    lenient.setUnknownKeys(UnknownKeys::Ignore);
    lenient.finish();
  }

  void wholeNumbers_data() {
    QTest::addColumn<QString>("value");
    QTest::addColumn<qint64>("lo");
    QTest::addColumn<qint64>("hi");
    QTest::addColumn<QString>("error");  // "" : accepted, the value read back
    QTest::newRow("inside") << "5" << qint64(1) << qint64(10) << "";
    QTest::newRow("lower bound") << "1" << qint64(1) << qint64(10) << "";
    QTest::newRow("upper bound") << "10" << qint64(1) << qint64(10) << "";
    QTest::newRow("negative range") << "-5" << qint64(-10) << qint64(-1) << "";
    QTest::newRow("largest integer") << "9223372036854775807" << qint64(0) << qint64(INT64_MAX) << "";
    QTest::newRow("below") << "0" << qint64(1) << qint64(10) << "n: 0 is not a whole number in 1..10";
    QTest::newRow("above") << "11" << qint64(1) << qint64(10) << "n: 11 is not a whole number in 1..10";
    QTest::newRow("fraction") << "2.5" << qint64(1) << qint64(10) << "n: 2.5 is not a whole number in 1..10";
    QTest::newRow("whole but written as a float") << "3.0" << qint64(1) << qint64(10)
                                                  << "n: 3.0 is not a whole number in 1..10";
    QTest::newRow("float beyond any integer") << "1e300" << qint64(1) << qint64(10)
                                              << "n: 1e+300 is not a whole number in 1..10";
    QTest::newRow("beyond int64") << "18446744073709551615" << qint64(0) << qint64(INT64_MAX)
                                  << "n: 18446744073709551615 is not a whole number in 0..9223372036854775807";
    QTest::newRow("text") << R"("5")" << qint64(1) << qint64(10) << R"(n: "5" is not a whole number in 1..10)";
    QTest::newRow("flag") << "true" << qint64(0) << qint64(1) << "n: true is not a whole number in 0..1";
  }
  void wholeNumbers() {
    QFETCH(QString, value);
    QFETCH(qint64, lo);
    QFETCH(qint64, hi);
    QFETCH(QString, error);
    const auto j = nlohmann::json::parse(value.toStdString());
    try {
      const auto n = JsonField(j, "n").wholeIn(lo, hi);
      QVERIFY2(error.isEmpty(), "accepted");
      QCOMPARE(QString::number(n), value);
    } catch (const JsonFieldError& e) {
      QCOMPARE(QString(e.what()), error);
      QCOMPARE(e.path(), std::string("n"));
    }
  }

  // as<T>: the type's own range, never a wrapped or truncated number.
  void typedNumbers_data() {
    QTest::addColumn<QString>("type");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("error");
    QTest::newRow("int") << "int" << "-7" << "";
    QTest::newRow("int 2^40") << "int" << "1099511627776" << "n: too large";
    QTest::newRow("int -2^40") << "int" << "-1099511627776" << "n: out of range";
    QTest::newRow("int from a fraction") << "int" << "2.5" << "n: expected a whole number, got 2.5";
    QTest::newRow("int from 1e300") << "int" << "1e300" << "n: expected a whole number, got 1e+300";
    QTest::newRow("uint64 largest") << "uint64" << "18446744073709551615" << "";
    QTest::newRow("uint64 negative") << "uint64" << "-1" << "n: must not be negative";
    QTest::newRow("uint8 300") << "uint8" << "300" << "n: too large";
    QTest::newRow("int64 beyond") << "int64" << "18446744073709551615" << "n: too large";
    QTest::newRow("double from a whole number") << "double" << "3" << "";
  }
  void typedNumbers() {
    QFETCH(QString, type);
    QFETCH(QString, value);
    QFETCH(QString, error);
    const auto j = nlohmann::json::parse(value.toStdString());
    const JsonField f(j, "n");
    try {
      QString got;
      if (type == "int") got = QString::number(f.as<int>());
      if (type == "uint64") got = QString::number(f.as<std::uint64_t>());
      if (type == "uint8") got = QString::number(f.as<std::uint8_t>());
      if (type == "int64") got = QString::number(f.as<std::int64_t>());
      if (type == "double") got = QString::number(f.as<double>());
      QVERIFY2(error.isEmpty(), "accepted");
      QCOMPARE(got, value);
    } catch (const JsonFieldError& e) {
      QCOMPARE(QString(e.what()), error);
    }
  }

  // Each refusal names what was expected and what was found.
  void wrongTypes_data() {
    QTest::addColumn<QString>("wanted");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("error");
    QTest::newRow("text from a number") << "text" << "3" << "v: expected text, got 3";
    QTest::newRow("text from a list") << "text" << "[1]" << "v: expected text, got a list";
    QTest::newRow("flag from text") << "flag" << R"("yes")" << R"(v: expected true or false, got text "yes")";
    QTest::newRow("flag from 1") << "flag" << "1" << "v: expected true or false, got 1";
    QTest::newRow("number from an object") << "number" << R"({"a":1})" << "v: expected a number, got an object";
    QTest::newRow("number from null") << "number" << "null" << "v: expected a number, got null";
    QTest::newRow("whole number from text") << "whole" << R"("7")" << R"(v: expected a whole number, got text "7")";
    QTest::newRow("object from text") << "object" << R"("a")" << R"(v: expected an object, got text "a")";
    QTest::newRow("list from an object") << "list" << "{}" << "v: expected a list, got an object";
    QTest::newRow("map from a list") << "map" << "[]" << "v: expected an object, got a list";
    QTest::newRow("enumeration from a number") << "enum" << "1" << "v: expected text, got 1";
  }
  void wrongTypes() {
    QFETCH(QString, wanted);
    QFETCH(QString, value);
    QFETCH(QString, error);
    const auto j = nlohmann::json::parse(value.toStdString());
    const JsonField f(j, "v");
    try {
      if (wanted == "text") f.as<std::string>();
      if (wanted == "flag") f.as<bool>();
      if (wanted == "number") f.as<double>();
      if (wanted == "whole") f.as<std::int64_t>();
      if (wanted == "object") f.fields();
      if (wanted == "list") f.elements();
      if (wanted == "map") f.entries();
      if (wanted == "enum") f.oneOf<Mode>({{"fast", Mode::Fast}});
      QFAIL("accepted");
    } catch (const JsonFieldError& e) {
      QCOMPARE(QString(e.what()), error);
      QCOMPARE(QString::fromStdString(e.path()) + ": " + QString::fromStdString(e.detail()), error);
    }
  }

  // A refusal is one line and short, whatever text the file holds; it is an InvalidArgument, as
  // every caller catches.
  void refusalsAreOneShortLine() {
    // Plain literals: moc misreads a raw string that holds an odd number of quotes.
    const auto j = nlohmann::json::parse("{\"a\":\"line one\\nline two " + std::string(100, 'x') + "\"}");
    try {
      JsonReader(j, "top").get<int>("a");
      QFAIL("accepted");
    } catch (const splitseg::InvalidArgument& e) {
      const QString what = e.what();
      QVERIFY2(!what.contains('\n'), e.what());
      QVERIFY2(what.startsWith("top.a: expected a whole number, got text \"line one\\nline two xx"), e.what());
      QVERIFY2(what.size() < 100, e.what());
    }
  }
};

QTEST_APPLESS_MAIN(JsonReaderTest)
#include "JsonReaderTest.moc"
