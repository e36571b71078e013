#!/usr/bin/python
# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r'''
module: gpu_release
short_description: Stop the processes holding the GPUs inside one container, sparing monitoring, then gate
version_added: 0.1.0
description:
  - Inside one target (this host, a Proxmox VE container through C(pct exec), or an LXC container through
    C(lxc-attach)), and only there, it
  - 0. runs O(stop_command), the server's own stop, when given;
  - 1. sends SIGTERM to processes whose command line matches O(server_patterns);
  - 2. waits up to O(grace) seconds for them to exit;
  - 3. sends SIGKILL to the process groups of survivors (to the survivor alone when its group holds a process
    that must not be killed) and to the parent of a server process left as a zombie;
  - 4. lists what still holds a device node matching O(device_globs) (globs expanded from a directory listing,
    then C(fuser PATH...)) and sends those processes SIGKILL, by PID;
  - 5. runs the same gate as M(gpuserve.sglang.gpu_memory_gate), configured by O(gate);
  - 6. runs O(start_command), the server's start, when given and the gate passed.
  - Never signals PID 1, the module itself or its ancestors, its own helper processes, O(exclude_pids), or a
    process matching O(protected_patterns) or O(extra_protected_patterns). C(fuser -k /dev/nvidia*) would kill
    monitoring daemons too; this module lists them under RV(skipped_protected) instead.
  - Reports a change only when it killed something or ran O(stop_command) or O(start_command).
extends_documentation_fragment:
  - gpuserve.sglang._attributes
  - gpuserve.sglang._target
  - gpuserve.sglang._gate.release
attributes:
  check_mode:
    support: full
    details:
      - Lists in RV(killed) what would be signalled (server processes with V(TERM), device holders with
        V(KILL)) and signals nothing. The gate reads once; memory still in use is reported, not a failure.
        O(stop_command) and O(start_command) do not run.
  diff_mode:
    support: full
    details: The diff's C(before) lists the killed processes, one C(PID cmdline) a line; C(after) is empty.
requirements:
  - In the target, C(ps) (procps), C(kill), C(ls) and C(fuser) (psmisc).
