"""`porter test --device emulate`: the harness backend that runs the checkout's Metal kernels
on the host CPU.

The op's kernel comes from the host .mm (hostmap) and porter.dispatch.kernel_choice (which
registration runs a sample, with what output type); the .metal file is built once per session
(build, cached on disk); kernels run in long-lived worker processes (client), so a kernel
that faults fails its test with "kernel crashed (signal N)" instead of killing porter.
TensorIterator semantics are emulated here: type promotion with torch.result_type,
broadcasting (torch_run on tensors, numpy_run on the reference cache's arrays), and the
kernel's registered output dtype (int -> float for math ops).
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from porter.dispatch import kernel_choice
from porter.dispatch.kernel_choice import METAL_TO_NAME, NAME_TO_METAL, OpNames, is_floating_or_complex
from porter.emulate.build import BUILD_ERROR, UNSUPPORTED, EmulateBuildError, Library, build_file
from porter.emulate.toolchain import PRIMARY_VERSION
from porter.emulate.client import WorkerClient
from porter.emulate import fast_calls, host_args, host_call, host_dtypes, host_registrations
from porter.emulate.hostmap import HostKernel, host_kernels, shared_stub_kernels
from porter.errors import PorterError
from porter.source import metal_scan
from porter.source.native_definitions import integers_copied


# the `.mm` files porter parses for a header the branch changes, beyond those it parses
# anyway: each is parsed twice, the second time whole (10-30 s), with the base's headers
HEADER_READERS = 3


class EmulateBackend:
    name = "emulate"
    device_type = "mps"
    mps_expectations = True

    def __init__(self, root: Path):
        self.root = Path(root)
        self._libs: dict[Path, Library] = {}
        self._host: list[HostKernel] | None = None
        self._client: WorkerClient | None = None
        self._pending: dict[Path, threading.Thread] = {}    # libraries building in a thread
        self._built: dict[Path, object] = {}                # what those threads produced
        self._stub_checked: dict = {}                       # OpNames -> _stub_without_kernel
        self._routes: dict = {}                             # op name -> (cpu kernel, routes)
        self._version_outputs: list = []                    # the last sample, other versions
        self._other_libs: dict = {}                         # (metal, version) -> Library
        self._orders: dict = {}                             # op name -> its iterator's tensor order
        self._scalar_facts: dict = {}                       # host kernel -> (_host_scalars)
        self._last: tuple | None = None                     # the last sample's kernel call
        # (metal, version, kernel name) -> Library / error, or the Future building it
        self._contracted: dict = {}
        self._file_views: dict = {}     # .metal -> the front end's views (_views)
        self._fma_free: dict = {}       # (.metal, registered name) -> _cannot_fuse
        self._mixed: dict = {}          # (.metal, registered name) -> _mixed_halves
        self._read: dict = {}           # .metal -> it and its headers' texts (_files_read)
        self._folding: dict = {}        # (file, version, kernel) -> its folding build
        self._ahead = None                                  # the executor of those Futures
        self._refusals: dict = {}                           # (body, line, dtype) -> HostRefusal
        self._mps_defined: frozenset | None = None          # what the mps/ sources define
        self._device_tests: dict = {}                       # (stub, op) -> _device_dependent
        self._yaml_rejected: str | None = None              # torchgen's reason, "" when none
        self._host_builds: dict = {}                        # .mm path -> its compile error
        self._registrations: dict = {}                      # parsed .mm path -> its registrations
        self._impls: dict = {}                              # parsed .mm path -> its Library impls
        self._math_modes: dict = {}                         # .metal -> a math-mode pragma's place
        self._unlike: dict = {}                             # .metal -> where g++ reads it otherwise
        self._fellows: dict = {}                            # .metal -> another file's error
        self._yaml_others: str | None = None                # another op's row unlike the wheel's
        self._changed: str | None = None                    # a changed .mm file's first error
        self._templates_unlike: str | None = None           # indexing.h unlike the emulator's model

    # ------------------------------------------------------------ protocol
    def unavailable_reason(self) -> str | None:
        from porter.emulate import build
        try:
            build.compiler()
        except Exception as err:
            return f"--device emulate: {err}"
        return None

    def supported_dtypes(self, opinfo) -> None:
        """Every dtype the MPS test sends is run: a dtype without a kernel fails in `run`,
        with the message the GPU gives, as it fails on a Mac."""
        return None

    def skip_reason(self, op: OpNames) -> str | None:
        """Why porter cannot run the op at all, or None: its MPS path is no Metal kernel of
        a *Kernel.mm (still MPSGraph, or host code the emulator does not model)."""
        if self._candidates(op) or self._stub_without_kernel(op) \
                or self._routed(op)[1]:
            return None
        return (f"porter cannot run {op.name} under the emulator: no *Kernel.mm of the "
                "checkout dispatches a Metal kernel for it (its MPS path is MPSGraph or host "
                "code porter does not model; `porter status` shows which)")

    def build_error(self, op: OpNames) -> str | None:
        """Why the op's kernel file would not compile on a Mac, or None. Every dtype fails
        then: one bad registration stops the whole .metal file."""
        if self._yaml_rejected is None:
            from porter.emulate.yaml_verdict import rejection
            self._yaml_rejected = rejection(self.root) or ""
        if self._yaml_rejected:
            return self._yaml_rejected
        # a fault porter reads in the op's own host (a function the stub cannot take) says more
        # than the compile error it causes
        fault = next((host.fault for host in self._candidates(op) if host.fault), None)
        broken = fault or self._host_files_do_not_build(op) or self._implemented_by_hand(op)
        if broken:
            return broken
        missing = None if self._candidates(op) else self._stub_without_kernel(op)
        if missing:
            return missing
        unlinked = (self._mps_row_undefined(op) or self._mps_row_elsewhere(op)
                    or self._rows_unlike_the_wheel(op) or self._yaml_unlike_the_wheel())
        if unlinked:
            return unlinked
        for host in self._candidates(op):
            if host.choice:
                return (f"not proven: {host.choice}: which kernel a sample runs on MPS is not "
                        "known here; test it on a Mac (`--device mps`)")
            if host.unmodelled:
                return host.unmodelled
            shared = self._device_dependent(op, host)
            if shared:
                return shared
            if host.condition:
                return (f"not proven: {host.stub}_stub is registered for MPS under "
                        f"{host.condition}, a condition porter cannot evaluate: a build that "
                        f"does not define it has no kernel ('{host.stub}_stub: missing kernel "
                        f"for mps'); register it unconditionally")
            # after the condition's words: a registration compiled out has none in clang's AST
            registered = self._registered_otherwise(host)
            if registered:
                return registered
            unbuilt = self._host_library_lacks(host)
            if unbuilt:
                return unbuilt
            apple = self._apple_header(host.metal)
            if apple:
                return apple
            try:
                lib = self._library(host.metal)
            except EmulateBuildError as err:
                return f"{self._rel(host.metal)} does not build: {self._rel(err.message)}"
            errors = lib.build_errors()
            unmodelled = next((m for m in map(_UNMODELLED_TYPE.search, errors) if m), None)
            if unmodelled:
                return (f"not proven: {self._rel(host.metal)} uses Metal's type "
                        f"`{unmodelled.group(1)}` (MSL §2.2.3 packed vectors, §2.3 matrices), "
                        "which porter's model of Metal does not declare: whether and how a Mac "
                        "builds and runs it is not known here; test it on a Mac (`--device mps`)")
            if errors and lib.refused_by_gxx_alone():
                return (f"not proven: the emulator's compiler (g++) cannot build "
                        f"{self._rel(errors[0]).removeprefix(BUILD_ERROR + ': ')}, which porter's "
                        "Metal front end accepts: whether a Mac builds it is not known here")
            if errors:
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                return (f"{self._rel(host.metal)} does not build: "
                        f"{self._rel(errors[0])}{more}")
            fellow = self._metallib_fellow_does_not_build(host.metal)
            if fellow:
                return fellow
            mode = self._math_mode(host.metal)
            if mode:
                return f"not proven: {self._rel(mode)}"
            unsequenced = self._unsequenced(host.metal)
            if unsequenced:
                return f"not proven: {self._rel(unsequenced)}"
            unlike = self._unlike_gxx(host.metal)
            if unlike:
                return unlike
            elsewhere = self._library_unmodelled(host)
            if elsewhere:
                return elsewhere
            for call in host.calls:
                # the call's kind and alpha as the host writes them, not the registration's
                regs = lib.find(call.kernel)
                wrong = regs and host_call.kind_mismatch(call, host.at_line(call.line), regs,
                                                          host.metal.name)
                if wrong:
                    return wrong
            for kernel in dict.fromkeys([host.kernel, *(call.kernel for call in host.calls)]):
                fast = kernel and fast_calls.reason(host.metal, self._rel(host.metal), kernel)
                if fast:
                    return fast
        # last: a file that does not build says more than the templates it runs
        if self._templates_unlike is None:
            from porter.emulate.kernel_templates import unlike_the_model
            self._templates_unlike = unlike_the_model(self.root) or ""
        return self._templates_unlike or None

    def _metallib_fellow_does_not_build(self, metal: Path) -> str | None:
        """Why another kernel file of the metallib `metal` is linked into does not build as
        Metal builds it (porter's front end, cached by content), or None: upstream's build
        compiles every kernels/*.metal into one metallib, so an error in any of them stops it
        before any test (review 20's H05: an error in ActivationKernel.metal left heaviside,
        in BinaryKernel.metal, green)."""
        if metal in self._fellows:
            return self._fellows[metal]
        from porter.emulate import frontend
        found = None
        for other in frontend.metallib_files(self.root, metal):
            if other.resolve() == Path(metal).resolve():
                continue
            try:
                text = other.read_text(encoding="utf-8")
            except OSError:
                continue
            errors = [e for view in frontend.views(text, other, self.root) for e in view.errors]
            if errors:
                found = (f"{self._rel(other)} does not build: {self._rel(errors[0])}; every "
                         f"kernels/*.metal file is linked into one metallib with "
                         f"{self._rel(metal)}, so a Mac's build stops there, before any test")
                break
        self._fellows[metal] = found
        return found

    def _host_files_do_not_build(self, op: OpNames) -> str | None:
        """The first compile error of the op's host `.mm` files, then of every `*Kernel.mm` file
        of the checkout, whichever op runs (one that fails stops a Mac's build: review 17's
        A04; review 18's H09: sign, registered through a macro, has no host function porter
        finds, and no file was parsed), as porter.emulate.host_compile reads them; or None. Of
        a host in an MPSGraph `.mm` file (a ternary op's in PointwiseOps.mm), syntax errors
        alone: such a file uses far more of Apple's frameworks than porter declares. The other
        MPSGraph files are not parsed."""
        from porter.emulate import host_compile
        from porter.source.checkout import OPERATIONS
        own = [host_compile.host_file(self.root, host.function) for host in self._candidates(op)]
        kernels = sorted((Path(self.root) / OPERATIONS).glob("*Kernel.mm"))
        for path in dict.fromkeys([*(mm for mm in own if mm is not None and mm.is_file()), *kernels]):
            if path not in self._host_builds:
                found = host_compile.parsed(self.root, path)
                self._registrations[path] = found.registrations if found else None
                self._impls[path] = found.impls if found else []
                self._host_builds[path] = host_compile.message(
                    found.errors if found else [], whole=path.name.endswith("Kernel.mm"))
            if self._host_builds[path]:
                return self._host_builds[path]
        return self._changed_hosts_do_not_build(set(self._host_builds))

    def _changed_hosts_do_not_build(self, parsed: set) -> str | None:
        """The first error the branch's change of another `.mm` file makes (porter.emulate.
        changed_hosts: a syntax error, a name the change removed still used: a Mac's build
        stops; another error the base's parse has not, or a parse that stops before the
        change: not proven), or None. A header of ATen the branch changes is read through a
        file that includes it: the parse of one that porter parses anyway, else one `.mm`
        that reads it, parsed with the base's headers too (review 24's C1). Once per run."""
        if self._changed is None:
            from porter.emulate import host_compile
            from porter.emulate.changed_hosts import (Change, changed_headers, changed_hosts,
                                                      header_readers, introduced)
            from porter.source.cpp_scan import code_changed
            from porter.source.git_base import default_base
            self._changed = ""
            # the branch's commits count too: a Mac builds them (HEAD where there is no base)
            found_base = default_base(self.root)
            base = found_base[1] if found_base else "HEAD"
            todo = changed_hosts(self.root, base)
            root = Path(self.root)
            changed = changed_headers(self.root, base)
            # each changed header's work-tree text (None: deleted), read once
            now = {h: (root / h).read_text(encoding="utf-8", errors="replace")
                   if (root / h).is_file() else None for h in changed}
            headers = {h: c for h, c in changed.items() if code_changed(c.head, now[h])}
            readers = (header_readers(self.root, set(headers), host_compile.wheel_include())
                       if headers else {})
            for header in sorted(headers):
                if _declarations_added(headers[header], now[header]):
                    # lines added, none removed, no directive among them (porter's ternary
                    # port declares its exec_ternary_kernel overload in MetalShaderLibrary.h):
                    # the files parsed anyway read them; a macro or a removal is read below
                    continue
                # every file that reads it is parsed: a macro or a declaration changed breaks
                # one reader and not another (review 25's H22: a `#define` that only
                # UnaryOps.mm's code expands). A file parsed anyway read it as the work tree has it
                unread = sorted((p for p, read in readers.items()
                                 if header in read and p not in parsed and p not in todo),
                                key=lambda p: (p.stat().st_size, p))
                if len(unread) > HEADER_READERS:
                    names = ", ".join(p.name for p in unread[:3])
                    self._changed = (
                        f"not proven: the branch changes {header}, which {len(unread)} files of the "
                        f"MPS build that porter does not otherwise parse read ({names}, ...): "
                        f"porter parses at most {HEADER_READERS} of them, twice each (docs/"
                        "testing.md \"What the host may do\")")
                    return self._changed
                for reader in unread:
                    # the file is the base's: only its headers' change is to be read
                    text = reader.read_text(encoding="utf-8", errors="replace")
                    todo[reader] = Change(set(), set(), text, frozenset())
            for path, change in sorted(todo.items()):
                if path in parsed:
                    continue
                rel = str(path.resolve().relative_to(root.resolve()))
                text = path.read_text(encoding="utf-8", errors="replace")
                now_parsed = host_compile.parsed(self.root, path, text)
                if now_parsed is None:
                    continue          # no parse here (no libclang): nothing is said
                found = now_parsed.errors
                self._registrations[path] = now_parsed.registrations
                self._impls[path] = now_parsed.impls
                read = {h for h in readers.get(path, ()) if h in headers}
                # the base's text parsed as the file's, with the base's text of each header it
                # reads that the branch changed: what its parse says too, a Mac built
                overlay = {h: headers[h].head for h in read if headers[h].head is not None}
                head = (host_compile.errors(self.root, path, change.head, overlay or None)
                        if change.head is not None else None)
                texts = {h: (now[h] or "", laid) for h, laid in overlay.items()}
                removed = change.removed.union(*(headers[h].removed for h in read))
                stops, unproven = introduced(found, rel, change._replace(removed=removed), head,
                                             text, texts)
                if stops or unproven:
                    where, line, why, _ = (stops or unproven)[0]
                    how = ("porter parses the `.mm` and `.cpp` files the branch changes, and their base's "
                           "text, against the wheel's ATen headers, docs/testing.md \"What the "
                           "host may do\"")
                    self._changed = (
                        f"{rel} does not build: {where}:{line}: {why}; a Mac's build stops there, "
                        f"before any test ({how})" if stops else
                        f"not proven: {where}:{line}: {why}" if unproven[0][3] == "unmodelled" else
                        f"not proven: {where}:{line}: {why}, "
                        + ("so porter's parse stopped before the lines the branch changes"
                           if unproven[0][3] == "stopped" else
                           "an error the branch's change makes, which the base's parse has not "
                           "(a Mac's build gets past it only if a header it generates, which the "
                           "installed torch lacks, declares what is missing)")
                        + f" ({how})")
                    break
        return self._changed or None

    def _views(self, metal: Path) -> list:
        """The front end's views of the kernel file under each version (cached by content in
        porter.emulate.frontend); once per file a run."""
        if metal not in self._file_views:
            from porter.emulate import frontend
            try:
                text = metal.read_text(encoding="utf-8")
                self._file_views[metal] = frontend.views(text, str(metal), self.root)
            except (OSError, UnicodeDecodeError, PorterError):
                self._file_views[metal] = []    # the build says why it cannot be read or checked
        return self._file_views[metal]

    def _cannot_fuse(self, metal: Path, reg) -> bool:
        """Whether no build can fuse a multiply-add of `reg`'s kernel: every functor it runs
        has no product and calls nothing but conversions and constructors under every
        version (the front end's View.fma_free), so its contracted answers are its plain
        ones, known without the contracted build (a -O1 compile an edit, waited for)."""
        key = (metal, reg.name)
        if key not in self._fma_free:
            from porter.emulate import groups
            views = self._views(metal)
            used = self._functors(metal, reg.name, groups)
            self._fma_free[key] = bool(views and used) and \
                all(used <= set(view.fma_free) for view in views)
        return self._fma_free[key]

    def _math_mode(self, metal: Path) -> str | None:
        """`_math_mode` of what the kernel file compiles, its checkout headers included (a
        header's pragma sets the mode of the file it is read into)."""
        if metal not in self._math_modes:
            pragmas = dict.fromkeys(p for view in self._views(metal) for p in view.pragmas)
            self._math_modes[metal] = _math_mode(pragmas, self._rel)
        return self._math_modes[metal]

    def _unsequenced(self, metal: Path) -> str | None:
        """A call of the kernel file given two arguments that change state (the front end's
        View.unsequenced: review 31's L12): g++ and clang evaluate them in other orders."""
        calls = [c for view in self._views(metal) for c in view.unsequenced]
        if not calls:
            return None
        file, line, callee = calls[0]
        return (f"{file}:{line}: `{callee}(...)` is given two arguments that change state: C++ "
                "leaves the order of a call's arguments unspecified, and g++ (the emulator's, "
                "right to left) and Apple's compiler (clang, left to right) differ; compute them "
                "in statements of their own first")

    def _library_unmodelled(self, host) -> str | None:
        """Not proven where the object a host function's exec_*_kernel call runs on is not the
        bundled metallib (`static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();`,
        declared once in the `.mm`), the one the kernel files are built into: a library built
        at run time from a string holds other kernels (review 33's H02, H02b)."""
        from porter.emulate import host_compile
        from porter.source.cpp_scan import code_mask
        mm = host_compile.host_file(self.root, host.function) if host.function else None
        if mm is None or not host.calls:
            return None
        try:
            text = mm.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        mask = code_mask(text)
        for name in dict.fromkeys(_RECEIVER.findall(mask)):
            bundled = re.findall(_BUNDLED.format(re.escape(name)), mask, re.M)
            # every declaration of the name (a type, then the name, then `=`, `(`, `{` or `;`)
            declared = [m.group(1) for m in re.finditer(
                rf"\b([A-Za-z_][\w:]*(?:\s*<[^;{{}}]*>)?)\s*[&*]*\s*\b{re.escape(name)}\s*[=({{;]",
                mask) if m.group(1) not in ("return", "else", "case", "throw", "delete")]
            if len(bundled) != 1 or len(declared) != 1:
                return (f"not proven: {self._rel(mm)}: the kernel call runs on `{name}`, which "
                        "the file does not declare once as the bundled metallib (`static auto& "
                        f"{name} = mps::MetalShaderLibrary::getBundledLibrary();`), the library "
                        "the kernel files are built into: porter does not model another")
        return None

    def _files_read(self, metal: Path) -> list[tuple[str, str]]:
        """(path, text) of the kernel file and every checkout header it includes
        (two_compilers.files_read), or [] where the file cannot be read (the build says why);
        once per file a run."""
        if metal not in self._read:
            from porter.emulate import headers, two_compilers
            try:
                text = metal.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                self._read[metal] = []
                return []
            dirs = headers.checkout_include_dirs(Path(self.root))
            self._read[metal] = [(str(metal), text)] + [
                (str(p), t) for p, t in two_compilers.files_read(text, dirs)]
        return self._read[metal]

    def _apple_header(self, metal: Path) -> str | None:
        """Not proven where the kernel file, or a checkout header it includes, includes an
        Apple SDK header Metal's compiler finds and porter does not model (two_compilers.
        apple_header): before the build, whose "No such file" would say a Mac cannot build it."""
        from porter.emulate import two_compilers
        found = two_compilers.apple_header(self._files_read(metal))
        if found is None:
            return None
        return (f"not proven: {self._rel(found[0])}:{found[1]}: <{found[2]}> is a header of "
                "Apple's SDK that Metal's compiler finds and porter does not model: what a Mac "
                "builds with it is not known here; test it on a Mac (`--device mps`)")

    def _unlike_gxx(self, metal: Path) -> str | None:
        """Not proven where the emulator's g++ build may read the kernel file or a header it
        includes otherwise than Apple's Metal compiler (porter.emulate.two_compilers: a
        condition on a macro porter does not give both alike, a g++ macro in code, an
        attribute such as GCC's `optimize`); once per file a run."""
        if metal not in self._unlike:
            from porter.emulate import two_compilers
            from porter.emulate.toolchain import compiler
            found = None
            try:
                files = self._files_read(metal)
                found = two_compilers.first_unlike(files, compiler()) if files else None
            except PorterError:
                pass                # no compiler: the build says so
            self._unlike[metal] = (f"not proven: {self._rel(found[0])}:{found[1]}: {found[2]}"
                                   if found else None)
        return self._unlike[metal]

    def _implemented_by_hand(self, op: OpNames) -> str | None:
        """Not proven where code porter parsed registers an implementation of the op with the
        dispatcher by hand (`m.impl("heaviside", ...)` in a `TORCH_LIBRARY_IMPL` block) for a
        key a Mac's test reaches (MPS, CPU, an alias), or one porter cannot read (review 27's
        H07: a new `.mm` or `.cpp` of the MPS build registering zeros for heaviside left its
        port green): on a Mac that function runs, not the kernel or the reference porter
        runs."""
        base = _aten_spelled(op)
        for path in sorted(self._impls):
            for where, line, key, name in self._impls[path]:
                if key is not None and (_OTHER_BACKEND.search(key) or _OFF_THE_TESTS_PATH.match(key)):
                    continue
                named = None if name is None else name.split("::")[-1].split(".")[0]
                if key == host_registrations.DEFINES and (named is None or named in (base, f"{base}_")):
                    return (f"not proven: {where}:{line} defines the operator "
                            f"{name or '(one porter cannot read)'} with the dispatcher (`m.def`): "
                            "a second definition of an aten operator fails libtorch's static "
                            "init on a Mac (docs/testing.md \"What the host may do\")")
                if named is None or named in (base, f"{base}_"):
                    what = f"an implementation of {name}" if name else "an operator porter cannot read"
                    runs = ("the CPU reference porter compares with" if key and key.endswith("CPU")
                            else "the kernel porter tests")
                    return (f"not proven: {where}:{line} registers {what} with the dispatcher for "
                            f"{key or 'a key porter cannot read'}, which a Mac runs instead of "
                            f"{runs} (docs/testing.md \"What the host may do\")")
        return None

    def _registered_otherwise(self, host: HostKernel) -> str | None:
        """Not proven unless the host files porter parsed (the op's own, every `*Kernel.mm`, the
        ones the branch changes) register the host function porter read from a
        REGISTER_DISPATCH line once, in its file, for a stub nothing else registers (review
        26's M3: a registration porter's pattern does not read ran another function on a
        Mac). The registrations are clang's (porter.emulate.host_registrations); None where
        porter could not parse."""
        if host.impl and not host.function:
            return None         # the op's impl runs the kernel on *this: no stub, no registration
        from porter.emulate import host_compile
        from porter.source.checkout import OPERATIONS
        own = host_compile.host_file(self.root, host.function) \
            or Path(self.root) / OPERATIONS / f"{host.metal.stem}.mm"
        if own not in self._registrations:
            found = host_compile.parsed(self.root, own)
            self._registrations[own] = found.registrations if found else None
        if any(found is None for found in self._registrations.values()):
            return None
        every = [r for path in sorted(self._registrations) for r in self._registrations[path]]
        function = host.function.split(" (")[0]
        rel = self._rel(str(own))
        how = "porter reads the registrations clang compiles, docs/testing.md \"What the host may do\""
        stub = f"{host.stub}_stub"
        if function:
            # the stub as written (gelu's GeluKernel), from the function's own registration
            mine = [r for r in every if r[0] == rel and r[3] == function]
            if len(mine) > 1:           # one function for two stubs: the op's by its name
                mine = [r for r in mine if r[2] == stub] or mine
            if len(mine) != 1:
                return (f"not proven: {rel} registers {function} for MPS {len(mine)} times in "
                        f"the code clang compiles, where porter read one REGISTER_DISPATCH line ({how})")
            stub = mine[0][2]
        made = [r for r in every if r[2] == stub]
        if len(made) > 1:
            places = ", ".join(f"{where}:{line}" for where, line, _, _ in made)
            return (f"not proven: {stub} is registered for MPS {len(made)} times ({places}): "
                    f"which function a Mac runs depends on the order the registrations run ({how})")
        if not made or made[0][0] != rel:
            elsewhere = made[0][0] if made else "no code porter compiles"
            return (f"not proven: {stub} is registered for MPS in {elsewhere}, while porter read "
                    f"its REGISTER_DISPATCH line in {rel} ({how})")
        return None

    def _device_dependent(self, op: OpNames, host: HostKernel) -> str | None:
        """Not proven where the shared function that runs the host's stub (a structured op's
        TORCH_IMPL_FUNC in native/*.cpp) tests the device: what it does for MPS alone runs on a
        Mac, never in the CPU reference, and porter runs the kernel alone."""
        key = (host.stub, host.via_op or op.name)
        if key not in self._device_tests:
            from porter.source.native_definitions import device_dependent
            owner = host.via_op or (op.aten_name or op.name).split(".")[-1]
            found = device_dependent(self.root, f"{host.stub}_stub", owner)
            self._device_tests[key] = None if found is None else (
                f"not proven: {found[0]}:{found[1]}: `{found[2]}` tests the device in the "
                f"function that runs {host.stub}_stub for every device: what it does for MPS "
                "runs on a Mac and never in the CPU reference, and porter runs the kernel alone")
        return self._device_tests[key]

    def _defined_in_mps_sources(self) -> frozenset:
        """The functions the checkout's mps/ sources define, read once a run: three yaml checks
        ask it of every op."""
        if self._mps_defined is None:
            from porter.source import checkout as co
            from porter.source.mps_definitions import defined_names, mps_source_paths
            checkout = co.Checkout(self.root)
            self._mps_defined = frozenset(
                defined_names(checkout.read(rel) for rel in mps_source_paths(checkout)))
        return self._mps_defined

    def _mps_row_undefined(self, op: OpNames) -> str | None:
        """An op with a Metal kernel on its stub whose yaml still sends MPS to an `_mps` function
        no mps/ source defines (the MPSGraph impl deleted, its row restored): a Mac build fails
        to link, whatever the kernel does. None otherwise."""
        if not any(h.function for h in self._candidates(op)):
            return None         # only a port on the stub (REGISTER_DISPATCH) is read here
        from porter.source import checkout as co
        from porter.source import native_yaml
        name = (op.aten_name or op.name).removeprefix("nn.functional.")
        spelled = name.replace(".", "_", 1) if name.startswith(("special.", "linalg.", "fft.")) else name
        checkout = co.Checkout(self.root)
        entries = native_yaml.entries_named(checkout.read(co.NATIVE_YAML), {spelled, spelled + "_"})
        # torchgen keeps an entry's last MPS row
        rows = [(e, e.mps_rows()[-1]) for e in entries if e.mps_rows()]
        own = [r for e, r in rows if r.kernel.split("::")[-1].endswith("_mps")]
        shared = [r for e, r in rows if any(r.kernel == d.kernel for d in e.dispatch if "CPU" in d.keys)]
        if not own or not shared:
            # only a family half routed to the shared kernel is read: where every row names an
            # `_mps` function, one missing here may be a source this checkout lacks
            return None
        defined = self._defined_in_mps_sources()
        for row in own:
            kernel = row.kernel.split("::")[-1]
            if kernel not in defined:
                return (f"{co.NATIVE_YAML}:{row.lineno} sends MPS to {kernel}, which no {co.MPS}/ "
                        f"source defines: a Mac build fails to link, and MPS never reaches the "
                        f"Metal kernel of {op.name} (porter check: PORTER002); send MPS to the "
                        f"shared kernel's row")
        return None

    def _mps_row_elsewhere(self, op: OpNames) -> str | None:
        """Not proven when the yaml does not send MPS to the path the ported kernel is on: the
        op's rows have no MPS at all (a Mac never runs the kernel), or an MPS row names another
        function than the shared CPU/CUDA kernel that runs the stub (or than the op's own
        `_out_mps` impl that runs the kernel): a Mac runs that function, not porter's kernel.
        None otherwise, and for an op whose rows porter does not find."""
        hosts = [h for h in self._candidates(op) if not h.fault]
        if not hosts or self._routed(op)[1]:
            return None         # a routed op's row is the shared kernel's by construction
        from porter.source import checkout as co
        from porter.source import native_yaml
        name = (op.aten_name or op.name).removeprefix("nn.functional.")
        spelled = name.replace(".", "_", 1) if name.startswith(("special.", "linalg.", "fft.")) else name
        entries = native_yaml.entries_named(co.Checkout(self.root).read(co.NATIVE_YAML),
                                            {spelled, spelled + "_"})
        dispatched = [e for e in entries if e.dense_rows()]
        rows = [(e, e.mps_rows()[-1]) for e in entries if e.mps_rows()]
        if dispatched and not rows:
            return (f"not proven: no row of {spelled}'s entries in {co.NATIVE_YAML} names MPS "
                    f"({co.NATIVE_YAML}:{dispatched[0].lineno}): a Mac does not run {op.name}'s "
                    f"Metal kernel at all; add MPS to the row that runs it "
                    f"(`{', '.join(dispatched[0].dense_rows()[0].keys)}, MPS: "
                    f"{dispatched[0].dense_rows()[0].kernel}`)")
        impls = {h.impl for h in hosts if h.impl}
        for entry, row in rows:
            kernel = row.kernel.split("::")[-1]
            shared = any(d.kernel == row.kernel for d in entry.dispatch if "CPU" in d.keys)
            if kernel in impls or (shared and any(not h.impl for h in hosts)):
                continue
            cpu = next((d.kernel for d in entry.dispatch if "CPU" in d.keys), "")
            path = ", ".join(sorted(impls)) if impls and not any(not h.impl for h in hosts) \
                else (f"{cpu}, " if cpu else "") + "the shared CPU/CUDA function whose stub runs it"
            if kernel not in self._defined_in_mps_sources():
                # the checkout may lack the source (a tree without MPSGraph files): not proven,
                # but worded as what a Mac does with the row as it reads here (review 36's H08)
                return (f"not proven: {co.NATIVE_YAML}:{row.lineno} sends MPS to {row.kernel}, "
                        f"not to {path}, and no {co.MPS}/ source of this checkout defines "
                        f"{kernel}: a Mac's build fails to link unless a source porter does not "
                        f"read defines it, and never runs the Metal kernel porter runs; send MPS "
                        f"to {path.split(', the shared')[0] if cpu else 'the function that runs it'}")
            return (f"not proven: {co.NATIVE_YAML}:{row.lineno} sends MPS to {row.kernel}, not to "
                    f"{path}: a Mac runs {row.kernel} for {entry.full_name}, not the Metal kernel "
                    "porter runs")
        return None

    def _rows_unlike_the_wheel(self, op: OpNames) -> str | None:
        """Not proven when the checkout declares the op's yaml entries otherwise than the
        installed torch does, beyond the MPS rows a port changes (porter.source.wheel_rows):
        the reference, the samples and the Python API come from the installed torch."""
        from porter.source import checkout as co
        from porter.source.wheel_rows import unlike_the_wheel
        name = (op.aten_name or op.name).removeprefix("nn.functional.")
        spelled = name.replace(".", "_", 1) if name.startswith(("special.", "linalg.", "fft.")) else name
        found = unlike_the_wheel(co.Checkout(self.root).read(co.NATIVE_YAML), {spelled, spelled + "_"})
        if found is None:
            return None
        line, what = found
        return (f"not proven: {co.NATIVE_YAML}:{line}: {what}; porter's CPU reference, samples "
                "and Python API are the installed torch's, built from its row, and a Mac builds "
                "the checkout's: test on a Mac (`--device mps`)")

    def _yaml_unlike_the_wheel(self) -> str | None:
        """Another op's yaml entry that makes a Mac's libtorch another than the installed
        torch (porter.source.wheel_rows.all_unlike): an MPS row naming a function no mps/
        source defines fails the link; any other difference is not proven (kept in porter's
        cache with torchgen's verdict: porter.emulate.yaml_verdict)."""
        if self._yaml_others is not None:
            return self._yaml_others or None
        from porter.emulate.yaml_verdict import rows_unlike_the_wheel
        from porter.source import checkout as co
        checkout = co.Checkout(self.root)
        found = rows_unlike_the_wheel(self.root)
        said = ""
        if found["mps"]:
            defined = self._defined_in_mps_sources()
            missing = next((row for row in found["mps"] if row[2] not in defined), None)
            if missing:
                said = (f"{co.NATIVE_YAML}:{missing[0]}: {missing[1]}'s MPS row names {missing[2]}, "
                        f"which no {co.MPS}/ source defines: a Mac's libtorch does not link, so no "
                        "test runs (porter check: PORTER002)")
        if not said and found["other"]:
            line, what = found["other"]
            said = (f"not proven: {co.NATIVE_YAML}:{line}: {what}; a Mac builds libtorch from "
                    "every row, and porter runs the installed torch's: test on a Mac (`--device mps`)")
        self._yaml_others = said
        return said or None

    def _host_library_lacks(self, host: HostKernel) -> str | None:
        """A host function calling exec_ternary_kernel with a scalar, where the checkout's
        MetalShaderLibrary.h declares no such overload: its .mm does not build on a Mac."""
        if not re.search(r"\bexec_ternary_kernel\s*\([^;]*?,[^;]*?,[^;]*?\)\s*;", host.body):
            return None
        from porter.source import host_library
        from porter.source.checkout import Checkout
        checkout = Checkout(self.root)
        if host_library.ternary_takes_scalar(checkout.read, checkout.exists) is not False:
            return None
        return (f"{host.stub}_stub's host function calls exec_ternary_kernel with a scalar, which "
                f"{host_library.LIBRARY_HEADER} does not declare (it takes (iter, name) only): "
                "its .mm does not build on a Mac; add that overload to the host library")

    def _stub_without_kernel(self, op: OpNames) -> str | None:
        """The yaml sends MPS to the shared CPU/CUDA function, whose DispatchStub no host file
        registers for MPS (a registration deleted, a port half-done): that is not an op porter
        cannot run but one a Mac fails, every dtype with 'missing kernel'."""
        key = (op.name, op.aten_name, op.variant)
        if key in self._stub_checked:
            return self._stub_checked[key]
        from porter.source import checkout as co
        from porter.source import native_yaml
        why = None
        name = (op.aten_name or op.name).removeprefix("nn.functional.")
        spelled = name.replace(".", "_", 1) if name.startswith(("special.", "linalg.", "fft.")) \
            else name                               # as resolve spells it (its OpSpec.op)
        checkout = co.Checkout(self.root)
        family = native_yaml.entries_named(checkout.read(co.NATIVE_YAML), {spelled, spelled + "_"})
        # MPS on the CPU/CUDA function (which calls the stub), not on an `_mps` impl of its own
        rows = [d for e in family for d in e.mps_rows()
                if any(c.kernel == d.kernel for c in e.dispatch if "CPU" in c.keys)]
        # without such a row no stub can be missing: the planner (resolve, every fact about
        # the op) is asked only which stub a shared row runs
        spec = None
        if rows:
            from porter.port.resolve import UNPORTED, resolve
            try:
                spec = resolve(checkout, name)
            except PorterError:
                pass
        # the planner reads REGISTER_DISPATCH lines as written; a host file naming the stub
        # otherwise (a file-local macro around REGISTER_DISPATCH: review 29's H05) may register
        # it all the same (the host files are read only where the planner finds none)
        named = (self._stub_named(spec.stub.name)
                 if spec is not None and spec.state == UNPORTED and spec.stub is not None else None)
        if named:
            why = (f"not proven: {named} names {spec.stub.name} otherwise than in a "
                   "REGISTER_DISPATCH line porter reads, so whether a Mac registers an MPS "
                   "kernel for it is not known (docs/testing.md \"What the host may do\")")
        elif spec is not None and spec.state == UNPORTED and spec.stub is not None:
            why = (f"the yaml routes MPS through {spec.stub.name} "
                   f"({co.NATIVE_YAML}:{rows[0].lineno}), but no *Kernel.mm registers an MPS "
                   f"kernel for it: MPS raises '{spec.stub.name}: missing kernel for mps' "
                   f"(register it, or `porter new-op {spec.op}`)")
        self._stub_checked[key] = why
        return why

    def _stub_named(self, stub: str) -> str | None:
        """`file:line` of the first mention of `stub` in an MPS host file (`.mm` under
        native/mps) outside a comment and outside a `REGISTER_DISPATCH(stub, ...)` statement
        (which the planner reads, under the preprocessor's conditions), or None."""
        from porter.source.cpp_scan import comments_blanked
        pattern = re.compile(rf"\b{re.escape(stub)}\b")
        read = re.compile(rf"^\s*REGISTER_DISPATCH\s*\(\s*{re.escape(stub)}\b")
        for mm in sorted((self.root / "aten/src/ATen/native/mps").rglob("*.mm")):
            try:
                text = comments_blanked(mm.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
            for number, line in enumerate(text.split("\n"), 1):
                if pattern.search(line) and not read.match(line):
                    return f"{self._rel(mm)}:{number}"
        return None

    def _iterator_order(self, op: OpNames) -> tuple[int, ...] | None:
        """The order the op's meta function's iterator reads its tensors in (porter.source.
        native_definitions.iterator_inputs): the kernel's operands, whatever the schema's order."""
        name = (op.aten_name or op.name).removeprefix("nn.functional.").replace(".", "_", 1)
        if name not in self._orders:
            from porter.source import checkout as co
            from porter.source.native_definitions import iterator_inputs
            self._orders[name] = iterator_inputs(co.Checkout(self.root), name)
        return self._orders[name]

    def _registered(self, host):
        """The built library of `host`'s kernel file and the kernel's registrations; none is the
        GPU's own error, as MPS raises it when the pipeline state is asked for."""
        lib = self._library(host.metal)
        regs = lib.find(host.kernel)
        if not regs:
            raise RuntimeError(f"no kernel {host.kernel!r} registered in {host.metal.name}: MPS "
                               f"raises 'Failed to create function state object for: "
                               f"{host.kernel}'")
        return lib, regs

    def run(self, opinfo, sample, dtype):
        return self._run(OpNames.of(opinfo), sample, kernel_choice.TorchSample(opinfo, sample))

    def run_portable(self, op: OpNames, sample):
        """`run` on a sample of the reference cache (porter.harness.cached_run.Sample), without
        torch: numpy arrays, and what `run` asks torch (the promoted dtype per operand count,
        the meta output dtype) as recorded when the sample was cached."""
        worker = self._worker()
        worker.sample = sample            # the answers `prefetch` holds for it, if any
        try:
            return self._run(op, sample, kernel_choice.RecordedSample(sample))
        finally:
            worker.sample = None

    def prefetch(self, op: OpNames, samples: list, append: bool = False) -> None:
        """Run the kernel calls a row of cached samples will make in as few round trips to the
        worker as their size allows (porter.emulate.client.answer_ahead): the same code path
        as `run_portable`, run once with every call answered by zeros to learn the calls, then
        the calls. `run_portable` of the same sample afterwards takes the answers in the order
        the dry run asked them, where each call has the same shape (library, entry, sizes);
        anything else it runs as it always did. `append`: the next row's calls, queued behind
        the row being compared (client.answer_ahead)."""
        worker = self._worker()
        kept = (self._version_outputs, self._last)

        def dry_run():
            for sample in samples:
                worker.sample = sample
                try:
                    self._run(op, sample, kernel_choice.RecordedSample(sample))
                except Exception:
                    continue          # the sample's real run says why
                finally:
                    worker.sample = None

        try:
            recorded = worker.record(dry_run)
        finally:
            self._version_outputs, self._last = kept
        worker.answer_ahead(recorded, append=append)

    def _run(self, op: OpNames, sample, types):
        """The sample's kernel (porter.dispatch.kernel_choice), run on torch tensors
        (porter.emulate.torch_run) or on the cache's numpy arrays (porter.emulate.numpy_run)."""
        on_torch = isinstance(types, kernel_choice.TorchSample)
        self._version_outputs = []
        host = self._select(op, sample.kwargs, getattr(sample.input, "dtype", None))
        host = host.for_sample(sample.kwargs)
        if host.unmodelled:         # reached through a route build_error does not see (sub_out)
            raise RuntimeError(host.unmodelled)
        lib, regs = self._registered(host)
        kind = regs[0].kind
        order = self._iterator_order(op) if kernel_choice.operands_can_swap(kind) else None
        choice = kernel_choice.choose(host.kernel, regs, kind, sample, types, "emulate",
                                      op.name, order)
        reg, common, want_out = choice.reg, choice.common, choice.want_out
        if reg is None and not is_floating_or_complex(common) and \
                integers_copied(self.root, host.stub + "_stub"):
            # the shared CPU/CUDA function copies integer inputs and returns before the stub
            # (nan_to_num_out): on MPS no kernel runs for them either
            return sample.input.clone() if on_torch else sample.input
        # the iterator's common dtype: a float op's output dtype for integer inputs
        iter_dtype = want_out if want_out and is_floating_or_complex(want_out) and \
            not is_floating_or_complex(common) else common
        self._host_lets_through(host, iter_dtype)
        if reg is not None:
            reg = self._typed_as_called(host, choice, iter_dtype)
        if reg is None:
            raise RuntimeError(self._missing_named(host, lib, choice.matching, common, want_out))
        if on_torch:
            import torch
            from porter.emulate import torch_run as run
            tensors = [x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=getattr(torch, common))
                       for x in choice.operands]
            tensors = [t.cpu() for t in tensors]
        else:
            from porter.dispatch.numpy_tensors import PArray, scalar
            from porter.emulate import numpy_run as run
            tensors = [x if isinstance(x, PArray) else scalar(x, common) for x in choice.operands]
        alpha = None
        if reg.kind.endswith("alpha"):
            alpha = run.pack_alpha(reg.alpha_type, self._scalar(host, sample, reg, choice.sample_tensors))
        readings: list = []
        self._contract_ahead(host, lib, reg)
        out = self._answer(run, lib, reg, tensors, alpha, want_out, readings, host.metal)
        # a Mac compiles the file with its own Metal: a version whose tokens differ (an
        # `#if __METAL_VERSION__ >= 400` branch) is another kernel, run on the same sample
        self._version_outputs = [(v, self._other_version_answer(run, host, v, reg, tensors,
                                                                alpha, want_out))
                                 for v in lib.other_versions] + readings
        self._last = (run, host, lib, reg, tensors, alpha, want_out)
        return out

    def _answer(self, run, lib: Library, reg, tensors, alpha, want_out, readings=None,
                metal: Path | None = None):
        """The call's answer; where the kernel reached an answer Metal leaves undefined (a NaN
        into fast::fmax, fmedian3: porter/metal.h), (why, the other reading) joins `readings`,
        a way a Mac may answer that the verdict holds to the reference too. `metal`: the
        kernel file, whose folding build answers a sample that overflowed a signed integer."""
        worker = self._worker()
        worker.undefined = None          # an empty output makes no call
        out = run.run_registration(worker, lib, reg, tensors, alpha)
        undefined = worker.undefined
        if undefined is not None and readings is not None:
            if len(undefined) > 2 and undefined[2]:
                # however it was spelled, a fast:: call porter runs as the precise one ran
                readings.append((_UNDEFINED_TAG, fast_calls.ran(undefined[2])))
            if undefined[0] & _UNDEFINED_CONVERSION:
                readings.append((_UNDEFINED_TAG, _CONVERTED_OUT_OF_RANGE))
            if undefined[0] & _NAN_SIGN:
                readings.append((_UNDEFINED_TAG, _NAN_SIGN_READ))
            if undefined[0] & _UNDEFINED_SHIFT:
                readings.append((_UNDEFINED_TAG, _SHIFTED_PAST_WIDTH))
            if undefined[0] & _OUT_OF_BOUNDS:
                readings.append((_UNDEFINED_TAG, _INDEXED_PAST_BOUND))
            if undefined[0] & _UNDEFINED_ARGUMENT:
                readings.append((_UNDEFINED_TAG, _ARGUMENT_UNDEFINED))
            if undefined[0] & _NARROW_VECTOR_OVERFLOW:
                readings.append((_UNDEFINED_TAG, _NARROW_VECTOR_OVERFLOWED))
            if undefined[0] & _DIVIDE_OVERFLOW:
                readings.append((_UNDEFINED_TAG, _DIVIDED_LEAST_BY_MINUS_ONE))
            if undefined[0] & _UNINITIALIZED:
                readings.append((_UNDEFINED_TAG, _READ_BEFORE_WRITTEN))
            if undefined[1] is not None:
                readings.append((undefined_reading(undefined[0]),
                                 self._read_as_host(run, run.like(out, undefined[1]), want_out)))
            if undefined[0] & _SIGNED_OVERFLOW and metal is not None:
                readings.append((_FOLDED, self._folded_answer(run, metal, lib, reg, tensors,
                                                              alpha, want_out)))
        if readings is not None and metal is not None:
            contracted = self._narrow_mul_add(metal, reg)
            if contracted:
                readings.append(("not proven", contracted))
            mixed = self._mixed_halves(metal, reg)
            if mixed:
                readings.append(("not proven", mixed))
        return self._read_as_host(run, out, want_out)

    def _narrow_mul_add(self, metal: Path, reg) -> str | None:
        """Why a half or bfloat kernel's answer is not proven where its functor computes
        `a * b + c` in that type (the front end's View.mul_adds): Apple's compiler may contract
        it to one fma, and porter's g++ build rounds after each operation (review 35's N10)."""
        narrow = {"half": "half", "bfloat": "bfloat"}.get(reg.in_type)
        if narrow is None:
            return None
        functor = f"{reg.name}_functor"
        for view in self._views(metal):
            for file, line, name, kind in view.mul_adds:
                if name == functor and kind in (narrow, "T"):
                    return (f"{self._rel(file)}:{line}: {functor} computes `a * b + c` (or "
                            "calls dot, mix, mad or a function built on dot, Metal's "
                            f"multiply-adds) in {narrow}, which Apple's compiler may contract to one fma (as "
                            "clang does within an expression) and the emulator rounds after "
                            "each operation: compute it in float (`float(a) * float(b) + "
                            "float(c)`), whose contraction porter runs both ways")
        return None

    def _mixed_halves(self, metal: Path, reg) -> str | None:
        """Why a kernel's answer is not proven where code it may run computes with a bfloat and
        a half together (the front end's View.mixed_halves; review 38's L34, L35): Metal
        converts a bfloat implicitly to float alone, and what a Mac's compiler makes of the
        mixture (an error, or which type it computes in) is not known here."""
        from porter.emulate import groups
        key = (metal, reg.name)
        if key not in self._mixed:
            found = [(f, ln) for view in self._views(metal)
                     for f, ln, owner, dtypes in view.mixed_halves
                     if (owner == "*" or owner in self._functors(metal, reg.name, groups))
                     and dtypes in ("*", reg.in_type, f"{reg.in_type}2", f"{reg.in_type}4")]
            self._mixed[key] = (
                f"{self._rel(found[0][0])}:{found[0][1]}: computes with a bfloat and a half "
                "together, which Metal converts to no common type implicitly (a bfloat converts "
                "to float alone): whether a Mac builds it, and in which type it computes, is not "
                "known here; convert both to float (`float(b) + float(h)`)") if found else None
        return self._mixed[key]

    def _functors(self, metal: Path, name: str, groups) -> set[str]:
        """The functor structs registered `name`'s kernels run (groups.functors_used); every
        struct of a file whose functors may run another's code without naming it (not
        groups.sealed under some version: a macro's or a pasted name, a friend function)."""
        from porter.emulate import frontend
        from porter.emulate.toolchain import METAL_VERSIONS
        try:
            text = metal.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return set()
        if not all(frontend.sealed(text, str(metal), self.root, v) for v in METAL_VERSIONS):
            return set(groups.functor_spans(text))
        return groups.functors_used(text, name)

    def _folded_answer(self, run, metal: Path, lib: Library, reg, tensors, alpha, want_out):
        """The answer of the kernel file's folding build (toolchain.FOLDING_FLAGS: signed
        overflow assumed away, as clang may), or why there is none (a string)."""
        key = (metal, lib.version, reg.name)
        built = self._folding.get(key)
        if built is None:
            try:
                built = build_file(metal, self.root, strict=False, version=lib.version,
                                   only=reg.name, folding=True)
            except EmulateBuildError as err:
                built = err
            self._folding[key] = built
        if isinstance(built, EmulateBuildError):
            return f"not proven: {self._rel(metal)} does not build so: {self._rel(built.message)}"
        same = [r for r in built.twins(reg) if getattr(r, "built", True)]
        if not same:
            return f"not proven: kernel {reg.name} ({reg.in_type} -> {reg.out_type}) is not built so"
        return self._answer(run, built, same[0], tensors, alpha, want_out)

    @staticmethod
    def _read_as_host(run, out, want_out):
        if want_out is not None and run.dtype_name_of(out).startswith("complex") and \
                not want_out.startswith("complex"):
            out = run.real_part(out)      # |z| broadcast into both lanes; the host reads one
        return out

    def _other_version_answer(self, run, host: HostKernel, version: int, reg, tensors, alpha,
                              want_out):
        """The registration's answer as the file builds under `version`, or why there is none
        (a string: the version's build lacks or quarantines the kernel)."""
        try:
            lib = self._library(host.metal, version)
        except EmulateBuildError as err:
            return f"{self._rel(host.metal)} does not build: {self._rel(err.message)}"
        same = lib.twins(reg)
        if not same:
            return (f"no kernel {reg.name} ({reg.in_type} -> {reg.out_type}) is registered in "
                    f"{host.metal.name} under this version")
        if not same[0].built:
            return _unbuilt(reg.name, self._rel(lib.reason(same[0]) or "?"))
        return self._answer(run, lib, same[0], tensors, alpha, want_out)

    def contracted_outputs(self):
        """The last sample's answers with `a * b + c` contracted to one fma (whether a Mac's
        compiler contracts is not known: porter.harness.verdicts calls a sample right only one
        way not proven): (the primary version's answer, [(version, answer or why none)] for
        the other versions `other_version_outputs` gave), or None where this CPU cannot run
        such a build or where that build fused no a*b+c of the kernel's code (its answers
        are the unfused ones). Built when first asked, the kernel's piece alone."""
        from porter.emulate.toolchain import contract_flags
        if self._last is None or contract_flags() is None:
            return None
        run, host, lib, reg, tensors, alpha, want_out = self._last
        if self._cannot_fuse(host.metal, reg):
            return None         # nothing to fuse: the same answers, and no build to wait for
        versions = [lib.version, *lib.other_versions]
        self._contract_ahead(host, lib, reg)
        builds = []
        for version in versions:
            key = (host.metal, version, reg.name)
            built = self._contracted[key]
            if isinstance(built, Future):
                try:
                    built = built.result()
                except EmulateBuildError as err:
                    built = err
                self._contracted[key] = built
            builds.append(built)
        if all(not isinstance(b, EmulateBuildError) and b.fused is False for b in builds):
            return None         # g++ fused nothing of the kernel's code: the same answers
        answers, readings = [], []
        for version, built in zip(versions, builds):
            if isinstance(built, EmulateBuildError):
                answers.append(f"{self._rel(host.metal)} does not build: {self._rel(built.message)}")
                continue
            same = [r for r in built.twins(reg) if getattr(r, "built", True)]
            if not same:
                answers.append(f"kernel {reg.name} ({reg.in_type} -> {reg.out_type}) is not built")
                continue
            # the primary version's other readings, as `_run` gives them uncontracted
            answers.append(self._answer(run, built, same[0], tensors, alpha, want_out,
                                        readings if version == lib.version else None,
                                        host.metal))
        primary, others = answers[0], list(zip(lib.other_versions, answers[1:])) + readings
        if isinstance(primary, str):
            return None         # the contracted build lacks the kernel: nothing to compare
        return primary, others

    def _contract_ahead(self, host: HostKernel, lib: Library, reg) -> None:
        """Start the contracted builds of `reg`'s kernel (build.build_source's `only`: its piece
        alone), one per version, while the first sample runs unfused: every passing sample
        asks for them (contracted_outputs)."""
        from porter.emulate.toolchain import contract_flags
        if contract_flags() is None or self._cannot_fuse(host.metal, reg):
            return
        for version in [lib.version, *lib.other_versions]:
            key = (host.metal, version, reg.name)
            if key not in self._contracted:
                if self._ahead is None:
                    self._ahead = ThreadPoolExecutor(max_workers=1)
                self._contracted[key] = self._ahead.submit(
                    build_file, host.metal, self.root, strict=False, version=version,
                    contract=True, only=reg.name)

    def other_version_outputs(self) -> list[tuple[int | str, object]]:
        """(__METAL_VERSION__, answer or why none) of the last sample under each other version
        whose kernel file compiles other tokens than the primary one, then (why, answer) for
        each other reading of an answer Metal leaves undefined (`_answer`); read once."""
        found, self._version_outputs = self._version_outputs, []
        return found

    # ------------------------------------------------------------ helpers
    def _host_lets_through(self, host: HostKernel, dtype: str) -> None:
        """Raise what a Mac raises when the host function's dtype dispatch or checks refuse the
        iterator's dtype."""
        if not host.body or not host.line:
            return
        key = (host.body, host.line, dtype)
        if key not in self._refusals:      # read once per host text and dtype, not per sample
            from porter.emulate import host_model
            self._refusals[key] = host_model.branch_refusal(host.body, host.line, dtype) or \
                host_dtypes.refusal(host.body, host.line, dtype)
        refused = self._refusals[key]
        if refused is not None:
            where = host.at_line(refused.line)
            if refused.message.startswith("not proven: "):
                raise RuntimeError(f"not proven: {where}: {refused.message[len('not proven: '):]}")
            raise RuntimeError(f"{where}: {refused.message}")

    def _typed_as_called(self, host: HostKernel, choice, iter_dtype: str):
        """The registration the host's call finds when it names the alpha's type itself
        (`exec_unary_kernel(iter, "logit", eps, ScalarType::Float)`: `logit_dense_half_half_float`
        for half), or the RuntimeError a Mac raises for one not registered."""
        calls = {(c.kernel, c.with_params, c.arguments[1:2]) for c in host.calls}
        if host.call is None or len(calls) > 1:
            return choice.reg       # several calls: host_args picks the one a dtype takes
        has_alpha, wanted = host_call.alpha_type(host.call, host_dtypes.dtype_names(host.body))
        if not has_alpha or wanted is None or not choice.reg.kind.endswith("alpha"):
            return choice.reg
        # a name formatted from the iterator's dtype, or its opmath type
        wanted = host_call.typed(wanted, NAME_TO_METAL.get(iter_dtype, iter_dtype))
        fits = [r for r in choice.matching if r.alpha_type == wanted and r.out_type == choice.reg.out_type]
        if wanted == host_call.UNKNOWN:
            raise RuntimeError(f"not proven: {host.at_line(host.call.line)} passes "
                               f"`{host.call.arguments[1]}` as the type of {host.call.kernel}'s "
                               f"scalar, which porter cannot read: which kernel a Mac looks up is "
                               f"not known")
        built = [r for r in fits if getattr(r, "built", True)]
        if built or fits:
            return built[0] if built else None     # none built: _missing_named says why
        out = choice.reg.out_type
        name = host_call.kernel_name(host.call.kernel, out, choice.reg.in_type, wanted)
        have = ", ".join(host_call.kernel_name(r.name, r.out_type, r.in_type, r.alpha_type)
                         for r in choice.matching)
        raise RuntimeError(f"{host.at_line(host.call.line)} passes {host.call.arguments[1]}: a Mac "
                           f"looks up {name}, which {host.metal.name} does not register "
                           f"(registered: {have}); MPS raises 'Failed to create function state "
                           f"object for: {name}'")

    def _missing_named(self, host: HostKernel, lib: Library, matching: list, common: str,
                       want_out: str | None) -> str:
        out = want_out if want_out is not None else common
        name = f"{host.kernel}_{common}_{out}"
        unbuilt = [r for r in matching if not r.built]
        if unbuilt:
            return _unbuilt(name, self._rel(lib.reason(unbuilt[0]) or "?"))
        # the host names a Mac looks up for it: `heaviside_dense_half_half` and the like
        metal_out, metal_in = NAME_TO_METAL.get(out, out), NAME_TO_METAL.get(common, common)
        # the layout words of c10/metal/indexing.h's host names only: a looser infix took
        # `gelu_tanh_bfloat_bfloat` for gelu's (review 29's F12)
        looked_up = re.compile(rf"{re.escape(host.kernel)}_(?:(?:dense|strided)(?:_[a-z0-9]+)*_)?"
                               rf"{metal_out}_{metal_in}")
        defined = next((where for kernel, where in sorted(self._front_end_kernels(host.metal).items())
                        if looked_up.fullmatch(kernel)), None)
        if defined is not None:
            # instantiated otherwise than through c10/metal's REGISTER_* macros (a file's own
            # copy of one: review 27's L37 said "MPS raises", where a Mac builds it)
            return (f"not proven: {defined} defines kernel {name} otherwise than through "
                    "c10/metal's REGISTER_* macros, the only way porter's emulator builds a "
                    "kernel: a Mac builds it, what it computes is not known here")
        have = ", ".join(f"{METAL_TO_NAME.get(r.in_type, 'None')}->{METAL_TO_NAME.get(r.out_type, 'None')}"
                         for r in matching)
        where = f" (registered: {have})" if have else ""
        return (f"no kernel {name} registered in {host.metal.name}{where}: MPS raises "
                f"'Failed to create function state object for: {name}'")

    def _front_end_kernels(self, metal: Path) -> dict[str, str]:
        """host name -> `file:line` of each kernel the Metal front end reads in `metal` (what
        a Mac's metallib holds), {} where it cannot say."""
        from porter.emulate import frontend
        try:
            view = frontend.view(metal.read_text(encoding="utf-8", errors="replace"), metal,
                                 self.root, PRIMARY_VERSION)
        except Exception:       # noqa: BLE001 (no front end: the emulator's own reading stands)
            return {}
        return {name: self._rel(where) for name, where in view.kernels}

    def _rel(self, text) -> str:
        return str(text).replace(str(self.root) + "/", "")

    def _host_kernels(self, names: set[str]) -> list[HostKernel]:
        if self._host is None:
            self._host = host_kernels(self.root)
        found = [h for h in self._host if h.op in names]
        if not found:
            # an op whose stub is shared and named after another (shrink_backward_stub)
            for name in sorted(n for n in names if "." not in n):
                found = shared_stub_kernels(self.root, name, self._host)
                if found:
                    break
        return found

    def _candidates(self, op: OpNames) -> list[HostKernel]:
        return kernel_choice.candidates(self._host_kernels(kernel_choice.kernel_names(op)), op)

    def _select(self, op: OpNames, kwargs: dict, dtype=None) -> HostKernel:
        routed = self._routed_host(op, dtype)
        if routed is not None:
            return routed
        return kernel_choice.select_host(self._candidates(op), op, kwargs)

    def _routed(self, op: "OpNames") -> tuple[str, list]:
        """(the shared kernel, its stub routes) when the yaml sends MPS to a TORCH_IMPL_FUNC
        that runs another stub than the op's own, or under branches (sub_out runs add_stub
        with -alpha; sgn_out runs sign_stub for real inputs): ("", []) otherwise."""
        name = _aten_spelled(op)
        if name not in self._routes:
            from porter.source import checkout as co
            from porter.source import native_yaml, stub_route
            found: tuple[str, list] = ("", [])
            checkout = co.Checkout(self.root)
            for entry in native_yaml.entries_named(checkout.read(co.NATIVE_YAML), {name}):
                shared = {d.kernel for d in entry.dense_rows()}
                mps = {r.kernel for r in entry.mps_rows()}
                if len(shared) == 1 and shared == mps:
                    routes = stub_route.routes(checkout, shared.pop())
                    # another op's stub (sub_out -> add_stub, sgn_out -> sign_stub); a stub of
                    # the op's own overload (round_decimals_stub) keeps the op's own lookup
                    text = checkout.read(co.NATIVE_YAML)
                    if any(r.stub != f"{name}_stub" and native_yaml.entries_named(
                            text, {r.stub.removesuffix("_stub")}) for r in routes):
                        found = (entry.dense_rows()[0].kernel, routes)
                        break
            self._routes[name] = found
        return self._routes[name]

    def _routed_host(self, op: "OpNames", dtype) -> HostKernel | None:
        """The host kernel a dtype reaches through its shared kernel's stub call, or None when
        the op runs its own stub; what the host code makes unknowable is not proven."""
        from porter.source import stub_route
        cpu_kernel, routes = self._routed(op)
        if not routes:
            return None
        is_complex = bool(getattr(dtype, "is_complex", False)) or str(dtype).startswith(("complex", "torch.complex"))
        route = stub_route.for_dtype(routes, is_complex)
        spelled = str(dtype).removeprefix("torch.")     # as the cached run names it
        if route is None or route.when == stub_route.UNKNOWN:
            raise RuntimeError(f"not proven: {cpu_kernel} ({routes[0].path}:{routes[0].line}) "
                               f"calls {', '.join(r.stub for r in routes)} under conditions porter "
                               f"cannot read: which kernel {spelled} runs on MPS is not known")
        if self._host is None:
            self._host = host_kernels(self.root)
        hosts = [h for h in self._host if f"{h.stub}_stub" == route.stub]
        if not hosts:
            raise RuntimeError(f"{cpu_kernel} runs {route.stub} for {spelled} ({route.path}:"
                               f"{route.line}), which no *Kernel.mm registers for MPS: MPS raises "
                               f"'{route.stub}: missing kernel for mps'")
        import dataclasses
        name = (op.aten_name or op.name).removeprefix("nn.functional.")
        return dataclasses.replace(hosts[0], via_op=name, via_arguments=route.arguments)

    def _scalar(self, host: HostKernel, sample, reg, arity: int | None = None):
        if arity is None:       # the tensors are the input and the leading tensor (array) args
            arity = 1
            for a in sample.args:
                if not hasattr(a, "shape"):
                    break
                arity += 1
        kwargs = sample.kwargs
        if host.stub == "round_decimals":
            return kwargs.get("decimals", 0)
        scalars, fields, own_call = self._host_scalars(host)
        if scalars:
            # What the host function gives the kernel: the sample's arguments, through the
            # shared function's stub call and the host code (porter.emulate.host_args)
            values = host_args.sample_values(sample, arity, scalars)
            try:
                if isinstance(fields, host_args.HostCodeUnknown):
                    raise fields
                order = [s.name for s in scalars]
                call = own_call if host.via_arguments is None \
                    else host_args.StubCall(list(host.via_arguments), [])
                passed = host_args.stub_values(call, values, order)
                return host_args.alpha_value(host.body, host.params, fields, passed,
                                             dtype=getattr(sample.input, "dtype", None))
            except host_args.HostCodeUnknown as err:
                # what the host hands the kernel is unknown, not wrong: a Mac runs it as written
                # (review 41's H09 was counted as a plain failure)
                raise RuntimeError(f"not proven: porter cannot model the scalar that {host.stub}'s host "
                                   f"code passes its kernel ({err}): test on a Mac "
                                   "(`--device mps`)") from None
        if "alpha" in kwargs and kwargs["alpha"] is not None:
            return kwargs["alpha"]
        return 1

    def _host_scalars(self, host: HostKernel):
        """(the op's schema scalars, the params struct's fields, the shared function's stub
        call) of a host kernel: read from the checkout once per run, not once per sample."""
        key = (host.via_op or host.stub, host.stub, host.params_struct, host.metal)
        if key not in self._scalar_facts:
            scalars = host_args.schema_scalars(self.root, host.via_op or host.stub)
            fields = call = None
            if scalars and host.params_struct:
                try:
                    fields = self._struct_fields(host)
                except host_args.HostCodeUnknown as err:
                    fields = err              # said by each sample, as other host code is
            if scalars:
                call = host_args.stub_call_arguments(self.root, host.stub + "_stub",
                                                     host.via_op or host.stub)
            self._scalar_facts[key] = (scalars, fields, call)
        return self._scalar_facts[key]

    def _struct_fields(self, host: HostKernel) -> list[str] | None:
        """The params struct's fields, from the kernels headers the kernel file includes
        (upstream's ThresholdParams sits in kernels/Activation.h) or the one named after it."""
        metal = host.metal.read_text(encoding="utf-8") if host.metal.is_file() else ""
        headers = [self.root / "aten" / "src" / h for h in metal_scan.kernel_headers(metal)]
        for header in [*headers, host.metal.with_suffix(".h")]:
            if header.is_file():
                fields = host_args.struct_fields(header.read_text(encoding="utf-8"),
                                                 host.params_struct)
                if fields is not None:
                    return fields
        return None

    def prebuild(self, queries) -> None:
        """Start building the .metal files these ops (as spelled on the command line) dispatch
        to, in one thread: g++ works on the other core while porter imports and reads its
        caches; `_library` waits for the result. The same builds, started sooner (one after
        the other: they share the precompiled header, and the main thread needs a core). The
        kernels' worker processes start too, so that the first row does not wait for them (their
        runtime library, compiled once a cache, is compiled here then, not at the first call)."""
        names = set(queries) | {q.removeprefix("nn.functional.") for q in queries}
        metals = [m for m in sorted({h.metal for h in self._host_kernels(names)})
                  if m not in self._libs and m not in self._pending]
        if not metals:
            return
        thread = threading.Thread(target=self._build_in_thread, args=(metals,), daemon=True)
        for metal in metals:
            self._pending[metal] = thread
        thread.start()
        # a Python process per lane, libasan loaded before it: the first row waited ~70 ms
        self._worker().start()

    def _build_in_thread(self, metals: list[Path]) -> None:
        for metal in metals:
            try:
                self._built[metal] = build_file(metal, self.root, strict=False)
            except Exception as err:          # handed to the main thread by `_library`
                self._built[metal] = err

    def header_gaps(self) -> list[str]:
        """The kernel files this run built only in part because the c10/metal headers in use
        (the installed torch's, the checkout having none) lack a function they call: their
        other kernels ran, but whether the whole file builds is not proven here."""
        from porter.emulate.build import OLD_HEADERS

        gaps = []
        for metal, lib in sorted(self._libs.items()):
            if not isinstance(lib, Library):
                continue
            reasons = [r for r in lib.quarantined.values() if r.startswith(OLD_HEADERS + ": ")]
            if reasons:
                first = self._rel(reasons[0][len(OLD_HEADERS) + 2:])
                more = len(set(reasons)) - 1
                gaps.append(f"{self._rel(metal)} is not fully built: {first}"
                            + (f" (and {more} more)" if more else ""))
        return gaps

    def _library(self, metal: Path, version: int | None = None) -> Library:
        if version is not None and version != PRIMARY_VERSION:
            key = (metal, version)     # another __METAL_VERSION__: built when a sample needs it
            if key not in self._other_libs:
                try:
                    self._other_libs[key] = build_file(metal, self.root, strict=False,
                                                       version=version)
                except EmulateBuildError as err:
                    self._other_libs[key] = err
            lib = self._other_libs[key]
            if isinstance(lib, EmulateBuildError):
                raise lib
            return lib
        pending = self._pending.pop(metal, None)
        if pending is not None:
            while metal not in self._built and pending.is_alive():
                pending.join(0.005)
            built = self._built.pop(metal, None) or build_file(metal, self.root, strict=False)
            if isinstance(built, Exception) and not isinstance(built, EmulateBuildError):
                raise built
            self._libs[metal] = built
        lib = self._libs.get(metal)
        if lib is None:
            try:
                lib = self._libs[metal] = build_file(metal, self.root, strict=False)
            except EmulateBuildError as err:      # remembered: one compile per session
                self._libs[metal] = err
                raise
        if isinstance(lib, EmulateBuildError):
            raise lib
        return lib

    def kernel_files(self) -> list[Path]:
        """The kernel files this run built (or found built): what `--watch` builds at once
        when one of them is saved."""
        return sorted(self._libs)

    def _worker(self) -> WorkerClient:
        if self._client is None:
            self._client = WorkerClient()
        return self._client

    def close(self) -> None:
        # contracted builds not yet started are dropped: the interpreter joins an executor's
        # threads at exit, so queued g++ runs would hold a Ctrl-C'd `--watch` for every one
        if self._ahead is not None:
            self._ahead.shutdown(wait=False, cancel_futures=True)
            self._ahead = None
        if self._client is not None:
            self._client.close()
            self._client = None


def _aten_spelled(op: OpNames) -> str:
    """The op's ATen name as native_functions.yaml and the dispatcher spell it
    (`nn.functional.gelu` -> `gelu`, `special.erfcx` -> `special_erfcx`)."""
    return (op.aten_name or op.name).removeprefix("nn.functional.").replace(".", "_", 1)


# dispatch keys of backends a Mac's test never reaches: a Library registration for one runs
# neither on MPS nor in the CPU reference (a CPU or AutogradCPU one replaces the reference:
# review 28's R03, C01, C04)
_OTHER_BACKEND = re.compile(r"(?:CUDA|HIP|XLA|XPU|Lazy|HPU|IPU|MTIA|PrivateUse\d|VE|MAIA|FPGA|"
                            r"Vulkan|ORT)$")
# keys a call of test_output_match (dense CPU and MPS tensors, no autocast, no transform) never
# dispatches to: a kernel registered there does not run in the test (review 29's R03, R04). A
# key not named here, the catch-all and the aliases included, is on its path.
_OFF_THE_TESTS_PATH = re.compile(r"(?:Meta|Autocast\w*|Sparse\w*|Quantized\w*|Nested\w*|"
                                 r"FuncTorch\w*|Batched\w*|Vmap\w*|Functionalize|Tracer)$")


def _declarations_added(change, now: str | None) -> bool:
    """Whether a header's change (`now`: its work-tree text) only adds lines, none of them a
    preprocessor directive."""
    if change.head is None or change.removed or now is None:
        return False
    had = {line.strip() for line in change.head.split("\n")}
    added = [line.strip() for line in now.split("\n") if line.strip() not in had]
    return not any(line.startswith(("#", "%:")) for line in added)


# `#pragma METAL fp ...`, and the same as `_Pragma("METAL fp ...")` (review 28's M02)
# The pragmas porter knows change nothing a kernel computes: a header's guard, diagnostics,
# loop unrolling (a loop's iterations run as written). Any other (`METAL fp math_mode(fast)`,
# `clang fp contract(fast)`, `float_control`, ...) may set how the file's floating point is
# computed, which the emulator does not model.
_KNOWN_PRAGMA = re.compile(r"#\s*pragma\s+(?:once|message\b|push_macro\b|pop_macro\b|"
                           r"(?:clang|GCC)\s+diagnostic\b|GCC\s+system_header\b|unroll\b|"
                           r"nounroll\b|clang\s+loop\s+(?:unroll|unroll_count)\b)")


def _math_mode(pragmas, rel) -> str | None:
    """`file:line: why` of the first pragma the kernel file compiles that porter does not know
    (review 27's N17: `#pragma METAL fp math_mode(fast)` makes `metal::tanh` the fast one on a
    Mac; review 29's F01-F03: one built by a macro, `float_control`, one continued on the next
    line): porter's emulator builds every file in Metal's default mode, so what such a file
    computes is not known here. `pragmas`: (file, line, text) as the front end read them."""
    for file, line, text in pragmas:
        if not _KNOWN_PRAGMA.match(text):
            return (f"{rel(file)}:{line}: `{' '.join(text.split())}` is a pragma porter does not "
                    "model (it may set the file's floating-point mode, and porter's emulator "
                    "builds every file in Metal's default mode)")
    return None


def _unbuilt(name: str, reason: str) -> str:
    """Why a registered kernel has no emulated build. An "unsupported construct" is the
    emulator's limit, not the file's: porter's Metal front end accepted the file (its errors
    fail the whole file before any kernel is looked up), and whether it computes right is not
    proven (review 33's B07 said "does not build" of metal::fmax3)."""
    if reason.startswith(UNSUPPORTED + ": "):
        # the front end's known tolerances (frontend_include/README.md) make "a Mac builds it"
        # a claim porter cannot make (review 27's L40, L42, L43: a Mac rejects those)
        return (f"not proven: kernel {name} is beyond porter's emulator, which cannot build it "
                f"({reason[len(UNSUPPORTED) + 2:]}); porter's Metal front end accepted the "
                "file, but neither whether a Mac builds this kernel nor what it computes is "
                "proven here")
    return f"kernel {name} does not build: {reason}"


# porter/metal.h's families of undefined answers (detail::UNDEFINED_*), as a verdict names them
_UNDEFINED = ((1, "fast::min/max/fmin/fmax/fmin3/fmax3/clamp got a NaN, undefined under fast "
                  "math"),
              (2, "fmedian3 got a NaN, which the specification does not define"),
              (512, "fmax/fmin got zeros of both signs: the other zero, as the specification's "
                    "text answers (`y if x < y, otherwise x`), where IEEE's maximumNumber "
                    "orders -0 below +0"),
              (4096, "an answer the specification leaves open: a library function it holds to a "
                     "bound in ulp, not to correct rounding (sin, exp, rsqrt, pow, ...: MSL §7.4), "
                     "answering the other float around the exact value; an integer past 2^24 "
                     "converted to bfloat rounded once (through float it rounds twice), ilogb of "
                     "zero or NaN (the least or the greatest int), frexp of a float subnormal taken "
                     "apart (an Apple GPU may flush it), length of a vector whose squares overflow "
                     "or flush (scaled or not)"))


# the object a host's kernel call runs on, and its declaration as the bundled metallib
_RECEIVER = re.compile(r"\b(\w+)\s*(?:\.|->)\s*exec_(?:unary|binary|ternary)_kernel")
_BUNDLED = (r"^[ \t]*static\s+auto\s*&\s*{}\s*=\s*(?:(?:::)?at::native::)?(?:mps::)?"
            r"MetalShaderLibrary::getBundledLibrary\(\)\s*;")


# Metal's types porter's front end and shim do not declare (review 34's L05, L08: a Mac builds
# them, so the front end's "unknown type name" is no Mac's error)
_UNMODELLED_TYPE = re.compile(
    r"(?:unknown type name|use of undeclared identifier|no template named) '("
    r"packed_(?:bool|char|uchar|short|ushort|int|uint|long|ulong|half|bfloat|float)[234]|"
    r"(?:half|bfloat|float)[234]x[234])'")


# porter/metal.h's detail::UNDEFINED_CONVERSION (toolchain.FLAGS' float-cast-overflow check)
# and detail::NAN_SIGN
_UNDEFINED_CONVERSION = 8
_NAN_SIGN = 16
_UNDEFINED_SHIFT = 32
_OUT_OF_BOUNDS = 64
_UNDEFINED_ARGUMENT = 128
_SIGNED_OVERFLOW = 256


class _Undefined(str):
    """The tag of a reading that says the kernel reached an answer Metal leaves undefined:
    printed "not proven"; a verdict that sees it on a failing sample calls the sample not
    proven, not red (porter.harness.verdicts._held)."""
    undefined = True


_UNDEFINED_TAG = _Undefined("not proven")
_NARROW_VECTOR_OVERFLOW = 1024
_NARROW_VECTOR_OVERFLOWED = (
    "a vector of char or short elements computed an answer its element cannot hold (`char2(-128) "
    "/ char2(-1)`, a signed overflow): Metal's vectors compute in the element's width, where "
    "that is undefined, and what an Apple GPU answers is not known here; compute in int "
    "vectors (`int2(a) / int2(b)`)")
_DIVIDE_OVERFLOW = 2048
_DIVIDED_LEAST_BY_MINUS_ONE = (
    "the kernel divided a signed type's least value by -1 (or took that remainder): undefined "
    "in Metal (LLVM folds it to poison where it sees the operands), trapping on this CPU only "
    "where g++ did not fold it, and not known on an Apple GPU; test the divisor first")
# the worker's own bit: the answer changed with the stack's filling (porter/emulate/
# worker_runtime.c)
_UNINITIALIZED = 32768
_READ_BEFORE_WRITTEN = (
    "the kernel read a local variable (or an element of a vector, an array or a struct) before "
    "writing it: undefined in Metal, and its answer changed with what the stack held here "
    "(porter runs each sample on two fillings of it); initialize it (`float2 acc = 0.0f;`)")
# the reading a sample that overflowed a signed integer is held to as well (_folded_answer)
_FOLDED = ("assuming no signed integer overflow, as Apple's compiler may (it is undefined in "
           "Metal; g++ -O2 folds on the same assumption; not proven)")
_ARGUMENT_UNDEFINED = (
    "the kernel called clamp with its lower bound above its upper one, extract_bits/"
    "insert_bits past the type's width, abs of the type's least value (whose magnitude it "
    "cannot hold), or as_type to a bool of a byte other than 0 or 1: Metal leaves the answer "
    "undefined, and what an Apple GPU answers is not known here")
_SHIFTED_PAST_WIDTH = (
    "the kernel shifted by a negative count or by at least the type's width: undefined in Metal, "
    "the count masked on this CPU, and not known on an Apple GPU; test the count first")
_INDEXED_PAST_BOUND = (
    "the kernel indexed an array or a vector past its bound, or read outside an array through "
    "a pointer (a thread array, a `constant` table of the file or of a header it includes: "
    "porter stops that read, and the kernel's answer with it): undefined in Metal, the next "
    "bytes on this CPU, and not known on an Apple GPU")
_NAN_SIGN_READ = (
    "the kernel read the sign of a NaN with x86's default bits (0xffc00000: what an invalid "
    "operation such as 0/0 or inf - inf makes here, negative, where an Apple GPU makes it "
    "positive as ARM does; a negated input NaN has the same bits, and porter cannot tell the "
    "two apart); test with `isnan` first, or test it on a Mac (`--device mps`)")
_CONVERTED_OUT_OF_RANGE = (
    "the kernel converted a float outside an integer type's range, or a NaN, to that type: "
    "undefined in Metal, the least integer on this CPU, and not known on an Apple GPU (which may "
    "saturate); keep the value in range first (clamp it), or test it on a Mac (`--device mps`)")


def undefined_reading(bits: int) -> str:
    """The phrase a verdict puts before a failure of the NaN reading (`_answer`)."""
    why = "; ".join(text for bit, text in _UNDEFINED if bits & bit) or "an undefined answer"
    if not bits & 3:
        return (f"with Metal's unsettled answer read the other way ({why}, MSL §6.5; porter "
                "holds the kernel to both answers, not knowing a Mac's)")
    return (f"with Metal's undefined answer read as NaN ({why}, MSL §6.5; porter holds the "
            "kernel to IEEE's answer and to NaN, not knowing a Mac's)")
