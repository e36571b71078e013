"""Stand-in for the get-pip bootstrap that ansible-test downloads from its own file host (unreachable here: only
the package registries are). ansible-test runs it as `python get_pip_X.py [pip install options] pip==X ...` in a
fresh venv without pip; this does the same with the interpreter's own ensurepip wheel, then installs the pinned
pip from PyPI. scripts/ansible-test copies it into ansible-test's cache (~/.ansible/test/cache/get_pip_X.py)."""
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}  # get-pip's own flags, not pip's

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]))
