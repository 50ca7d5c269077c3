"""`vnpu migrate` on a generated 1,000-file CUDA project (the fixture programs of
tests/fixtures/cuda_project, renamed, in 20 packages of 50). Bar: under 60 s on this machine.
Writes bench/results/migrate.json."""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
FIXTURES = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "cuda_project")
BAR_SECONDS = 60.0


def generate(root, files):
    programs = sorted(f for f in os.listdir(FIXTURES) if f.endswith(".py"))
    sources = [open(os.path.join(FIXTURES, p)).read() for p in programs]
    for i in range(files):
        package = os.path.join(root, f"pkg{i // 50:02d}")
        os.makedirs(package, exist_ok=True)
        with open(os.path.join(package, f"module{i:04d}.py"), "w") as f:
            f.write(sources[i % len(sources)] + f"\n\nVARIANT = {i}\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "migrate.json"))
    args = parser.parse_args()
    from vnpu.migrate_command import migrate_tree

    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "project")
        generate(src, args.files)
        start = time.perf_counter()
        summary = migrate_tree(src, os.path.join(tmp, "project_npu"))
        seconds = time.perf_counter() - start
    finally:
        shutil.rmtree(tmp)
    print(
        f"vnpu migrate: {summary['files']} files, {summary['changes']} changed lines in {seconds:.1f} s "
        f"(bar < {BAR_SECONDS:.0f} s)"
    )
    with open(args.out, "w") as f:
        json.dump(
            {
                "files": summary["files"],
                "changes": summary["changes"],
                "seconds": round(seconds, 2),
                "bar_seconds": BAR_SECONDS,
            },
            f,
            indent=2,
        )
    return 0 if seconds < BAR_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
