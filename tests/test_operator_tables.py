"""docs/operator_tables.py: the READMEs' operator tables come from the operator registry."""

import importlib.util
import os

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("operator_tables", os.path.join(ROOT, "docs", "operator_tables.py"))
tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tables)


@pytest.fixture(scope="module")
def grouped():
    grouped, unclaimed = tables.collect()
    assert not unclaimed, f"modules defining operators without a family in docs/operator_tables.py: {unclaimed}"
    return grouped


def _families_of(grouped):
    return {name: family for family, ops in grouped.items() for name, _ in ops}


def test_every_operator_of_the_npu_namespace_is_in_exactly_one_family(grouped):
    listed = [name for ops in grouped.values() for name, _ in ops]
    in_dispatcher = {
        q.split("::", 1)[1].split(".")[0] for q in torch._C._dispatch_get_all_op_names() if q.startswith("npu::")
    }
    assert len(listed) == len(set(listed))
    assert set(listed) == in_dispatcher


def test_every_family_names_only_modules_that_define_operators():
    from torch_npu.ops._library import DEFINED_IN

    defining = {module.rsplit(".", 1)[-1] for module in DEFINED_IN.values()}
    claimed = [m for family in tables.FAMILIES for m in family.modules.split()]
    assert len(claimed) == len(set(claimed))
    assert set(claimed) == defining


def test_operators_are_grouped_by_their_defining_module_and_backward_is_read_from_the_dispatcher(grouped):
    families = _families_of(grouped)
    title = {name: family.titles["README.md"] for name, family in families.items()}
    assert title["npu_rms_norm"] == "norms"
    assert title["npu_fusion_attention"] == "attention"
    assert title["npu_format_cast"].startswith("tensors")  # defined through `define`, not npu_op
    assert title["npu_dropout_gen_mask"].startswith("activations")  # exported by hand (a factory operator)
    assert title["obfuscation_initialize"].startswith("card-only")
    backward = {name: d for ops in grouped.values() for name, d in ops}
    assert backward["npu_rms_norm"] and backward["npu_fusion_attention"] and backward["npu_lstm"]
    assert not backward["npu_dropout_gen_mask"] and not backward["npu_quant_matmul"]


def test_the_summary_counts_match_the_registry(grouped):
    from torch_npu.ops.card_only import CARD_ONLY

    text = tables.summary(grouped, "README.md")
    total = sum(len(ops) for ops in grouped.values())
    card_only = {name for name, _ in grouped[tables.FAMILIES[-1]]}
    assert card_only <= set(CARD_ONLY)
    assert f"{total} operators, {total - len(card_only)} computed, {len(card_only)} card-only" in text


def test_the_readmes_hold_the_tables_the_registry_gives(grouped):
    """Fails when an operator was added or removed without `make docs`."""
    for readme in tables.HEADERS:
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            content = f.read()
        between = content.split(tables.START, 1)[1].split(tables.END, 1)[0]
        assert between == "\n" + tables.render(grouped, readme) + "\n", f"{readme} is out of date: run `make docs`"


def test_a_readme_without_markers_is_refused_and_markers_are_rewritten(tmp_path, grouped):
    plain = tmp_path / "README.md"
    plain.write_text("no markers here\n")
    with pytest.raises(SystemExit, match="has no <!-- operator-tables:start -->"):
        tables.write_readme(str(plain), "x")
    assert plain.read_text() == "no markers here\n"
    marked = tmp_path / "README.zh.md"
    marked.write_text(f"前\n{tables.START}\nold\n{tables.END}\n后\n")
    tables.write_readme(str(marked), tables.render(grouped, "README.zh.md"))
    text = marked.read_text()
    assert text.startswith(f"前\n{tables.START}\n注册表中") and text.endswith(f"{tables.END}\n后\n")
    assert "| 类别 | 算子 | 布局 / 数据类型 | 反向 |" in text and "old" not in text


def test_a_module_in_two_families_or_in_none_is_refused(monkeypatch):
    first, second = tables.FAMILIES[0], tables.FAMILIES[1]
    twice = tables.Family("x", "x", first.modules.split()[0])
    monkeypatch.setattr(tables, "FAMILIES", (*tables.FAMILIES, twice))
    with pytest.raises(SystemExit, match=f"module {first.modules.split()[0]} is in two families: attention and x"):
        tables.collect()
    monkeypatch.setattr(tables, "FAMILIES", tuple(f for f in tables.FAMILIES[:-1] if f is not second))
    with pytest.raises(SystemExit, match="belong to no family .*torch_npu.ops.rope"):
        tables.main()
