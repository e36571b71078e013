"""The role sglang_prometheus, run by ansible-playbook against this host with a fleet inventory: the scrape config it
generates, and its rules checked and tested by promtool (Debian's prometheus package, lab/host-packages.txt) with
the fixtures of tests/fixtures/prometheus/."""
import os
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "prometheus", "rules-test.yml")
PROMTOOL = shutil.which("promtool")
INVENTORY = """
all:
  children:
    sglang:
      hosts:
        ct104: {sglang_server_gateway_worker_url: "http://10.66.0.104:30000"}
        ct102: {sglang_server_gateway_worker_url: "http://10.66.0.102:30000"}
    sglang_gateway:
      hosts:
        gw100: {sglang_gateway_settings: {prometheus_host: 10.66.0.100}}
    prometheus:
      hosts:
        localhost: {ansible_connection: local, ansible_python_interpreter: "%s"}
""" % sys.executable

pytestmark = [pytest.mark.foreign_python,  # ansible-playbook runs the collection in another process (pytest.ini)
              pytest.mark.skipif(PROMTOOL is None, reason="no promtool: lab/lab packages installs Debian's prometheus"),
              pytest.mark.skipif(os.geteuid() != 0, reason="the role writes its files owned by root: run as root")]


def run_role(tmp, collections_path, *extra):
    (tmp / "hosts.yml").write_text(INVENTORY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=collections_path)
    playbook = shutil.which("ansible-playbook") or os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return subprocess.run([playbook, "-i", str(tmp / "hosts.yml"), os.path.join(ROOT, "playbooks", "prometheus.yml"),
                           "-e", "sglang_prometheus_dir=%s" % (tmp / "etc")] + list(extra), env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, collections_path):
    tmp = tmp_path_factory.mktemp("prometheus")
    out = run_role(tmp, collections_path)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    return tmp / "etc", out.stdout


def test_a_setting_out_of_range_is_refused_naming_it_before_anything_is_written(tmp_path, collections_path):
    out = run_role(tmp_path, collections_path, "-e", '{"sglang_prometheus_accept_length_floor": 0.5}')
    assert out.returncode != 0 and not (tmp_path / "etc").exists()
    assert "sglang_prometheus_accept_length_floor is 0.5: it must be tokens per verify step, 1 or more (1.0 is a " \
           "draft never accepted). Nothing was changed." in out.stdout


def test_the_scrape_config_lists_each_replica_and_the_gateway_with_their_labels(rendered):
    etc, _out = rendered
    config = yaml.safe_load((etc / "prometheus.yml").read_text())
    assert config["rule_files"] == [str(etc / "gpuserve-rules.yml")]
    assert config["global"] == {"scrape_interval": "15s", "evaluation_interval": "15s"}
    assert config["scrape_configs"] == [
        {"job_name": "sglang", "metrics_path": "/metrics", "static_configs": [
            {"targets": ["10.66.0.104:30000"], "labels": {"replica": "ct104", "worker": "http://10.66.0.104:30000"}},
            {"targets": ["10.66.0.102:30000"], "labels": {"replica": "ct102", "worker": "http://10.66.0.102:30000"}}]},
        {"job_name": "smg", "metrics_path": "/metrics", "static_configs": [
            {"targets": ["10.66.0.100:29000"], "labels": {"gateway": "gw100"}}]}]


def test_promtool_checks_the_config_with_its_rules(rendered):
    etc, _out = rendered
    out = subprocess.run([PROMTOOL, "check", "config", str(etc / "prometheus.yml")], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0 and "SUCCESS: 7 rules found" in out.stdout, out.stdout + out.stderr


def test_promtool_tests_the_recording_and_alert_rules_with_the_fixtures(rendered):
    etc, _out = rendered
    shutil.copy(FIXTURE, etc / "rules-test.yml")
    out = subprocess.run([PROMTOOL, "test", "rules", str(etc / "rules-test.yml")], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stdout + out.stderr
