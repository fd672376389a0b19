"""Volume-loading peer: SimpleITK (what MONAI's LoadImage and most scripts read NIfTI with).

Reads the file into a float32 NumPy array, as splitseg-bench volume --read reads it into a
float Volume, median over --repeats. Prints one JSON line.
"""
import argparse
import json
import statistics
import time

import numpy as np
import SimpleITK as sitk


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--read", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    times, cpu, shape = [], [], None
    for _ in range(a.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        arr = sitk.GetArrayFromImage(sitk.ReadImage(a.read)).astype(np.float32)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        shape = list(arr.shape[::-1])
    print(json.dumps({"peer": f"SimpleITK {sitk.Version_MajorVersion()}.{sitk.Version_MinorVersion()}",
                      "file": a.read, "median_seconds": statistics.median(times), "runs": times, "cpu_runs": cpu,
                      "size": shape}))


if __name__ == "__main__":
    main()
