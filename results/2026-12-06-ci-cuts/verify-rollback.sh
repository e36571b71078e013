#!/usr/bin/env bash
# molecule default's verify as main has it (with the rollback play) and as ci-time has it (without), each on the
# deployed lab's CT 101 (ansible-playbook, as molecule runs it: inventory/lab), then the lab test that now carries
# the rollback's assertions (lane faults, CT 103). Run as root from the worktree, under the lab lock, on a lab
# scripts/deploy left up (deploys first if CT 101 is not deployed).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=/work/main/.venv/bin:$PATH ANSIBLE_CONFIG=$PWD/ansible.cfg GPUSERVE_VENV=/work/main/.venv
if ! lab/lab status >/dev/null 2>&1 || ! pct exec 101 -- test -f /var/lib/gpuserve/sglang-manifest.json; then
  echo "--- scripts/deploy (the lab was not deployed)"; scripts/deploy >/tmp/ci-cuts-deploy.log 2>&1
fi
git show main:molecule/default/verify.yml > molecule/default/verify-main.yml
trap 'rm -f molecule/default/verify-main.yml' EXIT
for v in verify-main verify; do
  /usr/bin/time -f "molecule default $v.yml: wall %e s, controller user %U s sys %S s" \
    ansible-playbook -i inventory/lab molecule/default/$v.yml > /tmp/ci-cuts-$v.log 2>&1 || { tail -40 /tmp/ci-cuts-$v.log; exit 1; }
done
GPUSERVE_LANE=faults /usr/bin/time -f "faults: test_bad_settings rolled_back_in_seconds (CT 103 from the image if absent): wall %e s" \
  pytest -m lab -q -p no:cacheprovider tests/lab/test_bad_settings.py -k rolled_back_in_seconds --durations=3 2>&1 | tail -12
