# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""community.proxmox.proxmox_pct_remote with pipelining: a module runs in one `pct exec` instead of five."""
from __future__ import annotations

DOCUMENTATION = r'''
name: pct_remote
short_description: community.proxmox.proxmox_pct_remote, with Ansible pipelining
version_added: 0.1.0
author: gpuserve engineers (@gpuserve)
requirements:
  - paramiko
  - community.proxmox >= 2.0.0
description:
  - Runs commands in a Proxmox VE LXC container exactly as C(community.proxmox.proxmox_pct_remote) does (SSH to
    the PVE host with paramiko, then C(/usr/sbin/pct exec VMID -- ...)); it is that plugin, subclassed.
  - It declares pipelining support (next paragraph), and runs a command once more when C(pct exec) failed
    before it attached to the container, because LXC's C(lxc-attach) could not re-execute itself from a sealed
    memfd (C(Failed to rexec as memfd) on stderr). The command never ran then, so the second run is its only one.
  - With pipelining on (C(pipelining = True) under
    C([connection]) in ansible.cfg, or C(ANSIBLE_PIPELINING=true)), a module travels on the standard input of
    one C(pct exec) instead of being copied into the container, made executable, run and removed in five.
    Measured in the lab, a no-change task costs about a third of the time.
  - The options below are the parent plugin's, copied so Ansible can read them (a plugin's options must be a
    literal in its own file); a unit test fails when they drift from the installed community.proxmox.
options:
  remote_addr:
    description:
      - Address of the remote target.
    default: inventory_hostname
    type: string
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_ssh_host
      - name: ansible_paramiko_host
  port:
    description: Remote port to connect to.
    type: int
    default: 22
    ini:
      - section: defaults
        key: remote_port
      - section: paramiko_connection
        key: remote_port
    env:
      - name: ANSIBLE_REMOTE_PORT
      - name: ANSIBLE_REMOTE_PARAMIKO_PORT
    vars:
      - name: ansible_port
      - name: ansible_ssh_port
      - name: ansible_paramiko_port
    keyword:
      - name: port
  remote_user:
    description:
      - User to login/authenticate as.
      - Can be set from the CLI via the C(--user) or C(-u) options.
    type: string
    vars:
      - name: ansible_user
      - name: ansible_ssh_user
      - name: ansible_paramiko_user
    env:
      - name: ANSIBLE_REMOTE_USER
      - name: ANSIBLE_PARAMIKO_REMOTE_USER
    ini:
      - section: defaults
        key: remote_user
      - section: paramiko_connection
        key: remote_user
    keyword:
      - name: remote_user
  password:
    description:
      - Secret used to either login the SSH server or as a passphrase for SSH keys that require it.
      - Can be set from the CLI via the C(--ask-pass) option.
    type: string
    vars:
      - name: ansible_password
      - name: ansible_ssh_pass
      - name: ansible_ssh_password
      - name: ansible_paramiko_pass
      - name: ansible_paramiko_password
  use_rsa_sha2_algorithms:
    description:
      - Whether or not to enable RSA SHA2 algorithms for pubkeys and hostkeys.
      - On paramiko versions older than 2.9, this only affects hostkeys.
      - For behavior matching paramiko<2.9 set this to V(false).
    vars:
      - name: ansible_paramiko_use_rsa_sha2_algorithms
    ini:
      - {key: use_rsa_sha2_algorithms, section: paramiko_connection}
    env:
      - {name: ANSIBLE_PARAMIKO_USE_RSA_SHA2_ALGORITHMS}
    default: true
    type: boolean
  host_key_auto_add:
    description: "Automatically add host keys to C(~/.ssh/known_hosts)."
    env:
      - name: ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD
    ini:
      - key: host_key_auto_add
        section: paramiko_connection
    type: boolean
  look_for_keys:
    default: True
    description: "Set to V(false) to disable searching for private key files in C(~/.ssh/)."
    env:
      - name: ANSIBLE_PARAMIKO_LOOK_FOR_KEYS
    ini:
      - {key: look_for_keys, section: paramiko_connection}
    type: boolean
  proxy_command:
    default: ""
    description:
      - Proxy information for running the connection via a jumphost.
    type: string
    env:
      - name: ANSIBLE_PARAMIKO_PROXY_COMMAND
    ini:
      - {key: proxy_command, section: paramiko_connection}
    vars:
      - name: ansible_paramiko_proxy_command
  pty:
    default: True
    description: "C(sudo) usually requires a PTY, V(true) to give a PTY and V(false) to not give a PTY."
    env:
      - name: ANSIBLE_PARAMIKO_PTY
    ini:
      - section: paramiko_connection
        key: pty
    type: boolean
  record_host_keys:
    default: True
    description: "Save the host keys to a file."
    env:
      - name: ANSIBLE_PARAMIKO_RECORD_HOST_KEYS
    ini:
      - section: paramiko_connection
        key: record_host_keys
    type: boolean
  host_key_checking:
    description: "Set this to V(false) if you want to avoid host key checking by the underlying tools Ansible uses to connect to the host."
    type: boolean
    default: true
    env:
      - name: ANSIBLE_HOST_KEY_CHECKING
      - name: ANSIBLE_SSH_HOST_KEY_CHECKING
      - name: ANSIBLE_PARAMIKO_HOST_KEY_CHECKING
    ini:
      - section: defaults
        key: host_key_checking
      - section: paramiko_connection
        key: host_key_checking
    vars:
      - name: ansible_host_key_checking
      - name: ansible_ssh_host_key_checking
      - name: ansible_paramiko_host_key_checking
  use_persistent_connections:
    description: "Toggles the use of persistence for connections."
    type: boolean
    default: False
    env:
      - name: ANSIBLE_USE_PERSISTENT_CONNECTIONS
    ini:
      - section: defaults
        key: use_persistent_connections
  forward_agent:
    description: "Enable SSH agent forwarding."
    type: boolean
    default: False
    env:
      - name: ANSIBLE_PARAMIKO_FORWARD_AGENT
    ini:
      - section: paramiko_connection
        key: forward_agent
  banner_timeout:
    type: float
    default: 30
    description:
      - Configures, in seconds, the amount of time to wait for the SSH
        banner to be presented. This option is supported by paramiko
        version 1.15.0 or newer.
    ini:
      - section: paramiko_connection
        key: banner_timeout
    env:
      - name: ANSIBLE_PARAMIKO_BANNER_TIMEOUT
  timeout:
    type: int
    default: 10
    description: Number of seconds until the plugin gives up on failing to establish a TCP connection.
    ini:
      - section: defaults
        key: timeout
      - section: ssh_connection
        key: timeout
      - section: paramiko_connection
        key: timeout
    env:
      - name: ANSIBLE_TIMEOUT
      - name: ANSIBLE_SSH_TIMEOUT
      - name: ANSIBLE_PARAMIKO_TIMEOUT
    vars:
      - name: ansible_ssh_timeout
      - name: ansible_paramiko_timeout
    cli:
      - name: timeout
  lock_file_timeout:
    type: int
    default: 60
    description: Number of seconds until the plugin gives up on trying to write a lock file when writing SSH known host keys.
    vars:
      - name: ansible_lock_file_timeout
    env:
      - name: ANSIBLE_LOCK_FILE_TIMEOUT
  private_key_file:
    description:
      - Path to private key file to use for authentication.
    type: string
    ini:
      - section: defaults
        key: private_key_file
      - section: paramiko_connection
        key: private_key_file
    env:
      - name: ANSIBLE_PRIVATE_KEY_FILE
      - name: ANSIBLE_PARAMIKO_PRIVATE_KEY_FILE
    vars:
      - name: ansible_private_key_file
      - name: ansible_ssh_private_key_file
      - name: ansible_paramiko_private_key_file
    cli:
      - name: private_key_file
        option: "--private-key"
  vmid:
    description:
      - LXC Container ID
    type: int
    vars:
      - name: proxmox_vmid
  proxmox_become_method:
    description:
      - Become command used in proxmox
    type: str
    default: sudo
    vars:
      - name: proxmox_become_method
'''

