"""porter new-op OP: scaffold a native Metal kernel for an op that has no MPS implementation."""

from __future__ import annotations

from porter.source.checkout import Checkout
from porter.apply.write import apply_unless_dry
from porter.commands.common import add_edit_options, run_tests_after
from porter.errors import PorterError
from porter.port.resolve import MPSGRAPH, resolve
from porter.port.plan import plan_port
from porter.apply.report import show_plan
from porter.port.templates import rendered_in_warm_child
from porter.port.torchgen_check import EntryValidator

HELP = "add a native Metal (MPS) kernel for an elementwise op: yaml, .metal, .mm, expectations"


def add_arguments(parser) -> None:
    add_edit_options(parser)


def run(args) -> int:
    # torchgen and Jinja2 are imported in warm children while porter plans (porter.runtime.warm)
    with EntryValidator() as validator, rendered_in_warm_child():
        checkout = Checkout.at(args.root)
        spec = resolve(checkout, args.op)
        if spec.state == MPSGRAPH:
            impl = spec.mpsgraph[0]
            raise PorterError(f"'{spec.op}' already runs on MPS through MPSGraph ({impl.path}:{impl.line})",
                              hint=f"use porter migrate-from-mpsgraph {spec.op}")
        plan = plan_port(checkout, spec, args.body, validator=validator,
                         complex_body=args.complex_body)
    written = apply_unless_dry(plan.changes, args.dry_run, args.allow_dirty)
    extra = {"functor": plan.functor.origin if plan.functor else None, "kind": spec.kind,
             "stub": spec.stub.name, "kernel": spec.kernel}
    show_plan("new-op", spec.op, plan.changes, plan.notes, dry_run=args.dry_run,
              applied=written, as_json=args.json, extra=extra)
    if args.test and not args.dry_run:
        return run_tests_after(args, checkout.root)
    return 0
