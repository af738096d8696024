"""Rendering an audit's figures to PNG and SVG bytes, in parallel worker processes.

:func:`start_rendering` renders the figures of :func:`.plots.figure_specs` in forked worker processes
(Linux; elsewhere, or with one CPU, one after the other) while the caller goes on writing the
tables; a worker dies with its parent (``prctl(PR_SET_PDEATHSIG)``) and closes the font files it
inherited. :func:`render_figures` waits for them. Glyphs are unhinted and the PNG is encoded by Pillow
as RGB. The output does not depend on where a figure was rendered: PNG and SVG bytes are the same for
the same audit (:func:`figure_bytes`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import io
import multiprocessing
import os
import signal
import sys
import warnings
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure

from .figure_data import FigureData
from .figure_layout import audit_style, measuring_fonts, missing_glyphs
from .forest_figures import draw_forest
from .line_figures import LineFigureData, draw_line_figure
from .plots import figure_specs, spec_figure_data
from .text import terminal_text

__all__ = [
    "figure_bytes",
    "start_rendering",
    "render_figures",
]


_PNG_DPI = 200
_MAX_PNG_PIXELS = 6e6  # larger figures get a lower PNG resolution (the SVG is exact at any size)
_MIN_PNG_DPI = 100
_MAX_RENDERERS = 8  # processes drawing figures at once, the caller included
_SVG_RC = {"svg.fonttype": "none", "svg.hashsalt": "disagg-eval"}


def _png_dpi(width: float, height: float) -> int:
    """200 dpi; less for large figures, down to 100 dpi, so that a PNG has at most 6 million pixels."""
    if width * height * _PNG_DPI**2 <= _MAX_PNG_PIXELS:
        return _PNG_DPI
    return max(_MIN_PNG_DPI, int((_MAX_PNG_PIXELS / (width * height)) ** 0.5))


def _png(fig: Figure, dpi: int) -> bytes:
    """The figure drawn by Agg at ``dpi`` and written by Pillow as an RGB PNG (compression level 3).

    What ``savefig(format="png")`` does, minus the alpha channel (the figure is opaque) and with a
    lighter compression: 40% less time and smaller files than matplotlib's RGBA at level 6.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image, PngImagePlugin

    canvas = FigureCanvasAgg(fig)
    original = fig.dpi
    fig.dpi = dpi
    try:
        canvas.draw()
        image = Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB")
    finally:
        fig.dpi = original
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", f"Matplotlib version{mpl.__version__}, https://matplotlib.org/")
    out = io.BytesIO()
    image.save(out, format="png", compress_level=3, dpi=(dpi, dpi), pnginfo=info)
    return out.getvalue()


def figure_bytes(fig: Figure, *, dpi: int | None = None) -> dict[str, bytes]:
    """``{"png": ..., "svg": ...}``: the figure as PNG and SVG, both byte-reproducible.

    The PNG is 200 dpi (``dpi``; by default lower for a figure that would exceed 6 million pixels,
    down to 100 dpi: drawing and compressing pixels is most of the cost of a large figure), RGB,
    with no date in its metadata. The SVG keeps text as ``<text>`` elements (smaller, sharp,
    searchable, and readable back by tests) with a fixed id salt and no date, so the same figure
    gives the same bytes in any process.
    """
    width, height = fig.get_size_inches()
    out = {"png": _png(fig, dpi or _png_dpi(width, height))}
    svg = io.BytesIO()
    with mpl.rc_context(_SVG_RC):
        fig.savefig(svg, format="svg", metadata={"Date": None})
    out["svg"] = svg.getvalue()
    return out


def _render(data: FigureData | LineFigureData, rc: Mapping[str, Any]) -> tuple[tuple[float, float], dict[str, bytes]]:
    """Draw and save one figure (in this process or a worker): its size in inches and its bytes.

    A character that no installed font has is drawn as a box; matplotlib's warning about it is
    silenced here (one per character and figure), :meth:`_Rendering.notes` names it once."""
    with mpl.rc_context(rc), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font", category=UserWarning)
        fig = draw_line_figure(data) if isinstance(data, LineFigureData) else draw_forest(data)
        width, height = fig.get_size_inches()
        return (float(width), float(height)), figure_bytes(fig)


