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


@pytest.fixture(scope="session")
def oneflow_build_cache():
    """A build cache (speedstats.bench.builds' cache_dir) kept between sessions, so the heavy tests
    install each test build once per machine."""
    return oneflow_builds.BUILD_CACHE
