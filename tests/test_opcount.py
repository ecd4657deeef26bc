"""The ops each Python place dispatches (bench.opcount), head against base: the counter in this process
on a stand-in framework (builtins as its ops, a tensor type whose methods are builtins and whose
operators are the type's slots), the comparison (analysis.attribution.compare_dispatches), results.json's
`dispatches`, and the notes' lines, byte for byte and read back as GitHub lays them out. A real OneFlow
head whose BatchNorm dispatches 13 more `mul` per call is in test_attribution.py (heavy)."""

import json
import math
import random
import sys

from markdown_it import MarkdownIt

from helpers import notes_of, profiled, results_with
from speedstats import results as results_model
from speedstats.analysis.attribution import DispatchChange, ProfiledRound, attribute, compare_dispatches
from speedstats.bench import sampler
from speedstats.bench.instruments import Round, measure_round, started
from speedstats.bench.opcount import DispatchCount, DispatchCounter

PLACE = f"{__name__}:forward"
BATCHNORM = "oneflow.nn.modules.batchnorm:forward"
CONV = "oneflow.nn.modules.conv:_conv_forward"


class Tensor(bytearray):
    """A stand-in tensor: its methods are builtins (`count`), `*` is its type's slot (no call event)."""


OPS = {id(math.floor): "floor", id(math.sqrt): "sqrt"}


def forward(x, extra):
    math.floor(2.5)
    math.fabs(-1.0)  # a builtin that is no op of the framework
    x.count(b"a")
    for _ in range(extra):
        x = Tensor(x * 1)
    return x


def step(extra=0, calls=3):
    x = Tensor(b"ab")
    for _ in range(calls):
        forward(x, extra)
    math.sqrt(4.0)


def test_the_counter_names_each_place_with_its_ops_and_calls():
    previous = sys.getprofile()
    counter = DispatchCounter(OPS, Tensor).start()
    step(extra=2)
    step(extra=2)
    counter.stop()
    counts, calls, callers = counter.report()
    assert counts == {PLACE: {"floor": 6, "count": 6, "mul": 12}, f"{__name__}:step": {"sqrt": 2}}
    assert calls == {PLACE: 6, f"{__name__}:step": 2}
    here = f"{__name__}:test_the_counter_names_each_place_with_its_ops_and_calls"
    assert callers == {PLACE: {f"{__name__}:step": 6}, f"{__name__}:step": {here: 2}}
    # Stopped, the type's operators and the profile function are as they were.
    assert sys.getprofile() is previous and "__mul__" not in Tensor.__dict__
    assert Tensor(b"a") * 2 == b"aa"


def test_an_operator_the_type_defines_itself_is_restored_as_it_was():
    class Own(Tensor):
        def __add__(self, other):
            return "own"

    own_add = Own.__dict__["__add__"]
    counter = DispatchCounter({}, Own).start()
    assert Own(b"x") + 1 == "own"
    counter.stop()
    assert Own.__dict__["__add__"] is own_add
    place = f"{__name__}:test_an_operator_the_type_defines_itself_is_restored_as_it_was"
    assert counter.report()[0] == {place: {"add": 1}}


def test_the_sampler_passes_over_the_counters_frames():
    # A sample taken inside the counter (its profile function, an operator's stand-in) is the place that
    # called into it: here the helper that called a function of bench.opcount's module.
    inner = _frame_in_counter_module()
    record = sampler.StackSampler()
    record._add(inner, 0.002)
    assert record.self_s == {f"{__name__}:_frame_in_counter_module": 0.002}
    assert not any(place.startswith("speedstats.bench.opcount") for place in record.total_s)


def _frame_in_counter_module():
    """A frame of a function whose globals are bench.opcount's module's, called from here."""
    namespace = {"__name__": "speedstats.bench.opcount", "sys": sys}
    exec("def frame():\n    return sys._getframe()\n", namespace)  # noqa: S102 - a frame of that module
    return namespace["frame"]()


def test_the_instrument_counts_each_profiled_round_and_no_timed_one():
    instrument = DispatchCount(lambda: (OPS, Tensor), steps=2)
    with started([instrument]):
        timed = measure_round([instrument], Round(0), lambda: step(extra=1) or {"total_s": 1.0})
        profiled_round = measure_round([instrument], Round(1, profiled=True),
                                       lambda: (step(extra=1), step(extra=1)) and {"total_s": 1.0})
    assert timed == {"total_s": 1.0}
    assert profiled_round["profile"] == {
        "op_counts": {PLACE: {"floor": 6, "count": 6, "mul": 6}, f"{__name__}:step": {"sqrt": 2}},
        "place_calls": {PLACE: 6, f"{__name__}:step": 2},
        "place_callers": {PLACE: {f"{__name__}:step": 6}, f"{__name__}:step": {f"{__name__}:<lambda>": 2}},
        "count_steps": 2}


