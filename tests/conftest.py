"""Shared fixtures: the loopback fake GitHub, and the real OneFlow test builds (made once, kept in
.cache/test-builds)."""

import contextlib

import pytest

import oneflow_builds
from fakegithub import FakeGitHub


@pytest.fixture
def fake_github():
    """Starts the loopback fake GitHub of tests/fakegithub.py: fake_github(token) is a running FakeGitHub
    that accepts `token` (as github-actions[bot], with write access); a test file seeds it further in its
    own `gh` fixture. Every server it started is stopped after the test."""
    with contextlib.ExitStack() as servers:

        def start(token):
            server = servers.enter_context(FakeGitHub())
            server.add_token(token)
            return server

        yield start


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
def busy_wait_oneflow_wheel():
    """0.9.0+sgdwait40: one place (oneflow_builds.SLOWED_PLACE) busy-waits 40 ms per step."""
    return oneflow_builds.busy_wait_oneflow_wheel(40)


@pytest.fixture(scope="session")
def batchnorm_oneflow_wheel():
    """0.9.0+bnmul13: BatchNorm's forward (oneflow_builds.BATCHNORM_PLACE) multiplies its input by 1.0
    13 times."""
    return oneflow_builds.batchnorm_oneflow_wheel(13)


@pytest.fixture(scope="session")
def memory_oneflow_wheel():
    """0.9.0+mem128: holds 128 MiB more from import on."""
    return oneflow_builds.memory_oneflow_wheel(128)


@pytest.fixture(scope="session")
def oneflow_build_cache():
    """A build cache (speedstats.bench.builds' cache_dir) kept between sessions, so the heavy tests
    install each test build once per machine."""
    return oneflow_builds.BUILD_CACHE
