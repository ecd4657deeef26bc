"""Real, distinct OneFlow builds made from the pinned PyPI wheel, for heavy tests and benchmarks.

- pinned_oneflow_wheel: oneflow==0.9.0 for CPython 3.10, as PyPI has it.
- repacked_oneflow_wheel: the same code under the local version 0.9.0+<local>.
- slow_oneflow_wheel: 0.9.0+slow, whose Conv2d computes each forward convolution again and discards
  it (twice for kernels larger than 1x1), so a ResNet50 training step does proportionally more work.
- slowdown_oneflow_wheel(percent): 0.9.0+slowPERCENT, a slowdown you can set: each Conv2d forward also
  computes, and discards, the convolution with a share of its filters, so the extra work is
  proportional to the step (no sleep). The share is percent / PERCENT_PER_EXTRA_FORWARD of a whole
  forward convolution: a nominal figure, which benchmarks/power_curve.py measures.
- busy_wait_oneflow_wheel(ms, drain): 0.9.0+sgdwaitMS, one place slowed: SGD.step busy-waits MS
  milliseconds in its own frame, once per training step (for the attribution of where a head got
  slower); with drain, 0.9.0+sgddrainMS, it first waits for OneFlow's queue, so the step is slower.
- batchnorm_oneflow_wheel(extra): 0.9.0+bnmulEXTRA, a BatchNorm whose forward multiplies its input by 1.0
  EXTRA times before normalizing it (elementwise ops queued as a kernel-side change would queue them):
  BATCHNORM_PLACE dispatches EXTRA more `mul` per call, and the step is slower on the device, not in Python.
- memory_oneflow_wheel(mib): 0.9.0+memMIB, which allocates MIB MiB at import and keeps it, every page
  written, so the process holds that much more resident memory and nothing else changes.

Each is made once into <repo>/.cache/test-builds/ (ignored by git): work happens in a temporary
folder that is renamed into place when finished, under a file lock, so a finished folder is always
whole and two processes never make the same build at once. Plain functions, so benchmarks/ can load
this file by path.
"""

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ONEFLOW_VERSION = "0.9.0"
DEFAULT_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "test-builds"
# Where tests and benchmarks install these builds (the cache_dir of speedstats.bench.builds).
BUILD_CACHE = DEFAULT_CACHE / "installed"

_CONV2D_FORWARD = "    def forward(self, x):\n        return self._conv_forward(x, self.weight, self.bias)\n"
_SLOW_CONV2D_FORWARD = (
    "    def forward(self, x):\n"
    "        # Test build 0.9.0+slow: the convolution is computed again and discarded, twice for a\n"
    "        # kernel larger than 1x1, once for a 1x1 kernel.\n"
    "        with flow.no_grad():\n"
    "            for _ in range(1 if tuple(self.kernel_size) == (1, 1) else 2):\n"
    "                self._conv_forward(x, self.weight, self.bias)\n"
    "        return self._conv_forward(x, self.weight, self.bias)\n"
)


# One more whole forward convolution in every Conv2d makes a ResNet50 training step about this many
# percent slower on the CPU at batch 2, 3x64x64 (0.9.0+slow's 2 extra for 3x3 and 1 for 1x1 kernels
# measured +24 to +37%; a forward is about a third of a step, and 3x3 kernels most of its work).
PERCENT_PER_EXTRA_FORWARD = 20.0
_SHARED_CONV2D_FORWARD = (
    "    def forward(self, x):\n"
    "        # Test build 0.9.0+slow{percent}: a share of the convolution ({extra:g} of a whole one) is\n"
    "        # computed again and discarded, so the step does proportionally more work.\n"
    "        with flow.no_grad():\n"
    "            extra = {extra!r}\n"
    "            while extra > 1e-9:\n"
    "                share = min(extra, 1.0)\n"
    "                filters = self.weight.shape[0]\n"
    "                kept = filters if self.groups != 1 else max(1, int(round(share * filters)))\n"
    "                self._conv_forward(x, self.weight[:kept], None)\n"
    "                extra -= share\n"
    "        return self._conv_forward(x, self.weight, self.bias)\n"
)


def _log(message):
    print(f"test builds: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _locked(cache, name):
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _finished_wheel(folder):
    """The one wheel in a finished folder, or None."""
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if len(wheels) == 1 and zipfile.is_zipfile(wheels[0]):
        return wheels[0]
    return None


def _make_once(cache, name, make):
    """cache/name/<the wheel>, made by make(tmp_folder) unless already there."""
    cache = Path(cache)
    folder = cache / name
    wheel = _finished_wheel(folder)
    if wheel:
        return wheel
    with _locked(cache, name):
        wheel = _finished_wheel(folder)
        if wheel:
            return wheel
        if folder.exists():
            shutil.rmtree(folder)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=cache))
        try:
            start = time.monotonic()
            make(tmp)
            for leftover in tmp.iterdir():
                if leftover.suffix != ".whl":
                    shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
            if _finished_wheel(tmp) is None:
                raise RuntimeError(f"making {name} left no wheel")
            os.rename(tmp, folder)
            _log(f"made {name} in {time.monotonic() - start:.0f}s")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return _finished_wheel(folder)


