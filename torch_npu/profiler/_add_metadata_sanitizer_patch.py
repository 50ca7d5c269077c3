"""Metadata that torch.profiler's trace writer can write: keys and values without characters it corrupts.

`torch.profiler.profile.add_metadata(key, value)` hands kineto the value wrapped in quotes with its quotes escaped
(backslashes are not), and kineto's writer turns every backslash of the trace into '/': an escaped quote becomes
`/"`, which ends the JSON string, and the whole trace file no longer parses. A key is written the same way.
Before the call reaches kineto, every character whose JSON form needs a backslash (quote, backslash, control
characters) is replaced by one that needs none, and a UserWarning says what was altered; clean metadata passes
unchanged and silently (torch_npu does the same). The patch registry applies it.
"""

import json
import warnings

_NAMED = {
    '"': ("'", "double quote"),
    "\\": ("/", "backslash"),
    "\n": (" ", "newline"),
    "\r": (" ", "carriage return"),
    "\t": (" ", "tab"),
    "\b": (" ", "backspace"),
    "\f": (" ", "form feed"),
}


def _replacement(char):
    """(what the character becomes, its name) for a character the writer cannot keep, else None."""
    if char in _NAMED:
        return _NAMED[char]
    if ord(char) < 0x20:
        return " ", f"control character U+{ord(char):04X}"
    return None


def _sanitize_value(value):
    """(the value as a string the writer keeps intact, ["<count> <name>", ...] of what was replaced)."""
    text = value if isinstance(value, str) else str(value)
    kept, counts = [], {}
    for char in text:
        replaced = _replacement(char)
        if replaced is None:
            kept.append(char)
        else:
            kept.append(replaced[0])
            counts[char] = counts.get(char, 0) + 1
    return "".join(kept), [f"{n} {_replacement(char)[1]}" for char, n in sorted(counts.items())]


def _sanitize_json_value(value):
    """A serialised JSON document with each of its strings (keys too) sanitised, written back without escapes;
    text that is not JSON is sanitised as a plain value."""
    text = value if isinstance(value, str) else str(value)
    try:
        document = json.loads(text)
    except (TypeError, ValueError):
        return _sanitize_value(text)
    notes = []

    def clean(node):
        if isinstance(node, str):
            safe, found = _sanitize_value(node)
            notes.extend(found)
            return safe
        if isinstance(node, list):
            return [clean(item) for item in node]
        if isinstance(node, dict):
            return {clean(key): clean(item) for key, item in node.items()}
        return node

    return json.dumps(clean(document), ensure_ascii=False), notes


def _warn_altered(api, key, notes, part):
    warnings.warn(
        f"{api}({key!r}): the {part} contained characters that cannot survive the trace writer and was altered "
        f"({', '.join(notes)}). Writing it unchanged would produce an unparseable trace file.",
        UserWarning,
        stacklevel=3,
    )


def _sanitizing(api, original, sanitize):
    def add(self, key, value):
        safe_key, key_notes = _sanitize_value(key)
        if key_notes:
            _warn_altered(api, key, key_notes, "key")
        safe_value, value_notes = sanitize(value)
        if value_notes:
            _warn_altered(api, key, value_notes, "value")
        return original(self, safe_key, safe_value)

    add.__name__ = add.__qualname__ = api
    add.__doc__ = original.__doc__
    return add


def _apply_metadata_sanitizer_patch():
    """Wraps torch.profiler's `_KinetoProfile.add_metadata` / `add_metadata_json` once; True when it did."""
    from torch.profiler import profiler

    target = profiler._KinetoProfile
    if getattr(target, "_npu_metadata_sanitized", False):
        return False
    target.add_metadata = _sanitizing("add_metadata", target.add_metadata, _sanitize_value)
    target.add_metadata_json = _sanitizing("add_metadata_json", target.add_metadata_json, _sanitize_json_value)
    target._npu_metadata_sanitized = True
    return True
