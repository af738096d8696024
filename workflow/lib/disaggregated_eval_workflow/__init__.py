"""Plumbing of the Snakemake workflow (the reproduction pipeline), kept next to the rules.

Not part of the installed package: ``pip install disaggregated-eval`` gives the library and
``disagg-eval audit`` only, as the snakemake-workflows convention keeps a workflow's helpers in
``workflow/``. ``workflow/Snakefile`` puts ``workflow/lib`` of its own checkout (found from the folder of
that file, so also when another workflow uses it as a module) on ``sys.path`` before importing these modules;
Snakemake hands its ``sys.path`` to every rule script (the preamble of a ``script:``), so the scripts
import them the same way, locally and in cluster jobs (which parse the ``Snakefile`` again). The
tests find them through ``pythonpath`` in ``pyproject.toml``. What the plumbing needs from the library
it imports from ``disaggregated_eval``; the library never imports the plumbing.

- :mod:`disaggregated_eval_workflow.config`: checks of the workflow configuration (schema defaults,
  the schema, the cross-key rules), before any job starts.
- :mod:`disaggregated_eval_workflow.audit_runs`: the ``audit`` section of a workflow configuration,
  one audit job per listed file and model.
- :mod:`disaggregated_eval_workflow.code_files`: the source files a rule's script imports (the import
  walk behind ``script_code`` in ``workflow/rules/common.smk``), listed as rule inputs so that an edit
  of one of them reruns the rule.
- :mod:`disaggregated_eval_workflow.inputs`: the rule scripts' reading of score files, checked
  against the test set.
- :mod:`disaggregated_eval_workflow.timings`: a run's benchmark files summed per rule.
- :mod:`disaggregated_eval_workflow.snakemake_compat`: the work-around of Snakemake's
  ``--list-changes params`` listing.
- :mod:`disaggregated_eval_workflow.envs`: the pins of the rules' conda environments
  (``workflow/envs/``) and their union, which the container image installs.

The package imports nothing itself, so that importing one of its modules stays cheap.
"""