def _run(command):
    result = subprocess.run(command, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{result.stdout[-3000:]}")


def pinned_oneflow_wheel(cache=DEFAULT_CACHE, python=sys.executable):
    """The PyPI wheel oneflow==0.9.0 for CPython 3.10 (pip's cache makes a second download fast)."""

    def download(tmp):
        _log(f"downloading oneflow=={ONEFLOW_VERSION}")
        _run([python, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
              "--python-version", "3.10", "--disable-pip-version-check", "-d", str(tmp),
              f"oneflow=={ONEFLOW_VERSION}"])

    return _make_once(cache, "pinned", download)


def _repack(cache, name, local, edit, python):
    pinned = pinned_oneflow_wheel(cache, python)

    def repack(tmp):
        _log(f"repacking {pinned.name} as {ONEFLOW_VERSION}+{local} (takes minutes)")
        _run([python, "-m", "wheel", "unpack", "-d", str(tmp / "unpacked"), str(pinned)])
        (root,) = (tmp / "unpacked").iterdir()
        version_file = root / "oneflow" / "version.py"
        text = version_file.read_text()
        version_line = f'__version__ = "{ONEFLOW_VERSION}"'
        assert version_line in text, version_file
        version_file.write_text(text.replace(version_line, f'__version__ = "{ONEFLOW_VERSION}+{local}"'))
        if edit:
            edit(root)
        _run([python, "-m", "wheel", "pack", "--local-version", local, "-d", str(tmp), str(root)])

    return _make_once(cache, name, repack)


def repacked_oneflow_wheel(cache=DEFAULT_CACHE, local="a", python=sys.executable):
    """The pinned wheel repacked unchanged but for its version: 0.9.0+<local>."""
    return _repack(cache, f"repacked-{local}", local, None, python)


def _slow_conv2d(root):
    conv = root / "oneflow" / "nn" / "modules" / "conv.py"
    text = conv.read_text()
    start = text.index("\nclass Conv2d(")
    at = text.index(_CONV2D_FORWARD, start)
    assert at < text.index("\nclass Conv3d(")
    conv.write_text(text[:at] + _SLOW_CONV2D_FORWARD + text[at + len(_CONV2D_FORWARD):])


def _edit_conv2d_forward(root, forward):
    conv = root / "oneflow" / "nn" / "modules" / "conv.py"
    text = conv.read_text()
    start = text.index("\nclass Conv2d(")
    at = text.index(_CONV2D_FORWARD, start)
    assert at < text.index("\nclass Conv3d(")
    conv.write_text(text[:at] + forward + text[at + len(_CONV2D_FORWARD):])


def extra_forward_share(percent):
    """The share of a whole forward convolution each Conv2d computes again for a nominal slowdown."""
    return round(percent / PERCENT_PER_EXTRA_FORWARD, 4)


def slowdown_oneflow_wheel(percent, cache=DEFAULT_CACHE, python=sys.executable):
    """0.9.0+slowPERCENT: every Conv2d forward also computes a share of its convolution again and
    discards it, for a nominal slowdown of `percent` (an integer, 1 to 200) of a ResNet50 step."""
    if not isinstance(percent, int) or not 1 <= percent <= 200:
        raise ValueError(f"percent must be an integer from 1 to 200, got {percent!r}")
    forward = _SHARED_CONV2D_FORWARD.format(percent=percent, extra=extra_forward_share(percent))
    name = f"slow{percent}"
    return _repack(cache, name, name, lambda root: _edit_conv2d_forward(root, forward), python)


def history_oneflow_wheel(commit, percent=0, cache=DEFAULT_CACHE, python=sys.executable):
    """0.9.0+cCOMMITsPERCENT: the build of commit `commit` (an integer, 1 to 999) of a made-up history, for
    bisecting: the pinned code, slowed by a nominal `percent` (0 to 200) as slowdown_oneflow_wheel slows
    it, or unchanged (0). Each is a wheel of its own, so the builds of a history differ as a project's do."""
    if not isinstance(commit, int) or not 1 <= commit <= 999:
        raise ValueError(f"commit must be an integer from 1 to 999, got {commit!r}")
    if not isinstance(percent, int) or not 0 <= percent <= 200:
        raise ValueError(f"percent must be an integer from 0 to 200, got {percent!r}")
    name = f"c{commit}s{percent}"
    if percent == 0:
        return _repack(cache, name, name, None, python)
    forward = _SHARED_CONV2D_FORWARD.format(percent=percent, extra=extra_forward_share(percent))
    return _repack(cache, name, name, lambda root: _edit_conv2d_forward(root, forward), python)


SLOWED_PLACE = "oneflow.nn.optimizer.sgd:step"  # the place busy_wait_oneflow_wheel slows
_SGD_STEP = '''    def step(self, closure: Callable = None):
        """Performs a single optimization step.
        Args:
            closure (callable, optional): A closure that reevaluates the model
                and returns the loss.
        """
'''


def _busy_wait_sgd_step(name, ms, drain):
    def edit(root):
        sgd = root / "oneflow" / "nn" / "optimizer" / "sgd.py"
        text = sgd.read_text()
        assert text.count(_SGD_STEP) == 1, sgd
        wait = (f"        # Test build 0.9.0+{name}: a busy wait of {ms} ms here, once per step"
                f"{', after the queue drained' if drain else ''}.\n"
                "        import time\n\n"
                + ("        flow._oneflow_internal.eager.Sync()\n" if drain else "")
                + f"        busy_until = time.perf_counter() + {ms / 1000!r}\n"
                "        while time.perf_counter() < busy_until:\n"
                "            pass\n")
        sgd.write_text(text.replace(_SGD_STEP, _SGD_STEP + wait))
    return edit


def busy_wait_oneflow_wheel(ms, drain=False, cache=DEFAULT_CACHE, python=sys.executable):
    """0.9.0+sgdwaitMS: SGD.step (SLOWED_PLACE), called once per training step, busy-waits `ms`
    milliseconds (an integer, 1 to 10000) in its own Python frame: one place slowed, nothing else.
    OneFlow runs ops asynchronously, so on the CPU that wait mostly hides behind the queued backward.
    drain: 0.9.0+sgddrainMS, SGD.step first waits for OneFlow's queue to drain (as a host sync added
    to it would), so the busy wait is on the step's critical path and the step is about MS ms slower."""
    if not isinstance(ms, int) or not 1 <= ms <= 10000:
        raise ValueError(f"ms must be an integer from 1 to 10000, got {ms!r}")
    name = f"sgd{'drain' if drain else 'wait'}{ms}"
    return _repack(cache, name, name, _busy_wait_sgd_step(name, ms, drain), python)


def slow_oneflow_wheel(cache=DEFAULT_CACHE, python=sys.executable):
    """0.9.0+slow: Conv2d computes its forward convolution again and discards it (twice for kernels
    larger than 1x1), so a ResNet50 training step does proportionally more work: about 30% on the CPU
    at batch 2, 3x64x64 (benchmarks/slow_build_slowdown.py measures it)."""
    return _repack(cache, "slow", "slow", _slow_conv2d, python)


BATCHNORM_PLACE = "oneflow.nn.modules.batchnorm:forward"  # the place batchnorm_oneflow_wheel changes
_BATCHNORM_FORWARD = "    def forward(self, x):\n        self._check_input_dim(x)\n"


def _extra_batchnorm_muls(name, extra):
    def edit(root):
        batchnorm = root / "oneflow" / "nn" / "modules" / "batchnorm.py"
        text = batchnorm.read_text()
        assert text.count(_BATCHNORM_FORWARD) == 1, batchnorm
        muls = (f"        # Test build 0.9.0+{name}: {extra} extra elementwise ops on the input, queued as\n"
                "        # kernels; the result is the same.\n"
                f"        for _ in range({extra}):\n"
                "            x = x * 1.0\n")
        batchnorm.write_text(text.replace(_BATCHNORM_FORWARD, _BATCHNORM_FORWARD + muls))
    return edit


def batchnorm_oneflow_wheel(extra, cache=DEFAULT_CACHE, python=sys.executable):
    """0.9.0+bnmulEXTRA: BatchNorm's forward (BATCHNORM_PLACE, 53 calls in a ResNet50 step) multiplies its
    input by 1.0 `extra` times (an integer, 1 to 1000) before normalizing it: `extra` more `mul` ops per
    call, each a kernel of the input's size in the forward and another in the backward."""
    if not isinstance(extra, int) or not 1 <= extra <= 1000:
        raise ValueError(f"extra must be an integer from 1 to 1000, got {extra!r}")
    name = f"bnmul{extra}"
    return _repack(cache, name, name, _extra_batchnorm_muls(name, extra), python)


_HELD_MEMORY = (
    "\n# Test build 0.9.0+mem{mib}: {mib} MiB held from import on, every page written so that it is\n"
    "# resident.\n"
    "_test_build_held = bytearray({mib} * 1024 * 1024)\n"
    "for _test_build_page in range(0, len(_test_build_held), 4096):\n"
    "    _test_build_held[_test_build_page] = 1\n"
)


def memory_oneflow_wheel(mib, cache=DEFAULT_CACHE, python=sys.executable):
    """0.9.0+memMIB: importing oneflow allocates MIB MiB (an integer, 1 to 65536) and holds it, each page
    written, so the worker's process holds that much more resident memory."""
    if not isinstance(mib, int) or not 1 <= mib <= 65536:
        raise ValueError(f"mib must be an integer from 1 to 65536, got {mib!r}")

    def hold(root):
        init = root / "oneflow" / "__init__.py"
        init.write_text(init.read_text() + _HELD_MEMORY.format(mib=mib))

    name = f"mem{mib}"
    return _repack(cache, name, name, hold, python)


if __name__ == "__main__":
    for make in (pinned_oneflow_wheel, repacked_oneflow_wheel, slow_oneflow_wheel):
        print(make())
