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


PRIMARY = HEAD + "  T threshold;\n  T value;\n};\n"
# (id, the header, the words HostCodeUnknown says, or None: the fields read)
HEADERS = [
    ("an include guard", "#ifndef ACT_H\n#define ACT_H\n" + PRIMARY + "#endif\n", None),
    ("#pragma once", "#pragma once\n" + PRIMARY, None),
    ("one definition a side of a version guard (review 26's S1)",
     "#ifdef __METAL_VERSION__\n" + PRIMARY + "#else\n"
     + PRIMARY.replace("T threshold;\n  T value;", "T value;\n  T threshold;") + "#endif\n",
     "is defined 2 times"),
    ("a host-only specialization (review 26's S2)",
     PRIMARY + "#ifndef __METAL_VERSION__\ntemplate <>\nstruct ThresholdParams<float> {\n"
     "  float value;\n  float threshold;\n};\n#endif\n", "is defined 2 times"),
    ("the same definition a side of a version guard", "#ifdef __METAL_VERSION__\n" + PRIMARY + "#else\n"
     + PRIMARY + "#endif\n", None),
    ("the one definition under a condition", "#if defined(__METAL_VERSION__) || 1\n" + PRIMARY + "#endif\n",
     "under a preprocessor condition"),
]


@pytest.mark.parametrize(("text", "says"), [c[1:] for c in HEADERS], ids=[c[0] for c in HEADERS])
def test_the_struct_is_one_definition_every_reader_reads(text, says):
    if says is None:
        assert struct_fields(text, "ThresholdParams") == ["threshold", "value"]
    else:
        with pytest.raises(HostCodeUnknown, match=says):
            struct_fields(text, "ThresholdParams")


def test_a_header_without_the_struct_says_so():
    assert struct_fields("struct OtherParams { float x; };", "ThresholdParams") is None
