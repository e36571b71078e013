"""proxmox_lxc_gpu's argument spec agrees with its DOCUMENTATION (the drift validate-modules would flag)."""
import re

import pytest
import yaml

from ansible.module_utils.basic import env_fallback
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuserve.sglang.plugins.module_utils import _pve_lxc_gpu
from ansible_collections.gpuserve.sglang.plugins.modules import proxmox_lxc_gpu

DOC = yaml.safe_load(proxmox_lxc_gpu.DOCUMENTATION)['options']


def spec():
    """The module's argument spec, built at test time (as the module builds it at run time)."""
    return _pve_lxc_gpu.argument_spec()


# what ansible-test's validate-modules takes for a secret-looking name (it wants no_log set explicitly there)
SECRET_NAME = re.compile(r'(?:pass(?!ive)|secret|token|key)', re.I)


def _text(option):
    desc = option.get('description', '')
    return ' '.join(desc) if isinstance(desc, list) else desc


def test_the_spec_and_the_documentation_name_the_same_options():
    assert sorted(spec()) == sorted(DOC)


@pytest.mark.parametrize('name', sorted(DOC))
def test_option_agrees_with_its_documentation(name):
    option, doc = spec()[name], DOC[name]
    assert option.get('type', 'str') == doc.get('type', 'str')
    assert option.get('elements') == doc.get('elements')
    assert option.get('default') == doc.get('default')
    assert type(option.get('default')) is type(doc.get('default'))
    assert option.get('choices') == doc.get('choices')
    assert bool(option.get('required', False)) == bool(doc.get('required', False))
    assert sorted(option.get('aliases', [])) == sorted(doc.get('aliases', []))
    assert set(option) <= {'type', 'elements', 'default', 'choices', 'required', 'aliases', 'no_log', 'fallback'}


@pytest.mark.parametrize('name', sorted(DOC))
def test_secrets_are_never_logged_and_the_rest_is(name):
    never_logged = 'Never logged' in _text(DOC[name])
    assert bool(spec()[name].get('no_log', False)) is never_logged
    if SECRET_NAME.search(name):
        # an explicit decision either way (validate-modules' no-log-needed reads a missing or None no_log as none)
        assert spec()[name].get('no_log') is not None


def test_the_secrets_are_the_password_and_the_token_secret():
    assert sorted(n for n, o in spec().items() if o.get('no_log')) == ['api_password', 'api_token_secret']


@pytest.mark.parametrize('name', sorted(DOC))
def test_environment_fallback_is_the_documented_variable(name):
    documented = re.findall(r'Falls back to E\((\w+)\)', _text(DOC[name]))
    if documented:
        assert spec()[name].get('fallback') == (env_fallback, documented)
    else:
        assert 'fallback' not in spec()[name]


def test_the_spec_validates_a_minimal_call_with_the_documented_defaults(monkeypatch):
    for var in ('PROXMOX_HOST', 'PROXMOX_PORT', 'PROXMOX_USER', 'PROXMOX_PASSWORD', 'PROXMOX_TOKEN_ID',
                'PROXMOX_TOKEN_SECRET', 'PROXMOX_CA_PATH', 'PROXMOX_VALIDATE_CERTS', 'PROXMOX_API_TIMEOUT'):
        monkeypatch.delenv(var, raising=False)
    result = ArgumentSpecValidator(spec()).validate({'vmid': '101'})
    assert not result.error_messages
    params = result.validated_parameters
    assert params['vmid'] == 101
    for name, doc in DOC.items():
        assert params[name] == doc.get('default', params[name] if name == 'vmid' else None)
    assert ArgumentSpecValidator(spec()).validate({}).error_messages == ['missing required arguments: vmid']
    assert ArgumentSpecValidator(spec()).validate({'vmid': 1, 'method': 'ssh'}).error_messages


def test_environment_fills_the_api_options(monkeypatch):
    env = {'PROXMOX_HOST': 'pve.example', 'PROXMOX_PORT': '8007', 'PROXMOX_USER': 'root@pam',
           'PROXMOX_PASSWORD': 'pw', 'PROXMOX_TOKEN_ID': 'tid', 'PROXMOX_TOKEN_SECRET': 'ts',
           'PROXMOX_CA_PATH': '/etc/ca.pem', 'PROXMOX_VALIDATE_CERTS': 'no', 'PROXMOX_API_TIMEOUT': '9'}
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    params = ArgumentSpecValidator(spec()).validate({'vmid': 1}).validated_parameters
    assert params['api_host'] == 'pve.example' and params['api_port'] == 8007 and params['api_user'] == 'root@pam'
    assert params['api_password'] == 'pw' and params['api_token_id'] == 'tid' and params['api_token_secret'] == 'ts'
    assert params['ca_path'] == '/etc/ca.pem' and params['validate_certs'] is False and params['api_timeout'] == 9
