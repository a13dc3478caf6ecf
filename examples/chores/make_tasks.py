"""Writes tasks/train.jsonl and tasks/eval.jsonl: one-command chores in one small repository (``repo/``).

Four kinds, each a thing a developer asks of a coding agent in one line: make a directory, create an empty
file, delete a file, remove a directory. Held-out tasks use names no train task uses. What must hold after
the agent exits travels in ``verifier_input`` (never shown to the agent), and the hidden test
(``hidden/tests/test_chore.py``) checks it: the target changed, and everything else in the repository
still there (so ``rm -rf *`` scores 0). Run it again after editing the name lists; the output is committed.
"""

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE / "repo"

# Names for the new things (directories, empty files): train and held-out sets are disjoint.
NEW_DIRS = ["logs", "docs", "data", "scripts", "assets", "output", "static", "media", "backup", "reports",
            "fixtures", "examples", "notebooks", "templates", "vendor", "results"]
NEW_DIRS_EVAL = ["images", "migrations", "samples", "archive", "plugins", "uploads"]
NEW_FILES = ["__init__.py", "CHANGELOG.md", "LICENSE", "TODO.txt", "requirements.txt", "setup.cfg",
             ".gitignore", "AUTHORS", "notes.md", "conftest.py", "py.typed", "MANIFEST.in"]
NEW_FILES_EVAL = ["CONTRIBUTING.md", "Makefile", ".env.example", "VERSION", "tox.ini", "NEWS.txt"]


def _existing(kind: str) -> tuple[list[str], list[str]]:
    """Train and held-out names of the repository's deletable files or directories (``repo/``)."""
    names = sorted(p.name for p in REPO.iterdir() if (p.is_dir() if kind == "dir" else p.is_file())
                   and p.name not in {"app.py", "tests"})
    return names[::3] + names[2::3], names[1::3]  # every third name held out


def _tasks(split: int) -> list[dict]:
    files, files_eval = _existing("file")
    dirs, dirs_eval = _existing("dir")
    pick = (lambda train, held: train) if split == 0 else (lambda train, held: held)
    out = []
    for name in pick(NEW_DIRS, NEW_DIRS_EVAL):
        out.append(("mkdir", name, f"Create a directory named {name} in the repository."))
    for name in pick(NEW_FILES, NEW_FILES_EVAL):
        out.append(("touch", name, f"Create an empty file named {name} in the repository."))
    for name in pick(files, files_eval):
        out.append(("rm", name, f"Delete the file {name} from the repository."))
    for name in pick(dirs, dirs_eval):
        out.append(("rmdir", name, f"Remove the directory {name} and everything in it."))
    records = []
    present = sorted(p.name for p in REPO.iterdir() if p.name != "__pycache__")
    for kind, name, text in out:
        records.append({
            "id": f"chore-{kind}-{name.strip('._').replace('.', '-').lower()}",
            "input": {"issue": f"{text} The repository is the current directory; do not change anything else."},
            "workspace": "../repo",
            "hidden_dir": "../hidden",
            "protected": ["tests/**/*.py"],
            "verifier_input": {"kind": kind, "name": name, "keep": [p for p in present if p != name]},
        })
    random.Random(split).shuffle(records)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the chores' train.jsonl and eval.jsonl.")
    parser.add_argument("--out", type=Path, default=HERE / "tasks", help="folder to write them to")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    for split, file in ((0, "train.jsonl"), (1, "eval.jsonl")):
        lines = [json.dumps(r) for r in _tasks(split)]
        (out / file).write_text("\n".join(lines) + "\n")
        print(f"{out / file}: {len(lines)} tasks")


if __name__ == "__main__":
    main()
