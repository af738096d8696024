"""Plumbing of the Snakemake workflow (the reproduction pipeline), kept apart from the library.

Nothing here is needed to use the library or ``disagg-eval audit``; the ``Snakefile`` and the rule
files import these modules at parse time:

- :mod:`disaggregated_eval.pipeline.config`: checks of the workflow configuration (schema defaults,
  the schema, the cross-key rules), before any job starts.
- :mod:`disaggregated_eval.pipeline.audit_runs`: the ``audit`` section of a workflow configuration,
  one audit job per listed file and model.
- :mod:`disaggregated_eval.pipeline.code_files`: the library files a rule's script imports (the import
  walk behind ``library_files`` in ``workflow/rules/common.smk``), listed as rule inputs so that an edit
  of one of them reruns the rule.

The package imports nothing itself, so that importing one of its modules stays cheap.
"""
