"""Which ops each Python place dispatches, counted in the worker's profiled rounds, on any device.

OneFlow's profiler cannot run without a GPU driver, and the stack sampler (bench.sampler) shows a kernel
that got slower only as more waiting for the queue. What a change of the Python code does to the work
queued shows in the ops it dispatches: a place (`module:function`) that calls `mul` 13 more times per
call than the base's did names the slowed code, on the CPU as on CUDA.

The counter sees two ways into the framework from Python:

- a call of a builtin: sys.setprofile's 'c_call' event, whose frame is the caller (the place) and whose
  argument is the function called. An op is a builtin of the framework's op namespaces (`oneflow._C`,
  `torch`, `torch._C._nn`, ...) or a builtin method of a tensor (`x.sum()`), named by its own name;
- an operator (`x * 1.0`), which Python calls through the tensor type's slot, with no event: while the
  counter runs, the tensor type's operator methods are wrapped by functions of this module that count
  the operator under its op's name (`mul`) for the frame that used it, then call the original.

'call' events count how often each place is called, and from which place, so that a count can be said
per call, and a place called more often is named with the place that calls it more. The counter runs in
the thread that runs the rounds; its own frames are passed over by the stack sampler, whose time goes to
the place that dispatched the op. Every Python call and builtin call of the step calls the counter (a
ResNet50 step on the CPU about 1.1 times as long, docs/measurements.md), so it runs in the profiled rounds
only (bench.worker), never in a timed one.
"""

from __future__ import annotations

import sys

from speedstats.bench.instruments import Instrument
from speedstats.bench.sampler import place_of

# The tensor's operator methods and the op each dispatches (its name among the framework's functions).
# Comparisons are left alone: a type's __eq__ is also what its hashing and `in` rely on.
OPERATORS = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_",
    "__sub__": "sub", "__rsub__": "sub", "__isub__": "sub_",
    "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_",
    "__truediv__": "div", "__rtruediv__": "div", "__itruediv__": "div_",
    "__floordiv__": "floor_divide", "__rfloordiv__": "floor_divide",
    "__mod__": "fmod", "__pow__": "pow", "__rpow__": "pow",
    "__matmul__": "matmul", "__rmatmul__": "matmul",
    "__neg__": "negative", "__abs__": "abs", "__invert__": "logical_not",
    "__and__": "logical_and", "__or__": "logical_or", "__xor__": "logical_xor",
    "__getitem__": "getitem", "__setitem__": "setitem",
}

# Where each framework keeps its ops as builtins (modules or classes whose builtins are ops).
OP_NAMESPACES = {
    "oneflow": ("oneflow._oneflow_internal._C",),
    "pytorch": ("torch", "torch._C._VariableFunctions", "torch._C._nn", "torch._C._fft",
                "torch._C._linalg", "torch._C._special"),
}
TENSOR_TYPES = {"oneflow": "oneflow.Tensor", "pytorch": "torch.Tensor"}

BUILTIN = type(len)
_OWN = globals()


