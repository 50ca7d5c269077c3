"""Dynamic profiling without code changes: PROF_CONFIG_PATH set before `import torch_npu` initialises
dynamic_profile in that directory and every optimizer step advances it (several optimizers stepping in one iteration
make one step), so editing profiler_config.json during the run profiles the next steps of a program that never
mentions the profiler; msMonitor's daemon variables are answered as vnpu can."""

import json
import os

from profiler_sessions import the_session
from subprocess_helpers import run_python

TRAINING = """
    import json, os, torch, torch_npu
    config = os.path.join(os.environ["PROF_CONFIG_PATH"], "profiler_config.json")
    model = torch.nn.Linear(8, 8).npu()
    head = torch.nn.Linear(8, 1).npu()
    optimizers = [torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.Adam(head.parameters(), lr=0.1)]
    x = torch.randn(4, 8, device="npu")
    for step in range(8):
        if step == 2:  # what a user does from another shell while the job runs
            with open(config) as f:
                settings = json.load(f)
            settings.update(active=3, analyse=True, prof_dir=os.environ["PROF_DIR"])
            with open(config, "w") as f:
                json.dump(settings, f)
        head(model(x)).sum().backward()
        for optimizer in optimizers:
            optimizer.step()
    print("template", os.path.isfile(config))
"""


def test_editing_the_config_profiles_the_next_steps_of_an_unchanged_program(tmp_path):
    config_dir, prof_dir = tmp_path / "config", tmp_path / "prof"
    config_dir.mkdir()
    out = run_python(TRAINING, env={"PROF_CONFIG_PATH": str(config_dir), "PROF_DIR": str(prof_dir)}, timeout=300)
    assert "template True" in out.stdout
    session = the_session(prof_dir)
    with open(os.path.join(session, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as f:
        events = json.load(f)
    steps = sorted({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")})
    assert len(steps) == 3  # three optimizer iterations, not six optimizer steps


def test_an_invalid_config_path_leaves_profiling_off_with_torch_npus_message(tmp_path):
    a_file = tmp_path / "not_a_directory"
    a_file.write_text("")
    out = run_python("import torch, torch_npu", env={"PROF_CONFIG_PATH": str(a_file)})
    assert f"The path '{a_file}' is invalid, and profiler will not be enabled." in out.stdout + out.stderr


def test_the_msmonitor_daemon_variables_are_answered(tmp_path):
    code = "import torch, torch_npu; o = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1); o.step()"
    daemon = run_python(code, env={"MSMONITOR_USE_DAEMON": "1"})
    assert (
        "dynamic_profile: MSMONITOR_USE_DAEMON asks for msMonitor's daemon (dynolog), which sends the profiler "
        "configuration to the card's processes; vnpu has no daemon to receive it from, so dynamic profiling "
        "stays off. Set PROF_CONFIG_PATH to a directory to profile from its profiler_config.json instead."
    ) in daemon.stderr
    deprecated = run_python(code, env={"KINETO_USE_DAEMON": "1"})
    assert (
        "Environment variable 'KINETO_USE_DAEMON' will be deprecated. Please use 'MSMONITOR_USE_DAEMON' instead."
        in (deprecated.stdout + deprecated.stderr)
    )
    invalid = run_python(code, env={"MSMONITOR_USE_DAEMON": "yes"})
    assert "Environment variable 'MSMONITOR_USE_DAEMON' value not valid, will be set to 0 !" in (
        invalid.stdout + invalid.stderr
    )
