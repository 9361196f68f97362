"""The params struct a host packs its scalars into is read as plain fields of the template type
(porter.emulate.host_args.struct_fields); a body porter cannot show the host and the kernel read
alike is host code it does not model (review 25's H29, H29b: green with the fields in another
order under `#ifdef __METAL_VERSION__`; H40: `T threshold, value;` read as no field at all)."""

from __future__ import annotations

import pytest

from porter.emulate.host_args import HostCodeUnknown, struct_fields

HEAD = "template <typename T>\nstruct ThresholdParams {\n"

# (id, the struct's body, its fields, or the words HostCodeUnknown says)
CASES = [
    ("one field a line", "  T threshold;\n  T value;\n", ["threshold", "value"]),
    ("two fields in one declaration", "  T threshold, value;\n", ["threshold", "value"]),
    ("comments", "  T threshold; // the cut\n  /* then */ T value;\n", ["threshold", "value"]),
    ("the order under a version guard", "#ifdef __METAL_VERSION__\n  T threshold;\n  T value;\n"
     "#else\n  T value;\n  T threshold;\n#endif\n", "under a preprocessor directive"),
    ("a field of another type", "  double threshold;\n  T value;\n", "holds `double threshold;`"),
    ("a member function", "  T threshold;\n  T twice() const { return threshold * 2; }\n", "holds"),
]


@pytest.mark.parametrize(("body", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_params_struct_is_plain_fields_of_its_type(body, want):
    text = HEAD + body + "};\nusing ThresholdParams_float = ThresholdParams<float>;\n"
    if isinstance(want, list):
        assert struct_fields(text, "ThresholdParams") == want
    else:
        with pytest.raises(HostCodeUnknown, match=want):
            struct_fields(text, "ThresholdParams")


def test_a_header_without_the_struct_says_so():
    assert struct_fields("struct OtherParams { float x; };", "ThresholdParams") is None
