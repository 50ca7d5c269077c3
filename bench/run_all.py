"""Every benchmark in turn (each in its own interpreter, 1 intra-op thread where the benchmark takes the
setting), then bench/summary.py: bench/results/summary.json, summary.svg and the READMEs' benchmark tables.

    python bench/run_all.py               # all of them (about 15 minutes on 2 cores)
    python bench/run_all.py overhead      # only the named ones (file names without bench_), then the summary
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = {
    "overhead": ["--threads", "1"],
    "graphs": [],
    "fusion_attention": [],
    "fallback_check": [],
    "migrate": [],
    "distributed": [],
    "profiler": [],
    "compile": [],
}


def main(argv):
    unknown = [name for name in argv if name not in BENCHMARKS]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    failed = []
    for name in argv or BENCHMARKS:
        print(f"== bench_{name}", flush=True)
        done = subprocess.run([sys.executable, os.path.join(HERE, f"bench_{name}.py"), *BENCHMARKS[name]])
        if done.returncode != 0:
            failed.append(name)
    subprocess.run([sys.executable, os.path.join(HERE, "summary.py")], check=True)
    if failed:
        raise SystemExit(f"benchmark(s) that did not finish: {', '.join(failed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
