"""Writing a command's report to the file the user named: JSON for FILE.json, Markdown otherwise."""

import json


def write_report(path, report, markdown):
    """`report` as JSON when `path` ends in .json, else `markdown(report)`."""
    with open(path, "w") as f:
        if path.endswith(".json"):
            json.dump(report, f, indent=2)
        else:
            f.write(markdown(report))
