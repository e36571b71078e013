"""sglang_bench_run through its entry point in check mode: the preflight path (find, import, local files).

run_command is not patched: the module runs the real client driver (its source on stdin) with this interpreter
against a made-up sglang package (fake_sglang), so the argv, the environment and the message parsing are all
exercised.
The measured path needs a server and runs in tests/lab/test_benchmark.py.
"""
import json
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.modules import sglang_bench_run


def run(capsys, args):
    """The module in check mode; returns its result (failed=True on fail_json)."""
    with patch_module_args(dict(args, _ansible_check_mode=True)), pytest.raises(SystemExit):
        sglang_bench_run.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def files(tmp_path):
    (tmp_path / 'dataset.json').write_text('[]')
    (tmp_path / 'tok').mkdir()
    # nothing listens here: check mode must not contact the server
    return dict(python=sys.executable, dataset_path=str(tmp_path / 'dataset.json'), tokenizer=str(tmp_path / 'tok'),
                output_prefix=str(tmp_path / 'v0'), base_url='http://127.0.0.1:9')


def test_preflight_imports_the_client_and_returns_the_plan(capsys, tmp_path, files, fake_sglang, monkeypatch):
    site = fake_sglang(tmp_path / 'ok', {'sglang.benchmark.serving': (
        "import os, sys\nprint('banner')\n"
        "assert os.environ['HF_HUB_OFFLINE'] == '1', 'imported without the offline variables'\n")})
    monkeypatch.setenv('PYTHONPATH', site)
    out = run(capsys, dict(files, import_client=True))
    assert not out.get('failed'), out
    assert out['client_module'] == 'sglang.benchmark.serving'
    (only,) = out['plan']
    assert only['label'] == 'repeat 0 c=1' and only['argv'][:2] == ['--backend', 'sglang']
    # the client reads the dataset the driver writes with the chat template applied
    templated = files['output_prefix'] + '-dataset.json'
    assert ' '.join(only['argv']).count('--dataset-name sharegpt --dataset-path %s' % templated) == 1
    assert 'server' not in out and 'runs' not in out


def test_preflight_fails_with_the_clients_import_error(capsys, tmp_path, files, fake_sglang, monkeypatch):
    site = fake_sglang(tmp_path / 'bad', {'sglang.benchmark.serving': "import warnings\n"
                                          "warnings.warn('a warning before the error')\n"
                                          "raise ImportError('no torchvision (test)')\n"})
    monkeypatch.setenv('PYTHONPATH', site)
    out = run(capsys, dict(files, import_client=True))
    assert out.get('failed') is True
    assert out['msg'] == ("SGLang's benchmark client: sglang.benchmark.serving does not import in %s: ImportError: "
                          "no torchvision (test) (install what it needs into that venv)" % sys.prefix)
    # without import_client the file is found and nothing is imported
    out = run(capsys, files)
    assert not out.get('failed') and out['client_module'] == 'sglang.benchmark.serving'


def test_an_explicit_client_is_checked_too_and_missing_files_fail(capsys, tmp_path, files, fake_sglang, monkeypatch):
    monkeypatch.setenv('PYTHONPATH', fake_sglang(tmp_path / 'old', {'sglang.bench_serving': ''}))
    out = run(capsys, dict(files, import_client=True, client_module='sglang.benchmark.serving'))
    assert out.get('failed') is True and "no benchmark client (sglang.benchmark.serving) in " in out['msg']
    out = run(capsys, dict(files, import_client=True))
    assert not out.get('failed') and out['client_module'] == 'sglang.bench_serving'
    out = run(capsys, dict(files, dataset_path=str(tmp_path / 'absent.json')))
    assert out.get('failed') is True and out['msg'] == "dataset %s does not exist on the target (no hub downloads)" % (
        tmp_path / 'absent.json')
