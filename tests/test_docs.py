"""The documentation site: it builds with warnings as errors, its API pages resolve the package-dir
subpackages, its snippets run, and the built pages render in a headless browser."""

from __future__ import annotations

import functools
import html
import importlib.metadata
import inspect
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from markdown.extensions.toc import slugify

import evalstop_gym
from evalstop_gym.benchmarks.analysis.paper_claims import E2_FIGURES
from evalstop_gym.online import RunMonitor
from evalstop_gym.policies import BASES, DETECTORS, make_base, make_detector

REPO = Path(__file__).resolve().parent.parent
SNIPPETS = sorted((REPO / "docs" / "snippets").glob("*.py"))
EXAMPLES = sorted((REPO / "examples").glob("*.py"))
PAGE_OF_EXAMPLE = {"hf_trainer": "huggingface", "lightning_fit": "lightning",
                   "optuna_study": "optuna", "ray_tune_search": "ray-tune"}


def registered_classes() -> list[tuple[str, type]]:
    """Every registered detector prefix and base scheduler name, with its class."""
    return ([(name, type(make_detector(name))) for name in DETECTORS]
            + [(name, type(make_base(name))) for name in BASES])


def page_text(path: Path) -> str:
    """A built page's visible text, tags dropped and whitespace collapsed."""
    text = html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))
    return " ".join(text.split())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason=f"{module} is not installed: pip install '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-f", str(REPO / "mkdocs.yml"), "-d", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


@pytest.mark.parametrize("name,cls", registered_classes())
def test_registered_class_has_its_own_docstring(name, cls):
    """help(EvalStop) shows EvalStop's text, not DetectorBase's: the class names itself."""
    doc = cls.__dict__.get("__doc__") or ""
    assert doc.strip().startswith(name), f"{cls.__qualname__}: docstring should open with {name}"


def test_api_pages_render_mapped_subpackages(site):
    """evalstop_gym.policies lives in policies/ (package-dir); its classes still get API entries."""
    api = (site / "api" / "policies" / "index.html").read_text(encoding="utf-8")
    for name, cls in registered_classes():
        assert f'id="{cls.__module__}.{cls.__qualname__}"' in api, name


def test_examples_are_included_not_copied(site):
    """Each integration page shows its example file as it is in examples/."""
    assert set(PAGE_OF_EXAMPLE) == {p.stem for p in EXAMPLES}
    for example in EXAMPLES:
        text = page_text(site / "integrations" / PAGE_OF_EXAMPLE[example.stem] / "index.html")
        for line in example.read_text(encoding="utf-8").splitlines():
            assert " ".join(line.split()) in text, f"{example.name}: {line!r} not on its page"


def test_generated_reports_and_paper_figures_are_included(site):
    """REPRODUCTION.md and BEYOND.md appear as generated; the paper's figures page renders
    paper_claims (which ships), not a file outside the package."""
    for page, source in (("reproduction", "REPRODUCTION.md"), ("choosing", "BEYOND.md")):
        first = (REPO / source).read_text(encoding="utf-8").splitlines()[0].lstrip("# ")
        assert first in page_text(site / page / "index.html"), source
    toc = (site / "choosing" / "index.html").read_text(encoding="utf-8")
    toc = toc[toc.rindex("md-nav--secondary"):]
    toc = toc[:toc.index("md-content")]   # the contents alone, not the headings' permalinks
    for line in (REPO / "BEYOND.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):   # the included file's sections are in the page's contents
            assert f'href="#{slugify(line[3:], "-")}"' in toc, line
    figures = (site / "paper-figures" / "index.html").read_text(encoding="utf-8")
    assert 'id="evalstop_gym.benchmarks.analysis.paper_claims.E2_FIGURES"' in figures
    for key in E2_FIGURES:
        assert key in figures, key
    for page in (REPO / "docs").rglob("*.md"):
        assert "../shared" not in page.read_text(encoding="utf-8"), page


def test_pages_name_the_default_detector_only_through_code():
    """The practitioner and integration pages say "the default detector"; its name is read from
    RunMonitor's signature on the API page, so changing the default cannot leave them stale."""
    default = inspect.signature(RunMonitor).parameters["detector"].default
    pages = [REPO / "docs" / "getting-started" / "practitioner.md",
             *(REPO / "docs" / "integrations").glob("*.md")]
    for page in pages:
        assert default not in page.read_text(encoding="utf-8"), page.name


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[p.stem for p in SNIPPETS])
def test_snippets_run(snippet, tmp_path):
    """The code the pages include runs as shown (from a scratch folder)."""
    done = subprocess.run([sys.executable, str(snippet)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    if snippet.stem == "custom_detector":
        assert "stopped at step 4" in done.stdout
    if snippet.stem == "run_monitor":          # a newcomer's first run shows a decision
        assert "stop at step" in done.stdout, done.stdout
        assert "keep the checkpoint of step" in done.stdout


@pytest.fixture(scope="module")
def served(site):
    """The built site over http on 127.0.0.1, on a port the OS picks."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 (the base's signature)
        pass


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with no network of its own and a throwaway profile."""
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not on PATH (apt-get install chromium)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900"]
    return subprocess.run([exe, *flags, *args], capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("path,expected", [
    ("/", '<h1 id="evalstop-gym">EvalStop Gym'),
    ("/api/policies/", 'id="evalstop_gym.policies.eval_stop.EvalStop"'),
])
def test_pages_render_in_a_browser(served, tmp_path, path, expected):
    """The page's DOM, after the theme's scripts ran, holds its heading; a screenshot is drawn
    and is not blank."""
    dom = chromium(tmp_path, "--dump-dom", served + path)
    assert expected in dom.stdout, dom.stderr[-2000:]
    assert "md-header" in dom.stdout   # Material's header: the theme's assets loaded
    shot = tmp_path / "page.png"
    chromium(tmp_path, f"--screenshot={shot}", served + path)
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (900, 1280)
    assert pixels.std() > 0.05, "the screenshot is (nearly) one colour"


def test_release_files_agree_with_the_package():
    """LICENSE, CITATION.cff and CHANGELOG.md name the version and licence the package declares."""
    meta = importlib.metadata.metadata("evalstop-gym")
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["version"] == meta["Version"] == evalstop_gym.__version__
    assert citation["license"] == meta["License"] == "MIT"
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(meta['Version'])} - \d{{4}}-\d\d-\d\d$", changelog,
                     re.M), "CHANGELOG.md has no section for this version"
