"""The text edits of a port, one module per file kind; none reads or writes a file.

Each takes the file's text and the few facts it needs, as plain values, never an `OpSpec`,
and returns the new text (unchanged when there is nothing to do, so a second run is a no-op):
- `dispatch_rows` (native_functions.yaml): `add_mps(text, entries)`, `share_mps(text, entries)` (the op's yaml entries);
- `metal`: `add_functor(text, op, functor, kind)`, `add_unary_registration(text, op,
  use_kernels2, pairs)`, `add_binary_registration(text, op, macros)`,
  `add_complex_registration(text, op, kind)`, and the plans that choose those arguments from
  the op's dtypes;
- `host`: `add_kernel_function(text, stub=, function=, kernel=, iterator=, kind=)` (the host
  function is rendered from its Jinja2 template), `add_ti_dispatch(text, kernel)`;
- `mpsgraph`: `delete_definitions(text, definitions, op, header_kernels)` and
  `drop_fallbacks(text, op)`, which also return what they removed;
- `in_place`: `replace_body(text, definition, kernel, kind)` (an op's own structured MPS impl
  keeps its signature and calls the Metal kernel) and `add_library(text, metal_stem)`;
- `opinfo`: `remove_expected_failures(text, opinfo_sources)`, `xfails`:
  `remove_unimplemented(text, path, keys)`, which also return what they left in place.
Where an edit cannot be made in the file's conventions it raises ValueError (`dispatch_rows`'s
`NoSharedKernel` names the entry); the planners in `porter.port` turn that into a one-line
message citing the file.
"""
