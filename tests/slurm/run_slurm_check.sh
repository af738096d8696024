#!/usr/bin/env bash
# End-to-end check of profiles/slurm on a throw-away single-node SLURM cluster (Debian Slurm 22.05).
#
#   sudo tests/slurm/run_slurm_check.sh          # from anywhere; needs root (apt, daemons)
#
# 1. installs slurmctld, slurmd, slurm-client and munge through apt if they are missing;
# 2. writes a one-node slurm.conf in a temporary folder (two partitions: `fallback`, the cluster
#    default, and the partition under test, `snakecheck`), starts munged (unless one already
#    answers), slurmctld and slurmd, and waits until the node is idle;
# 3. copies the workflow (Snakefile, workflow/, config/, src/, profiles/) to a temporary
#    folder and runs tests/fixtures/tiny.yaml through `snakemake --workflow-profile profiles/slurm`,
#    with the partition set on the command line (the other default-resources of the profile are
#    restated, because a command-line --default-resources replaces the profile's whole block);
# 4. checks that every output exists and is up to date, that every non-local job became one
#    COMPLETED SLURM job in the test partition with the rule's threads, mem_mb and runtime
#    (scontrol and the sbatch calls in the Snakemake log), that SLURM logs exist, and that the local
#    rules (`all`, and `obtain_pums_file` on a synthetic PUMS file) never reach sbatch;
# 5. runs the audit target through the same profile: one audit job writes its folder and its record,
#    and a rerun that fails on its data leaves the folder byte for byte;
# 6. cancels leftover jobs, stops the daemons it started (by PID) and removes the temporary folder.
# Exit status 0 only if every check passed.
#
# Environment: PYTHON (interpreter with snakemake and snakemake-executor-plugin-slurm; default
# python3), SLURM_CHECK_PARTITION (snakecheck), SLURM_CHECK_JOBS (2), SLURM_CHECK_TIMEOUT (seconds
# for one Snakemake run, 3600), SLURM_CHECK_KEEP=1 (keep the temporary folder),
# SLURM_CHECK_LOCALRULES=0 (skip the obtain_pums_file part), SLURM_CHECK_PORTS ("6817 6818").
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-$(command -v python3 || command -v python)}
PARTITION=${SLURM_CHECK_PARTITION:-snakecheck}
JOBS=${SLURM_CHECK_JOBS:-2}
RUN_TIMEOUT=${SLURM_CHECK_TIMEOUT:-3600}
KEEP=${SLURM_CHECK_KEEP:-0}
CHECK_LOCALRULES=${SLURM_CHECK_LOCALRULES:-1}
read -r CTLD_PORT SLURMD_PORT <<<"${SLURM_CHECK_PORTS:-6817 6818}"
# PID files of the daemons this script started: lets a rerun stop leftovers of an interrupted run.
STATE_DIR=/tmp/disaggregated_eval_slurm_check.state
MIN_JOB_AGE=3600 # finished jobs stay visible to squeue/scontrol for an hour (plugin needs >= 120 s)
PACKAGES=(slurmctld slurmd slurm-client munge)

log() { echo "[slurm-check $(date +%H:%M:%S)] $*"; }
fail() {
    echo "[slurm-check $(date +%H:%M:%S)] FAIL: $*" >&2
    exit 1
}

[[ $(id -u) -eq 0 ]] || { echo "run as root (apt-get and the SLURM daemons need it)" >&2; exit 2; }
"$PYTHON" -c "import snakemake, snakemake_executor_plugin_slurm" 2>/dev/null ||
    { echo "$PYTHON lacks snakemake or the SLURM plugin: pip install -e \".[cluster]\"" >&2; exit 2; }

