"""The builds a run measures: what the environment has, a wheel, a folder of wheels, or pip requirements.

A build other than "installed" gets its own folder in the build cache (bench.buildcache), made with
`pip install --no-deps --target`: it holds only the packages given (the framework, its vision library),
and the workers put it first on PYTHONPATH, so they import those packages from it and everything else
(numpy, pillow, protobuf, the CUDA libraries) from the running environment. A rerun with the same
inputs reuses the folder without running pip. A requirement is cached by its text: one that is not
pinned to an exact version (`oneflow==0.9.1.dev20240101+cu118`) stays at the version it first
installed. A folder or glob may hold one wheel of a project per Python version; the one that fits the
workers' Python is taken.

Before anything is measured, a probe process imports the build with the workers' environment and
reports versions, git commit and module files; that is the build's provenance. A build that does not
install or import is a UserError naming it. Nothing here imports torch or oneflow.
"""

import concurrent.futures
import dataclasses
import glob
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

from speedstats.bench import buildcache
from speedstats.bench.buildcache import print_to_stderr
from speedstats.bench.environment import subprocess_env
from speedstats.contenders import FAMILIES, family_packages, of_family
from speedstats.errors import UserError
from speedstats.text import one_line

INSTALLED = "installed"
PROBE_TIMEOUT_S = 180
PIP_TIMEOUT_S = 1800
PIP_PROGRESS_S = 15  # a line this often while pip installs: a 1 GB build takes minutes, pip says nothing
_ENVIRONMENT_PACKAGES = ("numpy", "pillow", "protobuf")
_ERROR_LIMIT = 300

# Run as `python -c PROBE <packages to import, comma separated> <package>...`: imports those of the
# packages that have metadata on the path, and prints one JSON line about all of them. What each
# framework tells of itself (git commit, CUDA version, kernels) is read by its entry in FRAMEWORK_DETAILS,
# keyed by the framework's package (contenders' `package`; tests/test_contender_table.py holds them equal).
PROBE = r"""
import importlib, importlib.metadata, json, platform, sys


def oneflow_details(module):
    details = {"git_commit": getattr(module, "__git_commit__", None)}
    try:
        import oneflow.sysconfig
        with_cuda = oneflow.sysconfig.with_cuda()
        details["cuda"] = str(oneflow.sysconfig.get_cuda_version()) if with_cuda else None
    except Exception:
        details["cuda"] = None
    return details


def torch_details(module):
    details = {"git_commit": getattr(getattr(module, "version", None), "git_version", None),
               "cuda": getattr(getattr(module, "version", None), "cuda", None)}
    try:  # the architectures libtorch_cuda was compiled for; no GPU needed, unlike get_arch_list()
        details["cuda_archs"] = module._C._cuda_getArchFlags().split() if details["cuda"] else None
    except Exception:
        details["cuda_archs"] = None
    return details


FRAMEWORK_DETAILS = {"oneflow": oneflow_details, "torch": torch_details}
imported, names = sys.argv[1].split(","), sys.argv[2:]
report = {"python": platform.python_version(), "packages": {}, "environment": {}}
for name in names:
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        continue
    entry = {"version": version, "module_version": None, "git_commit": None, "file": None}
    if name in imported:
        module = importlib.import_module(name)
        entry["module_version"] = getattr(module, "__version__", None)
        entry["file"] = getattr(module, "__file__", None)
        if name in FRAMEWORK_DETAILS:
            entry.update(FRAMEWORK_DETAILS[name](module))
    report["packages"][name] = entry
for name in ("numpy", "pillow", "protobuf"):
    try:
        report["environment"][name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        pass
print("SPEEDSTATS-PROBE " + json.dumps(report))
"""


