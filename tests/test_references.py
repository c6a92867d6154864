"""What the documents cite resolves: repository paths exist, dotted names import, links that are
not public addresses point at files, and README and the docs name the same extension points."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted({ROOT / "README.md", ROOT / "REPRODUCTION.md", ROOT / "BEYOND.md",
                    ROOT / "PERFORMANCE.md", ROOT / "CHANGELOG.md",
                    *(ROOT / "docs").rglob("*.md")})
TOP = ("evalstop_gym", "policies", "benchmarks", "tests", "configs", "docs", "examples",
       "figures", ".ci")
PATH = re.compile(r"`((?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./-]+)`")
DOTTED = re.compile(r"`(evalstop_gym(?:\.\w+)+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
MISSING = ("SPEC.md", "paper/evalstop", "../shared")


def cited(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return sorted({(p.relative_to(ROOT).as_posix(), m) for p in DOCUMENTS
                   for m in pattern.findall(p.read_text(encoding="utf-8"))})


def exists(path: str) -> bool:
    path = path.rstrip("/.").split("::")[0]
    return any((base / path).exists() or glob_exists(base, path)
               for base in (ROOT, ROOT / "evalstop_gym"))


def glob_exists(base: Path, path: str) -> bool:
    return any(c in path for c in "*<") and any(base.glob(re.sub(r"<[^>]*>", "*", path)))


@pytest.mark.parametrize("doc, path", cited(PATH))
def test_cited_repository_paths_exist(doc, path):
    assert exists(path), f"{doc} cites {path}, which is not in the repository"


def resolve(name: str) -> object:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


@pytest.mark.parametrize("doc, name", cited(DOTTED))
def test_cited_dotted_names_resolve(doc, name):
    try:
        resolve(name)
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] != "evalstop_gym":   # an extra not installed
            pytest.skip(f"{name} needs {exc.name}")
        raise AssertionError(f"{doc} cites {name}, which does not import") from exc
    except AttributeError as exc:
        raise AssertionError(f"{doc} cites {name}, which does not exist: {exc}") from exc


@pytest.mark.parametrize("doc", [p.relative_to(ROOT).as_posix() for p in DOCUMENTS])
def test_links_are_public_addresses_or_files(doc):
    path = ROOT / doc
    text = path.read_text(encoding="utf-8")
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        target = target.split("#")[0]
        if not target:
            continue
        here = (path.parent / target)
        assert here.exists() or (ROOT / target).exists(), f"{doc} links {target}"
    for name in MISSING:
        assert name not in text, f"{doc} cites {name}, which is not in the repository"


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end > 0 else None]


def test_readme_and_extending_page_name_the_same_compiled_rule_extension_points():
    readme = section((ROOT / "README.md").read_text(encoding="utf-8"), "## Extending")
    page = section((ROOT / "docs" / "extending.md").read_text(encoding="utf-8"),
                   "## A compiled rule")
    for name in ("evalstop_gym/sim/rules.py", "stop_value", "native_rule", "tests/test_native.py"):
        assert name in readme and name in page, name
    from evalstop_gym.policies.detector import DetectorBase
    from evalstop_gym.sim import rules

    assert callable(rules.stop_value) and hasattr(DetectorBase, "native_rule")
    for stale in ("native_kernel._decide", "sim/native.py`"):
        assert stale not in readme and stale not in page, stale


SOURCES = sorted(p for d in ("evalstop_gym", "policies", "benchmarks") for p in (ROOT / d).rglob(
    "*.py"))
SOURCE_FILE = re.compile(r"`([\w./-]+\.py)\b")
PLACEHOLDERS = {"mine.py", "path/to/mine.py", "file.py", "FILE.py"}   # a user's file, named


def named_in_sources() -> list[tuple[str, str]]:
    return sorted({(p.relative_to(ROOT).as_posix(), m) for p in SOURCES
                   for m in SOURCE_FILE.findall(p.read_text(encoding="utf-8"))})


def test_the_files_the_sources_name_exist():
    """A docstring's `some/file.py` is a path from the repository, from the installed package,
    or from a folder above the naming file (`sweep/command.py` from benchmarks/cli.py)."""
    missing = []
    for source, name in named_in_sources():
        if name in PLACEHOLDERS:
            continue
        folders = [ROOT, ROOT / "evalstop_gym", *(ROOT / source).parents]
        if not any((folder / name).exists() for folder in folders) and not any(
                p.name == name for p in SOURCES):
            missing.append(f"{source}: {name}")
    assert missing == []
