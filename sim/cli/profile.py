"""``dbsim profile BUNDLE``: what a captured (or run) workload asks of its storage.

Importing this module registers the command on :data:`sim.cli.app.app` (:mod:`sim.cli.entry`
does). The profile is printed (sentences, then tables folded to the width) or, with
``--json``, printed as its document; it is always written into the bundle as ``profile.json``
and as a page, ``profile.html`` unless ``--html`` names another path. Exit codes: 0 written,
2 bad input (not a bundle, no storage figures in it, a file that cannot be written).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from sim.cli.app import app, output_width
from sim.errors import ConfigError

HtmlOpt = Annotated[
    Path | None,
    typer.Option("--html", help="Write the page here instead of BUNDLE/profile.html."),
]


@app.command()
def profile(
    bundle: Annotated[
        Path, typer.Argument(help="A capture bundle (dbsim capture, dbsim import) or a run's.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the profile as JSON.")] = False,
    html: HtmlOpt = None,
) -> None:
    """The workload's demand on its storage: peaks, request shape, daily shape, limits."""
    from rich.console import Console

    from sim.profile import HTML_NAME, PROFILE_NAME, build_profile
    from sim.profile.console import print_profile
    from sim.profile.page import render_page
    from sim.safeio import strict_json

    doc = build_profile(bundle)
    page_path = html if html is not None else bundle / HTML_NAME
    text = strict_json(doc) + "\n"
    # Written before anything is printed, but a bundle that cannot take them (read-only, a
    # link planted at the name) still gets its profile printed before the one error line.
    failed = _write(bundle / PROFILE_NAME, text, "profile.json") or _write(
        page_path, render_page(doc), "--html" if html is not None else "profile.html"
    )
    if as_json:
        sys.stdout.write(text)
    else:
        out = Console(width=output_width(sys.stdout))
        written = [] if failed else [f"profile: {bundle / PROFILE_NAME}", f"html: {page_path}"]
        print_profile(out, doc, written)
    if failed:
        raise ConfigError(failed)


def _write(path: Path, text: str, what: str) -> str | None:
    """``text`` at ``path`` by a temporary file and a rename (never through a link, never
    over anything but a regular file); the refusal's line, or None when written."""
    from sim.bundle.files import atomic_write, os_reason

    try:
        atomic_write(path, text)
    except OSError as exc:
        other = f" {exc.filename}" if exc.filename and str(exc.filename) != str(path) else ""
        return f"profile: {what} {path}: cannot write{other}: {os_reason(exc)}"
    return None
