"""What opening a real-size CT costs in memory (issue 50): one command's peak resident growth.

Runs the command and samples, every 10 ms, the machine's MemAvailable (it sees the reader child's
shared memory too, which no process's RSS shows once the child has exited) and the summed RSS of
the command's process tree. Prints one JSON line: both peaks above the start, the seconds, and
the file's decoded and float sizes read from its header (splitseg-cli info --json).
"""
import argparse
import json
import os
import subprocess
import time


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def tree_rss(root):
    """Summed VmRSS of root and its descendants (children found through /proc/*/stat)."""
    parents = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parents[int(pid)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            pass
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--what", required=True, help="a name for the row")
    ap.add_argument("--cli", required=True, help="splitseg-cli, to read the file's header")
    ap.add_argument("--file", required=True)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    head = json.loads(subprocess.run([a.cli, "info", a.file, "--json"], check=True, capture_output=True, text=True).stdout)
    voxels = head["size"][0] * head["size"][1] * head["size"][2]
    width = {"uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "float32": 4}.get(head["pixelType"], 8)
    time.sleep(0.5)
    base = mem_available()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    low, rss = base, 0
    while p.poll() is None:
        low = min(low, mem_available())
        rss = max(rss, tree_rss(p.pid))
        if time.perf_counter() - t0 > a.timeout:
            p.kill()
        time.sleep(0.01)
    seconds = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace").strip().splitlines()
    out = {"what": a.what, "file": os.path.basename(a.file), "size": head["size"], "pixelType": head["pixelType"],
           "file_bytes": os.path.getsize(a.file), "decoded_bytes": voxels * width, "float_bytes": voxels * 4,
           "peak_growth_bytes": base - low, "tree_rss_bytes": rss, "seconds": seconds, "exit": p.returncode}
    if p.returncode != 0:
        out["error"] = (err[-1] if err else f"exit {p.returncode}")[:300]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
