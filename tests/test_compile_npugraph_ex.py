"""torch.compile(backend="npugraph_ex"): torch_npu's replay backend by name, with torchair's option names —
the honoured ones change what runs, unknown ones are refused with the allowed list."""

import pytest
import torch
from compile_models import replay_model_and_input

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def test_npugraph_ex_options():
    model, x = replay_model_and_input()
    with torch.no_grad():
        for options in (
            {"clone_output": True},
            {"force_eager": True},
            {"capture_limit": 1},
            {"clone_input": False},
            {"remove_noop_ops": True},
        ):
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="npugraph_ex", options=options)
            outs = [compiled(x) for _ in range(3)]
            for out in outs:
                torch.testing.assert_close(out, model(x))
            if options.get("clone_output"):
                assert outs[1].data_ptr() != outs[2].data_ptr()
        torch._dynamo.reset()
        with pytest.raises(Exception, match="Invalid option 'unknown', allowed options: \\['capture_limit'"):
            torch.compile(model, backend="npugraph_ex", options={"unknown": 1})(x)


def test_npugraph_ex_graph_dump(tmp_path):
    model, x = replay_model_and_input()
    compiled = torch.compile(
        model, backend="npugraph_ex", options={"graph_dump_type": "py", "graph_dump_path": str(tmp_path)}
    )
    with torch.no_grad():
        compiled(x)
    (dump,) = list(tmp_path.iterdir())
    assert dump.suffix == ".py" and "def forward" in dump.read_text()
