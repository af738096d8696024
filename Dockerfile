# Container image of the workflow's jobs (`snakemake --sdm apptainer`; workflow/envs/README.md): Python 3.11
# and the union of the pinned packages of workflow/envs/*.yaml, the versions of `--sdm conda`. The library
# (src/) and the workflow's plumbing (workflow/lib/) are not copied: Snakemake mounts the folders of its
# own sys.path, which workflow/Snakefile extends with them, into every job's container.
#   docker build -t disaggregated-eval-workflow:0.1.0 .
#   apptainer build disaggregated-eval-workflow.sif docker-daemon://disaggregated-eval-workflow:0.1.0
# (or without Docker: apptainer build disaggregated-eval-workflow.sif workflow/envs/container.def)
FROM python:3.11-slim-bookworm
COPY workflow/envs/*.yaml /opt/disaggregated-eval/envs/
COPY workflow/lib/disaggregated_eval_workflow/envs.py /opt/disaggregated-eval/envs.py
RUN pip install --no-cache-dir pyyaml==6.0.3 \
    && python /opt/disaggregated-eval/envs.py /opt/disaggregated-eval/envs/*.yaml > /opt/disaggregated-eval/requirements.txt \
    && pip install --no-cache-dir -r /opt/disaggregated-eval/requirements.txt
