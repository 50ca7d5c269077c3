"""``vnpu``: the command line."""

import argparse
import sys


def _info(args):
    import torch

    import torch_npu  # noqa: F401

    props = torch.npu.get_device_properties(0)
    print(f"vnpu {torch_npu.__version__} on torch {torch.__version__}")
    print(
        f"{torch.npu.device_count()} x {props.name}: {props.total_memory / 2**30:.0f} GiB, "
        f"{props.cube_core_num} cube / {props.vector_core_num} vector cores, "
        f"L2 {props.L2_cache_size // 2**20} MiB, bf16 {'yes' if torch.npu.is_bf16_supported() else 'no'}"
    )
    return 0


def _demo(args):
    from vnpu.demo import main

    return main(steps=args.steps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vnpu", description="A software Ascend NPU for PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="show the virtual NPUs").set_defaults(func=_info)
    demo = sub.add_parser("demo", help="train seed 003's TinyNet and a small CNN with AMP on npu:0")
    demo.add_argument("--steps", type=int, default=40)
    demo.set_defaults(func=_demo)
    from vnpu import (
        doctor_command,
        env_command,
        fuzz_command,
        migrate_command,
        ops_command,
        profile_command,
        run_command,
    )

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["plan"]:  # its own options, then the program after --
        from vnpu import plan_command

        return plan_command.run(argv[1:])
    if argv[:1] == ["profile"]:  # its own options and the program's arguments after --
        return profile_command.run(argparse.Namespace(argv=argv[1:]))
    profile_command.add_parser(sub)
    ops_command.add_parser(sub)
    run_command.add_parser(sub)
    migrate_command.add_parser(sub)
    env_command.add_parser(sub)
    fuzz_command.add_parser(sub)
    doctor_command.add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