def counted(rng, extra, steps=2, calls=53):
    """A profiled round whose BatchNorm dispatches `extra` more `mul` per call."""
    r = profiled(rng, steps=steps)
    r.count_steps = steps
    muls = {"mul": extra * calls * steps} if extra else {}
    r.op_counts = {BATCHNORM: {"normalization": calls * steps, **muls},
                   "oneflow.nn.modules.conv:_conv_forward": {"conv2d": 53 * steps}}
    r.place_calls = {BATCHNORM: calls * steps, "oneflow.nn.modules.conv:_conv_forward": 53 * steps}
    r.place_callers = {BATCHNORM: {"oneflow.nn.modules.module:__call__": calls * steps},
                       CONV: {"oneflow.nn.modules.conv:forward": 53 * steps}}
    return r


def test_a_changed_count_is_said_per_call_and_the_same_counts_are_not():
    rng = random.Random(1)
    changes = compare_dispatches([counted(rng, 13) for _ in range(3)], [counted(rng, 0) for _ in range(3)])
    assert changes == [DispatchChange(place=BATCHNORM, op="mul", base_per_step=0.0, head_per_step=689.0,
                                      change_per_step=689.0, base_calls=53.0, head_calls=53.0,
                                      change_per_call=13.0, caller=None, caller_change=None)]
    assert compare_dispatches([counted(rng, 13)] * 3, [counted(rng, 13)] * 3) == []


def test_a_place_called_more_often_is_said_per_step_and_fewer_ops_too():
    rng = random.Random(2)
    head = [counted(rng, 0, calls=60) for _ in range(3)]
    base = [counted(rng, 2) for _ in range(3)]
    changes = compare_dispatches(head, base)
    assert [(c.op, c.change_per_step, c.change_per_call) for c in changes] == [("mul", -106.0, None),
                                                                             ("normalization", 7.0, None)]
    # The place is called 7 more times a step, all from Module.__call__.
    assert {(c.caller, c.caller_change) for c in changes} == {("oneflow.nn.modules.module:__call__", 7.0)}


def test_a_place_called_more_often_is_named_with_the_place_that_calls_it_more():
    # As the slow Conv2d build: Conv2d.forward calls _conv_forward three times where the base called it once.
    rng = random.Random(6)
    head = [counted(rng, 0) for _ in range(3)]
    for r in head:
        r.op_counts[CONV] = {"conv2d": 3 * 53 * 2}
        r.place_calls[CONV] = 3 * 53 * 2
        r.place_callers[CONV] = {"oneflow.nn.modules.conv:forward": 3 * 53 * 2}
    record = attribute(head, [counted(rng, 0) for _ in range(3)])
    line = next(line for line in notes_of(results_with(record)).splitlines() if line.startswith("- "))
    assert line == ("- `oneflow.nn.modules.conv:_conv_forward` dispatches 106 more `conv2d` per step "
                    "(53 → 159): it is called 159 times per step in the head and 53 in the base, 106 more "
                    "from `oneflow.nn.modules.conv:forward`")


def test_rounds_that_counted_nothing_compare_nothing():
    rng = random.Random(3)
    assert compare_dispatches([counted(rng, 13)], [profiled(rng)]) == []
    record = attribute([profiled(rng) for _ in range(3)], [profiled(rng) for _ in range(3)])
    assert (record.dispatches, record.dispatch_rounds) == ([], 0)


def attribution_with_dispatches(extra=13, rounds=3):
    rng = random.Random(4)
    return attribute([counted(rng, extra) for _ in range(rounds)], [counted(rng, 0) for _ in range(rounds)],
                     dispatch_counter="the ops each Python place calls")


def test_results_json_keeps_the_dispatches_and_reads_them_back(tmp_path):
    results = results_with(attribution_with_dispatches())
    path = tmp_path / "results.json"
    path.write_text(results.to_json())
    data = json.loads(path.read_text())["cases"][0]["attribution"]
    assert data["dispatch_rounds"] == 3 and data["dispatch_counter"] == "the ops each Python place calls"
    assert data["dispatches"] == [{"place": BATCHNORM, "op": "mul", "base_per_step": 0.0,
                                   "head_per_step": 689.0, "change_per_step": 689.0, "base_calls": 53.0,
                                   "head_calls": 53.0, "change_per_call": 13.0, "caller": None,
                                   "caller_change": None}]
    assert results_model.load(path).cases[0].attribution == results.cases[0].attribution


