"""Every registered PE satisfies the protocol the generic flow relies on."""

import dataclasses

import pytest

from codesign.pe import REGISTRY, get_pe, pe_names
from codesign.hw.protocol import HANDSHAKES, ProcessingElement
from codesign.resources import data_dir


@pytest.mark.parametrize("name", pe_names())
def test_registered_pe_is_complete(name):
    pe = get_pe(name)
    assert isinstance(pe, ProcessingElement) and pe.name == name
    assert pe.handshake in HANDSHAKES and pe.interfaces
    assert dataclasses.is_dataclass(pe.spec_class) and dataclasses.is_dataclass(pe.stimulus_class)
    with pytest.raises(TypeError):
        pe.spec_class(1)  # keyword-only
    spec = pe.spec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(spec, dataclasses.fields(spec)[0].name, None)
    for template in pe.templates.values():
        assert (data_dir("hls_templates") / template).is_file(), template
    for header in pe.headers:
        assert (data_dir("hls_templates") / "include" / header).is_file(), header
    assert set(pe.kernel_files) <= set(pe.templates) | set(pe.headers)
    assert pe.testbench_file in pe.templates
    assert any(path.stem == pe.rtl_top for path in pe.rtl_sources())
    assert set(pe.rtl_parameters(spec)) and all(isinstance(v, int) for v in pe.rtl_parameters(spec).values())
    assert (pe.latency is not None) == (pe.handshake == "pipeline")
    assert pe.estimate_specs()


def test_unknown_pe_names_the_registered_ones():
    with pytest.raises(ValueError, match="registered PEs: " + ", ".join(REGISTRY)):
        get_pe("nope")


def test_a_spec_of_another_pe_is_refused():
    names = pe_names()
    assert len(names) >= 2, names
    first, second = get_pe(names[0]), get_pe(names[1])
    with pytest.raises(TypeError, match="needs a"):
        first.check_spec(second.spec())


def test_cycle_models_are_the_stream_pes_own():
    """The registry's cycle models (what the board runtime asks) are every stream PE's, and give the cycles its
    class gives, on each PE's quick stimulus at the verification grid's first build."""
    from codesign.demo import quick_options
    from codesign.pe import CYCLE_MODELS, transaction_cycles
    from codesign.pe.stream import StreamPE

    assert set(CYCLE_MODELS) == {name for name in pe_names() if isinstance(get_pe(name), StreamPE)}
    for name in CYCLE_MODELS:
        pe = get_pe(name)
        spec = pe.verification_grid()[0].spec
        stimulus = pe.build_stimulus(spec, quick_options(pe))
        counts = [transaction_cycles(name, spec, words_in) for words_in, _ in stimulus[:50]]
        assert counts == [pe.transaction_cycles(spec, words_in) for words_in, _ in stimulus[:50]], name
        assert len(set(counts)) > 1, f"{name}: the stimulus should have transactions of differing cycles"


def test_a_pe_without_cycle_model_says_which_have_one():
    from codesign.pe import transaction_cycles

    with pytest.raises(ValueError, match="stream PEs that do: csb"):
        transaction_cycles("fpmac", None, [0])
