"""Tool registry and plan syntax/typing: the contract every other part builds on."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.openagi.plans import (
    LinearPlan,
    NonlinearPlan,
    PlanError,
    PlanLimits,
    check_plan,
    enumerate_plans,
    format_plan,
    parse_and_check,
    parse_plan,
)
from envs.openagi.registry import IMAGE, TEXT, ToolRegistry, UnknownToolError
from envs.openagi.tools import OPENAGI_TOOLS, signature_registry

REG = signature_registry()


def test_registry_has_openagi_tools():
    assert len(REG) == 15 and REG.names == tuple(s.name for s in OPENAGI_TOOLS)
    assert REG["Question Answering"].inputs == (TEXT, TEXT)
    assert set(REG.modalities) == {IMAGE, TEXT}


def test_adding_a_tool_is_one_call_and_plans_use_it():
    reg = signature_registry()
    reg.register("Audio Transcription", "audio", TEXT, lambda xs: [f"said:{x}" for x in xs])
    assert reg["Audio Transcription"](["hi", "yo"]) == ["said:hi", "said:yo"]
    plans = {format_plan(p) for p in enumerate_plans(reg, ("audio",), TEXT, PlanLimits(2, 0, 0))}
    assert "Audio Transcription" in plans and "Audio Transcription, Sentiment Analysis" in plans
    check_plan(parse_plan("Audio Transcription, Text Summarization", reg), reg, ("audio",), TEXT)


@pytest.mark.parametrize("name", ["", "a,b", "x (y)", "double  space", " lead", 3])
def test_registry_rejects_bad_names(name):
    with pytest.raises(ValueError, match="bad tool name"):
        ToolRegistry().register(name, IMAGE, IMAGE, lambda x: x)


def test_registry_errors_are_clear():
    reg = ToolRegistry()
    reg.register("Blur", IMAGE, IMAGE, lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("Blur", IMAGE, IMAGE, lambda x: x)
    with pytest.raises(ValueError, match="bad modality 'Image'"):
        reg.register("Sharpen", "Image", IMAGE, lambda x: x)
    with pytest.raises(UnknownToolError, match="unknown tool 'Sharp'.*Blur"):
        reg.get("Sharp")
    with pytest.raises(RuntimeError, match="returned 1 outputs for a batch of 2"):
        ToolRegistry([]).register("Bad", IMAGE, IMAGE, lambda xs: xs[:1])(["a", "b"])


def test_canonical_form_examples():
    text = "(Image Denoising, Image Deblurring) (Fill Mask) Visual Question Answering, Machine Translation"
    plan = parse_plan(text, REG)
    assert plan == NonlinearPlan((("Image Denoising", "Image Deblurring"), ("Fill Mask",)),
                                 "Visual Question Answering", ("Machine Translation",))
    assert format_plan(plan) == text
    check_plan(plan, REG, (IMAGE, TEXT), TEXT)
    empty = parse_plan("() (Fill Mask) Question Answering")
    assert empty.branches == ((), ("Fill Mask",)) and format_plan(empty) == "() (Fill Mask) Question Answering"
    assert parse_plan("  Image Denoising ,Image   Classification ") == LinearPlan(
        ("Image Denoising", "Image Classification"))


BAD = [
    # (text, inputs, target, reason, fragment of the message)
    ("", (IMAGE,), TEXT, "empty", "empty plan"),
    ("Image Denoizing, Image Classification", (IMAGE,), TEXT, "unknown_tool", "did you mean 'Image Denoising'"),
    ("Image Denoising, Image Denoising, Image Classification", (IMAGE,), TEXT, "repeated_tool", "used twice"),
    ("Image Classification, Colorization", (IMAGE,), IMAGE, "modality_mismatch", "'Colorization' takes image"),
    ("Sentiment Analysis", (IMAGE,), TEXT, "bad_start", "'Sentiment Analysis' takes text but the input"),
    ("Image Denoising", (IMAGE,), TEXT, "bad_end", "outputs image; the task's target is text"),
    ("Image Classification", (IMAGE, TEXT), TEXT, "branch_count", "expected a nonlinear plan"),
    ("(Image Denoising) Visual Question Answering", (IMAGE, TEXT), TEXT, "branch_count", "the plan has 1 branches"),
    ("(Fill Mask) () Question Answering", (TEXT,), TEXT, "branch_count", "expected a linear plan"),
    ("() () Text Summarization", (TEXT, TEXT), TEXT, "bad_join", "takes 1 input"),
    ("() () Visual Question Answering", (TEXT, TEXT), TEXT, "modality_mismatch", "takes image as input 1"),
    ("Question Answering", (TEXT,), TEXT, "multi_input_in_chain", "only single-input"),
    ("(Image Denoising", (IMAGE, TEXT), TEXT, "syntax", "never closed"),
    ("(a (b)) X", (IMAGE, TEXT), TEXT, "syntax", "nested"),
    ("Fill Mask,, Sentiment Analysis", (TEXT,), TEXT, "syntax", "stray comma"),
    ("Fill Mask (Sentiment Analysis)", (TEXT,), TEXT, "syntax", "brackets in a linear plan"),
    ("() ()", (TEXT, TEXT), TEXT, "empty", "needs a multi-input tool"),
]


@pytest.mark.parametrize("text,inputs,target,reason,fragment", BAD)
def test_bad_plans_get_clear_errors(text, inputs, target, reason, fragment):
    with pytest.raises(PlanError) as err:
        parse_and_check(text, REG, inputs, target)
    assert err.value.reason == reason
    assert fragment in str(err.value)


def test_length_limits():
    long = "Image Super Resolution, Image Denoising, Image Deblurring, Colorization, Image Classification"
    parse_and_check(long, REG, (IMAGE,), TEXT, PlanLimits(max_tools=5))
    with pytest.raises(PlanError, match="at most 4"):
        parse_and_check(long, REG, (IMAGE,), TEXT, PlanLimits(max_tools=4))


def test_enumeration_is_exactly_the_valid_plans():
    reg = signature_registry(("Image Denoising", "Colorization", "Image Classification", "Fill Mask",
                              "Question Answering", "Visual Question Answering", "Sentiment Analysis"))
    limits = PlanLimits(3, 2, 1)
    for sig in [((IMAGE,), TEXT), ((IMAGE,), IMAGE), ((TEXT, TEXT), TEXT), ((IMAGE, TEXT), TEXT)]:
        plans = list(enumerate_plans(reg, *sig, limits))
        assert len(plans) == len(set(plans)) > 0
        for p in plans:
            check_plan(p, reg, *sig, limits)
    # a brute-force cross-check on the linear image -> text case
    names = reg.names
    import itertools
    brute = set()
    for n in range(1, 4):
        for combo in itertools.product(names, repeat=n):
            try:
                brute.add(check_plan(LinearPlan(combo), reg, (IMAGE,), TEXT, limits))
            except PlanError:
                pass
    assert brute == set(enumerate_plans(reg, (IMAGE,), TEXT, limits))


names = st.sampled_from(REG.names)
chains = st.lists(names, max_size=4).map(tuple)


@st.composite
def plans(draw):
    if draw(st.booleans()):
        return LinearPlan(draw(chains.filter(bool)))
    return NonlinearPlan(tuple(draw(st.lists(chains, min_size=1, max_size=3))), draw(names), draw(chains))


@settings(max_examples=300, deadline=None)
@given(plans())
def test_parse_format_roundtrip(plan):
    assert parse_plan(format_plan(plan), REG) == plan


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet="(), ImageDnoisgClafctTxM"),
                 st.lists(st.sampled_from([*REG.names, "(", ")", ", ", " ", ",", "Bogus"])).map("".join)))
def test_random_strings_never_crash_the_parser(text):
    for sig in [((IMAGE,), TEXT), ((IMAGE, TEXT), TEXT)]:
        try:
            plan = parse_and_check(text, REG, *sig)
        except PlanError:
            continue
        assert parse_plan(format_plan(plan), REG) == plan


def test_valid_enumerated_plans_roundtrip():
    for sig in [((IMAGE,), TEXT), ((TEXT, TEXT), TEXT)]:
        for plan in enumerate_plans(REG, *sig, PlanLimits(3, 2, 1)):
            assert parse_and_check(format_plan(plan), REG, *sig, PlanLimits(3, 2, 1)) == plan
