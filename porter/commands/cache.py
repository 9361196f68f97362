"""`porter cache info|clear`: the on-disk caches (`porter test --device emulate`'s reference
cache, the emulator's compiled kernel libraries)."""

from __future__ import annotations

import json

from porter import exit_codes

HELP = "show or empty porter's caches (OpInfo samples and CPU references, built kernels)"


def add_arguments(parser) -> None:
    parser.add_argument("action", metavar="ACTION", choices=("info", "clear"), nargs="?",
                        default="info",
                        help="info (the default): where the caches are and their size; clear: "
                             "empty them")
    from porter.commands.terminal import add_format
    add_format(parser)


def _size(path) -> tuple[int, int]:
    if not path.is_dir():
        return 0, 0
    from porter.emulate.kernel_cache import RUNS
    # a live run's pins are hard links of entries counted already
    files = [p for p in path.rglob("*") if p.is_file() and RUNS not in p.relative_to(path).parts]
    return len(files), sum(p.stat().st_size for p in files)


def run(args) -> int:
    import shutil

    from porter.emulate import kernel_cache
    from porter.emulate.build import cache_dir as kernel_dir
    from porter.harness import refcache

    caches = {"references": refcache.directory(), "kernels": kernel_dir()}
    report = {}
    for name, path in caches.items():
        files, size = _size(path)
        if args.action == "clear" and name == "kernels":
            files, size = kernel_cache.clear(path)     # a live run's pinned libraries stay
        elif args.action == "clear" and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        report[name] = {"path": str(path), "files": files, "bytes": size}
    if args.json:
        print(json.dumps({"ok": True, "action": args.action, "caches": report}, indent=1))
        return exit_codes.OK
    verb = "removed" if args.action == "clear" else "holds"
    for name, info in report.items():
        print(f"{name:<10} {info['path']}: {verb} {info['files']} file(s), "
              f"{info['bytes'] / 1e6:.1f} MB")
    if args.action == "info":
        print(f"the reference cache keeps at most {refcache.limit_bytes() // (1024 * 1024)} MB "
              "(PORTER_REFCACHE_MB), least recently used first out")
        print(f"the kernel cache keeps at most {kernel_cache.limit_bytes() // (1024 * 1024)} MB "
              "(PORTER_KERNEL_CACHE_MB), least recently used first out")
    return exit_codes.OK
