"""Session fixtures: the real OneFlow test builds (made once, kept in .cache/test-builds)."""

import pytest

import oneflow_builds


@pytest.fixture(scope="session")
def pinned_oneflow_wheel():
    return oneflow_builds.pinned_oneflow_wheel()


@pytest.fixture(scope="session")
def repacked_oneflow_wheel():
    return oneflow_builds.repacked_oneflow_wheel(local="a")


@pytest.fixture(scope="session")
def slow_oneflow_wheel():
    return oneflow_builds.slow_oneflow_wheel()
