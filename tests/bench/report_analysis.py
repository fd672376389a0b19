"""The hand-written analysis (tests/bench/analysis.md) with its figures filled in from the results.

The text explains; it may not state a measured figure itself. Figures are placeholders,
{{id.field}}, filled from the report's rows (id as in report.py, fields ratio, lo, hi, n, pct,
verdict, ours, peer, and the extras some rows add). A measured-looking figure in the text (a
decimal, a percentage, a ratio like 1.2x, seconds, milliseconds, MiB) outside a placeholder or
an inline code span is refused, so a rerun can never leave a stale number behind. A placeholder
whose row did not run renders as "n/a".
"""
import re
import sys

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_:]+)\.([A-Za-z0-9_]+)\s*\}\}")
CODE = re.compile(r"`[^`]*`")
FIGURE = re.compile(r"(?<![\w^.])(\d+(?:\.\d+)?\s?(?:%|x\b|ms\b|s\b|MiB\b|GiB\b|KiB\b|MB\b|GB\b)|\d+\.\d+)")


def hand_written_figures(text):
    """[(line number, figure)] for every measured-looking figure outside placeholders and code."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        bare = CODE.sub("", PLACEHOLDER.sub("", line))
        found += [(n, m.group(1)) for m in FIGURE.finditer(bare)]
    return found


def fill(text, values):
    def one(m):
        return str((values.get(m.group(1)) or {}).get(m.group(2), "n/a"))
    return PLACEHOLDER.sub(one, text)


def render_analysis(path, values):
    text = path.read_text()
    bad = hand_written_figures(text)
    if bad:
        n, fig = bad[0]
        sys.exit(f"report: {path.name} line {n}: hand-written figure '{fig}'; cite it from the results with a "
                 f"placeholder such as {{{{train_eager.ratio}}}} ({len(bad)} such figures)")
    return fill(text, values)
