"""MkDocs hooks: the parts of the site that are read from the code, not copied.

- Each page under ``commands/`` ends with its command's ``--help``, rendered
  from the CLI itself at build time; a command without a page, or a page
  without a command, fails the build.
- ``<!-- mmctl-env -->`` becomes the table of ``MMCTL_*`` variables in
  :mod:`mmctl.settings`' docstring; a variable the module names but the
  table leaves out fails the build.
- The docstrings' Sphinx roles (``:class:`~mmctl.Client```) read as code.
- The benchmarks page's picture is drawn from BENCHMARKS.md's table.
- ``<!-- include FILE -->`` puts a file of the repository's root (ARCHITECTURE.md,
  BENCHMARKS.md, …) in the page as it is, less its title, with its links to
  the other root documents pointed at their pages here: those files stay
  where people and the tests read them, and the site cannot hold an old copy.

Nothing here reaches the network (the build runs offline).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: The root documents that are pages of the site.
ROOT_PAGES = {
    "README.md": "index.md",
    "ARCHITECTURE.md": "architecture.md",
    "BENCHMARKS.md": "benchmarks.md",
    "RELIABILITY.md": "reliability.md",
    "SECURITY.md": "security.md",
    "CHANGELOG.md": "changelog.md",
}

_INCLUDE = re.compile(r"^<!-- include (\S+?)(?: if present)? -->$", re.M)
_ENV = "<!-- mmctl-env -->"


def _fail(message: str) -> Exception:
    """An error that stops the build with one line (mkdocs' own kind when it is there)."""
    try:
        from mkdocs.exceptions import PluginError
    except ImportError:  # the tests import this module without mkdocs
        return ValueError(message)
    return PluginError(message)


# ---- the commands ----


def commands() -> dict[str, Any]:
    """Each command's page name (``shm-gc`` for ``mmctl shm gc``) -> its click
    command and the words that call it."""
    import typer

    from mmctl.cli.app import app

    found: dict[str, Any] = {}

    # Typer ships its own click: groups are told by their commands, not by class.
    def walk(group: Any, words: list[str]) -> None:
        for name, cmd in group.commands.items():
            if hasattr(cmd, "commands"):
                walk(cmd, [*words, name])
            else:
                found["-".join([*words, name])] = (cmd, [*words, name])

    walk(typer.main.get_command(app), [])
    return found


def help_text(words: list[str]) -> str:
    """What ``mmctl WORDS --help`` prints, at the CLI's own 100 columns."""
    import typer

    from mmctl.cli.app import app

    cmd: Any = typer.main.get_command(app)
    ctx = cmd.context_class(cmd, info_name="mmctl", terminal_width=100, **cmd.context_settings)
    for word in words:
        cmd = cmd.commands[word]
        ctx = cmd.context_class(cmd, info_name=word, parent=ctx, terminal_width=100)
    return str(cmd.get_help(ctx))


def _help_section(words: list[str]) -> str:
    spelled = " ".join(["mmctl", *words])
    return (
        f"\n\n## `{spelled} --help`\n\n"
        "Rendered from the command line itself when this site was built.\n\n"
        f"```text\n{help_text(words)}\n```\n"
    )


# ---- the environment ----


def env_rows() -> list[tuple[str, str]]:
    """(variable, meaning) from the table in :mod:`mmctl.settings`' docstring."""
    import mmctl.settings as settings

    doc = settings.__doc__ or ""
    rows: list[tuple[str, str]] = []
    for line in doc.splitlines():
        if line.startswith("``MMCTL_"):
            name, _, text = line.partition("``  ")
            rows.append((name.strip("` "), text.strip()))
        elif rows and line.startswith(" " * 10) and line.strip():
            rows[-1] = (rows[-1][0], f"{rows[-1][1]} {line.strip()}")
    named = {v for k, v in vars(settings).items() if k.isupper() and str(v).startswith("MMCTL_")}
    missing = named - {name for name, _ in rows}
    if missing:
        raise _fail(f"mmctl/settings.py's table leaves out {sorted(missing)}")
    return rows


def env_table() -> str:
    def md(text: str) -> str:  # reST literals -> Markdown code
        return text.replace("``", "`").replace("|", "\\|")

    lines = ["| variable | what it does |", "|---|---|"]
    lines += [f"| `{name}` | {md(text)} |" for name, text in env_rows()]
    return "\n".join(lines)


# ---- the root documents ----


def include(name: str, page_dir: str, *, optional: bool = False) -> str:
    path = ROOT / name
    if not path.is_file():
        if optional:
            return ""
        raise _fail(f"docs include a missing file: {name}")
    text = path.read_text()
    text = re.sub(r"\A# .*\n+", "", text)  # the page has its own title
    up = "../" * page_dir.count("/") if page_dir else ""

    def relink(match: re.Match[str]) -> str:
        target, anchor = match.group(2), match.group(3) or ""
        page = ROOT_PAGES.get(target)
        return f"]({up}{page}{anchor})" if page else match.group(0)

    return re.sub(r"\]\((\./)?([A-Z]+\.md)(#[^)]*)?\)", relink, text)


# ---- the benchmark's picture ----

#: Drawn at build time from BENCHMARKS.md's own table; never committed.
TRANSPORTS_PNG = "img/transports.png"


def transport_rows() -> list[tuple[float, float, float, float, float, float]]:
    """(payload MB, shm/inline median E2E, its 95% interval low and high,
    inline and shm hand-off ms) from BENCHMARKS.md's "Transports under load" table."""
    text = (ROOT / "BENCHMARKS.md").read_text()
    section = text[text.index("## Transports under load") :]
    section = section[: section.index("\n## ", 1)]
    number = r"([\d.]+)"
    row = re.compile(
        rf"^\| {number} MB \| {number} \[{number}–{number}\] \| {number} ms \| {number} ms \|", re.M
    )
    rows = [tuple(float(v) for v in m.groups()) for m in row.finditer(section.replace("**", ""))]
    if len(rows) < 2:
        raise _fail("BENCHMARKS.md: no 'Transports under load' table to draw")
    return rows  # type: ignore[return-value]


def transports_png() -> bytes:
    """Two panels, one colour per transport in both: each transport's hand-off
    against the payload, and shm's median end-to-end time over inline's."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = transport_rows()
    mb = [r[0] for r in rows]
    colours = {"inline": "tab:blue", "shm": "tab:orange"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), constrained_layout=True)
    left.plot(mb, [r[4] for r in rows], "o-", color=colours["inline"], label="inline")
    left.plot(mb, [r[5] for r in rows], "s-", color=colours["shm"], label="shm")
    left.set(xscale="log", yscale="log", xlabel="pixel tensor per request (MB)",
             ylabel="hand-off (ms, median)", title="Tensor hand-off")  # fmt: skip
    left.legend()
    ratio = [r[1] for r in rows]
    err = [[r[1] - r[2] for r in rows], [r[3] - r[1] for r in rows]]
    right.errorbar(mb, ratio, yerr=err, fmt="s-", color=colours["shm"], capsize=4,
                   label="shm / inline, 95% interval")  # fmt: skip
    right.axhline(1.0, color=colours["inline"], linestyle="--", label="inline (= 1)")
    right.set(xscale="log", xlabel="pixel tensor per request (MB)",
              ylabel="median end-to-end, shm / inline", title="Whole request")  # fmt: skip
    right.legend()
    for axes in (left, right):
        axes.set_xticks(mb, [f"{v:g}" for v in mb])
        axes.minorticks_off()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return out.getvalue()


# ---- MkDocs' hooks ----


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    src = page.file.src_uri
    folder = src.rpartition("/")[0] + "/" if "/" in src else ""

    def included(match: re.Match[str]) -> str:
        return include(match.group(1), folder, optional="if present" in match.group(0))

    markdown = _INCLUDE.sub(included, markdown)
    if _ENV in markdown:
        markdown = markdown.replace(_ENV, env_table())
    if src.startswith("commands/") and src != "commands/index.md":
        name = src.removeprefix("commands/").removesuffix(".md")
        known = commands()
        if name not in known:
            raise _fail(f"docs/{src}: no command `mmctl {name.replace('-', ' ')}`")
        markdown += _help_section(known[name][1])
    return markdown


#: A Sphinx role in a docstring as Markdown renders it: :class:<code>~a.b.C</code>.
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([\w.]+)</code>")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """The docstrings' Sphinx roles as code, with ``~`` meaning the last name only."""

    def code(match: re.Match[str]) -> str:
        name = match.group(2).rpartition(".")[2] if match.group(1) else match.group(2)
        return f"<code>{name}</code>"

    return _ROLE.sub(code, html)


def on_files(files: Any, config: Any) -> Any:
    pages = {f.src_uri for f in files if f.src_uri.startswith("commands/")}
    missing = [n for n in commands() if f"commands/{n}.md" not in pages]
    if missing:
        raise _fail(f"commands without a page in docs/commands/: {missing}")
    from mkdocs.structure.files import File

    files.append(File.generated(config, TRANSPORTS_PNG, content=transports_png()))
    return files
