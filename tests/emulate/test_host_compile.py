"""porter.emulate.host_compile on the real-size tree: the precompiled include block of a host
`.mm` is shared by every checkout with the same headers (a port command's scratch copy built its
own: 9 s and 80 MB each, and CI's disk filled), an error in a checkout header the block reads
is still reported at the checkout's path, and a parse whose process dies is "not proven",
never green."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("clang.cindex")
pytest.importorskip("torch")

from porter.emulate import host_compile  # noqa: E402
from porter.source.checkout import OPERATIONS  # noqa: E402

LIBRARY_H = "aten/src/ATen/native/mps/MetalShaderLibrary.h"


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PORTER_CACHE_DIR", str(cache))
    return cache / "host_compile"


@pytest.mark.slow(seconds=110)
def test_two_checkouts_share_one_prefix_and_a_header_error_is_the_checkouts(real_tree_template, tmp_path,
                                                                            own_cache, monkeypatch):
    first = Path(shutil.copytree(real_tree_template, tmp_path / "one" / "pytorch"))
    second = Path(shutil.copytree(real_tree_template, tmp_path / "two" / "pytorch"))
    mm = f"{OPERATIONS}/UnaryKernel.mm"
    builds = []
    real_build = host_compile._build
    monkeypatch.setattr(host_compile, "_parsed_apart",
                        lambda *a: host_compile._parse(*a[:2], a[3], a[2], a[4] or None))
    monkeypatch.setattr(host_compile, "_build", lambda *a: builds.append(a[1]) or real_build(*a))
    # a file parsed once for a content of its headers: parsed whole, no prefix built
    assert host_compile.errors(first, first / mm) == []
    assert (builds, list(own_cache.glob("*.pch"))) == ([], [])
    # the second checkout, at another path, with the same bytes: the first one's verdict, no parse
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(host_compile, "_parsed_apart", lambda *a: pytest.fail("parsed again"))
        assert host_compile.errors(second, second / mm) == []
    # ... and an edit of the file there: parsed again with the same headers, so the block is
    # precompiled (the file is being edited) ...
    (second / mm).write_text((second / mm).read_text() + "\n// edited\n")
    assert host_compile.errors(second, second / mm) == []
    assert len(builds) == 1 and len(list(own_cache.glob("*.pch"))) == 1
    # ... and the first checkout's edit reads that prefix: none built
    (first / mm).write_text((first / mm).read_text() + "\n// edited there\n")
    assert host_compile.errors(first, first / mm) == []
    assert len(builds) == 1 and len(list(own_cache.glob("*.pch"))) == 1
    # an error in a checkout header the block reads: the error at the checkout's path (not the
    # cache's copy of the header), from a whole parse (a content of the headers seen once) ...
    header = second / LIBRARY_H
    text = header.read_text()
    line = text[:text.index("namespace")].count("\n") + 1
    header.write_text(text.replace("namespace", "int planted = ;\nnamespace", 1))
    found = host_compile.errors(second, second / mm)
    assert [e[:2] for e in found] == [[LIBRARY_H, line]], found
    assert host_compile.message(found).startswith(f"{LIBRARY_H} does not build: {LIBRARY_H}:{line}: ")
    assert len(builds) == 1
    # ... and from a prefix of its own once the file is edited under it: the same error, where
    # the prefix's mirror holds the header
    (second / mm).write_text((second / mm).read_text() + "\n// edited again\n")
    assert [e[:2] for e in host_compile.errors(second, second / mm)] == [[LIBRARY_H, line]]
    assert len(builds) == 2 and len(list(own_cache.glob("*.pch"))) == 2
    # mended: the first prefix again, and the first checkout was never touched
    header.write_text(text)
    assert host_compile.errors(second, second / mm) == []
    assert host_compile.errors(first, first / mm) == []
    assert len(builds) == 2 and len(list(own_cache.glob("*.pch"))) == 2


@pytest.mark.slow
def test_a_checkout_header_that_comes_to_stand_for_a_wheel_header_is_read(real_tree_template, tmp_path,
                                                                          own_cache):
    """The real-size tree has no mps/OperationUtils.h, so the parse read the wheel's; a checkout
    that gains its own is parsed again, reading it: an error there is found (review 17's A05)."""
    root = Path(shutil.copytree(real_tree_template, tmp_path / "pytorch"))
    mm = root / OPERATIONS / "UnaryKernel.mm"
    assert host_compile.errors(root, mm) == []
    utils = "aten/src/ATen/native/mps/OperationUtils.h"
    wheel = Path(host_compile._wheel_include()) / "ATen/native/mps/OperationUtils.h"
    text = wheel.read_text()
    # an upstream checkout has its own copy: it parses cleanly (it was "not proven" on NSArray<>,
    # a dictionary literal, dispatch_queue_create, which porter_apple.h now declares)
    (root / utils).write_text(text)
    assert host_compile.errors(root, mm) == []
    anchor = "\nnamespace at::native::mps {"
    line = text.count("\n", 0, text.index(anchor)) + 2
    (root / utils).write_text(text.replace(anchor, "\nint planted = ;" + anchor, 1))
    # the first error is the planted one (the rest: Apple's names the wheel's header uses)
    assert host_compile.message(host_compile.errors(root, mm)).startswith(
        f"{utils} does not build: {utils}:{line}: expected expression"), host_compile.errors(root, mm)


def test_a_parse_whose_process_dies_is_not_proven_and_not_kept(real_tree_template, tmp_path, own_cache,
                                                               monkeypatch):
    root = Path(shutil.copytree(real_tree_template, tmp_path / "pytorch"))
    mm = root / OPERATIONS / "UnaryKernel.mm"

    def aborted(args, **kwargs):
        return subprocess.CompletedProcess(args, -6, "", "LLVM ERROR: IO failure on output stream")

    # the arguments first (they ask g++ for its include directory, through the same
    # subprocess.run, and are kept for the process): only the parse's child dies
    assert host_compile._arguments(root) is not None
    monkeypatch.setattr(host_compile.subprocess, "run", aborted)
    found = host_compile.errors(root, mm)
    assert found == [[f"{OPERATIONS}/UnaryKernel.mm", 1,
                      "porter's parse of the file did not finish (its process was killed by SIGABRT: "
                      "LLVM ERROR: IO failure on output stream)", "stopped"]]
    assert host_compile.message(found).startswith(
        f"not proven: {OPERATIONS}/UnaryKernel.mm:1: porter's parse of the file did not finish")
    assert not list(own_cache.glob("*.json"))       # asked again next run


@pytest.mark.slow
def test_a_header_put_back_after_a_parse_that_missed_it_is_read(real_tree_template, tmp_path,
                                                                own_cache):
    """Review 48b's F4: the verdict of a parse is kept by the files it read, and a header it did
    not find is none of them: put back, it went unseen ("file not found ... not proven" stood,
    where a Mac builds)."""
    root = Path(shutil.copytree(real_tree_template, tmp_path / "pytorch"))
    mm = root / OPERATIONS / "BinaryKernel.mm"
    mm.write_text(mm.read_text().replace("#include <fmt/format.h>\n",
                                         '#include <fmt/format.h>\n#include "PorterHelper.h"\n', 1))
    assert any("file not found" in str(error) for error in host_compile.errors(root, mm))
    (mm.parent / "PorterHelper.h").write_text("#pragma once\ninline int porter_helper() { return 1; }\n")
    assert host_compile.errors(root, mm) == []


@pytest.mark.slow
def test_quoted_includes_beside_the_mm_and_beside_a_checkout_header_are_found(real_tree_template,
                                                                              tmp_path, own_cache):
    """A quoted include is looked up beside its includer: review 18's H12 (`#include "X.h"` in
    the .mm, X.h beside it) and H17 (MetalShaderLibrary.h including a sibling) said "file not
    found", as porter built the include block from copies in its cache."""
    root = Path(shutil.copytree(real_tree_template, tmp_path / "pytorch"))
    mm = root / OPERATIONS / "BinaryKernel.mm"
    (mm.parent / "PorterHelper.h").write_text("#pragma once\ninline int porter_helper() { return 1; }\n")
    text = mm.read_text()
    mm.write_text(text.replace("#include <fmt/format.h>\n",
                               '#include <fmt/format.h>\n#include "PorterHelper.h"\n', 1))
    assert host_compile.errors(root, mm) == []
    header = root / LIBRARY_H
    (header.parent / "PorterDep.h").write_text("#pragma once\nstruct PorterDep {};\n")
    header.write_text(header.read_text().replace("#pragma once\n", '#pragma once\n#include "PorterDep.h"\n', 1))
    assert host_compile.errors(root, mm) == []
    assert host_compile.errors(root, mm) == []          # again, from what the first run kept


def test_a_tracked_header_deleted_from_the_checkout_is_not_read_from_the_wheel(tmp_path, own_cache,
                                                                              monkeypatch):
    # review 18's H05: MetalShaderLibrary.h deleted (` D` in git status), the parse read the
    # wheel's copy and every dtype was green; a Mac's build finds no file. The verdict may come
    # from a checkout that never had the file (a miniature), so each use asks again.
    root = tmp_path / "pytorch"
    mm = root / OPERATIONS / "UnaryKernel.mm"
    mm.parent.mkdir(parents=True)
    mm.write_text("// host\n#include <ATen/native/mps/OperationUtils.h>\n"
                  f"#include <{LIBRARY_H.removeprefix('aten/src/')}>\n")
    (root / LIBRARY_H).write_text("#pragma once\n")
    wheel = [LIBRARY_H.removeprefix("aten/src/"), "ATen/native/mps/OperationUtils.h", "fmt/format.h"]
    parsed = {"errors": [], "checkout_files": {}, "wheel_files": wheel, "registrations": [], "impls": []}
    monkeypatch.setattr(host_compile, "_parsed_apart", lambda *a: parsed)
    monkeypatch.setattr(host_compile, "_arguments", lambda r: ["-I" + str(r / "aten" / "src")])
    monkeypatch.setattr(host_compile, "_fixed_arguments", lambda: ())
    # not a git checkout: nothing is tracked, the wheel stands in
    (root / LIBRARY_H).unlink()
    assert host_compile.errors(root, mm) == []
    for cmd in (["init", "-q"], ["add", "-A"]):
        subprocess.run(["git", "-C", str(root), *cmd], check=True)
    (root / LIBRARY_H).write_text("#pragma once\n")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit",
                    "-qm", "base"], check=True)
    # tracked and present: a checkout file, read as such (a wheel name here is a stale record)
    assert host_compile.errors(root, mm) == []
    (root / LIBRARY_H).unlink()
    for _ in range(2):            # the parse's verdict, then the recorded one
        found = host_compile.errors(root, mm)
        assert found == [[f"{OPERATIONS}/UnaryKernel.mm", 2,
                          f"'{LIBRARY_H.removeprefix('aten/src/')}' file not found: the checkout "
                          f"deletes {LIBRARY_H}, which git tracks, and a Mac's build reads no "
                          "installed torch's copy of it", "error"]], found
        assert host_compile.message(found).startswith(f"{OPERATIONS}/UnaryKernel.mm does not build: ")
        monkeypatch.setattr(host_compile, "_parsed_apart", lambda *a: pytest.fail("parsed again"))


