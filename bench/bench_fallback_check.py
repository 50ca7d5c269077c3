"""What an active operator-support profile costs operators that have NPU kernels: npu time per operator
with the profile of the torch-npu release matching torch against no profile, in fresh processes run
alternately (the profile is fixed at import). Needs a synced profile (`vnpu ops sync`; synced here if
the cache has none). Writes bench/results/fallback_check.json."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

BAR = 1.02
HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = r"""
import sys, time, torch, torch_npu
sys.path.insert(0, {here!r})
from _timing import best_of
torch.manual_seed(0)
a = torch.randn(10, device="npu")
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).npu()
x = torch.randn(16, 64, device="npu")
def step():
    model(x).sum().backward()
for _ in range(200):
    a + 1; step()
print(best_of(lambda: a + 1, 20000), best_of(step, 300))
"""


def _profile_path():
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    sys.path.insert(0, os.path.dirname(HERE))
    from torch_npu import _op_support

    os.environ.pop("VNPU_OPS_PROFILE", None)
    profile = _op_support.active_profile() or _op_support.sync()
    # the active profile may be a synced one or the one shipped in the package: its contents, written out
    path = os.path.join(tempfile.mkdtemp(prefix="vnpu-bench-"), f"torch_npu-{profile['torch_npu']}.json")
    with open(path, "w") as f:
        json.dump(profile, f)
    return path, profile["torch_npu"]


def _run(profile):
    env = dict(os.environ, VNPU_OPS_PROFILE=profile)
    done = subprocess.run(
        [sys.executable, "-c", WORKLOAD.format(here=HERE)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return [float(v) for v in done.stdout.split()[-2:]]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "fallback_check.json"))
    args = parser.parse_args()
    path, version = _profile_path()
    ratios = {"a + 1": [], "MLP forward+backward": []}
    for _ in range(args.rounds):
        off, on = _run("none"), _run(path)
        for key, o, p in zip(ratios, off, on):
            ratios[key].append(p / o)
    results = {k: {"ratio": statistics.median(v), "rounds": v, "bar": BAR} for k, v in ratios.items()}
    for k, r in results.items():
        print(f"{k:22s} with the torch_npu {version} profile / without: {r['ratio']:.3f} (bar <= {BAR})")
    with open(args.out, "w") as f:
        json.dump({"torch_npu_profile": version, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
