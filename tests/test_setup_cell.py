"""The chapters' setup cell, run as Colab runs it, without network: a failed clone or a bad
CIPHERLAB_SOURCE ends in one line that says what failed and what to do (not an ImportError cells
later), and where cipherlab already imports it installs nothing. Also the release check."""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from cipherbook.viva import REPO_ROOT, repository, setup_cell_source

URL, TAG = repository()

# Runs the cell the way a kernel does (IPython's shell; plain exec with --plain), with cipherlab
# made unimportable when asked, and records every command the cell starts.
HARNESS = r"""
import json, subprocess, sys
mode, cell_path, calls_path = sys.argv[1:4]
calls = []
_run = subprocess.run
def run(command, *args, **kwargs):
    calls.append(list(map(str, command)))
    return _run(command, *args, **kwargs)
subprocess.run = run
if "missing" in mode:
    class Missing:  # the Colab case: no cipherlab installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "cipherlab":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Missing())
source = open(cell_path).read()
try:
    if "plain" in mode:
        exec(compile(source, "setup-cell", "exec"), {"__name__": "__main__"})
    else:
        from IPython.core.interactiveshell import InteractiveShell
        InteractiveShell.instance(colors="nocolor").run_cell(source)
finally:
    json.dump(calls, open(calls_path, "w"))
"""


def run_cell(tmp_path, mode="missing", source=None, env=None, path_prefix=None):
    """(output, commands started) of the setup cell run in a fresh interpreter in an empty folder."""
    work = tmp_path / "content"
    work.mkdir(exist_ok=True)
    cell = setup_cell_source()
    if source is not None:
        cell = cell.replace('CIPHERLAB_SOURCE = ""', f"CIPHERLAB_SOURCE = {source!r}", 1)
    (tmp_path / "cell.py").write_text(cell, encoding="utf-8")
    (tmp_path / "harness.py").write_text(HARNESS, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if k not in ("CIPHERLAB_SOURCE", "VIRTUAL_ENV")}  # an outside venv too
    if path_prefix:
        environ["PATH"] = f"{path_prefix}{os.pathsep}{environ['PATH']}"
    environ.update(env or {})
    done = subprocess.run([sys.executable, str(tmp_path / "harness.py"), mode, str(tmp_path / "cell.py"),
                           str(tmp_path / "calls.json")], cwd=work, env=environ, capture_output=True,
                          text=True, timeout=120)
    calls = json.loads((tmp_path / "calls.json").read_text())
    return done.stdout + done.stderr, calls


def failure_line(output: str) -> str:
    lines = [line[line.index("cipherlab setup failed:"):] for line in output.splitlines()
             if "cipherlab setup failed:" in line]
    assert len(lines) == 1, output
    assert "To fix: set CIPHERLAB_SOURCE" in lines[0]
    return lines[0]


def assert_no_pip(calls):
    assert not any("pip" in command for command in calls), calls


@pytest.fixture
def failing_git(tmp_path):
    """A `git` on PATH that fails the way a clone of a missing tag does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git = bin_dir / "git"
    git.write_text("#!/bin/sh\necho \"Cloning into '$7'...\" >&2\n"
                   f"echo 'fatal: Remote branch {TAG} not found in upstream origin' >&2\nexit 128\n")
    git.chmod(0o755)
    return bin_dir


@pytest.mark.skipif(os.name != "posix", reason="a shell-script git")
@pytest.mark.parametrize("mode", ["missing", "missing-plain"])
def test_a_failed_clone_of_the_release_ends_in_one_line_naming_url_tag_and_fix(tmp_path, failing_git, mode):
    output, calls = run_cell(tmp_path, mode, path_prefix=failing_git)
    line = failure_line(output)
    assert f"git clone --branch {TAG} {URL} failed (fatal: Remote branch {TAG} not found" in line
    assert calls == [["git", "clone", "--depth", "1", "--branch", TAG, URL, str(tmp_path / "content" / f"cipherlab-{TAG}")]]
    assert_no_pip(calls)
    assert "ModuleNotFoundError" not in output and "ImportError" not in output, output
    if mode == "missing":  # in a kernel: the one line, no traceback
        assert "Traceback" not in output, output
    else:  # plain Python: the traceback ends with that line, not with an ImportError
        assert output.strip().splitlines()[-1].endswith(line), output


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_url_that_does_not_clone_fails_with_gits_reason(tmp_path):
    """The environment variable is the same setting as the cell's variable; real git, a local URL."""
    url = (tmp_path / "no-such-repo.git").as_uri()
    output, calls = run_cell(tmp_path, env={"CIPHERLAB_SOURCE": url + "#main"})
    line = failure_line(output)
    assert f"git clone --branch main {url} failed (fatal:" in line
    assert_no_pip(calls)
    assert "Traceback" not in output