def test_a_header_missing_from_a_folder_the_checkout_holds_in_full_is_not_read_from_the_wheel(
        tmp_path, own_cache, monkeypatch):
    # review 20's D05: BinaryOps.h deleted by a commit (git no longer tracks it), every dtype
    # green; the checkout's ATen/native holds every other header the wheel has there
    wheel = Path(host_compile._wheel_include())
    names = sorted(p.name for p in (wheel / "ATen" / "native").glob("*.h"))
    assert "BinaryOps.h" in names and len(names) > 20
    root = tmp_path / "pytorch"
    native = root / "aten" / "src" / "ATen" / "native"
    (root / OPERATIONS).mkdir(parents=True)
    mm = root / OPERATIONS / "BinaryKernel.mm"
    mm.write_text("#include <ATen/native/BinaryOps.h>\n")
    parsed = {"errors": [], "checkout_files": {}, "wheel_files": ["ATen/native/BinaryOps.h", "ATen/ops/add.h"],
              "registrations": [], "impls": []}
    monkeypatch.setattr(host_compile, "_parsed_apart", lambda *a: parsed)
    monkeypatch.setattr(host_compile, "_arguments", lambda r: ["-I" + str(r / "aten" / "src")])
    monkeypatch.setattr(host_compile, "_fixed_arguments", lambda: ())
    # a miniature's ATen/native (a few headers): the wheel stands in for the rest
    for name in names[:4]:
        (native / name).write_text("#pragma once\n")
    assert host_compile.errors(root, mm) == []
    # every header but BinaryOps.h: a folder held in full, and one header gone from it
    for name in names:
        if name != "BinaryOps.h":
            (native / name).write_text("#pragma once\n")
    found = host_compile.errors(root, mm)
    assert [e[:2] for e in found] == [[f"{OPERATIONS}/BinaryKernel.mm", 1]], found
    assert found[0][2].startswith("'ATen/native/BinaryOps.h' file not found: the checkout's "
                                  "aten/src/ATen/native holds the other headers"), found