def _cost(data: FigureData | LineFigureData) -> int:
    if isinstance(data, LineFigureData):
        return len(data.panels) * max(len(data.entries), 1)
    return len(data.panels) * max(len(data.labels), 1)


def _renderers(n_figures: int, n_jobs: int | None) -> int:
    """Processes drawing figures, the caller included: ``n_jobs``, default the CPUs this process may
    use; at most one per figure and 8."""
    if n_jobs is not None:
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
            raise ValueError(f"n_jobs must be a positive number of processes or None; got {n_jobs!r}")
        wanted = n_jobs
    else:
        try:
            wanted = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover (not Linux)
            wanted = os.cpu_count() or 1
    wanted = min(wanted, n_figures, _MAX_RENDERERS)
    # Workers are forked (fast: matplotlib is already imported and nothing is pickled but the
    # figures' data): only on Linux, and never from a daemonic process, which cannot have children.
    if wanted < 2 or not sys.platform.startswith("linux") or multiprocessing.current_process().daemon:
        return 1
    return wanted


_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_SHOW_GLYPHS = 5  # characters named by the note on missing glyphs


def _first_line(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def _texts(data: FigureData | LineFigureData) -> list[str]:
    """The data-derived text of a figure as it is drawn: its title and slice labels (or legend entries),
    with control characters escaped (:func:`.text.terminal_text`, as the figures draw them)."""
    if isinstance(data, LineFigureData):
        texts = [data.title, *(entry[0] for entry in data.entries)]
    else:
        texts = [data.title, *data.labels, *(panel.title for panel in data.panels)]
    return [terminal_text(t) for t in texts]


def _close_fonts() -> None:
    """Close the font files this process holds open, before it forks renderers.

    matplotlib keeps each font it has used open (``font_manager._get_font``'s cache). A forked
    child shares every open file's offset with its parent, so parent and child drawing text at once
    can read each other's glyph bytes (FreeType's "invalid outline"). With no font open at the
    fork, each process opens its own files.
    """
    from matplotlib import font_manager

    measuring_fonts.cache_clear()
    clear = getattr(getattr(font_manager, "_get_font", None), "cache_clear", None)
    if clear is not None:
        clear()
        gc.collect()  # the cached FT2Font objects close their files when collected


def _init_worker(parent: int) -> None:
    """Worker initializer: Ctrl-C is the caller's to handle (it stops the workers), not each worker's;
    and a worker dies with its parent.

    A parent killed with SIGKILL runs no cleanup, and a worker waiting for its next figure would
    wait for ever (the other workers hold the pipe open). On Linux the kernel sends the worker
    SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``); a parent that died before that call
    is seen by its pid having changed.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


class _Rendering:
    """Figures being rendered (:func:`start_rendering`); :meth:`result` waits for them."""

    def __init__(self, result: Any, n_jobs: int | None) -> None:
        self._specs = figure_specs(result)
        self._data = [spec_figure_data(result, spec) for spec in self._specs]
        # before the style and any fork: the fonts learnt here (_learn_system_fonts) are then used
        self._missing = missing_glyphs([t for data in self._data for t in _texts(data)])
        self._rc = audit_style()
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[int, Future] = {}
        self._failed: dict[str, str] = {}
        renderers = _renderers(len(self._specs), n_jobs)
        if renderers > 1:
            _close_fonts()
            with warnings.catch_warnings():
                # Python >= 3.12 warns that forking a process with threads may deadlock the child;
                # the children only draw with Agg and never touch the parent's thread pools or locks.
                warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks.*")
                self._pool = ProcessPoolExecutor(renderers - 1, mp_context=multiprocessing.get_context("fork"),
                                                 initializer=_init_worker, initargs=(os.getpid(),))  # fmt: skip
                # largest first, so that no worker starts a long figure last
                for k in sorted(range(len(self._data)), key=lambda k: -_cost(self._data[k])):
                    self._futures[k] = self._pool.submit(_render, self._data[k], self._rc)

    def result(self) -> dict[str, tuple[dict, dict[str, bytes]]]:
        """Every figure, ``name -> (spec, {"png": bytes, "svg": bytes})``, in the order of :func:`figure_specs`.

        The caller draws too: it takes the figures no worker has started, smallest first.
        """
        done: dict[int, tuple[tuple[float, float], dict[str, bytes]] | None] = {}

        def draw_here(k: int) -> None:
            try:
                done[k] = _render(self._data[k], self._rc)
            except Exception as exc:  # a figure never fails the audit: it is left out, with a note
                self._failed[self._specs[k]["name"]] = f"{type(exc).__name__}: {exc}"
                done[k] = None

        try:
            for k in sorted(self._futures, key=lambda k: _cost(self._data[k])):
                if self._futures[k].cancel():
                    draw_here(k)
            for k in range(len(self._specs)):
                if k in done:
                    continue
                if k not in self._futures:
                    draw_here(k)
                    continue
                try:
                    done[k] = self._futures[k].result()
                except Exception as exc:  # raised in the worker (a broken pool included)
                    self._failed[self._specs[k]["name"]] = f"{type(exc).__name__}: {exc}"
                    done[k] = None
        except BaseException:
            self.close(abort=True)
            raise
        self.close()
        out = {}
        for k, spec in enumerate(self._specs):
            if done[k] is None:
                continue
            (width, height), images = done[k]
            out[spec["name"]] = ({**spec, "width_in": width, "height_in": height}, images)
        return out

    def notes(self) -> list[str]:
        """Notes on the figures, after :meth:`result`: each figure that could not be drawn (left out of
        the folder and the report, the tables unaffected), and the characters drawn as boxes."""
        notes = [
            f"figure {name} could not be drawn and is left out (the tables are complete): {_first_line(error)}"
            for name, error in self._failed.items()
        ]
        missing = self._missing
        if missing:
            shown = ", ".join(f"{ch!r} (U+{ord(ch):04X})" for ch in missing[:_SHOW_GLYPHS])
            more = f" and {len(missing) - _SHOW_GLYPHS} more" if len(missing) > _SHOW_GLYPHS else ""
            notes.append(
                f"figures: no installed font has a glyph for {shown}{more}; the figures draw a box in its place "
                f"(the tables and the report's text keep every character); a font with it, such as Debian's "
                f"fonts-droid-fallback for CJK, draws it"
            )
        return notes

    def close(self, *, abort: bool = False) -> None:
        """Stop the workers: figures not started are cancelled; those being drawn are waited for, or,
        with ``abort`` (the caller failed or was interrupted), the workers are terminated at once."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if abort:
            terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
            if terminate is not None:
                terminate()
            else:  # the workers (before shutdown, which forgets them)
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> _Rendering:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(abort=exc_type is not None)


def start_rendering(result: Any, *, n_jobs: int | None = None) -> _Rendering:
    """Start rendering every figure of the audit; ``.result()`` returns them as :func:`render_figures` does.

    With ``n_jobs`` (default: the CPUs this process may use, ``os.sched_getaffinity``, at most 8)
    above 1 on Linux, ``n_jobs - 1`` forked worker processes start drawing at once, while the caller goes on
    (e.g. writing the tables); :meth:`result` then draws the figures no worker has started yet in the
    caller. Use it as a context manager so that the workers stop if the caller fails.

    Raises
    ------
    ValueError
        If ``n_jobs`` is not a positive integer or None.
    """
    return _Rendering(result, n_jobs)


def render_figures(result: Any, *, n_jobs: int | None = None) -> dict[str, tuple[dict, dict[str, bytes]]]:
    """Every figure of the audit (:func:`figure_specs`) as ``name -> (spec, {"png": bytes, "svg": bytes})``.

    ``spec`` gains the figure's ``width_in`` and ``height_in``. The figures are rendered in parallel
    (see :func:`start_rendering`); the bytes do not depend on ``n_jobs``.

    Raises
    ------
    ValueError
        If ``n_jobs`` is not a positive integer or None.
    """
    with start_rendering(result, n_jobs=n_jobs) as rendering:
        return rendering.result()
