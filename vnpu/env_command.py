"""``vnpu env``: the environment CANN's set_env.sh gives, pointing at vnpu's toolkit directory.

    eval "$(vnpu env)"

Libraries that detect torch_npu expect CANN's variables (DeepSpeed reads ASCEND_HOME_PATH and the
toolkit's version file); vnpu needs no CANN, so the directory holds version files only.
"""

import os
import shlex

TOOLKIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "toolkit")


def variables():
    """The variables, in the order set_env.sh sets them."""
    return {
        "ASCEND_TOOLKIT_HOME": TOOLKIT,
        "ASCEND_HOME_PATH": TOOLKIT,
        "ASCEND_OPP_PATH": os.path.join(TOOLKIT, "opp"),
        "ASCEND_AICPU_PATH": TOOLKIT,
    }


def run(args):
    for name, value in variables().items():
        if args.unset:
            print(f"unset {name}")
        else:
            print(f"export {name}={shlex.quote(value)}")
    return 0


def add_parser(sub):
    parser = sub.add_parser(
        "env",
        help='print the CANN environment (ASCEND_HOME_PATH...) for eval "$(vnpu env)"',
        description="Print shell commands that set the environment CANN's set_env.sh sets, "
        "pointing at vnpu's toolkit directory (version files only): "
        'eval "$(vnpu env)"',
    )
    parser.add_argument("--unset", action="store_true", help="print commands that remove the variables instead")
    parser.set_defaults(func=run)