options:
  server_patterns:
    description:
      - Python regular expressions searched in each process's full command line (C(ps -o args)); a process
        matching one is a server process to stop.
      - The defaults match C(python -m sglang.launch_server), C(sglang serve) and the C(sglang::) titles
        SGLang gives its workers (C(sglang::scheduler_TP0), C(sglang::detokenizer)).
    type: list
    elements: str
    default: ['sglang\.launch_server', '(^|[\s/])sglang\s+serve(\s|$)', '^sglang::']
  protected_patterns:
    description:
      - Regular expressions searched in each command line; a matching process is never signalled, even when it
        matches O(server_patterns) or holds a device node. Replaces the defaults; see O(extra_protected_patterns)
        to add to them.
    type: list
    elements: str
    default: [nvidia-persistenced, nv-hostengine, dcgm, nvidia_gpu_exporter, node_exporter, prometheus]
  extra_protected_patterns:
    description:
      - More protected regular expressions, added to O(protected_patterns).
    type: list
    elements: str
    default: []
  exclude_pids:
    description:
      - PIDs (in the target's PID namespace) never to signal.
    type: list
    elements: int
    default: []
  command_timeout:
    description:
      - Seconds any one command in the target (C(ps), C(kill), C(ls), C(fuser)) may run before coreutils
        C(timeout) stops it; the module then fails, saying which command hung.
    type: float
    default: 30
  grace:
    description:
      - Seconds server processes get to exit after SIGTERM before SIGKILL.
    type: float
    default: 15
  grace_poll_interval:
    description:
      - Seconds between process listings while waiting out O(grace).
    type: float
    default: 0.05
  device_globs:
    description:
      - Device nodes whose holders are killed after the server processes. Absolute paths, shell wildcards in
        the last part only; directories are skipped.
    type: list
    elements: str
    default: ['/dev/nvidia*']
  kill_device_holders:
    description:
      - Whether to kill what still holds a O(device_globs) node (step 4). V(false) skips that step.
    type: bool
    default: true
  stop_command:
    description:
      - An argv run in the target before anything is signalled, e.g. C(gpuserve-sglang stop), which ends an
        idle SGLang server at once and drains a busy one (docs/server.md). A non-zero exit fails the module and
        nothing is released. Its answer is RV(stop).
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  start_command:
    description:
      - An argv run in the target once the gate passed, e.g. C(gpuserve-sglang start). Nothing runs when the
        gate fails. A non-zero exit fails the module. Its answer is RV(start).
      - With O(stop_command), a restart is one call of this module instead of three tasks.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  hook_timeout:
    description:
      - Seconds O(stop_command) and O(start_command) may each run (O(command_timeout) bounds the other
        commands); past it coreutils C(timeout) stops the command and the module fails.
    type: float
    default: 600
    version_added: 0.2.0
seealso:
  - module: gpuserve.sglang.gpu_memory_gate
author:
  - gpuserve engineers (@gpuserve)
'''

EXAMPLES = r'''
- name: Stop SGLang in CT 101 and wait for all 8 GPUs of the host to read 0 MiB
  gpuserve.sglang.gpu_release:
    target: pct
    vmid: 101
    gate:
      expected_count: 8
  register: release

- name: Show what would be killed, killing nothing
  gpuserve.sglang.gpu_release:
    target: pct
    vmid: 101
  check_mode: true

- name: On a plain GPU host, keep a custom exporter alive and give the server 30 s
  gpuserve.sglang.gpu_release:
    grace: 30
    extra_protected_patterns: ['my_gpu_probe']
    gate:
      gpus: [0, 1, 2, 3]
      backend: nvml

- name: Inside an LXC container by name, without the gate
  gpuserve.sglang.gpu_release:
    target: lxc
    container_name: sglang-a
    gate:
      enabled: false
'''

RETURN = r'''
killed:
  description: Processes signalled, in order (in check mode, those that would be).
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: PID in the target's PID namespace.
      type: int
    cmdline:
      description: Its command line.
      type: str
    signal:
      description: V(TERM) or V(KILL).
      type: str
    reason:
      description: Why, e.g. V(matches a server pattern), V(survived SIGTERM), V(holds /dev/nvidia0 ...).
      type: str
  sample: [{pid: 812, cmdline: "sglang::scheduler_TP0", signal: TERM, reason: matches a server pattern}]
skipped_protected:
  description: Processes that matched a server pattern or held a device node but were spared, with the reason
    (V(protected), V(PID 1), V(excluded), V(this module, its ancestors or its helpers)).
  returned: always
  type: list
  elements: dict
  sample: [{pid: 77, cmdline: /usr/bin/nvidia-persistenced, reason: protected}]
device_paths:
  description: Device nodes whose holders were listed.
  returned: always
  type: list
  elements: str
  sample: [/dev/nvidia0, /dev/nvidia-uvm, /dev/nvidiactl]
gate:
  description: The gate's result, as M(gpuserve.sglang.gpu_memory_gate) returns it; V(null) when disabled.
  returned: always
  type: dict
  sample: {passed: true, polls: 2, elapsed_s: 0.061, gpus: [{index: 0, used_mib: 0, total_mib: 143771}]}
timings:
  description: Seconds spent in each phase.
  returned: always
  type: dict
  contains:
    term_s:
      description: Listing, SIGTERM and the grace wait.
      type: float
    kill_s:
      description: SIGKILL to survivors and zombies' parents.
      type: float
    holders_s:
      description: Listing device holders and killing them.
      type: float
    gate_s:
      description: The gate.
      type: float
    stop_s:
      description: O(stop_command), when given.
      type: float
    start_s:
      description: O(start_command), when given.
      type: float
  sample: {stop_s: 0.31, term_s: 0.21, kill_s: 0.0, holders_s: 0.02, gate_s: 0.03, start_s: 0.4}
stop:
  description: What O(stop_command) did; in check mode only C(skipped) (V(check mode)).
  returned: when O(stop_command) is given
  type: dict
  contains:
    rc:
      description: Its exit status.
      type: int
    answer:
      description: Its standard output read as JSON; V(null) when it is not.
      type: raw
    stdout:
      description: Its standard output (the last 2000 characters).
      type: str
    stderr:
      description: Its standard error (the last 2000 characters).
      type: str
  sample: {rc: 0, answer: {how: idle, stop_s: 0.08}, stdout: '{"how": "idle", "stop_s": 0.08}', stderr: ''}
start:
  description: What O(start_command) did, as RV(stop); absent when the gate failed.
  returned: when O(start_command) is given and the gate passed
  type: dict
kill_to_pass_s:
  description: Seconds from the first signal sent to the gate passing; V(null) when nothing was signalled or
    the gate did not run.
  returned: always
  type: float
  sample: 0.26
signal_epoch:
  description: Wall-clock time (seconds since the epoch, this host's clock) just before the first signal was
    sent; V(null) when nothing was signalled. Lets an outside observer, e.g. a benchmark polling GPU memory, put
    its readings on the same time line.
  returned: always
  type: float
  sample: 1796069123.4567
gate_passed_epoch:
  description: Wall-clock time (this host's clock) when the gate passed; V(null) when it did not run or pass. With
    RV(signal_epoch), or the stop's own, an outside observer of GPU memory puts the pass on its time line.
  returned: always
  type: float
  sample: 1796069123.7
  version_added: 0.2.0
target:
  description: Where the processes were handled, e.g. V(CT 101) or V(this host).
  returned: always
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._release import RELEASE_ARGS, Release, ReleaseError
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import TARGET_ARGS, TARGET_REQUIRED_IF


def main():
    module = AnsibleModule(argument_spec=dict(**TARGET_ARGS, **RELEASE_ARGS), required_if=TARGET_REQUIRED_IF,
                           supports_check_mode=True)
    try:
        module.exit_json(**Release(module, module.params).run())
    except ReleaseError as exc:
        module.fail_json(msg=exc.msg, **(exc.result or {}))


if __name__ == '__main__':
    main()