def _dist_name(name):
    """A distribution name as pip compares them: lower case, runs of -_. as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclasses.dataclass(frozen=True)
class BuildSource:
    """One thing pip installs into a build: a wheel file or a requirement."""

    kind: str  # "wheel" or "requirement"
    value: str  # the wheel's path, or the requirement text

    @property
    def package(self):
        """The distribution name it installs, normalised (None for a URL requirement)."""
        if self.kind == "wheel":
            return _dist_name(Path(self.value).name.split("-", 1)[0])
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", self.value)
        return _dist_name(match.group(0)) if match and "://" not in self.value else None

    def describe(self):
        return f"wheel {Path(self.value).name}" if self.kind == "wheel" else self.value


@dataclasses.dataclass
class BuildRequest:
    role: str
    family: str
    sources: list
    pip_args: list = dataclasses.field(default_factory=list)

    @property
    def installed(self):
        return not self.sources

    def describe(self):
        given = " + ".join(source.describe() for source in self.sources) if self.sources else INSTALLED
        return f"{self.role} ({given})"


def _looks_like_path(token):
    if "/" in token or token.endswith(".whl"):
        return True
    # A bare word is a folder only when it holds wheels: "oneflow" in a checkout of OneFlow's
    # repository, which has a folder of that name, is still the requirement.
    return os.path.isdir(token) and any(name.endswith(".whl") for name in os.listdir(token))


def _expand_path(role, token):
    """The wheels a path, folder or glob names; UserError when it names none."""
    path = Path(token).expanduser()
    if any(char in token for char in "*?["):
        matches = sorted(glob.glob(str(path)))
        files = [os.path.abspath(m) for m in matches if m.endswith(".whl") and os.path.isfile(m)]
        if not files:
            raise UserError(f"{role}: {token}: no wheel (.whl) matches")
        return files
    if path.is_dir():
        files = sorted(os.path.abspath(p) for p in path.glob("*.whl") if p.is_file())
        if not files:
            raise UserError(f"{role}: {token}: no wheel (.whl) in this folder")
        return files
    if path.is_file():
        if not token.endswith(".whl"):
            raise UserError(f"{role}: {token}: not a wheel file (.whl)")
        return [os.path.abspath(path)]
    raise UserError(f"{role}: {token}: no such wheel, folder or file")


def _parse_sources(role, spec):
    spec = (spec or "").strip()
    if not spec or spec == INSTALLED:
        return []
    tokens = [spec] if os.path.exists(spec) and _looks_like_path(spec) else spec.split()
    sources = []
    said = one_line(spec, 200)  # a spec of several lines is named on one
    for token in tokens:
        if token == INSTALLED:
            raise UserError(f"{role}: {said}: 'installed' cannot be combined with other builds")
        if token.startswith("-"):
            raise UserError(f"{role}: {said}: {token} is a pip option; give it in the pip arguments")
        if "://" in token:
            sources.append(BuildSource("requirement", token))
        elif _looks_like_path(token):
            sources.extend(BuildSource("wheel", path) for path in _expand_path(role, token))
        elif re.match(r"[A-Za-z0-9]", token):
            sources.append(BuildSource("requirement", token))
        else:
            raise UserError(f"{role}: {said}: {token} is neither a wheel path nor a pip requirement")
    return sources


def parse_build_spec(role, family, spec, companion_specs=(), pip_args=()):
    """A BuildRequest from the user's text: "installed", a wheel, a folder of wheels, a glob, or pip
    requirements (whitespace separated). companion_specs go into the same build (flowvision for a
    OneFlow build); pip_args (a list, or one string split like a shell) are passed to pip."""
    if family not in FAMILIES:
        raise UserError(f"{role}: unknown framework family {family!r} (known: {', '.join(FAMILIES)})")
    sources = _parse_sources(role, spec)
    if isinstance(companion_specs, str):
        companion_specs = [companion_specs]
    for companion in companion_specs or ():
        sources.extend(_parse_sources(role, companion))
    if isinstance(pip_args, str):
        try:
            pip_args = shlex.split(pip_args)
        except ValueError as exc:
            raise UserError(f"{role}: pip arguments {pip_args!r}: {exc}") from None
    return BuildRequest(role=role, family=family, sources=sources, pip_args=[str(a) for a in pip_args or ()])


@dataclasses.dataclass
class Build:
    role: str
    family: str
    site_dir: object  # Path, or None for the installed environment
    provenance: dict
    description: str = ""
    # A shared lock on the build's cache folder while this process lives: evict_builds skips it.
    in_use: object = dataclasses.field(default=None, repr=False, compare=False)

    def describe(self):
        return self.description or f"{self.role} ({self.family})"

    def worker_env(self, env):
        """A copy of env whose PYTHONPATH starts with the build's folder (absolute: a worker runs in a
        folder of its own)."""
        env = dict(env)
        if self.site_dir is not None:
            site = os.path.abspath(self.site_dir)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH")) if p)
        return env

    def imported_elsewhere(self, imported):
        """Why a worker's import report (ready.json's `imported`: the framework module's file) is not
        this build's, or None: a build with a folder of its own must be imported from it."""
        file = (imported or {}).get("file")
        if self.site_dir is None or not file or _inside(file, self.site_dir):
            return None
        return f"the worker imported {file}, not the build from {os.path.realpath(self.site_dir)}"