def test_a_source_that_is_no_folder_archive_or_url_is_named(tmp_path):
    output, calls = run_cell(tmp_path, source=str(tmp_path / "not-there"))
    assert f"CIPHERLAB_SOURCE='{tmp_path / 'not-there'}' is neither a folder" in failure_line(output)
    assert calls == []


def test_a_folder_or_archive_without_cipherlab_is_named(tmp_path):
    folder = tmp_path / "MyDrive" / "notes"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("not the repository")
    output, calls = run_cell(tmp_path, source=str(folder))
    assert f"{folder} holds no cipherlab source" in failure_line(output) and calls == []
    archive = tmp_path / "upload.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="notes")
    output, calls = run_cell(tmp_path, source=str(archive))
    assert "upload-unpacked holds no cipherlab source" in failure_line(output) and calls == []
    assert (tmp_path / "content" / "upload-unpacked" / "notes" / "README.md").is_file()


def test_where_cipherlab_imports_the_cell_installs_nothing(tmp_path, failing_git):
    """A local checkout: no clone, no pip, just the device, as before; a source set says it is unused."""
    output, calls = run_cell(tmp_path, "present", path_prefix=failing_git)
    assert calls == [] and "torch" in output.splitlines()[-1] and "cipherlab" not in output, output
    output, calls = run_cell(tmp_path, "present", env={"CIPHERLAB_SOURCE": str(tmp_path / "mine")})
    assert calls == [] and "so CIPHERLAB_SOURCE is not used" in output
    assert list((tmp_path / "content").iterdir()) == []


def test_the_cell_installs_with_the_kernels_pip_and_needs_no_restart():
    source = setup_cell_source()
    assert f"git clone --depth 1 --branch {TAG} {URL}" in source and '\nCIPHERLAB_SOURCE = ""\n' in source
    assert '[sys.executable, "-m", "pip", "install"' in source and not re.search(r"^\s*[!%]", source, re.M)  # no shell or magic lines
    assert "sys.path.insert(0, str(root))" in source and "Restart session" in source


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_release_check_fails_until_the_tag_is_on_the_remote(tmp_path):
    import tomllib

    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    remote = tmp_path / "remote.git"
    quiet = {"capture_output": True, "check": True}
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], **quiet)
    check = [str(REPO_ROOT / "tools" / "release.sh"), "--check", "--url", str(remote)]
    done = subprocess.run(check, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 1
    assert done.stderr.strip() == (f"release: tag {TAG} is not at {remote}: push it (tools/release.sh) before "
                                   "publishing the book; until then every setup cell's clone fails")
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", str(work)], **quiet)
    (work / "pyproject.toml").write_text(f'[project]\nname = "cipherlab"\nversion = "{version}"\n')
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(work), "add", "pyproject.toml"], **quiet)
    subprocess.run(["git", "-C", str(work), *ident, "commit", "-q", "-m", "r"], **quiet)
    subprocess.run(["git", "-C", str(work), *ident, "tag", "-a", TAG, "-m", "r"], **quiet)
    subprocess.run(["git", "-C", str(work), "push", "-q", str(remote), f"refs/tags/{TAG}"], **quiet)
    done = subprocess.run(check, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr
    assert f"{TAG} is at {remote}" in done.stdout
