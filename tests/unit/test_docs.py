"""The comments that cite ARCHITECTURE.md point at sections that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_architecture_references_resolve():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    sections = set(re.findall(r"^## (\d+)\. ", text, re.M))
    cited = set()
    for path in [*ROOT.joinpath("mmctl").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py")]:
        for major, _minor in re.findall(r"ARCHITECTURE §(\d+)(?:\.(\d+))?", path.read_text()):
            cited.add(major)
    assert cited and cited <= sections, f"cited {sorted(cited)}, present {sorted(sections)}"


def test_reliability_and_security_cite_tests_that_exist():
    """Each `test_…` name in RELIABILITY.md and SECURITY.md is a test function
    (a renamed test must not leave a table pointing at nothing)."""
    defined = set()
    for path in ROOT.joinpath("tests").rglob("test_*.py"):
        defined |= set(re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), re.M))
    for doc in ("RELIABILITY.md", "SECURITY.md"):
        cited = set(re.findall(r"`(test_\w+)(?:\[[^\]]*\])?`", (ROOT / doc).read_text()))
        assert cited, doc
        assert cited <= defined, f"{doc} cites missing tests: {sorted(cited - defined)}"


def test_benchmarks_label_their_numbers_by_commit_and_date():
    """Each section of BENCHMARKS.md says which commit its numbers were measured
    at, and when — never which session or issue of the work they came from."""
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert not re.findall(r"(?i)\bsession[- ]\d|\bissue\b|#\d\d\b", text)
    commits = set(re.findall(r"`([0-9a-f]{7,40})`", text))
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.splitlines()[0]
        labels = re.findall(r"`[0-9a-f]{7,40}`[^`\n]{0,12}\(?(20\d\d-\d\d-\d\d)", section)
        assert labels, f"BENCHMARKS.md '## {title}' names no commit with its date"
    import subprocess

    shallow = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"],
                             capture_output=True, text=True)  # fmt: skip
    if shallow.returncode == 0 and shallow.stdout.strip() == "false":  # the whole history here
        for commit in commits:
            found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                                   capture_output=True)  # fmt: skip
            assert found.returncode == 0, f"BENCHMARKS.md names {commit}, not a commit here"


def test_no_path_of_one_machine_is_named():
    """Scripts and docs name the scripts that make an environment, not where
    one machine happened to keep it."""
    pattern = re.compile(
        r"/work/(main|shared|wt)/|/root/|\.cache/mmctl/(engine|reference)-env-[0-9a-f]"
    )
    files = [p for ext in ("*.py", "*.md", "*.sh", "*.toml") for p in ROOT.rglob(ext)
             if not {".venv", "fixtures", ".git"} & set(p.parts) and p != Path(__file__)]  # fmt: skip
    named = [f"{p.relative_to(ROOT)}:{n}" for p in files
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             if pattern.search(line)]  # fmt: skip
    assert not named, named


def test_sizes_are_written_by_one_helper():
    """A picture's size reads width x height everywhere, as PIL and ffprobe
    write it, because one function writes it (``media.probe.dimensions``):
    an f-string that joins two values with an ``x`` anywhere else is a second
    way, and the first to drift (``61x97`` was printed for a 97x61 image). A
    patch grid (t x h x w, vLLM's order) is not a picture's size."""
    joined = re.compile(r"\{[^{}]*\}x\{")
    found = []
    for folder in ("mmctl", "scripts", "bench"):
        for path in ROOT.joinpath(folder).rglob("*.py"):
            for line in path.read_text().splitlines():
                if joined.search(line) and "{t}x{h}x{w}" not in line:
                    found.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert found == ['mmctl/media/probe.py: return f"{width}x{height}"'], found


def _site_hooks():
    import importlib.util

    path = ROOT / "docs" / "hooks" / "mmctl_docs.py"
    spec = importlib.util.spec_from_file_location("mmctl_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_command_has_a_docs_page_and_every_page_a_command():
    """The site's build fails on either; this says so without MkDocs installed."""
    hooks = _site_hooks()
    pages = {p.stem for p in (ROOT / "docs" / "commands").glob("*.md")} - {"index"}
    assert pages == set(hooks.commands())
    assert "Usage: mmctl shm gc [OPTIONS]" in hooks.help_text(["shm", "gc"])


def test_the_environment_page_lists_every_setting():
    import mmctl.settings as settings

    hooks = _site_hooks()
    named = {v for k, v in vars(settings).items() if k.isupper() and str(v).startswith("MMCTL_")}
    rows = dict(hooks.env_rows())
    assert set(rows) == named and all(rows.values())
    assert "XDG_CACHE_HOME" in rows["MMCTL_CACHE_DIR"]


def test_the_benchmarks_picture_reads_the_table():
    rows = _site_hooks().transport_rows()
    assert [r[0] for r in rows] == sorted(r[0] for r in rows) and len(rows) >= 3
    assert all(low <= ratio <= high for _mb, ratio, low, high, *_ in rows)


def _family_rows(text: str) -> dict[str, set[str]]:
    """A families table's rows: the family's name -> the model types it names."""
    if "\n## Model families" in text:  # the README: that section only
        text = text[text.index("\n## Model families") + 1 :]
        text = text.split("\n## ", 1)[0]
    section = text
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `") and "|---" not in line:
            cells = [c.strip() for c in line.split("|")[1:-1]]
            name = re.match(r"`([^`]+)`", cells[0]).group(1)
            rows[name] = set(re.findall(r"`([a-z0-9_]+)`", cells[1]))
    return rows


def test_the_family_tables_name_every_family_and_model_type():
    """The README's table and the site's are the registry's, row for row."""
    from mmctl.models.registry import FAMILIES

    served = {f.name: set(f.model_types) for f in FAMILIES}
    for doc in (ROOT / "README.md", ROOT / "docs" / "families.md"):
        rows = _family_rows(doc.read_text())
        assert {k: v & set().union(*served.values()) for k, v in rows.items()} == served, doc