def _inside(file, folder):
    """Whether `file` lies under `folder`, links resolved."""
    return os.path.realpath(file).startswith(os.path.realpath(folder) + os.sep)


def _check_wheel(request, path):
    """A UserError unless path is a zip archive with a .dist-info/WHEEL entry (cheap: the central
    directory only)."""
    name = Path(path).name
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except FileNotFoundError:
        raise UserError(f"{request.describe()}: {name}: file not found") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"{request.describe()}: {name} is not a valid wheel: {one_line(exc, 120)}") from None
    if not any(n.count("/") == 1 and n.endswith(".dist-info/WHEEL") for n in names):
        raise UserError(f"{request.describe()}: {name} is not a valid wheel: no .dist-info/WHEEL in it")


def _wheel_fits(path, python_version):
    """Whether a wheel's Python and ABI tags (from its file name) fit CPython `python_version`."""
    parts = Path(path).name[: -len(".whl")].split("-")
    if len(parts) < 5:
        return True  # not a standard name: pip judges it
    python_tags, abi_tags = parts[-3].split("."), parts[-2].split(".")
    major, minor = (int(n) for n in python_version.split(".")[:2])

    def python_fits(tag):
        if tag in (f"py{major}", f"py{major}{minor}", f"cp{major}{minor}"):
            return True
        older = re.fullmatch(rf"cp{major}(\d+)", tag)  # a stable-ABI wheel of an older CPython
        return bool(older) and "abi3" in abi_tags and int(older.group(1)) <= minor

    return any(map(python_fits, python_tags)) and any(t in ("none", "abi3", f"cp{major}{minor}")
                                                      for t in abi_tags)


def _check_wheel_tags(request, path):
    """A UserError unless the wheel's tags (from its file name) include one this interpreter takes: a
    wheel for another Python or platform fails here, in seconds, not in pip or at its first import."""
    try:
        from packaging.tags import sys_tags
        from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    except ImportError:  # pip judges it
        return
    name = Path(path).name
    try:
        tags = parse_wheel_filename(name)[3]
    except InvalidWheelFilename:
        return  # not a standard name: pip judges it
    accepted = list(sys_tags())
    if not accepted or tags & set(accepted):
        return
    platforms = list(dict.fromkeys(tag.platform for tag in accepted))  # in the order pip prefers them
    shown_platforms = ", ".join(platforms[:3]) + (", …" if len(platforms) > 4 else "")
    if len(platforms) > 3:
        shown_platforms += f" and {platforms[-1]}"
    raise UserError(f"{request.describe()}: {name} is for {'-'.join(name[:-len('.whl')].split('-')[-3:])}, "
                    f"which this Python ({platform.python_implementation()} {platform.python_version()}) "
                    f"does not take: it takes {accepted[0]} and {len(accepted) - 1} other tags, for the "
                    f"platforms {shown_platforms} (`python -m pip debug --verbose` lists them)")


