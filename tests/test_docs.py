"""The documentation site (``make docs``): it builds offline without a warning, its command
reference lists every command of ``chakra --help``, and it works in a real browser (pages, search)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser import ARTIFACTS, BrowserPage, served

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return out


def test_the_site_builds_strictly_with_its_home_page_and_search_index(site: Path):
    assert (site / "index.html").is_file()
    assert (site / "search" / "search_index.json").is_file()


def test_the_command_reference_has_every_command_of_chakra_help(site: Path):
    from test_fuzz import _commands

    page = (site / "reference" / "cli" / "index.html").read_text()
    missing = sorted(name for name in _commands() if f"<code>chakra {name}</code>" not in page)
    assert missing == []


def test_the_api_reference_is_rendered_from_the_docstrings(site: Path):
    page = (site / "reference" / "api" / "chakra.workload" / "index.html").read_text()
    assert 'id="chakra.workload.open_workload"' in page and "loaded on first use" in page


def test_every_public_class_and_function_of_the_package_has_its_entry_in_the_api_reference(site: Path):
    from test_architecture import public_definitions

    sys.path.insert(0, str(REPO / "docs" / "hooks"))
    from generated_pages import api_modules

    shown = set(api_modules())
    missing = []
    for name, where in public_definitions().items():
        for module in (f"chakra.{m}" if m else "chakra" for m in where):
            if module not in shown:
                continue  # the command-line modules (the command reference) and private modules
            page = site / "reference" / "api" / module / "index.html"
            if f'id="{module}.{name}"' not in page.read_text():
                missing.append(f"{module}.{name}")
    assert missing == []


def test_the_home_page_and_a_tutorial_render_in_a_browser_with_their_navigation(site: Path):
    with served(site) as url:
        for page, heading, picture in (("", "chakra-et", "docs-home.png"),
                                       ("tutorials/what-if/", "What-if studies", "docs-tutorial.png")):  # fmt: skip
            with BrowserPage(f"{url}/{page}") as browser:
                shown = browser.wait_for("document.readyState == 'complete' && document.querySelector('h1')?.innerText")
                entries = browser.evaluate("document.querySelectorAll('.md-nav__link').length")
                browser.screenshot(ARTIFACTS / picture)
            assert heading in shown and entries > 50, page


def test_searching_all_reduce_in_a_browser_lists_the_written_pages_that_explain_it_first(site: Path):
    with served(site) as url, BrowserPage(f"{url}/?q=all-reduce") as browser:
        titles = browser.wait_for(
            "[...document.querySelectorAll('.md-search-result__item h1')].map(title => title.textContent.trim())"
        )
        browser.screenshot(ARTIFACTS / "docs-search.png")
    assert any(title.startswith("Simulator") for title in titles), titles
    assert not any(title.startswith("chakra.") for title in titles[:5]), titles  # module pages come after


def test_the_search_index_finds_all_reduce_in_the_guides_and_the_reference(site: Path):
    import json

    entries = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    found = {entry["location"].split("#")[0] for entry in entries if "all-reduce" in entry["text"].lower()}
    assert {"concepts/simulator/", "reference/cli/"} <= found, sorted(found)
