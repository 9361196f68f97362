"""--changed-since and files deleted whole (issue 36: a deleted file left out of the diff's
reading, or out of the old checkout's files, survived the suite): the diff names it deleted, and
the checkout as it was at the ref still has it."""

from __future__ import annotations

from porter.checks.changed import Changes, OldCheckout, parse_diff

DELETED = """\
diff --git a/aten/src/ATen/native/mps/kernels/Gone.h b/aten/src/ATen/native/mps/kernels/Gone.h
deleted file mode 100644
index 1234567..0000000
--- a/aten/src/ATen/native/mps/kernels/Gone.h
+++ /dev/null
@@ -1,2 +0,0 @@
-#pragma once
-struct gone_functor {};
diff --git a/aten/src/ATen/native/mps/kernels/Kept.h b/aten/src/ATen/native/mps/kernels/Kept.h
index 1234567..89abcde 100644
--- a/aten/src/ATen/native/mps/kernels/Kept.h
+++ b/aten/src/ATen/native/mps/kernels/Kept.h
@@ -1,0 +2 @@
+struct kept_functor {};
"""
GONE = "aten/src/ATen/native/mps/kernels/Gone.h"
KEPT = "aten/src/ATen/native/mps/kernels/Kept.h"


def test_a_file_deleted_whole_is_read_as_deleted():
    changes = parse_diff(DELETED, "HEAD~1")
    assert changes.deleted_files == {GONE}
    assert KEPT in changes.lines and GONE not in changes.lines and not changes.added_files


def test_the_checkout_at_the_ref_still_has_a_deleted_file(tmp_path):
    (tmp_path / KEPT).parent.mkdir(parents=True)
    (tmp_path / KEPT).write_text("#pragma once\nstruct kept_functor {};\n")
    old = OldCheckout(tmp_path, Changes("HEAD~1", deleted_files={GONE}))
    assert old.exists(GONE) and old.exists(KEPT)
    assert GONE in old.glob("aten/src/ATen/native/mps/kernels", "*.h")
    assert not OldCheckout(tmp_path, Changes("HEAD~1")).exists(GONE)