# --------------------------------------------------------------------------------------------
# Stop daemons left over by an interrupted earlier run (only PIDs this script recorded).
stop_pid() { # stop_pid PID NAME: SIGTERM, wait up to 15 s, then SIGKILL; only if /proc says NAME
    local pid=$1 name=$2
    [[ -n $pid && -r /proc/$pid/comm && $(cat "/proc/$pid/comm") == "$name" ]] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null || true
}
mkdir -p "$STATE_DIR"
for name in slurmd slurmctld munged; do
    if [[ -f $STATE_DIR/$name.pid ]]; then
        log "stopping $name left over by an earlier run (PID $(cat "$STATE_DIR/$name.pid"))"
        stop_pid "$(cat "$STATE_DIR/$name.pid")" "$name"
        rm -f "$STATE_DIR/$name.pid"
    fi
done

# --------------------------------------------------------------------------------------------
# (a) packages
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
log "Slurm $(dpkg-query -W -f='${Version}' slurmctld), munge $(dpkg-query -W -f='${Version}' munge)," \
    "snakemake $("$PYTHON" -m snakemake --version)," \
    "plugin $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("snakemake-executor-plugin-slurm"))')"

# --------------------------------------------------------------------------------------------
TMP=$(mktemp -d /tmp/slurm_check.XXXXXX)
MUNGED_PID="" CTLD_PID="" SLURMD_PID=""
export SLURM_CONF=$TMP/etc/slurm.conf