def _resolve(dotted):
    """The object at a dotted name (a module, or an attribute of one), or None where there is none."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        value = module
        for name in parts[cut:]:
            value = getattr(value, name, None)
        return value
    return None


def framework_ops(framework):
    """(ops, tensor type) of an imported framework: {id of each op builtin: its name}, and the tensor
    type whose builtin methods and operators are ops too."""
    ops = {}
    for dotted in OP_NAMESPACES.get(framework, ()):
        namespace = _resolve(dotted)
        for name in dir(namespace) if namespace is not None else ():
            value = getattr(namespace, name, None)
            if isinstance(value, BUILTIN) and not name.startswith("_"):
                ops.setdefault(id(value), name)
    return ops, _resolve(TENSOR_TYPES[framework]) if framework in TENSOR_TYPES else None


class DispatchCounter:
    """Counts, while started, the ops each place of the calling thread dispatches and the place's calls.
    ops: {id(builtin): op name}; tensor_type: the tensor's type (its builtin methods and operators)."""

    def __init__(self, ops, tensor_type):
        self.ops = dict(ops)
        self.tensor_type = tensor_type
        self.counts = {}  # (code, op): dispatches
        self.calls = {}  # (code, the caller's code): calls
        self.names = {}  # code: place, of the places that dispatched an op and of their callers
        self._previous = None
        self._wrapped = []  # (name, the type's own attribute or None)

    def start(self):
        self._wrap_operators()
        self._previous = sys.getprofile()
        sys.setprofile(self._event)
        return self

    def stop(self):
        sys.setprofile(self._previous)
        self._unwrap_operators()
        return self

    def _event(self, frame, event, arg):
        if frame.f_globals is _OWN:
            return  # an operator's stand-in calling the original: counted as the operator already
        if event == "call":
            caller = frame.f_back
            while caller is not None and caller.f_globals is _OWN:
                caller = caller.f_back  # an operator's stand-in: the frame that used the operator
            key = (frame.f_code, caller.f_code if caller is not None else None)
            self.calls[key] = self.calls.get(key, 0) + 1
            if caller is not None and key[1] not in self.names:
                self.names[key[1]] = place_of(caller)
        elif event == "c_call":
            op = self.ops.get(id(arg))
            if op is None:
                owner = getattr(arg, "__self__", None)
                if self.tensor_type is None or not isinstance(owner, self.tensor_type):
                    return
                op = arg.__name__
            self._count(frame, op)

    def _count(self, frame, op):
        code = frame.f_code
        key = (code, op)
        self.counts[key] = self.counts.get(key, 0) + 1
        if code not in self.names:
            self.names[code] = place_of(frame)

    def _wrap_operators(self):
        kind = self.tensor_type
        if kind is None:
            return
        for name, op in OPERATORS.items():
            original = getattr(kind, name, None)
            if original is None:
                continue
            own = kind.__dict__.get(name)
            try:
                setattr(kind, name, _counting(self, op, original))
            except (TypeError, AttributeError):  # a type that takes no new attributes: its calls only
                continue
            self._wrapped.append((name, own))

    def _unwrap_operators(self):
        kind, wrapped, self._wrapped = self.tensor_type, self._wrapped, []
        for name, own in reversed(wrapped):
            if own is None:
                delattr(kind, name)
            else:
                setattr(kind, name, own)

    def report(self):
        """{place: {op: dispatches}}, {place: calls} and {place: {caller: calls}} of the places that
        dispatched an op (a caller is a place too; "?" where there was none)."""
        counts, calls, callers = {}, {}, {}
        dispatching = set()
        for (code, op), n in self.counts.items():
            place = self.names[code]
            dispatching.add(code)
            ops = counts.setdefault(place, {})
            ops[op] = ops.get(op, 0) + n
        for (code, caller), n in self.calls.items():
            if code not in dispatching:
                continue
            place = self.names[code]
            calls[place] = calls.get(place, 0) + n
            by = callers.setdefault(place, {})
            name = self.names.get(caller, "?")
            by[name] = by.get(name, 0) + n
        return counts, calls, callers


def _counting(counter, op, original):
    """A stand-in for the tensor type's operator method: counts `op` for the frame that used the
    operator, then does what the method did."""

    def operator(*args, **kwargs):
        counter._count(sys._getframe(1), op)
        return original(*args, **kwargs)

    operator.__name__ = getattr(original, "__name__", op)
    return operator


class DispatchCount(Instrument):
    """The dispatch counter around each profiled round (bench.instruments), of the thread that runs it:
    the round's `profile` gets `op_counts` ({place: {op: dispatches}}), `place_calls` ({place: calls}),
    `place_callers` ({place: {the place that called it: calls}})
    and `count_steps`, the steps counted. make(): (ops, tensor type), as framework_ops gives them."""

    def __init__(self, make, steps):
        self.make = make
        self.steps = steps
        self.counter = self.report = None

    def before_round(self, round):
        self.counter = self.report = None
        if round.profiled:
            self.counter = DispatchCounter(*self.make()).start()

    def after_round(self, round):
        if self.counter is not None:
            self.report = self.counter.stop().report()

    def add_to(self, record):
        if self.report is not None:
            counts, calls, callers = self.report
            record.setdefault("profile", {}).update(op_counts=counts, place_calls=calls,
                                                    place_callers=callers, count_steps=self.steps)
