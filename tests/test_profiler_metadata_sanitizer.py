"""torch.profiler metadata with characters kineto's trace writer corrupts (quotes, backslashes, control
characters, in keys or values): the trace still parses, the metadata arrives with those characters replaced, and a
UserWarning in torch_npu's words says what was altered; clean metadata arrives unchanged and silently."""

import json
import warnings

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from torch_npu.profiler._add_metadata_sanitizer_patch import (
    _apply_metadata_sanitizer_patch,
    _sanitize_json_value,
    _sanitize_value,
)


def trace_with(tmp_path, add):
    """(the exported trace as parsed JSON, the warnings `add(prof)` raised)."""
    prof = profile(activities=[ProfilerActivity.CPU])
    prof.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        add(prof)
    torch.randn(8, 8).sum()
    prof.stop()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text()), [str(w.message) for w in caught if w.category is UserWarning]


@pytest.mark.parametrize(
    "key, value, stored_key, stored_value, what",
    [
        ("note", 'has "quotes" inside', "note", "has 'quotes' inside", "the value"),
        ("path", "C:\\temp\\run", "path", "C:/temp/run", "the value"),
        ("lines", "a\nb\tc\x01", "lines", "a b c ", "the value"),
        ('bad"key', "clean", "bad'key", "clean", "the key"),
    ],
)
def test_a_corrupting_character_is_replaced_and_the_trace_parses(tmp_path, key, value, stored_key, stored_value, what):
    trace, warned = trace_with(tmp_path, lambda prof: prof.add_metadata(key, value))
    assert trace[stored_key] == stored_value
    assert "traceEvents" in trace
    assert len(warned) == 1 and f"add_metadata({key!r}): {what} contained characters" in warned[0]


def test_the_warning_counts_each_kind_of_character():
    safe, notes = _sanitize_value('say "hi"\\\n')
    assert safe == "say 'hi'/ "
    assert notes == ["1 newline", "2 double quote", "1 backslash"]
    assert _sanitize_value("\x07")[1] == ["1 control character U+0007"]
    with pytest.warns(UserWarning) as record:
        from torch_npu.profiler._add_metadata_sanitizer_patch import _warn_altered

        _warn_altered("add_metadata", "k", notes, "value")
    assert str(record[0].message) == (
        "add_metadata('k'): the value contained characters that cannot survive the trace writer and was altered "
        "(1 newline, 2 double quote, 1 backslash). Writing it unchanged would produce an unparseable trace file."
    )


def test_clean_metadata_arrives_unchanged_without_a_warning(tmp_path):
    def add(prof):
        prof.add_metadata("clean", "nothing to replace: 你好")
        prof.add_metadata_json("doc", json.dumps({"run": 7, "tags": ["a", "b"]}))

    trace, warned = trace_with(tmp_path, add)
    assert trace["clean"] == "nothing to replace: 你好"
    assert trace["doc"] == {"run": 7, "tags": ["a", "b"]}
    assert warned == []


def test_json_metadata_has_every_string_of_the_document_sanitised(tmp_path):
    document = {'k"ey': {"inner": ['a "quoted" item', 3]}}
    trace, warned = trace_with(tmp_path, lambda prof: prof.add_metadata_json("doc", json.dumps(document)))
    assert trace["doc"] == {"k'ey": {"inner": ["a 'quoted' item", 3]}}
    assert len(warned) == 1 and "add_metadata_json('doc'): the value" in warned[0]
    assert _sanitize_json_value("not json") == ("not json", [])


def test_the_patch_is_applied_once_at_import():
    from torch_npu._patches import applied_patches

    assert "torch.profiler.profiler._KinetoProfile.add_metadata / add_metadata_json" in {
        p.target for p in applied_patches()
    }
    assert _apply_metadata_sanitizer_patch() is False
    assert torch.profiler.profiler._KinetoProfile.add_metadata.__name__ == "add_metadata"
