"""Writing a command's report to the file the user named: JSON for FILE.json, a standalone HTML page for
FILE.html (the Markdown report rendered, tables included), Markdown for FILE.md."""

import html
import json

from markdown_it import MarkdownIt

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 80em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: left; }}
th {{ background: #eef; }} tr:nth-child(even) td {{ background: #f7f7fb; }}
code {{ background: #f3f3f3; padding: 0 0.2em; }}
</style></head>
<body>
{body}</body></html>
"""


SUFFIXES = (".md", ".json", ".html")


def suffix_problem(path):
    """Why `path` cannot name a report ("" if it can)."""
    return "" if path.endswith(SUFFIXES) else f"--report must end in .md, .json or .html, got {path}"


def markdown_to_html(text, title):
    """`text` (Markdown with pipe tables) as a standalone HTML page."""
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return _PAGE.format(title=html.escape(title), body=body)


def write_report(path, report, markdown, title="vnpu report"):
    """`report` as JSON when `path` ends in .json, HTML for .html, else `markdown(report)`."""
    with open(path, "w") as f:
        if path.endswith(".json"):
            json.dump(report, f, indent=2)
        elif path.endswith(".html"):
            f.write(markdown_to_html(markdown(report), title))
        else:
            f.write(markdown(report))
