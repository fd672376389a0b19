// Text from files shown in messages (core/base/Printable): valid UTF-8 kept, control characters
// and invalid bytes escaped, so a message is one line and a terminal never receives raw bytes.
#include "core/base/Error.h"
#include "core/base/Printable.h"

#include <QtTest>

#include <string>

class PrintableTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void escapes_data() {
    QTest::addColumn<QByteArray>("in");
    QTest::addColumn<QByteArray>("out");
    QTest::newRow("plain") << QByteArray("ct_0001.nii.gz") << QByteArray("ct_0001.nii.gz");
    QTest::newRow("UTF-8 kept") << QByteArray("sch\xc3\xa4" "del \xe2\x80\x94 \xf0\x9f\xa7\xa0") << QByteArray("sch\xc3\xa4" "del \xe2\x80\x94 \xf0\x9f\xa7\xa0");
    QTest::newRow("invalid byte") << QByteArray("a\xff" "b") << QByteArray("a\\xffb");
    QTest::newRow("lone continuation") << QByteArray("a\x80") << QByteArray("a\\x80");
    QTest::newRow("overlong slash") << QByteArray("\xc0\xaf") << QByteArray("\\xc0\\xaf");
    QTest::newRow("surrogate") << QByteArray("\xed\xa0\x80") << QByteArray("\\xed\\xa0\\x80");
    QTest::newRow("cut sequence at the end") << QByteArray("x\xe2\x80") << QByteArray("x\\xe2\\x80");
    QTest::newRow("newline") << QByteArray("a\nb") << QByteArray("a\\x0ab");
    QTest::newRow("escape sequence") << QByteArray("\x1b[2J") << QByteArray("\\x1b[2J");
    QTest::newRow("C1 control") << QByteArray("\xc2\x9b" "31m") << QByteArray("\\xc2\\x9b31m");
    QTest::newRow("DEL") << QByteArray("a\x7f") << QByteArray("a\\x7f");
  }
  void escapes() {
    QFETCH(QByteArray, in);
    QFETCH(QByteArray, out);
    const std::string got = splitseg::printable(std::string(in.constData(), static_cast<std::size_t>(in.size())));
    QCOMPARE(QByteArray(got.data(), static_cast<int>(got.size())), out);
    QCOMPARE(splitseg::printable(got), got);  // escaping twice changes nothing
    // Valid UTF-8 exactly where nothing but control characters was escaped.
    const bool controls = in.contains('\n') || in.contains('\x1b') || in.contains('\x7f') || in.startsWith("\xc2\x9b");
    QCOMPARE(splitseg::isUtf8(std::string(in.constData(), static_cast<std::size_t>(in.size()))), in == out || controls);
  }

  // Every engine error carries the escaped text: the CLI and the workstation print what() as is.
  void errorsCarryEscapedText() {
    const splitseg::IoError e(std::string("scan\xff\n.nii"), "volume not found");
    QCOMPARE(QByteArray(e.what()), QByteArray("scan\\xff\\x0a.nii: volume not found"));
    QCOMPARE(e.path(), std::string("scan\xff\n.nii"));  // the path itself stays usable
  }
};

QTEST_APPLESS_MAIN(PrintableTest)
#include "PrintableTest.moc"