INTRO = ("The ops each place dispatches, resnet50-bs2 OneFlow: where a place (module:function) calls the "
         "framework's ops a different number of times in the head than in the base, counted in 3 profiled "
         "rounds of each build (the count is the same in every step, so it has no interval):")


def test_the_notes_name_the_place_and_its_extra_ops_per_call():
    notes = notes_of(results_with(attribution_with_dispatches()))
    parts = notes.split("\n\n")
    assert parts[4:] == [INTRO, ("- `oneflow.nn.modules.batchnorm:forward` dispatches 13 more `mul` per call "
                                 "(0 → 13), called 53 times per step")]
    # As GitHub lays it out: the sentence, then a list whose item holds the place and the op as code.
    tokens = MarkdownIt("commonmark").enable("table").parse(notes)
    item = [t for t in tokens if t.type == "inline"][-1]
    assert [c.content for c in item.children if c.type == "code_inline"] == [BATCHNORM, "mul"]
    assert sum(t.type == "bullet_list_open" for t in tokens) == 1


def test_a_place_whose_calls_changed_is_said_per_step_and_at_most_five_lines():
    rng = random.Random(5)
    head = [counted(rng, 0, calls=60) for _ in range(3)]
    for r in head:
        r.op_counts.update({f"oneflow.module{i}:function": {"add": 2 * (i + 1)} for i in range(6)})
    notes = notes_of(results_with(attribute(head, [counted(rng, 2) for _ in range(3)])))
    lines = [line for line in notes.splitlines() if line.startswith("- ")]
    assert lines[0] == ("- `oneflow.nn.modules.batchnorm:forward` dispatches 106 fewer `mul` per step "
                        "(106 → 0): it is called 60 times per step in the head and 53 in the base, 7 more "
                        "from `oneflow.nn.modules.module:__call__`")
    assert len(lines) == 5 and "(5 of 8 shown):" in notes


def test_a_place_that_is_no_plain_name_is_escaped_not_code():
    record = attribution_with_dispatches()
    record.dispatches[0].place = "evil`[x](http://e.com)"
    notes = notes_of(results_with(record))
    line = next(line for line in notes.splitlines() if line.startswith("- "))
    assert line.startswith("- evil\\`\\[x\\]")
    tokens = MarkdownIt("commonmark").parse(notes)
    assert not [c for t in tokens for c in t.children or () if c.type in ("link_open", "code_inline")
                and c.content != "mul"]


def test_a_per_call_change_of_a_place_never_called_is_said_per_step():
    # As a results.json from elsewhere may say it: a change per call, but no calls to divide by.
    record = attribution_with_dispatches()
    record.dispatches[0].base_calls = 0.0
    line = next(line for line in notes_of(results_with(record)).splitlines() if line.startswith("- "))
    assert line == ("- `oneflow.nn.modules.batchnorm:forward` dispatches 689 more `mul` per step (0 → 689): "
                    "it is called 53 times per step in the head and 0 in the base")


def test_dispatches_without_a_significant_place_still_show_and_none_add_nothing():
    unchanged = attribution_with_dispatches(extra=0)
    assert notes_of(results_with(unchanged)) == notes_of(results_with(None))
    fewer_rounds = attribution_with_dispatches(rounds=1)
    assert fewer_rounds.places == [] and fewer_rounds.dispatches
    assert INTRO.replace("3 profiled rounds", "1 profiled round") in notes_of(results_with(fewer_rounds))


def test_a_profiled_rounds_report_with_counts_reads_back():
    report = {"total_s": 1.0, "profile": {"steps": 2, "self_s": {}, "total_s": {}, "count_steps": 2,
                                          "op_counts": {PLACE: {"mul": 4}}, "place_calls": {PLACE: 2}}}
    r = ProfiledRound.from_report(report)
    assert (r.op_counts, r.place_calls, r.count_steps) == ({PLACE: {"mul": 4}}, {PLACE: 2}, 2)
    assert ProfiledRound.from_report({"total_s": 1.0, "profile": {"steps": 2, "self_s": {},
                                                                  "total_s": {}}}).count_steps == 0
