"""`vnpu ops`: operator-support profiles of real torch_npu releases (sync, list, check)."""

import os

from rich.console import Console
from rich.table import Table

NO_PROFILE = (
    "no operator-support profile is active: run `vnpu ops sync` (the torch-npu release matching your "
    "torch) or `vnpu ops sync --torch-npu VERSION` to fetch one from PyPI"
)


def _support():
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    from torch_npu import _op_support  # noqa: F401 (imports torch_npu, which needs no profile)

    return _op_support


def sync(args):
    support = _support()
    console = Console(soft_wrap=True)  # messages stay on one line (greppable)
    with console.status("downloading the torch-npu wheel from PyPI (no dependencies)"):
        try:
            profile = support.sync(args.torch_npu)
        except (RuntimeError, ValueError) as err:
            console.print(f"[red]vnpu ops sync: {err}[/red]")
            return 1
    fallback = support.fallback_operators(profile)
    console.print(
        f"torch_npu {profile['torch_npu']} ({profile['wheel']}): {len(profile['npu_kernels'])} operators "
        f"with NPU kernels; {len(fallback)} ATen operators of torch on this machine would fall back to "
        f"the CPU.\nProfile: {support.profile_path(profile['torch_npu'])} (now active)"
    )
    return 0


def _active_or_explain(support, console):
    try:
        profile = support.active_profile()
    except RuntimeError as err:
        console.print(f"[red]{err}[/red]")
        return None
    if profile is None:
        console.print(NO_PROFILE)
    return profile


def list_custom_operators(profile, console):
    """torch_npu's custom operators of the profile's release, each with its state on vnpu: computed (vnpu
    defines it), card-only (defined with its schema; calling it says why only the card runs it) or missing
    (calling it raises AttributeError)."""
    import torch_npu
    from torch_npu.ops.card_only import CARD_ONLY

    names = profile.get("custom_operators") or []
    if not names:
        console.print(f"torch_npu {profile['torch_npu']}: the profile lists no custom operators (run `vnpu ops sync`)")
        return 1
    card_only = [n for n in names if n in CARD_ONLY]
    computed = [n for n in names if hasattr(torch_npu, n) and n not in CARD_ONLY]
    for name in names:
        state = "card-only" if name in CARD_ONLY else ("computed" if name in computed else "missing")
        console.print(f"{name:56} {state}", highlight=False)
    console.print(
        f"torch_npu {profile['torch_npu']}: {len(names)} custom operators, {len(computed)} computed on vnpu, "
        f"{len(card_only)} card-only, {len(names) - len(computed) - len(card_only)} missing",
        style="bold",
    )
    return 0


def list_operators(args):
    support = _support()
    console = Console(soft_wrap=True)  # messages stay on one line (greppable)
    profile = _active_or_explain(support, console)
    if profile is None:
        return 1
    if args.custom:
        return list_custom_operators(profile, console)
    names = support.fallback_operators(profile) if args.fallback else profile["npu_kernels"]
    what = "operators that would fall back to the CPU" if args.fallback else "operators with NPU kernels"
    for name in names:
        console.print(name, highlight=False)
    console.print(f"torch_npu {profile['torch_npu']}: {len(names)} {what}", style="bold")
    return 0


_VERDICTS = {
    "npu": "runs on the NPU",
    "decomposed": "decomposed into other operators before reaching the NPU (CompositeImplicitAutograd)",
    "composite": "device-generic kernel: runs on the NPU",
    "cpu_fallback": "no NPU kernel: falls back to the CPU (torch_npu warns; TORCH_NPU_FALLBACK_CPU_DISABLE=1 "
    "makes it an error)",
    "none": "no kernel for any device",
}


def check(args):
    import torch

    support = _support()
    from torch_npu import _op_selection as selection

    console = Console(soft_wrap=True)  # messages stay on one line (greppable)
    profile = _active_or_explain(support, console)
    if profile is None:
        return 1
    name = args.operator.removeprefix("aten::").removeprefix("torch.ops.aten.").replace(".default", "")
    all_ops = [q for q in torch._C._dispatch_get_all_op_names() if q.startswith("aten::")]
    wanted = [q for q in all_ops if q == f"aten::{name}" or ("." not in name and q.startswith(f"aten::{name}."))]
    if not wanted:
        console.print(f"[red]no ATen operator named {args.operator!r}[/red]")
        return 2
    table = Table(title=f"{args.operator} on torch_npu {profile['torch_npu']}")
    table.add_column("operator")
    table.add_column("on Ascend hardware")
    kernels = support.npu_work(profile)
    aten = selection.aten_kernels()
    verdicts = {q: support.classify(q, kernels, aten) for q in sorted(wanted)}
    for q, verdict in verdicts.items():
        table.add_row(q, _VERDICTS[verdict], style="red" if verdict == "cpu_fallback" else None)
    console.print(table)
    return 1 if any(v == "cpu_fallback" for v in verdicts.values()) else 0


def add_parser(sub):
    ops = sub.add_parser("ops", help="operator-support profiles of real torch_npu releases")
    ops_sub = ops.add_subparsers(dest="ops_command", required=True)
    p = ops_sub.add_parser("sync", help="fetch a torch-npu wheel with pip and store its operator lists")
    p.add_argument("--torch-npu", metavar="VERSION", help="torch-npu release (default: the series of your torch)")
    p.set_defaults(func=sync)
    p = ops_sub.add_parser("list", help="operators with NPU kernels in the active profile")
    p.add_argument("--fallback", action="store_true", help="list the operators that would fall back to the CPU")
    p.add_argument("--custom", action="store_true", help="torch_npu's custom operators and their state on vnpu")
    p.set_defaults(func=list_operators)
    p = ops_sub.add_parser("check", help="how real hardware runs an ATen operator (exit 1 if on the CPU)")
    p.add_argument("operator", help="e.g. fmax, fmax.out, aten::fmax.out")
    p.set_defaults(func=check)