cleanup() {
    local status=$?
    set +e
    if [[ -n $CTLD_PID ]] && kill -0 "$CTLD_PID" 2>/dev/null; then
        local ids
        ids=$(squeue -h -o %i 2>/dev/null)
        if [[ -n $ids ]]; then
            log "cancelling leftover SLURM jobs: $(echo $ids)"
            scancel $ids
            for _ in $(seq 30); do [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break; sleep 1; done
        fi
    fi
    stop_pid "$SLURMD_PID" slurmd
    stop_pid "$CTLD_PID" slurmctld
    stop_pid "$MUNGED_PID" munged
    # configless slurmd's link to its config cache (only if it points into our folder)
    [[ $(readlink /run/slurm/conf 2>/dev/null) == "$TMP"/* ]] && rm -f /run/slurm/conf
    rm -f "$STATE_DIR"/{slurmd,slurmctld,munged}.pid
    if [[ $KEEP == 1 ]]; then
        log "kept $TMP"
    else
        rm -rf "$TMP"
    fi
    if ((status == 0)); then log "PASSED"; else echo "[slurm-check] FAILED (exit $status)" >&2; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --------------------------------------------------------------------------------------------
# (b) munge, slurm.conf, slurmctld, slurmd
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "munged already running: reusing it"
else
    mkdir -p /run/munge
    chown munge:munge /run/munge
    setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground \
        >"$TMP/munged.out" 2>&1 &
    MUNGED_PID=$!
    echo "$MUNGED_PID" >"$STATE_DIR/munged.pid"
    for _ in $(seq 40); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
    munge -n | unmunge >/dev/null || fail "munged does not answer ($(cat "$TMP/munged.out"))"
    log "munged started (PID $MUNGED_PID)"
fi

for port in "$CTLD_PORT" "$SLURMD_PORT"; do
    ss -Hltn "sport = :$port" | grep -q . && fail "port $port is in use (set SLURM_CHECK_PORTS)"
done

HOST=$(hostname -s)
# Node geometry exactly as slurmd sees it (a mismatch drains the node); memory below what is free.
NODE_HW=$(slurmd -C | head -1 | tr ' ' '\n' | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ')
AVAILABLE_MB=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
REAL_MB=$((AVAILABLE_MB * 8 / 10))
((REAL_MB >= 4096)) || fail "only ${AVAILABLE_MB} MB available; the profile's default jobs ask 4000 MB"
mkdir -p "$TMP"/{etc,state,spool,run,log}
cat >"$SLURM_CONF" <<EOF
ClusterName=snakecheck
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/run/slurmctld.pid
SlurmdPidFile=$TMP/run/slurmd.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
MinJobAge=$MIN_JOB_AGE
ReturnToService=2
# Configless: slurmd fetches this file from slurmctld and exposes it as /run/slurm/conf/slurm.conf.
# Needed because the jobstep plugin removes SLURM_CONF before the srun inside each job.
SlurmctldParameters=enable_configless
NodeName=$HOST NodeAddr=127.0.0.1 ${NODE_HW}RealMemory=$REAL_MB State=UNKNOWN
PartitionName=fallback Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=$PARTITION Nodes=$HOST Default=NO MaxTime=INFINITE State=UP
EOF

/usr/sbin/slurmctld -D -c -f "$SLURM_CONF" >"$TMP/log/slurmctld.out" 2>&1 &
CTLD_PID=$!
echo "$CTLD_PID" >"$STATE_DIR/slurmctld.pid"
for _ in $(seq 40); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
scontrol ping | grep -q UP || fail "slurmctld did not come up: $(tail -5 "$TMP/log/slurmctld.log")"
/usr/sbin/slurmd -D --conf-server "127.0.0.1:$CTLD_PORT" >"$TMP/log/slurmd.out" 2>&1 &
SLURMD_PID=$!
echo "$SLURMD_PID" >"$STATE_DIR/slurmd.pid"
for _ in $(seq 60); do
    [[ $(sinfo -h -p "$PARTITION" -o %t 2>/dev/null) == idle ]] && break
    sleep 1
done
[[ $(sinfo -h -p "$PARTITION" -o %t) == idle ]] ||
    fail "node not idle: $(sinfo -N -l); $(tail -5 "$TMP/log/slurmd.log")"
log "SLURM up (slurmctld PID $CTLD_PID, slurmd PID $SLURMD_PID):" \
    "$(sinfo -h -o '%P %t %c CPUs %m MB' | tr '\n' ';')"

# --------------------------------------------------------------------------------------------
# (c) the tiny workflow through the SLURM profile, in a copy of the workflow
WORK=$TMP/workflow
mkdir -p "$WORK"
for item in Snakefile workflow config src profiles; do cp -r "$REPO/$item" "$WORK/"; done
find "$WORK" -name __pycache__ -type d -prune -exec rm -rf {} +
export PYTHONPATH=$WORK/src${PYTHONPATH:+:$PYTHONPATH} # jobs import the copied library
cd "$WORK"

# The profile's default-resources plus the partition under test (a command-line
# --default-resources replaces the profile's block entirely, so its other keys are restated).
mapfile -t DEFAULT_RESOURCES < <("$PYTHON" - "$PARTITION" <<'EOF'
import sys, yaml
resources = dict(yaml.safe_load(open("profiles/slurm/profile.yaml")).get("default-resources") or {})
resources["slurm_partition"] = sys.argv[1]
for key, value in resources.items():
    print(f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}")
EOF
)
SMK=(
    "$PYTHON" -m snakemake --workflow-profile profiles/slurm
    --default-resources "${DEFAULT_RESOURCES[@]}"
    --jobs "$JOBS"
    --slurm-init-seconds-before-status-checks 5 # test turnaround; the profile keeps its value
    --slurm-keep-successful-logs                # keep .snakemake/slurm_logs for the checks
    --verbose                                   # logs each sbatch call
)
log "running: ${SMK[*]} --configfile tests/fixtures/tiny.yaml"
start=$(date +%s)
if ! timeout "$RUN_TIMEOUT" "${SMK[@]}" --configfile "$REPO/tests/fixtures/tiny.yaml" \
    >"$TMP/snakemake_tiny.log" 2>&1; then
    grep -v DEBUG "$TMP/snakemake_tiny.log" | tail -60 >&2
    fail "snakemake exited non-zero (log: $TMP/snakemake_tiny.log)"
fi
WALL=$(($(date +%s) - start))
log "tiny workflow finished in ${WALL} s"

# --------------------------------------------------------------------------------------------
# (d) checks
"$PYTHON" -m snakemake --workflow-profile none --cores 1 -n --configfile "$REPO/tests/fixtures/tiny.yaml" \
    >"$TMP/dryrun.log" 2>&1 || fail "dry run after the SLURM run failed"
grep -q "Nothing to be done" "$TMP/dryrun.log" || fail "outputs not up to date: $(tail -30 "$TMP/dryrun.log")"

"$PYTHON" -m snakemake --workflow-profile none --cores 1 --summary --configfile "$REPO/tests/fixtures/tiny.yaml" \
    >"$TMP/summary.tsv" 2>"$TMP/summary.err" || fail "snakemake --summary failed"

scontrol show job -o >"$TMP/jobs_tiny.txt" 2>/dev/null || true
"$PYTHON" - "$TMP" "$REPO/tests/fixtures/tiny.yaml" "$PARTITION" "$WALL" <<'EOF' || fail "checks failed"
import collections, pathlib, re, sys, yaml

tmp, tiny, partition, wall = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
errors = []

# every output of the DAG exists
rows = [line.split("\t") for line in (tmp / "summary.tsv").read_text().splitlines()[1:] if line.strip()]
outputs = [row[0] for row in rows]
missing = [f for f in outputs if not pathlib.Path(f).exists()]
if not outputs or missing:
    errors.append(f"missing outputs: {missing[:10]} (of {len(outputs)})")
figures = [f for f in outputs if f.startswith("figures/")]
tables = [f for f in outputs if f.startswith("results/tables/")]

# Snakemake's view: jobs per rule, sbatch calls, local rules
log = (tmp / "snakemake_tiny.log").read_text()
stats = re.search(r"Job stats:\n.*?\n-+\s+-+\n(.*?)\n\s*total\s+(\d+)", log, re.S)
planned = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats.group(1), re.M)}
local_rules = sorted(set(re.findall(r"^localrule (\w+):", log, re.M)))
sbatch_calls = re.findall(r"sbatch call: (.*)", log)
remote_planned = sum(n for rule, n in planned.items() if rule not in local_rules)
if "all" not in local_rules:
    errors.append("rule all did not run locally")
if len(sbatch_calls) != remote_planned:
    errors.append(f"{len(sbatch_calls)} sbatch calls for {remote_planned} non-local jobs")
if not re.search(r"(\d+) of \1 steps \(100%\) done", log):
    errors.append("Snakemake did not report 100% done")

# SLURM's view (scontrol keeps finished jobs for MinJobAge): one COMPLETED job per sbatch call
jobs = []
for line in (tmp / "jobs_tiny.txt").read_text().splitlines():
    fields = dict(re.findall(r"(\S+?)=(\S*)", line))
    if "JobId" in fields:
        jobs.append(fields)
if len(jobs) != len(sbatch_calls):
    errors.append(f"SLURM knows {len(jobs)} jobs, Snakemake made {len(sbatch_calls)} sbatch calls")
slurm_logs = sorted(pathlib.Path(".snakemake/slurm_logs").rglob("*.log"))
if len(slurm_logs) != len(jobs):
    errors.append(f"{len(slurm_logs)} SLURM log files for {len(jobs)} jobs")

# Expected requests: rules with `resources:` read config["resources"]["simulation"][group]
# (config/config.yaml updated by the tiny config); the others get the profile's default-resources.
def merge(base, update):
    for key, value in update.items():
        base[key] = merge(base.get(key, {}), value) if isinstance(value, dict) else value
    return base
config = merge(yaml.safe_load(open("config/config.yaml")), yaml.safe_load(open(tiny)))
defaults = yaml.safe_load(open("profiles/slurm/profile.yaml"))["default-resources"]
groups = {"fit_outcome_models": "models", "fit_weight_models": "weights",
          "compute_oracle_weights": "oracle", "bootstrap_metrics": "bootstrap"}
def expected(rule):
    if rule in groups:
        return config["resources"]["simulation"][groups[rule]]
    return {"threads": 1, "mem_mb": defaults["mem_mb"], "runtime": defaults["runtime"]}

def minutes(limit):  # D-HH:MM:SS or HH:MM:SS or MM:SS
    days, _, rest = limit.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 1440 + parts[0] * 60 + parts[1] + (parts[2] > 0)

per_rule = collections.defaultdict(list)
for job in jobs:
    rule = re.match(r"rule_(\w+?)(?:_wildcards_.*)?$", job.get("Comment", "")).group(1)
    got = {"threads": int(job["NumCPUs"]), "mem_mb": int(job["MinMemoryNode"].rstrip("M")),
           "runtime": minutes(job["TimeLimit"])}
    want = expected(rule)
    want = {k: int(want[k]) for k in ("threads", "mem_mb", "runtime")}
    per_rule[rule].append(got)
    if got != want:
        errors.append(f"job {job['JobId']} ({rule}): SLURM got {got}, expected {want}")
    if job["JobState"] != "COMPLETED" or job["ExitCode"] != "0:0":
        errors.append(f"job {job['JobId']} ({rule}): {job['JobState']} exit {job['ExitCode']}")
    if job["Partition"] != partition:
        errors.append(f"job {job['JobId']} ({rule}) ran in partition {job['Partition']}")
for call in sbatch_calls:
    rule = re.search(r"--comment '?rule_(\w+?)(?:_wildcards_\S*?)?'? ", call).group(1)
    want = expected(rule)
    flags = {"threads": rf"--cpus-per-task[= ]{want['threads']}\b", "mem_mb": rf"--mem {want['mem_mb']}\b",
             "runtime": rf"-t '?{want['runtime']}'?\b", "partition": rf"-p '?{partition}'?\b"}
    for key, pattern in flags.items():
        if not re.search(pattern, call):
            errors.append(f"sbatch call of {rule} lacks {pattern}: {call}")
for rule in local_rules:
    if rule in per_rule:
        errors.append(f"local rule {rule} was submitted to SLURM")

print(f"outputs: {len(outputs)} files ({len(tables)} tables, {len(figures)} figures), all present")
print(f"Snakemake jobs: {sum(planned.values())} ({remote_planned} via SLURM, local: {', '.join(local_rules)})")
print(f"SLURM jobs: {len(jobs)} COMPLETED in partition {partition}, {len(slurm_logs)} SLURM logs; wall time {wall} s")
print(f"{'rule':30} {'jobs':>4} {'cpus':>5} {'mem_mb':>7} {'min':>5}")
for rule, got in sorted(per_rule.items()):
    print(f"{rule:30} {len(got):4d} {got[0]['threads']:5d} {got[0]['mem_mb']:7d} {got[0]['runtime']:5d}")
print("example sbatch call:", sbatch_calls[0] if sbatch_calls else None)
if errors:
    print("\n".join(["ERRORS:"] + errors[:40]), file=sys.stderr)
    sys.exit(1)
EOF
N_TINY_JOBS=$(grep -c JobId= "$TMP/jobs_tiny.txt" || true)

# --------------------------------------------------------------------------------------------
# local rule on the cluster profile: obtain_pums_file (ACS) must run on the submitting node
if [[ $CHECK_LOCALRULES == 1 ]]; then
    log "local rule check: obtain_pums_file on a synthetic PUMS file (tests/fixtures/tiny_acs.yaml)"
    "$PYTHON" - "$REPO/tests/fixtures/tiny_acs.yaml" <<'EOF'
import sys, yaml
from disaggregated_eval import acs, synthetic_pums
c = yaml.safe_load(open(sys.argv[1]))["acs"]
path = acs.person_file_path(c["data_root"], year=c["year"], horizon=c["horizon"], state=c["state"])
synthetic_pums.write_synthetic_person_file(path, n_rows=4000, seed=11, year=c["year"])
EOF
    # the target comes before --configfile, which takes every following word as a file
    timeout "$RUN_TIMEOUT" "${SMK[@]}" results/acs/source/validation.json \
        --configfile "$REPO/tests/fixtures/tiny_acs.yaml" >"$TMP/snakemake_local.log" 2>&1 ||
        { tail -40 "$TMP/snakemake_local.log" >&2; fail "obtain_pums_file run failed"; }
    [[ -s results/acs/source/validation.json ]] || fail "results/acs/source/validation.json missing"
    grep -q "^localrule obtain_pums_file:" "$TMP/snakemake_local.log" ||
        fail "obtain_pums_file did not run as a local rule"
    if grep -q "sbatch call:" "$TMP/snakemake_local.log"; then fail "obtain_pums_file reached sbatch"; fi
    n_now=$(scontrol show job -o 2>/dev/null | grep -c JobId= || true)
    ((n_now == N_TINY_JOBS)) || fail "the local-rule run submitted $((n_now - N_TINY_JOBS)) SLURM jobs"
    log "obtain_pums_file ran locally; no SLURM job submitted"
fi

# --------------------------------------------------------------------------------------------
# the audit target on the cluster profile: one job writes its folder and its record; a rerun that fails
# on its data (a positive_label the label never takes) keeps the folder byte for byte
log "audit target: one audit job through SLURM, then a rerun that fails on its data"
"$PYTHON" - "$REPO/examples/data/compas.csv" <<'EOF'
import sys, pandas as pd, yaml
pd.read_csv(sys.argv[1]).head(600).to_csv("compas_head.csv", index=False)
run = {"file": "compas_head.csv", "label": "two_year_recid", "scores": ["compas_score"], "groups": ["race"],
       "metrics": ["false_positive_rate"], "controls": ["none"], "n_resamples": 200, "n_permutations": 30}
yaml.safe_dump({"audit": {"runs": {"race": run}}}, open("audit_good.yaml", "w"))
yaml.safe_dump({"audit": {"runs": {"race": {**run, "positive_label": 7}}}}, open("audit_bad.yaml", "w"))
EOF
AUDIT_OUT=results/audit/race/compas_score
timeout "$RUN_TIMEOUT" "${SMK[@]}" audit --configfile audit_good.yaml >"$TMP/snakemake_audit.log" 2>&1 ||
    { tail -40 "$TMP/snakemake_audit.log" >&2; fail "audit run failed"; }
grep -q "sbatch call:" "$TMP/snakemake_audit.log" || fail "the audit job did not reach sbatch"
[[ -f $AUDIT_OUT/report.html ]] || fail "$AUDIT_OUT/report.html missing"
cmp -s "$AUDIT_OUT/manifest.json" "$AUDIT_OUT.manifest.json" || fail "the job's record is not its folder's manifest"
find "$AUDIT_OUT" -type f | sort | xargs sha256sum >"$TMP/audit_before.sha"
if timeout "$RUN_TIMEOUT" "${SMK[@]}" audit --configfile audit_bad.yaml >"$TMP/snakemake_audit_bad.log" 2>&1; then
    fail "the audit that fails on its data succeeded"
fi
grep -rq "positive_label '7' does not occur" "$TMP/snakemake_audit_bad.log" .snakemake/slurm_logs ||
    fail "the failed audit's message is in neither Snakemake's nor SLURM's log"
sha256sum -c --quiet "$TMP/audit_before.sha" || fail "the failed rerun changed the earlier audit's folder"
log "audit job ran through SLURM; the failed rerun left the earlier folder byte for byte"

log "SUMMARY: tiny workflow through SLURM in ${WALL} s, ${N_TINY_JOBS} SLURM jobs, the audit target, all checks passed"