EXAMPLES = r'''
# inventory: the container, reached through its PVE host
# ct101:
#   ansible_connection: gpuserve.sglang.pct_remote
#   ansible_host: pve1.example.com
#   ansible_user: root
#   proxmox_vmid: 101
# ansible.cfg:
# [connection]
# pipelining = True
'''

from ansible_collections.community.proxmox.plugins.connection.proxmox_pct_remote import (
    Connection as PctRemoteConnection, display)

# LXC 5's lxc-attach first re-executes itself from a sealed memfd (src/lxc/rexec.c). Sealing can fail with EBUSY
# while the kernel still pins the copied pages; lxc-attach then exits before it attaches, so the command never ran
# in the container. Seen once in the lab (stderr "Device or resource busy - Failed to rexec as memfd").
REXEC_FAILED = b'Failed to rexec as memfd'


class Connection(PctRemoteConnection):
    """The parent's exec_command already streams in_data to `pct exec` and closes stdin: that is all pipelining
    needs. (Without has_pipelining, Ansible copies each module into the container first.)"""

    transport = 'gpuserve.sglang.pct_remote'
    has_pipelining = True

    def exec_command(self, cmd, in_data=None, sudoable=True):
        # The parent asks for a pty on sudoable commands; a pty never passes on the end of stdin, so a
        # pipelined module (sent on stdin) would wait for it forever. No pty when there is stdin to send.
        result = super().exec_command(cmd, in_data=in_data, sudoable=sudoable and in_data is None)
        rc, out, err = result
        if rc != 0 and not out and REXEC_FAILED in (err or b''):
            # lxc-attach failed before attaching: nothing ran, so running it once more is safe
            display.warning('pct exec failed before it attached (%s); running the command once more'
                            % err.decode('utf-8', 'replace').strip().splitlines()[0])
            result = super().exec_command(cmd, in_data=in_data, sudoable=sudoable and in_data is None)
        return result