def _pick_wheels(request, python_version):
    """The request with, for a project given as several wheels (a folder or glob holding one per
    Python version), only the one that fits this Python; a UserError when none or several do."""
    by_package = {}
    for source in request.sources:
        if source.kind == "wheel":
            by_package.setdefault(source.package, []).append(source)
    dropped = set()
    for package, sources in by_package.items():
        if len(sources) < 2:
            continue
        fitting = [s for s in sources if _wheel_fits(s.value, python_version)]
        names = ", ".join(Path(s.value).name for s in (fitting if len(fitting) > 1 else sources))
        if not fitting:
            raise UserError(f"{request.describe()}: no wheel of {package} fits "
                            f"Python {python_version}: {names}")
        if len(fitting) > 1:
            raise UserError(f"{request.describe()}: several wheels of {package} fit Python {python_version}: "
                            f"{names}; give one")
        dropped.update(s for s in sources if s is not fitting[0])
    if not dropped:
        return request
    return dataclasses.replace(request, sources=[s for s in request.sources if s not in dropped])


def _python_version(python):
    if python == sys.executable:
        return platform.python_version()
    result = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                            check=False, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if result.returncode != 0:
        raise UserError(f"{python}: cannot run this Python")
    return result.stdout.strip()


def _last_meaningful_line(text):
    """The line of a failed command's output that says why: pip's last ERROR line, else a Python
    exception's last line, else the last non-empty line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("ERROR:"):
            return line[len("ERROR:"):].strip()
    return lines[-1] if lines else "no output"


def _framework_env(family, env=None):
    """The environment a worker of this family gets (before the build's PYTHONPATH)."""
    return subprocess_env(family, base=env)


def _probe(request, build, python, timeout_s):
    names = list(family_packages(request.family))
    if build.site_dir is not None:
        for dist_info in sorted(Path(build.site_dir).glob("*.dist-info")):
            name = _dist_name(dist_info.name.split("-", 1)[0])
            if name not in names:
                names.append(name)
    env = build.worker_env(_framework_env(request.family))
    try:
        result = subprocess.run([python, "-c", PROBE, ",".join(family_packages(request.family)), *names],
                                check=False, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise UserError(f"{request.describe()}: importing the build took over {timeout_s:.0f}s") from None
    if result.returncode != 0:
        cause = one_line(_last_meaningful_line(result.stderr or result.stdout), _ERROR_LIMIT)
        raise UserError(f"{request.describe()}: the build does not import: {cause}")
    for line in reversed(result.stdout.splitlines()):
        if line.startswith("SPEEDSTATS-PROBE "):
            return json.loads(line[len("SPEEDSTATS-PROBE "):])
    raise UserError(f"{request.describe()}: the import probe printed no report")


def _check_took_effect(request, report, site_dir):
    """Every package the build installed is imported from the build's folder."""
    framework = of_family(request.family).package
    if site_dir is None:
        if framework not in report["packages"]:
            raise UserError(f"{request.describe()}: {framework} is not installed in this environment")
        return
    installed = {_dist_name(p.name.split("-", 1)[0]) for p in Path(site_dir).glob("*.dist-info")}
    if not installed:
        raise UserError(f"{request.describe()}: pip installed nothing")
    for name in sorted(installed & set(family_packages(request.family))):
        entry = report["packages"].get(name) or {}
        file = entry.get("file")
        if not file or not _inside(file, site_dir):
            raise UserError(f"{request.describe()}: the build did not take effect: {name} is imported from "
                            f"{file or 'nowhere'}, not from the build's folder")


def _provenance(request, report, site_dir=None, final_site=None, wheel_hashes=None, cache_key=None):
    """The provenance record of a probe report. Paths under site_dir are written under final_site
    (the build's folder after its rename)."""
    by_package = {}
    for source in request.sources:
        by_package.setdefault(source.package, source)
    packages = {}
    for name, entry in report["packages"].items():
        source = by_package.get(name)
        file = entry.get("file")
        if file and site_dir is not None and final_site is not None:
            rel = os.path.relpath(file, site_dir)
            if not rel.startswith(".."):
                file = str(Path(final_site) / rel)
        packages[name] = {
            "version": entry["version"],
            "module_version": entry.get("module_version"),
            "git_commit": entry.get("git_commit"),
            "cuda": entry.get("cuda"),  # the CUDA version it was made for (None: CPU build, or untold)
            # the GPU architectures its kernels were compiled for, as ["sm_60", ...] (None: untold;
            # OneFlow 0.9.0 does not tell)
            "cuda_archs": entry.get("cuda_archs"),
            "wheel": Path(source.value).name if source and source.kind == "wheel" else None,
            "sha256": (wheel_hashes or {}).get(source.value) if source and source.kind == "wheel" else None,
            "requirement": source.value if source and source.kind == "requirement" else None,
            "file": file,
        }
    framework_source = by_package.get(of_family(request.family).package)
    if request.installed:
        kind = INSTALLED
    elif framework_source is not None:
        kind = framework_source.kind
    elif any(s.package is None for s in request.sources):
        kind = "requirement"  # a URL requirement: what it installs shows in packages
    else:
        kind = INSTALLED  # only companions were given: the framework is the environment's
    return {
        "role": request.role,
        "family": request.family,
        "source": kind,
        "packages": packages,
        "environment": {"python": report["python"], **report["environment"]},
        "cache_key": cache_key,
    }


def _summary(provenance):
    framework = of_family(provenance["family"]).package
    entry = provenance["packages"].get(framework) or {}
    text = f"{framework} {entry.get('version')}"
    if entry.get("git_commit"):
        text += f" (git {entry['git_commit']})"
    return text


def _install(request, folder, wheel_hashes, cache_key, python, progress, probe_timeout_s, pip_timeout_s):
    """Install into a temporary folder next to `folder`, probe it, rename it into place."""
    tmp = buildcache.temporary_folder(folder)
    try:
        site = tmp / "site"
        command = [python, "-m", "pip", "install", "--no-deps", "--no-input", "--disable-pip-version-check",
                   "--no-warn-script-location", "--target", str(site),
                   *[s.value for s in request.sources], *request.pip_args]
        # pip builds in TMPDIR and moves the result into --target: on the same filesystem that is a rename.
        env = {**os.environ, "TMPDIR": str(tmp)}
        progress(f"build {request.describe()}: installing with pip…")
        start = time.monotonic()
        try:
            returncode, output = run_with_progress(command, env, pip_timeout_s, progress,
                                                   f"installing {request.describe()}")
        except subprocess.TimeoutExpired:
            raise UserError(f"{request.describe()}: pip install took over {pip_timeout_s:.0f}s") from None
        if returncode != 0:
            cause = one_line(_last_meaningful_line(output), _ERROR_LIMIT)
            raise UserError(f"{request.describe()}: pip install failed: {cause}")
        progress(f"build {request.describe()}: installed in {time.monotonic() - start:.0f}s, probing…")
        build = Build(role=request.role, family=request.family, site_dir=site, provenance={},
                      description=request.describe())
        report = _probe(request, build, python, probe_timeout_s)
        _check_took_effect(request, report, site)
        provenance = _provenance(request, report, site, folder / "site", wheel_hashes, cache_key)
        stored = {k: v for k, v in provenance.items() if k != "role"}
        shared = buildcache.share_identical_files(site, folder)
        if shared:
            progress(f"build {request.describe()}: {shared / 2**20:.0f} MiB shared with builds in the cache")
        buildcache.put_in_place(tmp, folder, stored)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Build(role=request.role, family=request.family, site_dir=folder / "site", provenance=provenance,
                 description=request.describe())


def run_with_progress(command, env, timeout_s, progress, what, interval_s=PIP_PROGRESS_S):
    """(exit status, stdout and stderr) of a command, saying `what: 45s` every interval_s seconds while it
    runs; subprocess.TimeoutExpired after timeout_s, the command killed. An exception (a SIGTERM
    unwinding) kills it too."""
    start = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while True:
            left = timeout_s - (time.monotonic() - start)
            if left <= 0:
                raise subprocess.TimeoutExpired(command, timeout_s)
            try:
                output, _ = proc.communicate(timeout=min(interval_s, left))
                return proc.returncode, output
            except subprocess.TimeoutExpired:  # communicate() again loses none of the output
                if time.monotonic() - start < timeout_s:
                    progress(f"{what}: {time.monotonic() - start:.0f}s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def prepare_build(request, cache_dir, python=sys.executable, progress=print_to_stderr,
                  probe_timeout_s=PROBE_TIMEOUT_S, pip_timeout_s=PIP_TIMEOUT_S):
    """The Build for a request: installed (or reused from the cache) and probed. UserError on failure."""
    if request.installed:
        build = Build(role=request.role, family=request.family, site_dir=None, provenance={},
                      description=request.describe())
        report = _probe(request, build, python, probe_timeout_s)
        _check_took_effect(request, report, None)
        build.provenance = _provenance(request, report)
        progress(f"build {request.describe()}: {_summary(build.provenance)}")
        return build
    python_version = _python_version(python)
    request = _pick_wheels(request, python_version)
    wheels = [s.value for s in request.sources if s.kind == "wheel"]
    for wheel in wheels:
        _check_wheel(request, wheel)
        if python == sys.executable:  # the tags are this interpreter's
            _check_wheel_tags(request, wheel)
    wheel_hashes = {wheel: buildcache.wheel_digest(wheel, cache_dir) for wheel in wheels}
    key = buildcache.cache_key(request, wheel_hashes, python_version)
    folder = buildcache.build_folder(cache_dir, request.family, key)

    def install():
        return _install(request, folder, wheel_hashes, key, python, progress, probe_timeout_s, pip_timeout_s)

    in_use, installed = buildcache.hold_or_install(folder, install, request.describe(), progress)
    if installed is not None:
        installed.in_use = in_use
        progress(f"build {request.describe()}: {_summary(installed.provenance)}, in {folder}")
        return installed
    # Probed again, not read from build.json: the environment under the build (numpy, the CUDA
    # libraries) may have changed since it was installed, and a build that no longer imports must
    # fail here, before anything is measured.
    build = Build(role=request.role, family=request.family, site_dir=folder / "site", provenance={},
                  description=request.describe(), in_use=in_use)
    report = _probe(request, build, python, probe_timeout_s)
    _check_took_effect(request, report, build.site_dir)
    build.provenance = _provenance(request, report, wheel_hashes=wheel_hashes, cache_key=key)
    progress(f"build {request.describe()}: from the cache ({key[:16]}), {_summary(build.provenance)}, "
             f"in {folder}")
    return build


def prepare_builds(requests, cache_dir, python=sys.executable, progress=print_to_stderr):
    """The Build of each request, by role; the first failure (in the requests' order) raises its
    UserError. The installed builds are probed while the others are installed or looked up and probed,
    one after another (those take the cache's locks, which one process must not take twice at once)."""
    roles = set()
    for request in requests:
        if request.role in roles:
            raise UserError(f"{request.role}: two builds given for this role")
        roles.add(request.role)
    outcomes = {}
    installed = [request for request in requests if request.installed]
    one_line_at_a_time = threading.Lock()

    def say(message):
        with one_line_at_a_time:
            progress(message)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(installed))) as pool:
        probes = {request.role: pool.submit(prepare_build, request, cache_dir, python=python, progress=say)
                  for request in installed}
        for request in requests:
            if request.installed:
                continue
            try:
                outcomes[request.role] = prepare_build(request, cache_dir, python=python, progress=say)
            except UserError as exc:
                outcomes[request.role] = exc
                break
        for role, probe in probes.items():
            try:
                outcomes[role] = probe.result()
            except UserError as exc:
                outcomes[role] = exc
    for request in requests:
        if isinstance(outcomes.get(request.role), UserError):
            raise outcomes[request.role]
    return {request.role: outcomes[request.role] for request in requests}
