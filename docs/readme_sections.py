"""Generated sections of README.md / README.zh.md: the text between a pair of markers is replaced whole
(bench/summary.py writes the benchmark tables, docs/operator_tables.py the operator tables)."""


def replace_section(path, start, end, text, what):
    """Replaces the text between `start` and `end` in the file at `path`; refuses a file without them."""
    with open(path, encoding="utf-8") as f:
        content = f.read()
    if start not in content or end not in content:
        raise SystemExit(f"{path} has no {start} ... {end} markers for the {what}")
    head, rest = content.split(start, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{head}{start}\n{text}\n{end}{tail}")
