// A shared library that is not a SplitSeg plugin (no entry point).
extern "C" int not_a_plugin() { return 42; }
