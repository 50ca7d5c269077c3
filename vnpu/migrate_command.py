"""`vnpu migrate SRC [-o DST] [--in-place]`: static CUDA -> Ascend migration of a file or a project tree.

Writes the converted tree (default: a new directory SRC_npu; --in-place rewrites SRC and keeps the
originals of changed files under SRC/.vnpu_backup/) and, in the spirit of Ascend's analyser,
change_list.csv (file, line, before, after) and unsupported_api.csv (file, line, API, why, suggestion)
in the output directory (in place: SRC/.vnpu_migration/). Files that do not parse are reported and
copied unchanged; the rest continue. Rules: vnpu/migrate_rules.py.
"""

import csv
import difflib
import os
import shutil
import time

import libcst as cst
from rich.console import Console
from rich.progress import track
from rich.table import Table

from vnpu.migrate_rules import migrate_source, migrate_text

TEXT_SUFFIXES = (".yaml", ".yml", ".json", ".sh", ".cfg", ".ini", ".toml", ".env")
SKIPPED_DIRS = {".git", "__pycache__", ".vnpu_backup", ".vnpu_migration", ".venv", "node_modules"}
REPORT_DIR_IN_PLACE = ".vnpu_migration"


def _files(src):
    if os.path.isfile(src):
        yield os.path.basename(src)
        return
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            yield os.path.relpath(os.path.join(root, name), src)


def _changed_lines(rel, before, after):
    """[(file, line, before, after)] of the lines that differ (line numbers of the original)."""
    old, new = before.splitlines(), after.splitlines()
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            rows.append(
                (
                    rel,
                    i1 + min(k, max(i2 - i1 - 1, 0)) + 1,
                    old[i1 + k] if i1 + k < i2 else "",
                    new[j1 + k] if j1 + k < j2 else "",
                )
            )
    return rows


def migrate_file(rel, text):
    """(new text, changes, unsupported, parse error or None) of one file."""
    if rel.endswith(".py"):
        try:
            new, unsupported = migrate_source(text)
        except cst.ParserSyntaxError as err:
            return text, [], [], f"line {err.raw_line}: {str(err).splitlines()[0]}"
        return new, _changed_lines(rel, text, new), [(rel, *u) for u in unsupported], None
    if rel.endswith(TEXT_SUFFIXES) or os.path.basename(rel) in ("Dockerfile", "Makefile"):
        new = migrate_text(text)
        return new, _changed_lines(rel, text, new), [], None
    return text, [], [], None


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None


def migrate_tree(src, dst=None, in_place=False, progress=False):
    """Migrate src into dst (or in place); returns the summary dict (see the module doc)."""
    src = os.path.abspath(src)
    single_file = os.path.isfile(src)
    if in_place:
        dst = src
        report_dir = os.path.join(os.path.dirname(src) if single_file else src, REPORT_DIR_IN_PLACE)
        backup_root = os.path.join(os.path.dirname(src) if single_file else src, ".vnpu_backup")
    else:
        dst = os.path.abspath(dst or (src[:-3] + "_npu.py" if single_file and src.endswith(".py") else src + "_npu"))
        if os.path.exists(dst):
            raise FileExistsError(f"{dst} already exists: choose another -o, remove it, or use --in-place")
        report_dir = os.path.dirname(dst) if single_file else dst
        backup_root = None
    src_root = os.path.dirname(src) if single_file else src
    start = time.perf_counter()
    changes, unsupported, failures, changed_files, scanned = [], [], [], 0, 0
    files = list(_files(src))
    for rel in track(files, description="migrating") if progress and len(files) > 50 else files:
        source_path = os.path.join(src_root, rel)
        target_path = dst if single_file and not in_place else os.path.join(src_root if in_place else dst, rel)
        text = _read(source_path)
        scanned += 1
        if text is None:  # binary or unreadable: copied as it is
            new, file_changes, file_unsupported, error = None, [], [], None
        else:
            new, file_changes, file_unsupported, error = migrate_file(rel, text)
        if error is not None:
            failures.append((rel, error))
            unsupported.append(
                (
                    rel,
                    "",
                    "<syntax error>",
                    f"the file does not parse ({error})",
                    "fix the syntax and migrate again; the file was copied unchanged",
                )
            )
        changes += file_changes
        unsupported += file_unsupported
        changed = text is not None and new != text
        changed_files += changed
        if in_place:
            if changed:
                backup = os.path.join(backup_root, rel)
                os.makedirs(os.path.dirname(backup), exist_ok=True)
                if not os.path.exists(backup):
                    shutil.copy2(source_path, backup)
                with open(source_path, "w", encoding="utf-8") as f:
                    f.write(new)
            continue
        os.makedirs(os.path.dirname(target_path) or ".", exist_ok=True)
        if changed:
            with open(target_path, "w", encoding="utf-8") as f:
                f.write(new)
            shutil.copymode(source_path, target_path)
        else:
            shutil.copy2(source_path, target_path)
    os.makedirs(report_dir, exist_ok=True)
    change_csv = os.path.join(report_dir, "change_list.csv")
    unsupported_csv = os.path.join(report_dir, "unsupported_api.csv")
    with open(change_csv, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["file", "line", "before", "after"])
        writer.writerows(changes)
    with open(unsupported_csv, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["file", "line", "API", "why", "suggestion"])
        writer.writerows(unsupported)
    return {
        "source": src,
        "output": dst,
        "files": scanned,
        "changed_files": changed_files,
        "changes": len(changes),
        "unsupported": len(unsupported) - len(failures),
        "parse_failures": failures,
        "change_list": change_csv,
        "unsupported_api": unsupported_csv,
        "seconds": round(time.perf_counter() - start, 2),
    }


def run(args):
    console = Console(soft_wrap=True)  # messages stay on one line (greppable)
    if not os.path.exists(args.src):
        console.print(f"[red]vnpu migrate: no such file or directory: {args.src}[/red]")
        return 2
    if args.in_place and args.output:
        console.print("[red]vnpu migrate: -o and --in-place exclude each other[/red]")
        return 2
    try:
        summary = migrate_tree(args.src, args.output, args.in_place, progress=not args.quiet)
    except FileExistsError as err:
        console.print(f"[red]vnpu migrate: {err}[/red]")
        return 2
    table = Table(title=f"vnpu migrate: {summary['source']} -> {summary['output']}")
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, key in (
        ("files", "files"),
        ("files changed", "changed_files"),
        ("lines changed", "changes"),
        ("unsupported CUDA APIs (see the CSV)", "unsupported"),
    ):
        table.add_row(label, str(summary[key]))
    table.add_row("files that do not parse (copied unchanged)", str(len(summary["parse_failures"])))
    table.add_row("seconds", str(summary["seconds"]))
    console.print(table)
    for rel, error in summary["parse_failures"]:
        console.print(f"[yellow]skipped {rel}: {error}[/yellow]")
    console.print(f"reports: {summary['change_list']}, {summary['unsupported_api']}")
    return 0


def add_parser(sub):
    p = sub.add_parser("migrate", help="rewrite CUDA code for Ascend (libcst) and report what needs a human")
    p.add_argument("src", help="a Python file or a project directory")
    p.add_argument("-o", "--output", help="where to write the converted tree (default: SRC_npu)")
    p.add_argument("--in-place", action="store_true", help="rewrite SRC, keeping originals in SRC/.vnpu_backup/")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
