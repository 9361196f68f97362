"""porter new-op OP: scaffold a native Metal kernel for an op that has no MPS implementation."""

from __future__ import annotations

from porter.source.checkout import Checkout
from porter.commands.common import add_edit_options, aten_op_name, finish_edit
from porter.errors import PorterError
from porter.port.resolve import MPSGRAPH, resolve
from porter.port.migration import leftovers, plan_migration
from porter.port.plan import plan_port
from porter.port.templates import rendered_in_warm_child
from porter.port.torchgen_check import EntryValidator

HELP = "add a native Metal (MPS) kernel for an elementwise op: yaml, .metal, .mm, expectations"


def add_arguments(parser) -> None:
    add_edit_options(parser)


def run(args) -> int:
    # torchgen and Jinja2 are imported in warm children while porter plans (porter.runtime.warm)
    with EntryValidator() as validator, rendered_in_warm_child():
        checkout = Checkout.at(args.root)
        args.op = aten_op_name(checkout, args.op)
        spec = resolve(checkout, args.op)
        if spec.state == MPSGRAPH:
            impl = spec.mpsgraph[0]
            raise PorterError(f"'{spec.op}' already runs on MPS through MPSGraph ({impl.path}:{impl.line})",
                              hint=f"use porter migrate-from-mpsgraph {spec.op}")
        left = leftovers(checkout, spec)
        if left:
            # a half-applied migration: the yaml is shared, the MPSGraph code is still there
            # (and no longer compiles); finishing it is the migration's job
            plan = plan_migration(checkout, args.op, args.body, validator,
                                  complex_body=args.complex_body)
            rel, d = left[0]
            plan.notes.insert(0, f"{rel}:{d.line}: {d.name} is the MPSGraph implementation a "
                                 "half-applied migration left behind: deleted, as "
                                 f"migrate-from-mpsgraph {spec.op} would")
        else:
            plan = plan_port(checkout, spec, args.body, validator=validator,
                             complex_body=args.complex_body)
    extra = {"functor": plan.functor.origin if plan.functor else None, "kind": spec.kind,
             "stub": spec.stub.name, "kernel": spec.kernel}
    if getattr(plan, "removed", None):
        extra["removed"] = plan.removed
    return finish_edit("new-op", checkout, plan, args, extra)
