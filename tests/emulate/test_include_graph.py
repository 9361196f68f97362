"""porter.emulate.include_graph: its lookups, answered from folder listings, are the file
system's own answers, and one graph serves a run's host files."""

from __future__ import annotations

import pytest

from porter.emulate.include_graph import IncludeGraph


def _tree(tmp_path):
    src = tmp_path / "aten/src"
    (src / "ATen/native/mps").mkdir(parents=True)
    (src / "ATen/Tensor.h").write_text("#pragma once\n")
    (src / "ATen/native/mps/OperationUtils.h").write_text("#include <ATen/Tensor.h>\n")
    (src / "ATen/Folder.h").mkdir()                     # a directory named like a header
    (src / "ATen/link.h").symlink_to(src / "ATen/Tensor.h")
    (src / "ATen/dangling.h").symlink_to(src / "ATen/Gone.h")
    return src


# (the path asked, relative to aten/src): each must be answered as Path.is_file answers it
LOOKUPS = [
    "ATen/Tensor.h",                            # a file
    "ATen/Missing.h",                           # none in a listed folder
    "ATen/native/mps/OperationUtils.h",         # a file two folders down
    "ATen/NoFolder/x.h",                        # a folder that is not there
    "ATen/Folder.h",                            # a directory, not a file
    "ATen/link.h",                              # a link to a file
    "ATen/dangling.h",                          # a link to nothing
    "ATen/native/../Tensor.h",                  # through `..`
    "ATen/native/mps/../../Tensor.h",
    "ATen/tensor.h",                            # another case: only a folding file system has it
]


@pytest.mark.parametrize("rel", LOOKUPS)
def test_a_lookup_answers_as_the_file_system_does(tmp_path, rel):
    src = _tree(tmp_path)
    graph = IncludeGraph(tmp_path)
    graph._is_file(src / "ATen/Tensor.h")         # the folder listed before the ask
    assert graph._is_file(src / rel) == (src / rel).is_file()


def test_a_graph_follows_includes_through_listed_folders(tmp_path):
    src = _tree(tmp_path)
    mm = src / "ATen/native/mps/operations/X.mm"
    graph = IncludeGraph(tmp_path)
    text = "#include <ATen/native/mps/OperationUtils.h>\n#include <ATen/Missing.h>\n"
    reached = graph.reached(mm, text)
    assert reached == {src / "ATen/native/mps/OperationUtils.h", src / "ATen/Tensor.h"}
    reached.clear()                               # a caller's set is its own
    assert graph.reached(mm, text) == {src / "ATen/native/mps/OperationUtils.h", src / "ATen/Tensor.h"}
    assert graph.reached(mm, "#include <ATen/Tensor.h>\n") == {src / "ATen/Tensor.h"}


def test_a_run_shares_one_host_graph_and_the_next_run_reads_the_checkout_again(tmp_path):
    """Each host file's check asked a graph of its own (3,500 stats a `--watch` round); a run
    now shares one, and forgets it when it ends (porter.runtime.run_memo)."""
    from porter.emulate import host_macros
    from porter.runtime import run_memo
    src = _tree(tmp_path)
    mm = src / "ATen/native/mps/operations/X.mm"
    text = "#include <ATen/Late.h>\n"
    run_memo.forget()
    try:
        assert host_macros._graph(tmp_path) is host_macros._graph(tmp_path)
        assert host_macros._graph(tmp_path).reached(mm, text) == set()
        (src / "ATen/Late.h").write_text("#define SWAP_H <x.h>\n#include SWAP_H\n")
        run_memo.forget()
        assert host_macros.computed_include(tmp_path, mm, text) == \
            "`#include SWAP_H` (aten/src/ATen/Late.h:2)"
    finally:
        run_memo.forget()


# (a kernel or host file's line, what the preprocessor includes or None, whether it names a
# computed include): review 48's F1, `%:include <x.h>` reached a header no cache key held
DIRECTIVES = [
    ("#include <a.h>", ("<", "a.h"), False),
    ("%:include <b.h>", ("<", "b.h"), False),                 # the digraph of `#`
    ("#/**/include <c.h>", ("<", "c.h"), False),              # a comment between the tokens
    ("#include/**/<d.h>", ("<", "d.h"), False),
    ("#\\\ninclude <e.h>", ("<", "e.h"), False),              # a line continued
    ('  #  include_next "f.h"', ('"', "f.h"), False),
    ("  #   import <g.h>", ("<", "g.h"), False),
    ("#include MACRO", None, True),
    ("%:include MACRO", None, True),
    ("// #include <h.h>", None, False),
    ("/* %:include <i.h> */", None, False),
    ("#if 0\n#include <j.h>\n#endif", None, False),
]


@pytest.mark.parametrize("line,included,computed", DIRECTIVES)
def test_every_spelling_of_an_include_is_read(line, included, computed):
    from porter.emulate.include_graph import _live_directives
    includes, named = _live_directives(line + "\n")
    assert includes == ([included] if included else [])
    assert (named is not None) == computed


def test_a_header_reached_through_the_digraph_is_in_a_kernel_files_keys(tmp_path):
    from porter.emulate.headers import reached_headers
    (tmp_path / "rvx").mkdir()
    (tmp_path / "rvx/Rv.h").write_text("#pragma once\n")
    found, computed = reached_headers("%:include <rvx/Rv.h>\n", [tmp_path])
    assert found == [tmp_path / "rvx/Rv.h"] and not computed


def test_the_checkout_root_is_searched_before_aten_src(real_root):
    """PyTorch's cmake/Metal.cmake compiles each kernel file with `-I ${CMAKE_SOURCE_DIR} -I
    ${CMAKE_SOURCE_DIR}/aten/src`: a header in both is the root's (review 48's F2: an
    aten/src/c10/metal/utils.h shadowed the checkout's c10/metal/utils.h)."""
    from porter.emulate import headers
    dirs = headers.include_dirs(real_root)
    assert dirs[0] == headers.SHIM_DIR
    assert dirs.index(real_root) < dirs.index(real_root / "aten/src")
    # where a Metal compiler finds the checkout's headers: the same order, porter's shim left out
    assert headers.checkout_include_dirs(real_root) == dirs[1:]
