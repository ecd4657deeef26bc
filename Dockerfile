# The image of the speedstats GitHub Action (action.yml: runs.using docker, image Dockerfile).
# Everything comes from the base image, its Ubuntu archive and PyPI, with the versions the tests use:
# the same pip steps as scripts/bootstrap.sh, under constraints.txt (the full lock).
#
# OneFlow 0.9.0 is a CUDA 11.7 build, hence a CUDA 11.7 runtime base. The GPU itself reaches the
# container through the NVIDIA container runtime of the runner host (see README: "The runner").
FROM nvidia/cuda:11.7.1-cudnn8-runtime-ubuntu22.04

# CPython 3.10 is Ubuntu 22.04's own python3, installed with apt from the base image's distribution
# (oneflow 0.9.0 has wheels for CPython 3.8-3.10 only).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3.10 python3.10-venv \
 && rm -rf /var/lib/apt/lists/*

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN python3.10 -m venv /opt/venv

WORKDIR /opt/speedstats
# The pins first, so the heavy layer is rebuilt only when they change.
COPY constraints.txt ./
COPY requirements/ requirements/
RUN pip install --quiet -c constraints.txt -r requirements/light.txt -r requirements/bench.txt \
 && pip install --quiet -c constraints.txt "setuptools<70" wheel \
 && pip install --quiet -c constraints.txt --no-build-isolation --no-deps flowvision==0.2.1 \
 && pip install --quiet -c constraints.txt "setuptools==84.2.1"

# The project itself, installed in place; its templates and suites are package data.
COPY . .
RUN pip install --quiet -c constraints.txt --no-build-isolation --no-deps -e . \
 && speedstats --version

ENTRYPOINT ["/opt/venv/bin/python", "/opt/speedstats/docker/entrypoint.py"]
