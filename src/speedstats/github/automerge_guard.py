"""`speedstats automerge-guard`: when a CI job failed, remove the automerge label and say which job."""

import sys

from speedstats.errors import UserError
from speedstats.github.options import add_common_options
from speedstats.github.session import guarded, make_client, run_guard, target_or_none


def register(subparsers):
    p = subparsers.add_parser("automerge-guard", help="remove the automerge label when a CI job failed",
                              description="When the job failed and the pull request carries the label, "
                                          "remove the label and say which job failed (once).")
    p.add_argument("--job", required=True, metavar="NAME", help="name of the job, as the comment reports it")
    p.add_argument("--label", default="automerge", help="the label to remove (default: automerge)")
    p.add_argument("--status", choices=("failure", "success", "cancelled"), default="failure",
                   help="the job's status, e.g. ${{ job.status }} "
                        "(default: failure, for an `if: failure()` step)")
    add_common_options(p, author=False)
    p.set_defaults(func=automerge_guard_command)


def automerge_guard_command(args):
    if not args.job.strip():
        raise UserError("--job: must not be empty")
    if not args.label.strip():
        raise UserError("--label: must not be empty")
    target = target_or_none(args)
    if target is None:
        return 0
    if args.status != "failure":  # nothing to do, and no need for a token
        print(f"speedstats: {target}: job {args.job!r} status is {args.status}; the {args.label!r} label is "
              "left alone", file=sys.stderr)
        return 0
    client = make_client(args)
    return guarded(lambda: run_guard(args, target, client, args.job, args.label, args.status), client)
