"""``geomlab app``: start the Streamlit app, warm (``streamlit run serve.py``), from any working folder.

Every argument this command does not know is passed to ``streamlit run`` as it is (``--server.port 8611``,
``--server.headless true``, ...). The app's files are found through :mod:`geomlab.core.locate` (the repository, or
the installed package), so runs and uploads go where they would from the repository: the working folder's
``runs/`` unless ``GEOMLAB_RUNS_DIR`` says otherwise (docs/app.md).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

HELP = "start the Streamlit app (serve.py: warm-up with the server); other options go to `streamlit run`"

#: This command takes the options it does not know and hands them to ``streamlit run`` (read by geomlab.commands.cli).
PASS_THROUGH = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cold", action="store_true",
                   help="run app.py instead of serve.py: no warm-up at server start (the first visitor warms it)")
    p.add_argument("--dry-run", action="store_true", help="print the streamlit command line and exit")
    p.epilog = ("Any other option is passed to `streamlit run`, e.g. `geomlab app --server.port 8611 "
                "--server.headless true` (see `streamlit run --help`).")


def streamlit_command(extra: list[str], cold: bool = False) -> list[str]:
    """The argv that starts the app: ``[python, -m, streamlit, run, <app dir>/serve.py, *extra]`` (``app.py``
    when ``cold``). Raises ``FileNotFoundError`` when the app's files are missing (a broken install)."""
    from geomlab.core.locate import APP_DIR

    script = APP_DIR / ("app.py" if cold else "serve.py")
    if not script.is_file():
        raise FileNotFoundError(f"{script} is missing: reinstall geomlab (pip install 'geomlab[app]')")
    return [sys.executable, "-m", "streamlit", "run", str(script), *extra]


def run(args: argparse.Namespace) -> int:
    cmd = streamlit_command(list(getattr(args, "extra", [])), cold=args.cold)
    if args.dry_run:
        print(shlex.join(cmd))
        return 0
    try:
        import streamlit  # noqa: F401
    except ImportError:
        raise ValueError("the app needs streamlit: pip install 'geomlab[app]'") from None
    if os.name == "posix":  # become the server: its process id, signals and exit status are this command's
        os.execv(sys.executable, cmd)
    return subprocess.call(cmd)
