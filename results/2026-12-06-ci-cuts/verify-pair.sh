#!/usr/bin/env bash
# molecule default's verify.yml as main has it, then as ci-time has it, back to back on the deployed lab's CT 101
# (ansible-playbook with inventory/lab, as molecule runs it), nothing else of ours running. Under the lab lock.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=/work/main/.venv/bin:$PATH ANSIBLE_CONFIG=$PWD/ansible.cfg
git show main:molecule/default/verify.yml > molecule/default/verify-main.yml
trap 'rm -f molecule/default/verify-main.yml' EXIT
for v in verify-main verify; do
  /usr/bin/time -o /tmp/ci-cuts-time-$v -f "molecule default $v.yml: wall %e s, controller user %U s sys %S s" \
    ansible-playbook -i inventory/lab molecule/default/$v.yml > "results/2026-12-06-ci-cuts/run2-$v.log" 2>&1
  cat /tmp/ci-cuts-time-$v
done
