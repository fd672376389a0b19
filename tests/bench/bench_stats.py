"""Statistics behind docs/benchmarks.md: per-round medians, paired ratios, bootstrap intervals, verdicts.

The unit of repetition is the round: run.sh runs every side once per round, in an order that
alternates between rounds, so load on this shared machine hits both sides of a comparison alike.
A ratio is computed per round from that round's medians (its warm-up steps were never timed), and
the figure reported is the median of those per-round ratios with a 95% percentile-bootstrap
interval over the rounds. A goal is "met" only when the whole interval is on its side, "missed"
when the whole interval is on the other side and "not shown" when the interval straddles it or
fewer than MIN_ROUNDS rounds ran.
"""
import random
import statistics

MIN_ROUNDS = 7          # issue 17: at least 7 interleaved rounds before anything is called met
RESAMPLES = 4000        # bootstrap resamples; the seed makes a re-render of old results identical
SEED = 17
LEVEL = 0.95


def per_round(rows, kind, key="steps"):
    """{round: median of the values under `key` in that round's records of `kind`} (errors skipped)."""
    vals = {}
    for r in rows:
        if r.get("kind") != kind or r.get("error"):
            continue
        v = r.get(key)
        if isinstance(v, (int, float)):
            v = [v]
        if not v:
            continue
        vals.setdefault(str(r.get("round", "0")), []).extend(float(x) for x in v)
    return {k: statistics.median(v) for k, v in vals.items()}


def pooled_median(rows, kind, key="steps"):
    """Median over rounds of the per-round medians (None when the kind never ran)."""
    r = per_round(rows, kind, key)
    return statistics.median(r.values()) if r else None


def bootstrap(values, stat=statistics.median, resamples=RESAMPLES, seed=SEED, level=LEVEL):
    """Percentile-bootstrap interval of `stat` over `values` (one value per round)."""
    k = len(values)
    if k == 0:
        return None
    if k == 1:
        return values[0], values[0]
    rng = random.Random(seed)
    est = sorted(stat([values[rng.randrange(k)] for _ in range(k)]) for _ in range(resamples))
    lo = est[int((1 - level) / 2 * resamples)]
    hi = est[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return lo, hi


class Estimate:
    """A median over rounds with its bootstrap interval."""

    def __init__(self, values):
        self.values = list(values)
        self.n = len(self.values)
        self.median = statistics.median(self.values) if self.values else None
        self.lo, self.hi = bootstrap(self.values) or (None, None)

    def text(self, fmt="{:.2f}", suffix=""):
        if self.median is None:
            return "n/a"
        return (f"{fmt.format(self.median)}{suffix} [{fmt.format(self.lo)}, {fmt.format(self.hi)}] "
                f"({self.n} rounds)")


def ratio(rows, a, b, key="steps", invert=False):
    """Per-round a/b (b/a with invert: a throughput ratio from times) over the rounds both ran."""
    ra, rb = per_round(rows, a, key), per_round(rows, b, key)
    common = sorted(set(ra) & set(rb), key=lambda s: (len(s), s))
    vals = [(rb[r] / ra[r]) if invert else (ra[r] / rb[r]) for r in common if ra[r] > 0 and rb[r] > 0]
    return Estimate(vals) if vals else None


def verdict(est, op, threshold, min_rounds=MIN_ROUNDS):
    """'met', 'missed' or 'not shown ...' for a goal `<= threshold` or `>= threshold`."""
    if est is None or est.median is None:
        return "not measured"
    if est.n < min_rounds:
        return f"not shown: {est.n} rounds (< {min_rounds})"
    good = (lambda v: v <= threshold) if op == "<=" else (lambda v: v >= threshold)
    if good(est.lo) and good(est.hi):
        return "met"
    if not good(est.lo) and not good(est.hi):
        return "missed"
    return "not shown: interval straddles the goal"


def verdict_within(est, low, high, min_rounds=MIN_ROUNDS):
    """The same for a goal `low <= value <= high`."""
    if est is None or est.median is None:
        return "not measured"
    if est.n < min_rounds:
        return f"not shown: {est.n} rounds (< {min_rounds})"
    if low <= est.lo and est.hi <= high:
        return "met"
    if est.hi < low or est.lo > high:
        return "missed"
    return "not shown: interval straddles the goal"
