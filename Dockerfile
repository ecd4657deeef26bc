# The image of the speedstats GitHub Action (action.yml: runs.using docker, image Dockerfile).
# Everything comes from the base image, its Ubuntu archive and PyPI, with the versions the tests use:
# the same pip steps as scripts/bootstrap.sh, under constraints.txt (the full lock).
#
# Plain Ubuntu, not an nvidia/cuda base: every CUDA library comes from the PyPI wheels (OneFlow
# bundles its own and takes cuDNN 8 and cuBLAS 11 from the nvidia-*-cu11 wheels; torch takes the
# CUDA 12.6 wheels). Only the driver's libcuda.so.1 and libnvidia-ml.so.1 come from the host, and the
# NVIDIA container runtime mounts them into a container that sets NVIDIA_VISIBLE_DEVICES. NVIDIA
# deletes end-of-life CUDA tags from Docker Hub; an Ubuntu LTS tag stays.
FROM ubuntu:22.04

# Where the image comes from; the release workflow adds its version and commit.
LABEL org.opencontainers.image.title="speedstats" \
      org.opencontainers.image.source="https://github.com/Oneflow-Inc/speedstats" \
      org.opencontainers.image.licenses="Apache-2.0"

# CPython 3.10 is Ubuntu 22.04's own python3 (oneflow 0.9.0 has wheels for CPython 3.8-3.10 only);
# ca-certificates for the https downloads of the GitHub commands. DL3008 (pin apt versions) is
# ignored on purpose: the archive keeps only the newest build of each package, so a pinned version
# stops resolving at its next security update; the Python packages, which make the figures, are
# pinned by constraints.txt.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3.10 python3.10-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# The NVIDIA runtime gives the container every GPU with compute (CUDA) and utility (NVML: the GPU's
# name, its state around each round, the driver). No NVIDIA_REQUIRE_CUDA: the pinned torch is a CUDA
# 12.6 build, but a workflow may pick another PyTorch build for its driver or GPU; `speedstats run`
# checks the driver and the GPUs against each build through NVML instead (docs/runner.md).
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN python3.10 -m venv /opt/venv

WORKDIR /opt/speedstats
# A package index to install from instead of PyPI, such as a mirror near the runners:
# `docker build --build-arg PIP_INDEX_URL=https://mirror.example/simple .` (docs/runner.md). pip reads
# it from the environment of the RUN steps below; empty, the default, is PyPI. Build arguments show in
# `docker history`: give a URL without credentials.
ARG PIP_INDEX_URL=
# The pins first, so the heavy layer is rebuilt only when they change.
COPY constraints.txt ./
COPY requirements/ requirements/
RUN pip install --quiet -c constraints.txt -r requirements/light.txt -r requirements/bench.txt \
 && pip install --quiet -c constraints.txt "setuptools<70" wheel \
 && pip install --quiet -c constraints.txt --no-build-isolation --no-deps flowvision==0.2.1 \
 && pip install --quiet -c constraints.txt "setuptools==84.2.1"

# The project itself, installed in place: it reads its suites from the package and its templates from
# /opt/speedstats/templates (a wheel carries both as package data).
COPY . .
RUN pip install --quiet -c constraints.txt --no-build-isolation --no-deps -e . \
 && speedstats --version

ENTRYPOINT ["/opt/venv/bin/python", "/opt/speedstats/docker/entrypoint.py"]
