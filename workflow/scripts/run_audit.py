"""Rule run_audit: one audit of one file and model, written as ``disagg-eval audit --out`` writes it.

The folder ``params.folder`` is written by the command line's own path
(:func:`disaggregated_eval.audit.cli.run_audit`): checked before the file is read (a folder holding
files that no audit wrote is refused, never emptied), replaced atomically once the new output is
complete, so that a failure, Ctrl-C or SIGTERM leaves an earlier output as it was. Progress, warnings,
the summary and errors go to the job's log, an error's line also to standard error. The job's declared
outputs, written only after success, atomically: a copy of the folder's report (``<folder>.report.html``,
for ``snakemake --report``), then, last, its record (``<folder>.manifest.json``: a copy of the folder's
manifest) (``docs/design.md``, "The workflow's audit jobs").
"""

import contextlib
import sys
from pathlib import Path

from disaggregated_eval import io
from disaggregated_eval.audit.cli import run_audit
from disaggregated_eval.audit.signals import EXIT_OK

job = snakemake  # noqa: F821 (injected by Snakemake)
options = dict(job.params.options)
options.setdefault("n_threads", job.threads)
folder = Path(job.params.folder)
log_path = Path(job.log[0])
errors = sys.stderr
with log_path.open("w", encoding="utf-8") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
    status = run_audit(job.input.data, folder, options)
if status != EXIT_OK:
    lines = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    print(f"{lines[-1] if lines else f'exit status {status}'} (log: {log_path})", file=errors)
    sys.exit(status)
with io.atomic_path(job.output.report) as tmp:
    tmp.write_bytes((folder / "report.html").read_bytes())
with io.atomic_path(job.output.record) as tmp:
    tmp.write_bytes((folder / "manifest.json").read_bytes())
