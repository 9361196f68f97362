"""The host file of an op's kernel family (`ActivationKernel.mm`), read, or created where the
checkout has none, the way upstream created it with its first port into that family.

Every port command that places an op in a family calls `host_text`: new-op and
migrate-from-mpsgraph, with or without scalars, one kernel or a str-picked pair, two or three
tensors. A created file has upstream's head (its includes, the stub's header), the bundled
library handle (`lib`) and the `at::native` namespace the registrations go into, and appears in
the ChangeSet as created (the dry run's `create`). Upstream's build globs the operations folder;
a checkout that lists its MPS sources by name in a build file gets the new file listed beside its
siblings (`build_list_edit`), and that file is in the ChangeSet too.
"""

from __future__ import annotations

import re

from porter.port.edits import host as host_edit
from porter.port.edits import in_place as in_place_edit
from porter.source import checkout as co

# the family whose host file every checkout with MPS kernels has, whose head a new one copies
MODEL_FAMILY = "UnaryKernel"

# build files that may name MPS sources one by one (upstream globs them: none does there)
BUILD_FILES = ("aten/src/ATen/CMakeLists.txt", "build_variables.bzl", "BUILD.bazel",
               "caffe2/CMakeLists.txt", "cmake/Codegen.cmake")


def host_text(checkout, path: str, family: str, stub_header: str, plan) -> str:
    """The current text of host file `path`; where it does not exist, a new one for `family`
    (whose stubs are declared in `stub_header`, e.g. Activation.h), noted in `plan`."""
    cs = plan.changes
    if checkout.exists(path) or path in cs.changes:
        return cs.current(path, checkout.read)
    text = new_host_file(checkout, family, stub_header.rsplit("/", 1)[-1],
                         lambda rel: cs.current(rel, checkout.read))
    listed = build_list_edits(checkout, path, lambda rel: cs.current(rel, checkout.read))
    for rel, new in listed.items():
        cs.set(rel, checkout.read(rel), new)
    where = (f"; listed in {', '.join(sorted(listed))} beside its siblings" if listed else
             "; the build globs the operations folder" if _globbed(checkout, path) else "")
    plan.notes.append(f"created {path} in the shape of upstream's family host files (includes, "
                      f"the bundled library `lib`, the namespace, the registrations){where}")
    return text


def new_host_file(checkout, family: str, stub_header: str, read) -> str:
    """A host file for `family` with no function yet: the model family's head where the
    checkout has that file, else upstream's head written out."""
    model = f"{co.OPERATIONS}/{MODEL_FAMILY}.mm"
    if checkout.exists(model) and family != MODEL_FAMILY:
        try:
            return host_edit.new_family_file(read(model), MODEL_FAMILY, family, stub_header)
        except ValueError:
            pass        # a head porter cannot copy: upstream's, below
    text = ("#define TORCH_ASSERT_ONLY_METHOD_OPERATORS\n"
            f"#include <ATen/native/{stub_header}>\n"
            "#include <ATen/native/mps/OperationUtils.h>\n\n"
            "namespace at::native {\n"
            "} // namespace at::native\n")
    return in_place_edit.add_library(text, family)


def build_list_edits(checkout, path: str, read) -> dict[str, str]:
    """{build file: its new text} for each build file that names a sibling of `path` (a file of
    the same folder and extension) literally: the new file's name on a line of its own after the
    last sibling's, in that line's indentation and quoting."""
    folder, name = path.rsplit("/", 1)
    ext = name.rsplit(".", 1)[-1]
    last_dir = folder.rsplit("/", 1)[-1]
    sibling = re.compile(rf"^(?P<head>[ \t]*[\"']?)(?P<dir>[\w${{}}./-]*/{re.escape(last_dir)}/)"
                         rf"(?P<sib>\w+)\.{re.escape(ext)}(?P<tail>[\"']?,?)[ \t]*$", re.M)
    edits = {}
    for rel in BUILD_FILES:
        if not checkout.exists(rel):
            continue
        text = read(rel)
        if re.search(rf"/{re.escape(name)}\b", text):
            continue
        found = [m for m in sibling.finditer(text)
                 if folder.endswith(re.sub(r"^(\$\{\w+\}/)+", "", m["dir"]).strip("/"))]
        if found:
            m = found[-1]
            line = f"{m['head']}{m['dir']}{name}{m['tail']}"
            edits[rel] = text[:m.end()] + "\n" + line + text[m.end():]
    return edits


def _globbed(checkout, path: str) -> bool:
    folder = path.rsplit("/", 1)[0].removeprefix("aten/src/ATen/")
    rel = BUILD_FILES[0]
    if not checkout.exists(rel):
        return False
    return bool(re.search(rf"GLOB[^)]*{re.escape(folder)}/\*\.mm", checkout.read(rel)))
