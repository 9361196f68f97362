"""porter migrate-from-mpsgraph OP: move an op from its MPSGraph implementation to a native Metal kernel."""

from __future__ import annotations

from porter.source.checkout import Checkout
from porter.commands.common import add_edit_options, aten_op_name, finish_edit
from porter.port.migration import plan_migration
from porter.port.templates import rendered_in_warm_child
from porter.port.torchgen_check import EntryValidator

HELP = ("replace an elementwise op's MPSGraph implementation by a native Metal kernel: yaml, "
        "old impl and its helpers, .metal, .mm, expectations")


def add_arguments(parser) -> None:
    add_edit_options(parser)
    parser.add_argument("--in-place", action="store_true",
                        help="keep the op's own MPS impl (MPS: <op>_out_mps) and make its body run "
                             "the Metal kernel, even where MPS could join the CPU/CUDA row")


def run(args) -> int:
    # torchgen and Jinja2 are imported in warm children while porter plans (porter.runtime.warm)
    with EntryValidator() as validator, rendered_in_warm_child():
        checkout = Checkout.at(args.root)
        args.op = aten_op_name(checkout, args.op)
        migration = plan_migration(checkout, args.op, args.body, validator,
                                   complex_body=args.complex_body, in_place=args.in_place)
    spec = migration.spec
    extra = {"functor": migration.functor.origin if migration.functor else None,
             "functor_detail": migration.functor.detail if migration.functor else None,
             "kind": spec.kind, "stub": spec.stub.name, "kernel": spec.kernel,
             "removed": migration.removed,
             "in_place": spec.in_place._asdict() if spec.in_place else None}
    return finish_edit("migrate-from-mpsgraph", checkout, migration, args, extra)
