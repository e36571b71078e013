"""A real git tree, committed once, for the tests of what reads "which commit, which changes" in the container
(_git_tree's callers: sglang_install_info, the helper's state, source and validate-args record)."""
import subprocess


def commit_tree(src, files):
    """Makes the folder src (a pathlib.Path) a git repository with `files` ({name: text}) committed once; returns
    (the git argv prefix to run more commands in it, with an identity; the commit's sha)."""
    src.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(src), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    for name, text in files.items():
        (src / name).write_text(text)
    subprocess.run(git + ["add"] + list(files), check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return git, head
